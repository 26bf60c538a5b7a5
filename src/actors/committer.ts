import { CoordinatorError, EntryDroppedError } from '../errors.js';
import type { Clock } from '../machines/clock.js';
import type { GroupContext } from '../machines/context.js';
import {
  decideSteady,
  repeatSteady,
  steadyHeartbeat,
  type SteadyDecision,
} from '../machines/heartbeat.js';
import type { HeartbeatReply, HeartbeatRequest } from '../machines/protocol.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { diffGroups, isEmptyPatch } from '../store/codec.js';
import type { Store } from '../store/store.js';
import { unwrap } from './commands.js';
import type { DeadlineSweep } from './deadline-sweep.js';
import { applyEffects } from './effects.js';
import { startActor, type ActorFactory, type GroupEntry, type GroupEvent } from './group-entry.js';
import type { Settled } from './mailbox.js';
import { announcedStep, type AnnouncedStep, type Publication } from './publication.js';
import type { StoreGuard } from './store-guard.js';
import { replicaTurnBudget, type TurnBudget } from './turn-budget.js';
import type { WriteRefusal } from './write-refusal.js';

export interface CommitterOptions {
  readonly store: Pick<Store, 'commitGroup'>;
  readonly guard: StoreGuard;
  readonly clock: Clock;
  readonly metrics: Metrics;
  readonly logger: Logger;
  readonly factory: ActorFactory;
  readonly publication: Publication;
  readonly refusal: WriteRefusal;
  /** Told of the deadlines an event or a steady heartbeat may have brought forward. */
  readonly deadlines?: Pick<DeadlineSweep, 'noteChanges' | 'noteMember'>;
  /**
   * The share of each turn of the event loop that batches may take before they let others run
   * (the replica's, shared with the answers written after a batch).
   */
  readonly turnBudget?: TurnBudget;
}

/** A heartbeat's reply and the time it was decided at (a held heartbeat counts from it). */
export interface DecidedReply {
  readonly reply: HeartbeatReply;
  readonly now: number;
}

/** What one step of a batch does, given the context as the steps before it left it. */
type BatchStep<T> = (
  context: GroupContext,
) =>
  | { readonly answer: T }
  | { readonly event: GroupEvent; readonly answer: (after: GroupContext) => T };

/**
 * What a step of a batch did before the write: its answer (worked out at once, from the context
 * right after the step, and given only after the write), or what it threw. Nothing of the
 * step's context is kept but its answer and what announcing it needs.
 */
type Ran<T> =
  | {
      readonly ok: true;
      readonly answer: Settled<T>;
      /** The event the step sent and what announcing it needs; null when answered from memory. */
      readonly sent: { readonly event: GroupEvent; readonly step: AnnouncedStep } | null;
    }
  | { readonly ok: false; readonly error: unknown };

function settle<T>(answer: () => T): Settled<T> {
  try {
    return { ok: true, value: answer() };
  } catch (error) {
    return { ok: false, error };
  }
}

/**
 * Lets the event loop turn when this turn's budget is used up (by this batch or any other
 * deferrable work): other groups' heartbeats are then served. The group's mailbox stays held
 * meanwhile, so nothing of this group interleaves, and readers are served its published state,
 * as while its write is in flight. Throws {@link EntryDroppedError} when the entry was dropped
 * meanwhile (its actor stopped): nothing of the batch is then written or answered.
 */
async function yieldIfSpent(budget: TurnBudget, entry: GroupEntry, run: Run): Promise<void> {
  if (!budget.spentFor(run.since)) return;
  await budget.nextTurn(run.since);
  budget.begin();
  run.since = budget.clock();
  if (entry.phase === 'dropped') throw new EntryDroppedError();
}

/** Since when a batch runs in the current turn (its own share, see `TurnBudget.spentFor`). */
interface Run {
  since: number;
}

/**
 * Runs events through a group's actor and persists what they changed: ONE fenced,
 * revision-checked write before anyone is answered. A refused write rebuilds the actor from
 * the last persisted state, as if the events never happened. The caller holds the mailbox.
 *
 * Heartbeats that queued up on a group together (a burst of joins) run as one batch: each in
 * turn through the chart, then one write for all of them, then their answers (n joins
 * are one write, not n, and the join debounce keeps them to one recompute).
 */
export class Committer {
  constructor(private readonly options: CommitterOptions) {}

  /**
   * The answer from memory to a heartbeat that changes nothing but its member's liveness
   * (refreshed), decided in O(1) in the size of the group (no chart, no write), or null (see
   * `steadyHeartbeat`). The caller holds the mailbox, or knows it idle: nothing else runs on
   * the group.
   */
  steady(entry: GroupEntry, now: number, request: HeartbeatRequest): HeartbeatReply | null {
    const ctx = entry.snapshot().context;
    const steady = steadyHeartbeat(ctx, request, now);
    // Its member's deadlines moved (later, normally): O(1) for the timers.
    if (steady !== null)
      this.options.deadlines?.noteMember(entry, ctx.liveness.get(request.memberId));
    return steady;
  }

