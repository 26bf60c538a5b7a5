/**
 * Operator control of consumption (docs/operations.md#pausing-consumption): paused shards and
 * position resets. A paused shard targets nobody, so the normal revoke-first flow takes it from
 * its member (the member finishes in-flight work and reports DONE, or is fenced at its rebalance
 * timeout) and grants it to nobody until it is resumed. A position reset pauses its shards the
 * same way; once every one of them is released the host moves their Redis consumer groups and
 * reports each move (SHARD_POSITIONS_MOVED); the last one resumes them. Pure functions of
 * (context, event); each change of the halted shards raises CONSUMPTION_CHANGED, and the
 * consumption region's state follows from the group in one function, {@link consumptionPhase}.
 */
import type { GroupContext } from './context.js';
import { beginEvent, raise, succeed, touched } from './context.js';
import type {
  CancelResetEvent,
  ConsumptionEvent,
  ResetPositionsEvent,
  ShardPositionsMovedEvent,
} from './events.js';
import { ChartEventType } from './events.js';
import { shardAt } from './group-state.js';
import { recompute } from './member-changes.js';
import type { Refusal } from './refusals.js';
import type { CompletedReset, GroupState, PositionReset } from './types.js';
import { groupId } from './types.js';
import { sortedUnion } from './halted.js';

export { haltedShards, isHalted } from './halted.js';

/** The consumption region's state: `resetting` has `pausing` and `moving`. */
export type ConsumptionPhase = 'running' | 'pausing' | 'paused' | 'resetPausing' | 'resetMoving';

/** Reply of PAUSE_CONSUMPTION / RESUME_CONSUMPTION. */
export interface ConsumptionReply {
  readonly pausedShards: readonly number[];
  readonly changed: boolean;
}

const NONE: readonly number[] = Object.freeze([]);

/**
 * The consumption region's state, derived from the group in this one place: `running` with
 * nothing halted; a reset under way is `resetPausing` until each of its shards is given up and
 * `resetMoving` after; otherwise `pausing` until each paused shard is given up, then `paused`.
 */
export function consumptionPhase(group: GroupState): ConsumptionPhase {
  const reset = group.positionReset;
  if (reset)
    return allReleased(
      group,
      reset.moves.map((m) => m.shard),
    )
      ? 'resetMoving'
      : 'resetPausing';
  const paused = group.pausedShards ?? NONE;
  if (paused.length === 0) return 'running';
  return allReleased(group, paused) ? 'paused' : 'pausing';
}

/** Whether no member holds any of `shards` any more. */
function allReleased(group: GroupState, shards: readonly number[]): boolean {
  return shards.every((shard) => {
    const record = shardAt(group, shard);
    return record.state === 'released' || record.shard >= group.shardCount;
  });
}

/** Why the shards a pause, resume or reset names are refused, or null: each must exist. */
export function shardsRefusal(group: GroupState, shards: readonly number[] | null): Refusal | null {
  if (shards === null) return null;
  const outside = shards.filter(
    (shard) => !Number.isSafeInteger(shard) || shard < 0 || shard >= group.shardCount,
  );
  if (outside.length === 0) return null;
  return {
    code: 'SHARD_OUT_OF_RANGE',
    message: `group ${groupId(group)} has shards 0..${group.shardCount - 1}; no shard ${outside.join(', ')}`,
    details: { shards: outside, shardCount: group.shardCount },
  };
}

/**
 * Why a position reset is refused for its data, or null: its shards must exist, and none may be
 * paused by another request (resume them first, or reset the others).
 */
export function resetRefusal(group: GroupState, shards: readonly number[]): Refusal | null {
  const outside = shardsRefusal(group, shards);
  if (outside) return outside;
  const paused = (group.pausedShards ?? NONE).filter((shard) => shards.includes(shard));
  if (paused.length === 0) return null;
  return {
    code: 'CONSUMPTION_PAUSED',
    message: `shards ${paused.join(', ')} of group ${groupId(group)} are paused by another request; resume them first`,
    details: { pausedShards: paused },
  };
}

