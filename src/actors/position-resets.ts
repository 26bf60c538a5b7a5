import { performance } from 'node:perf_hooks';
import { CoordinatorError } from '../errors.js';

import { consumptionPhase, shardsRefusal } from '../machines/consumption.js';
import type { ResetPositionsEvent } from '../machines/events.js';
import { refusedByChart } from '../machines/group-machine.js';
import {
  groupId,
  type GroupRef,
  type GroupState,
  type PositionReset,
  type ShardMove,
} from '../machines/types.js';
import {
  compareStreamIds,
  idsKeyShard,
  moveShardPosition,
  planPositions,
  validateResetTo,
  type ShardPositionPlan,
} from '../streams/positions.js';
import type { StreamsReader } from '../streams/streams-reader.js';
import { resetView } from './views.js';
import { groupLogFields } from '../observability/logger.js';
import { groupOf, isFailedClosed, type GroupEntry } from './group-entry.js';
import type { ReplicaWorkOptions } from './replica-work.js';

export type PositionResetsOptions = ReplicaWorkOptions;

/**
 * The host's half of a position reset (docs/operations.md#replay-or-skip): once the chart shows
 * a reset whose shards every member gave up (`resetting.moving`), each shard's Redis consumer
 * group is moved (XGROUP SETID; a skip also acknowledges what it skips) and the moves are
 * reported with SHARD_POSITIONS_MOVED; the last report ends the reset and resumes the shards.
 * A move is idempotent, so a new owner after a failover simply moves what the persisted reset
 * does not list as moved yet. A move that fails (streams Redis down) is tried again at the next
 * sweep; the shards stay paused meanwhile, never resumed unmoved.
 */
export class PositionResets {
  /** Groups being moved now: a sweep does not start a second move of the same group. */
  private readonly moving = new Set<string>();

  constructor(private readonly options: PositionResetsOptions) {}

  /**
   * A reset asked for by an operator: the plan (per shard the current position, the new one and
   * how many entries are delivered again or skipped), read from the streams without holding the
   * group's mailbox, so the group goes on serving meanwhile; and, unless `dryRun`, the reset
   * started through the chart with the mailbox held. Whether the chart takes it
   * (frozen, failed closed, a migration or another reset under way, shards that do not exist
   * or are paused) is asked before the streams are read; a refused one goes through the chart,
   * which answers it. A repeat of the request that started the reset under way, or the last one,
   * answers that reset again.
   */
  async request(
    entry: GroupEntry,
    request: PositionsRequest,
    resetId: string,
    withMailbox: <T>(work: (entry: GroupEntry) => Promise<T>) => Promise<T>,
    run: (entry: GroupEntry, event: ResetPositionsEvent) => Promise<unknown>,
  ): Promise<PositionsView> {
    const { clock } = this.options;
    const group = groupOf(entry);
    const repeat = resetNamed(group, resetId);
    if (!request.dryRun && repeat) {
      assertRepeatOf(request, repeat, group.shardCount);
      return startedView(group, repeat);
    }
    const shards = request.shards ?? idsShards(request.to) ?? range(group.shardCount);
    unmatchedIds(request.to, shards);
    const now = clock.now();
    const probe = resetEvent(now, {
      resetId,
      to: 'earliest',
      moves: shards.map((shard) => ({ ...NO_MOVE, shard })),
      moved: [],
      requestedBy: request.requestedBy,
      reason: request.reason,
      startedAt: now,
    });
    if (request.dryRun) {
      const refusal = shardsRefusal(group, shards);
      if (refusal) {
        throw new CoordinatorError(refusal.code, refusal.message, {
          ...(refusal.details ? { details: refusal.details } : {}),
        });
      }
    } else if (refusedByChart(entry.snapshot(), probe)) {
      await withMailbox((held) => run(held, probe));
      throw new CoordinatorError('INTERNAL', 'the chart refused the reset without an answer');
    }
    const reader = this.streams();
    // A request forwarded by another replica is answered before that replica gives up on it:
    // a plan that would outlast it is left unfinished (it writes nothing) and nothing is done.
    const bound = request.planWithinMs ?? null;
    const since = performance.now();
    const planned = (async () => {
      const to = validateResetTo(request.to, group.shardCount, await reader.time());
      const plan = await reader.use((client) =>
        planPositions(client, {
          streamPrefix: group.streamPrefix,
          consumerGroup: group.consumerGroup,
          shards,
          to,
        }),
      );
      return { to, plan };
    })();
    const { to, plan } =
      bound === null ? await planned : await within(planned, bound, shards.length, request.dryRun);
    const changes = plan.filter(changesShard).length;
    if (request.dryRun || changes === 0)
      return { dryRun: request.dryRun, plan, changes, reset: null };
    // Every shard asked for is paused and moved: members read on until they let go, so a shard
    // at its target now may not be by then (each move is worked out again when it is made).
    const reset: PositionReset = {
      ...probe.reset,
      to,
      moves: plan.map((p) => ({
        shard: p.shard,
        from: p.from,
        to: p.to,
        redeliver: p.redeliver,
        skip: p.skip,
        exact: p.exact,
        acknowledge: acknowledges(p.from, p.to),
      })),
    };
    return withMailbox(async (held) => {
      // The same request may have started its reset meanwhile (a retry that overtook it).
      const now = groupOf(held);
      const started = resetNamed(now, resetId);
      if (started) {
        assertRepeatOf(request, started, now.shardCount);
        return startedView(now, started);
      }
      // Waited for the mailbox past the bound: the forwarding replica is about to give up.
      if (bound !== null && performance.now() - since >= bound)
        throw planTooSlow(bound, shards.length, request.dryRun);
      // The chart decides again on the group as it is now: it may have changed since the plan.
      await run(held, resetEvent(clock.now(), reset));
      return { dryRun: false, plan, changes, reset: resetView(reset, 'pausing') };
    });
  }

