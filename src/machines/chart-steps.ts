/**
 * The named actions of the group statechart (docs/architecture.md#the-statechart): each is a pure
 * step (context, event) → context built on the protocol functions, wrapped so that it never throws
 * (a throwing action would put the actor in its error state) and never breaks a group invariant
 * (the step is rejected instead, with INVARIANT_VIOLATION effects). Each step names the events it
 * caused (`raised`), which the chart raises to itself afterwards, so that every region moves on a
 * named event.
 */
import { applyFreeze, applyPauseProducers, applyResumeProducers, applyUnfreeze } from './admin.js';
import type { GroupContext } from './context.js';
import { beginEvent, createGroupContext, fail, raise, succeed } from './context.js';
import {
  applyCancelReset,
  applyPauseConsumption,
  applyResetPositions,
  applyResumeConsumption,
  applyShardPositionsMoved,
} from './consumption.js';
import type {
  AdminEvent,
  CancelResetEvent,
  ChartEventName,
  ConsumptionEvent,
  GroupEvent,
  RecoverEvent,
  ResetPositionsEvent,
  ShardPositionsMovedEvent,
} from './events.js';
import { ChartEventType } from './events.js';
import { applyFailClosed } from './fail-closed.js';
import { guardInvariants } from './invariants.js';
import { applyHeartbeat, applyTick } from './membership.js';
import {
  applyAdoptLayout,
  applyRetiredShardsDrained,
  applyRollback,
  applyScale,
  completeMigration,
  convergeMigration,
  migrationConverged,
} from './migration.js';
import { rollbackAllowed } from './migration-view.js';
import { migrationPhase } from './phases.js';
import { refusalFor, type RefusalReason } from './refusals.js';
import { applyObservedVersion } from './rollback-signals.js';

/** A step of the chart: what one action does to the context. */
export type Step<E extends GroupEvent = GroupEvent> = (ctx: GroupContext, event: E) => GroupContext;

const NO_EVENTS: readonly ChartEventName[] = Object.freeze([]);

/**
 * Wraps a step: a bug becomes an INTERNAL result with an EVENT_FAILED effect, and a change that
 * would break an invariant is rejected (except for a `load`, which puts in a group read from the
 * store: nothing of the group before it is compared with it, as after a load from the store).
 * The step names the chart events it caused (`raise` in `context.ts`); the migration region's
 * events are added from what the context now shows.
 */
export function chartStep<E extends GroupEvent>(
  step: Step<E>,
  options: { readonly load?: boolean } = {},
): Step<E> {
  return (ctx, event) => {
    let next: GroupContext;
    const start: GroupContext = ctx.raised.length === 0 ? ctx : { ...ctx, raised: NO_EVENTS };
    // Liveness lives outside the context (see `liveness.ts`): a step thrown away takes its
    // liveness changes with it.
    const mark = ctx.liveness.begin();
    try {
      const stepped = step(start, event);
      next = options.load ? stepped : guardInvariants(start, stepped);
      if (next !== stepped) ctx.liveness.undo(mark);
    } catch (error) {
      ctx.liveness.undo(mark);
      const message = error instanceof Error ? error.message : String(error);
      return {
        ...start,
        lastEventAt: 'now' in event ? event.now : ctx.lastEventAt,
        result: { ok: false, code: 'INTERNAL', message: `${event.type} failed: ${message}` },
        effects: [{ type: 'EVENT_FAILED', event: event.type, message }],
      };
    } finally {
      ctx.liveness.end();
    }
    return withMigrationEvents(next);
  };
}

/**
 * The migration region's events, derived from the context in this one place: MIGRATION_CONVERGED
 * once the active migration got there, ROLLBACK_WINDOW_ELAPSED once a converged one's rollback
 * window has passed (time moves with every event, a refused one too).
 */
export function withMigrationEvents(ctx: GroupContext): GroupContext {
  if (ctx.group.status === 'FAILED_CLOSED') return ctx;
  const phase = migrationPhase(ctx.group);
  if (phase === 'inProgress' && migrationConverged(ctx)) {
    return raise(ctx, ChartEventType.MIGRATION_CONVERGED);
  }
  if (phase === 'converged' && !rollbackAllowed(ctx.group.activeMigration!, ctx.lastEventAt)) {
    return raise(ctx, ChartEventType.ROLLBACK_WINDOW_ELAPSED);
  }
  return ctx;
}