/** PAUSE_CONSUMPTION: the shards (all when null) are added to the paused ones. */
export function applyPauseConsumption(ctx: GroupContext, event: ConsumptionEvent): GroupContext {
  const start = beginEvent(ctx, event.now);
  const { group } = start;
  const asked = event.shards ?? range(group.shardCount);
  const paused = sortedUnion(group.pausedShards ?? NONE, asked);
  return withPaused(start, paused, event.now);
}

/** RESUME_CONSUMPTION: the shards (all when null) are taken off the paused ones. */
export function applyResumeConsumption(ctx: GroupContext, event: ConsumptionEvent): GroupContext {
  const start = beginEvent(ctx, event.now);
  const { group } = start;
  const current = group.pausedShards ?? NONE;
  const paused =
    event.shards === null ? NONE : current.filter((shard) => !event.shards!.includes(shard));
  return withPaused(start, paused, event.now);
}

/** RESET_POSITIONS: the reset's shards are halted until they are moved. */
export function applyResetPositions(ctx: GroupContext, event: ResetPositionsEvent): GroupContext {
  const start = beginEvent(ctx, event.now);
  const next = halt(start, { ...start.group, positionReset: event.reset });
  return touched(start, succeed(next, { reset: event.reset }), event.now);
}

/**
 * SHARD_POSITIONS_MOVED: the host moved these shards of the reset. Once all are moved the reset
 * ends and its shards are granted again. A report for another reset (one that ended, or a
 * repeat after a failover) changes nothing.
 */
export function applyShardPositionsMoved(
  ctx: GroupContext,
  event: ShardPositionsMovedEvent,
): GroupContext {
  const start = beginEvent(ctx, event.now);
  const reset = start.group.positionReset;
  if (!reset || reset.resetId !== event.resetId) return succeed(start, { reset: reset ?? null });
  const moved = sortedUnion(
    reset.moved,
    event.shards.filter((shard) => reset.moves.some((m) => m.shard === shard)),
  );
  if (moved.length === reset.moved.length) return succeed(start, { reset });
  const done = moved.length === reset.moves.length;
  const updated: PositionReset = { ...reset, moved };
  const next = done
    ? halt(start, {
        ...start.group,
        positionReset: null,
        lastPositionReset: { ...updated, completedAt: event.now },
      })
    : { ...start, group: { ...start.group, positionReset: updated } };
  // The reset's shards stay halted until the last one is moved: only its end is a change.
  return touched(
    start,
    succeed(next, { reset: done ? null : updated, completed: done }),
    event.now,
  );
}

/**
 * CANCEL_RESET: the reset ends where it got to (shards moved so far stay moved, the others keep
 * their positions) and its shards are granted again.
 */
export function applyCancelReset(ctx: GroupContext, event: CancelResetEvent): GroupContext {
  const start = beginEvent(ctx, event.now);
  const reset = start.group.positionReset!;
  const ended: CompletedReset = { ...reset, completedAt: event.now, cancelled: true };
  const next = halt(start, { ...start.group, positionReset: null, lastPositionReset: ended });
  return touched(start, succeed(next, { reset: ended }), event.now);
}

function withPaused(start: GroupContext, paused: readonly number[], now: number): GroupContext {
  const { group } = start;
  const current = group.pausedShards ?? NONE;
  if (sameList(current, paused)) {
    return succeed(start, { pausedShards: current, changed: false } satisfies ConsumptionReply);
  }
  const next = halt(start, { ...group, pausedShards: paused });
  const reply: ConsumptionReply = { pausedShards: paused, changed: true };
  return touched(start, succeed(next, reply), now);
}

/**
 * The group with a new set of halted shards: `metadataVersion` +1 so every member's next
 * heartbeat is answered in full (with the new `pausedShards`), and targets recomputed so the
 * halted shards target nobody and the others are spread over the members.
 */
function halt(ctx: GroupContext, group: GroupState): GroupContext {
  const changed: GroupContext = {
    ...ctx,
    group: { ...group, metadataVersion: group.metadataVersion + 1 },
  };
  return raise(recompute(changed), ChartEventType.CONSUMPTION_CHANGED);
}

function range(count: number): number[] {
  return Array.from({ length: count }, (_, shard) => shard);
}

function sameList(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((value, i) => value === b[i]);
}