  /** Moves the shards of every group served here whose reset is ready for it. */
  async sweep(): Promise<void> {
    if (this.options.reader === null) return;
    for (const entry of this.options.entries()) {
      if (readyToMove(entry)) await this.check(entry.ref);
    }
  }

  /** Whether `entry`'s group has a reset ready to move (cheap; for the host's change hook). */
  ready(entry: GroupEntry): boolean {
    return this.options.reader !== null && readyToMove(entry);
  }

  /** Moves the reset's shards of `ref` not moved yet and reports them. Never throws. */
  async check(ref: GroupRef): Promise<void> {
    const { reader, withEntry, dispatch, clock, logger } = this.options;
    const id = groupId(ref);
    if (reader === null || this.moving.has(id)) return;
    this.moving.add(id);
    try {
      // The mailbox is held only to read the reset and to record the moves: nobody reads the
      // paused shards, so the streams are moved while the group goes on serving.
      const found = await withEntry(ref, (entry) =>
        Promise.resolve(readyToMove(entry) ? groupOf(entry) : null),
      );
      if (found === null) return;
      const reset = found.positionReset!;
      const moved: number[] = [];
      let acknowledged = 0;
      try {
        for (const step of pending(reset)) {
          // A reset cancelled meanwhile moves no further shard: those not moved keep their
          // positions, and members may read them again already.
          const current = await withEntry(ref, (entry) =>
            Promise.resolve(groupOf(entry).positionReset?.resetId === reset.resetId),
          );
          if (!current) break;
          const result = await reader.use(async (client) => {
            // Worked out against the position as it is now, after the members let go: `latest`
            // is the stream's end now, and a move forward (a skip) acknowledges what it skips.
            const [now] = await planPositions(client, {
              streamPrefix: found.streamPrefix,
              consumerGroup: found.consumerGroup,
              shards: [step.shard],
              to: reset.to === 'latest' ? 'latest' : { ids: { [step.shard]: step.to } },
              countBound: 1,
            });
            const to = now?.to ?? step.to;
            const from = now?.from ?? null;
            // Named by the reset, so that a move this replica sends after losing the group
            // cannot undo the new owner's (docs/operations.md#moving-a-groups-positions).
            return moveShardPosition(client, {
              stream: `${found.streamPrefix}:${step.shard}`,
              consumerGroup: found.consumerGroup,
              to,
              acknowledgeUpTo: acknowledges(from, to),
              moveId: `${reset.startedAt}:${reset.resetId}`,
            });
          });
          acknowledged += result.acknowledged;
          moved.push(step.shard);
        }
      } finally {
        // What was moved is reported even when a later shard failed: it is not moved twice.
        if (moved.length > 0) {
          await withEntry(ref, (entry) =>
            dispatch(entry, {
              type: 'SHARD_POSITIONS_MOVED',
              now: clock.now(),
              resetId: reset.resetId,
              shards: moved,
            }),
          );
          logger.info('consumer group positions moved', {
            ...groupLogFields(ref),
            resetId: reset.resetId,
            shards: moved,
            acknowledged,
          });
        }
      }
    } catch (error) {
      logger.warn('consumer group positions not moved now; trying again at the next sweep', {
        ...groupLogFields(ref),
        reason: error instanceof Error ? error.message : String(error),
      });
    } finally {
      this.moving.delete(id);
    }
  }