/**
 * RECOVER: the group continues from what the host restored or rewrote and claimed, as a load
 * from the store would start it (every member gets a full session timeout of grace), keeping
 * the rollback signals seen so far. It is a load, not a step of the failed group: a restored
 * backup may name other owners and lower member epochs than the failed group held (recovery
 * issues epochs above every one issued before), and the chart leaves
 * `failedClosed` on RECOVER whatever the step did, so it must not be rejected for them
 * (docs/architecture.md#invariants).
 */
export function recover(ctx: GroupContext, event: RecoverEvent): GroupContext {
  const fresh = createGroupContext({
    group: event.group,
    config: ctx.config,
    now: event.now,
    storeRevision: event.storeRevision,
  });
  return succeed({ ...fresh, signals: ctx.signals }, { status: event.group.status });
}

/** The steps behind the chart's actions, by action name. */
export const steps = {
  heartbeat: chartStep<Extract<GroupEvent, { type: 'HEARTBEAT' }>>((ctx, e) =>
    applyHeartbeat(ctx, e.request, e.now),
  ),
  tick: chartStep<Extract<GroupEvent, { type: 'TICK' }>>((ctx, e) => applyTick(ctx, e.now)),
  observeVersion: chartStep<Extract<GroupEvent, { type: 'OBSERVE_VERSION' }>>((ctx, e) =>
    applyObservedVersion(ctx, e.version, e.source, e.now),
  ),
  freeze: chartStep<AdminEvent>((ctx, e) => applyFreeze(ctx, e.now)),
  unfreeze: chartStep<AdminEvent>((ctx, e) => applyUnfreeze(ctx, e.now)),
  pauseProducers: chartStep<AdminEvent>((ctx, e) => applyPauseProducers(ctx, e.now)),
  resumeProducers: chartStep<AdminEvent>((ctx, e) => applyResumeProducers(ctx, e.now)),
  failClosed: chartStep<Extract<GroupEvent, { type: 'FAIL_CLOSED' }>>((ctx, e) =>
    applyFailClosed(ctx, e.now, e.reason),
  ),
  recover: chartStep<RecoverEvent>(recover, { load: true }),
  scale: chartStep<Extract<GroupEvent, { type: 'SCALE' }>>(applyScale),
  rollback: chartStep<Extract<GroupEvent, { type: 'ROLLBACK' }>>(applyRollback),
  adoptLayout: chartStep<Extract<GroupEvent, { type: 'ADOPT_LAYOUT' }>>(applyAdoptLayout),
  retiredShardsDrained:
    chartStep<Extract<GroupEvent, { type: 'RETIRED_SHARDS_DRAINED' }>>(applyRetiredShardsDrained),
  pauseConsumption: chartStep<ConsumptionEvent>(applyPauseConsumption),
  resumeConsumption: chartStep<ConsumptionEvent>(applyResumeConsumption),
  resetPositions: chartStep<ResetPositionsEvent>(applyResetPositions),
  shardPositionsMoved: chartStep<ShardPositionsMovedEvent>(applyShardPositionsMoved),
  cancelReset: chartStep<CancelResetEvent>(applyCancelReset),
  convergeMigration: chartStep<GroupEvent>((ctx) => convergeMigration(ctx, ctx.lastEventAt)),
  completeMigration: chartStep<GroupEvent>((ctx) => completeMigration(ctx, ctx.lastEventAt)),
};

/**
 * A command the chart refused (docs/architecture.md#admin-refusals): the transition names `reason`,
 * `refusals.ts` phrases it; nothing in the group changes.
 */
export function refuse(ctx: GroupContext, event: GroupEvent, reason: RefusalReason): GroupContext {
  const now = 'now' in event ? event.now : ctx.lastEventAt;
  const start = beginEvent(ctx, now);
  const { code, message, details } = refusalFor(reason, start, event);
  return withMigrationEvents(fail(start, code, message, details));
}