  /**
   * {@link steady}, keeping the decision so that the same heartbeat can be answered again by
   * {@link repeatSteady}; null when not steady. The caller holds the mailbox, or knows it idle.
   */
  decideSteady(entry: GroupEntry, now: number, request: HeartbeatRequest): SteadyDecision | null {
    const ctx = entry.snapshot().context;
    const decision = decideSteady(ctx, request, now);
    // The record the decision refreshed (looked up only for a held heartbeat's, not kept).
    if (decision !== null)
      this.options.deadlines?.noteMember(
        entry,
        decision.record ?? ctx.liveness.get(request.memberId),
      );
    return decision;
  }

  /**
   * The same steady heartbeat again (`decision.reply`): true, its member's liveness refreshed,
   * while the decision holds on the group as it is; false, nothing touched, when it may not.
   * O(1), with no lookup of the member in the group. The caller holds the mailbox, or knows it
   * idle.
   */
  repeatSteady(entry: GroupEntry, now: number, decision: SteadyDecision): boolean {
    const live = repeatSteady(decision, entry.snapshot().context, now);
    if (live === null) return false;
    this.options.deadlines?.noteMember(entry, live);
    return true;
  }

  /**
   * A heartbeat: one that changes nothing but its member's liveness is
   * answered from memory ({@link steady}); any other takes the chart's road through
   * {@link dispatch}, which answers a steady heartbeat with the same reply.
   */
  async heartbeat(
    entry: GroupEntry,
    now: number,
    request: HeartbeatRequest,
  ): Promise<HeartbeatReply> {
    const steady = this.steady(entry, now, request);
    if (steady !== null) return steady;
    return unwrap(
      await this.dispatch(entry, { type: 'HEARTBEAT', now, request }),
    ) as HeartbeatReply;
  }

  /**
   * Heartbeats of one group, in arrival order, each answered with the time it
   * was decided at. Those that change nothing but their member's liveness are answered from
   * memory ({@link steady}) as long as no heartbeat before them in the batch changed anything.
   * From the first that does, each takes its turn (the chart's road, or from memory on the
   * state the ones before it left), what they changed is written once, and all of them are
   * answered after that write (or all get its error: none of their changes happened).
   */
  async heartbeats(
    entry: GroupEntry,
    requests: readonly HeartbeatRequest[],
  ): Promise<Array<Settled<DecidedReply>>> {
    const { clock } = this.options;
    const answered: Array<Settled<DecidedReply>> = [];
    for (const request of requests) {
      const now = clock.now();
      const steady = this.steady(entry, now, request);
      if (steady === null) break;
      answered.push({ ok: true, value: { reply: steady, now } });
    }
    if (answered.length === requests.length) return answered;
    const steps = requests
      .slice(answered.length)
      .map((request): BatchStep<DecidedReply> => (context) => {
        const now = clock.now();
        const steady = steadyHeartbeat(context, request, now);
        if (steady !== null) return { answer: { reply: steady, now } };
        return {
          event: { type: 'HEARTBEAT', now, request },
          answer: (after) => ({ reply: unwrap(after) as HeartbeatReply, now }),
        };
      });
    return [...answered, ...(await this.commitSteps(entry, steps))];
  }

  /** Resolves with the context after the event and after its write committed. */
  async dispatch(entry: GroupEntry, event: GroupEvent): Promise<GroupContext> {
    const [outcome] = await this.commitSteps(entry, [
      () => ({ event, answer: (after: GroupContext) => after }),
    ]);
    if (!outcome) throw new CoordinatorError('INTERNAL', 'the event gave no outcome');
    if (!outcome.ok) throw outcome.error;
    // The context as published: after the write, with its revision.
    return entry.actor.getSnapshot().context;
  }

  /** Runs `steps` in turn, then ONE write for what they changed; settles each after it. */
  private async commitSteps<T>(
    entry: GroupEntry,
    steps: ReadonlyArray<BatchStep<T>>,
  ): Promise<Array<Settled<T>>> {
    const before = entry.actor.getSnapshot().context;
    // Liveness is kept outside the context (machines/liveness.ts): what the steps changed in
    // it is undone with them when the actor fails or the write is refused.
    const mark = before.liveness.begin();
    const budget = this.options.turnBudget ?? replicaTurnBudget;
    const run: Run = { since: budget.clock() };
    try {
      let ran: Array<Ran<T>>;
      try {
        ran = await this.runSteps(entry, steps, budget, run);
        // The write starts a turn of its own when the steps used the budget up: a recompute's
        // step and the encoding of its thousand-field write are then two turns, not one.
        // Nothing to write, nothing to wait for.
        if (entry.actor.getSnapshot().context.group !== before.group)
          await yieldIfSpent(budget, entry, run);
      } catch (error) {
        if (!(error instanceof EntryDroppedError)) throw error;
        before.liveness.undo(mark);
        return steps.map(() => ({ ok: false, error }));
      }
      return await this.commit(entry, before, mark, ran, steps.length);
    } finally {
      before.liveness.end();
    }
  }