  private streams(): StreamsReader {
    const { reader } = this.options;
    if (reader !== null) return reader;
    throw new CoordinatorError(
      'STREAMS_UNAVAILABLE',
      'the coordinator does not know where the streams are: set coordinator.streams.url (COORDINATOR_STREAMS_URL)',
    );
  }
}

/** What an operator asks of a reset (docs/operations.md#replay-or-skip). */
export interface PositionsRequest {
  readonly to: unknown;
  /** Null: every shard of the group. */
  readonly shards: readonly number[] | null;
  readonly dryRun: boolean;
  readonly requestedBy: string;
  readonly reason: string;
  /**
   * Forwarded by another replica: how long the plan (and the wait for the group's mailbox) may
   * take before the request is answered 503 `FORWARDED_PLAN_TOO_SLOW`, nothing done
   * (docs/operations.md#replay-or-skip). Absent or null: no bound (sent to the owner directly).
   */
  readonly planWithinMs?: number | null;
}

/** `planned`, or `FORWARDED_PLAN_TOO_SLOW` once `boundMs` passed first (the plan runs on unseen). */
async function within<T>(
  planned: Promise<T>,
  boundMs: number,
  shards: number,
  dryRun: boolean,
): Promise<T> {
  planned.catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(planTooSlow(boundMs, shards, dryRun)), boundMs);
  });
  try {
    return await Promise.race([planned, late]);
  } finally {
    clearTimeout(timer);
  }
}

function planTooSlow(boundMs: number, shards: number, dryRun: boolean): CoordinatorError {
  return new CoordinatorError(
    'FORWARDED_PLAN_TOO_SLOW',
    `the plan over ${shards} shards did not finish within ${boundMs} ms, before the forwarding ` +
      `replica gives up: nothing was done${dryRun ? '' : ', no reset was started'}; try again, ` +
      'send the request to the owner (X-Coord-Owner-Url) directly, or reset fewer shards at a time',
    { details: { shards, boundMs, started: false } },
  );
}

/** The answer: the plan, how many shards it changes, and the reset it started (if any). */
export interface PositionsView {
  readonly dryRun: boolean;
  readonly plan: readonly ShardPositionPlan[];
  readonly changes: number;
  readonly reset: ReturnType<typeof resetView> | null;
}

const NO_MOVE: ShardMove = {
  shard: 0,
  from: null,
  to: '0-0',
  redeliver: 0,
  skip: 0,
  exact: true,
  acknowledge: false,
};

function resetEvent(now: number, reset: PositionReset): ResetPositionsEvent {
  return { type: 'RESET_POSITIONS', now, reset };
}

/** The reset under way or the last one to have ended, when it is `resetId` (a repeated request). */
function resetNamed(group: GroupState, resetId: string): PositionReset | null {
  return (
    [group.positionReset, group.lastPositionReset].find((reset) => reset?.resetId === resetId) ??
    null
  );
}