  private async runSteps<T>(
    entry: GroupEntry,
    steps: ReadonlyArray<BatchStep<T>>,
    budget: TurnBudget,
    run: Run,
  ): Promise<Array<Ran<T>>> {
    const { factory } = this.options;
    const ran: Array<Ran<T>> = [];
    budget.begin();
    for (const step of steps) {
      // Once the turn's budget is used up, others get a turn (the first step always runs).
      if (ran.length > 0) await yieldIfSpent(budget, entry, run);
      const context = entry.actor.getSnapshot().context;
      const liveness = context.liveness;
      const mark = liveness.begin();
      try {
        const decided = step(context);
        if (!('event' in decided)) {
          ran.push({ ok: true, answer: { ok: true, value: decided.answer }, sent: null });
          continue;
        }
        entry.actor.send(decided.event);
        const snapshot = entry.actor.getSnapshot();
        if (snapshot.status !== 'active') {
          liveness.undo(mark);
          entry.actor = startActor(factory, context);
          ran.push({
            ok: false,
            error: new CoordinatorError(
              'INTERNAL',
              'the group actor failed; it was rebuilt from the last persisted state',
            ),
          });
          continue;
        }
        ran.push({
          ok: true,
          answer: settle(() => decided.answer(snapshot.context)),
          sent: { event: decided.event, step: announcedStep(snapshot) },
        });
      } finally {
        liveness.end();
      }
    }
    return ran;
  }

  /** The one write of a batch, then the answers, effects and publication of each step. */
  private async commit<T>(
    entry: GroupEntry,
    before: GroupContext,
    mark: number,
    ran: ReadonlyArray<Ran<T>>,
    count: number,
  ): Promise<Array<Settled<T>>> {
    const { factory, clock, store, guard, metrics, logger, publication } = this.options;
    const after = entry.actor.getSnapshot().context;
    // A failed-closed group is never written: lost metadata is not recreated, restored metadata
    // stays as the operator put it (docs/operations.md#fail-closed-behaviour).
    if (after.group !== before.group && after.group.status !== 'FAILED_CLOSED') {
      const patch = diffGroups(entry.persisted, after.group);
      if (!isEmptyPatch(patch)) {
        const now = clock.now();
        // The patch is ours to extend: a copy would copy a recompute's thousand shard fields.
        patch.set.updatedAt = String(now);
        try {
          entry.revision = await guard(() =>
            store.commitGroup(entry.ref, entry.fence, entry.revision, patch),
          );
        } catch (error) {
          // Nothing was written: forget the steps, as if they never happened.
          before.liveness.undo(mark);
          entry.actor.stop();
          entry.actor = startActor(factory, before);
          const first = ran.find((r) => r.ok && r.sent !== null);
          const eventType = first?.ok ? (first.sent?.event.type ?? '') : '';
          const explained = await this.options.refusal.explain(entry, eventType, error);
          return Array.from({ length: count }, () => ({ ok: false as const, error: explained }));
        }
        entry.persisted = { ...after.group, updatedAt: now };
        if (entry.phase !== 'dropped') {
          entry.actor.send({ type: 'PERSISTED', revision: entry.revision, updatedAt: now });
        }
      }
    }
    const sent = ran.flatMap((r) => (r.ok && r.sent !== null ? [r.sent] : []));
    // Dropped while its write was in flight: the write committed (fenced: this replica still
    // owned the group), so its answers stand; the entry publishes and times nothing more.
    const dropped = entry.phase === 'dropped';
    sent.forEach(({ step }, i) => {
      applyEffects(step.context.effects, metrics, logger, entry.ref);
      // Each transition is announced; the last one with the state as published (observe).
      if (i < sent.length - 1 && !dropped) publication.announceStep(entry, step);
    });
    if (dropped) return ran.map((r) => (r.ok ? r.answer : { ok: false, error: r.error }));
    const latest = entry.actor.getSnapshot().context;
    this.options.deadlines?.noteChanges(entry, latest, before.liveness.changedSince(mark));
    publication.observe(entry, latest);
    return ran.map((r) => (r.ok ? r.answer : { ok: false, error: r.error }));
  }
}