/**
 * A request whose `X-Request-Id` started `reset` answers that reset only when it is the same
 * request: the same target and the same shards (in any order). The id on another request is a
 * mistake, 400, rather than a 202 for a reset it did not ask for
 * (docs/operations.md#replay-or-skip).
 */
function assertRepeatOf(request: PositionsRequest, reset: PositionReset, shardCount: number): void {
  const shardsOf = (list: readonly number[]) => [...new Set(list)].sort((a, b) => a - b).join(', ');
  const asked = shardsOf(request.shards ?? idsShards(request.to) ?? range(shardCount));
  const started = shardsOf(reset.moves.map((move) => move.shard));
  if (targetKey(request.to) === targetKey(reset.to) && asked === started) return;
  throw new CoordinatorError(
    'VALIDATION_FAILED',
    `X-Request-Id ${reset.resetId} started another reset (to ${JSON.stringify(reset.to)}, ` +
      `shards ${started}): send a new request with a new X-Request-Id`,
    { details: { resetId: reset.resetId, to: reset.to, shards: reset.moves.map((m) => m.shard) } },
  );
}

/** A reset target as one comparable text (the ids of an `ids` target by shard). */
function targetKey(to: unknown): string {
  if (typeof to === 'object' && to !== null && 'ids' in to) {
    const ids = to.ids;
    if (typeof ids === 'object' && ids !== null) {
      const entries = Object.entries(ids as Record<string, unknown>);
      return JSON.stringify({ ids: entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)) });
    }
  }
  return JSON.stringify(to);
}

/** The shards an `ids` target names, when the request names none itself. */
function idsShards(to: unknown): number[] | null {
  if (typeof to !== 'object' || to === null || !('ids' in to)) return null;
  const ids = to.ids;
  if (typeof ids !== 'object' || ids === null) return null;
  return Object.keys(ids)
    .map(idsKeyShard)
    .sort((a, b) => a - b);
}

/** An `ids` target that names a shard the request does not reset is a mistake: 400. */
function unmatchedIds(to: unknown, shards: readonly number[]): void {
  const named = idsShards(to);
  const extra = named?.filter((shard) => !shards.includes(shard)) ?? [];
  if (extra.length === 0) return;
  throw new CoordinatorError(
    'VALIDATION_FAILED',
    `to.ids names shards ${extra.join(', ')}, which shards does not list`,
    { details: { shards: extra } },
  );
}

function range(count: number): number[] {
  return Array.from({ length: count }, (_, shard) => shard);
}

/** A repeated request: the reset it started, as it stands (or as it ended). */
function startedView(group: GroupState, reset: PositionReset): PositionsView {
  const done = group.positionReset?.resetId !== reset.resetId;
  const plan = reset.moves.map((m) => ({
    shard: m.shard,
    stream: `${group.streamPrefix}:${m.shard}`,
    from: m.from,
    to: m.to,
    redeliver: m.redeliver,
    skip: m.skip,
    exact: m.exact,
    pendingSkipped: 0,
  }));
  const stage = done ? 'done' : consumptionPhase(group) === 'resetMoving' ? 'moving' : 'pausing';
  return { dryRun: false, plan, changes: plan.length, reset: resetView(reset, stage) };
}

function readyToMove(entry: GroupEntry): boolean {
  if (isFailedClosed(entry)) return false;
  return consumptionPhase(groupOf(entry)) === 'resetMoving';
}

/**
 * Whether a move from `from` to `to` acknowledges the pending entries up to `to`: a move forward
 * (a skip), and one to where the group stands already, whose pending entries the plan counts
 * as skipped (`pendingSkipped`). A replay leaves them pending.
 */
function acknowledges(from: string | null, to: string): boolean {
  return from !== null && compareStreamIds(to, from) >= 0;
}

/** Whether the plan changes a shard: its position, or pending entries it acknowledges. */
function changesShard(plan: ShardPositionPlan): boolean {
  return plan.from !== plan.to || (plan.pendingSkipped > 0 && acknowledges(plan.from, plan.to));
}

/** The reset's moves not reported as done yet. */
function pending(reset: PositionReset) {
  return reset.moves.filter((m) => !reset.moved.includes(m.shard));
}
