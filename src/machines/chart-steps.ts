/**
 * The named actions of the group statechart (docs/architecture.md#the-statechart): each is a pure
 * step (context, event) → context built on the protocol functions, wrapped so that it never throws
 * (a throwing action would put the actor in its error state) and never breaks a group invariant
 * (the step is rejected instead, with INVARIANT_VIOLATION effects). Each step also lists the events
 * the chart raises to itself afterwards (`raised`), so that every region moves on a named event.
 */
import { applyFreeze, applyPauseProducers, applyResumeProducers, applyUnfreeze } from './admin.js';
import type { GroupContext } from './context.js';
import { beginEvent, createGroupContext, fail, succeed } from './context.js';
import type { AdminEvent, ChartEventName, GroupEvent, RecoverEvent } from './events.js';
import { ChartEventType } from './events.js';
import { applyFailClosed } from './fail-closed.js';
import { allShards } from './group-state.js';
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
import { applyObservedVersion } from './rollback-signals.js';
import type { GroupState } from './types.js';
import { DEPARTURES_KEPT, type MemberDeparture } from './member-machine.js';

/** A step of the chart: what one action does to the context. */
export type Step<E extends GroupEvent = GroupEvent> = (ctx: GroupContext, event: E) => GroupContext;

/**
 * Wraps a step: a bug becomes an INTERNAL result with an EVENT_FAILED effect, a change that
 * would break an invariant is rejected, and the chart events the change calls for are listed
 * in `raised`.
 */
export function chartStep<E extends GroupEvent>(step: Step<E>): Step<E> {
  return (ctx, event) => {
    let next: GroupContext;
    // Liveness lives outside the context (see `liveness.ts`): a step thrown away takes its
    // liveness changes with it.
    const mark = ctx.liveness.begin();
    try {
      const stepped = step(ctx, event);
      next = guardInvariants(ctx, stepped);
      if (next !== stepped) ctx.liveness.undo(mark);
    } catch (error) {
      ctx.liveness.undo(mark);
      const message = error instanceof Error ? error.message : String(error);
      return {
        ...ctx,
        lastEventAt: 'now' in event ? event.now : ctx.lastEventAt,
        result: { ok: false, code: 'INTERNAL', message: `${event.type} failed: ${message}` },
        effects: [{ type: 'EVENT_FAILED', event: event.type, message }],
        raised: [],
      };
    } finally {
      ctx.liveness.end();
    }
    return { ...next, raised: raisedBy(ctx, next), departures: departures(ctx, next) };
  };
}

const ENDS = { MEMBER_LEFT: 'left', MEMBER_EXPIRED: 'expired', MEMBER_FENCED: 'fenced' } as const;

/** Members the step removed, with how they ended, in front of those kept from before. */
function departures(before: GroupContext, after: GroupContext): readonly MemberDeparture[] {
  if (after.group.members === before.group.members) return after.departures;
  const gone: MemberDeparture[] = [];
  for (const effect of freshEffects(before, after)) {
    if (
      effect.type !== 'MEMBER_LEFT' &&
      effect.type !== 'MEMBER_EXPIRED' &&
      effect.type !== 'MEMBER_FENCED'
    ) {
      continue;
    }
    const { memberId } = effect;
    if (before.group.members.has(memberId) && !after.group.members.has(memberId)) {
      gone.push({ memberId, state: ENDS[effect.type], at: after.lastEventAt });
    }
  }
  if (gone.length === 0) return after.departures;
  return [...gone.reverse(), ...after.departures].slice(0, DEPARTURES_KEPT);
}

/**
 * The chart events a change calls for: the membership events its effects and shard changes
 * name, then MIGRATION_CONVERGED or ROLLBACK_WINDOW_ELAPSED when the active migration got
 * there. A steady heartbeat changes no group object, so it raises nothing.
 */
export function raisedBy(before: GroupContext, after: GroupContext): ChartEventName[] {
  const raised = new Set<ChartEventName>();
  if (after.group !== before.group || after.recomputeAt !== before.recomputeAt) {
    for (const effect of freshEffects(before, after)) {
      switch (effect.type) {
        case 'MEMBER_JOINED':
        case 'MEMBER_LEFT':
        case 'MEMBER_EXPIRED':
        case 'MEMBER_FENCED':
          raised.add(effect.type);
          break;
        case 'ASSIGNMENT_RECOMPUTED':
          raised.add(ChartEventType.TARGETS_RECOMPUTED);
          break;
        default:
          break;
      }
    }
    // A due recompute that moved no target still ends the wait for it.
    if (before.recomputeAt !== null && after.recomputeAt === null) {
      raised.add(ChartEventType.TARGETS_RECOMPUTED);
    }
    if (after.group.shards !== before.group.shards) {
      for (const type of shardChanges(before.group, after.group)) raised.add(type);
    }
  }
  if (after.group.status !== 'FAILED_CLOSED') {
    const phase = migrationPhase(after.group);
    if (phase === 'inProgress' && migrationConverged(after)) {
      raised.add(ChartEventType.MIGRATION_CONVERGED);
    } else if (
      phase === 'converged' &&
      !rollbackAllowed(after.group.activeMigration!, after.lastEventAt)
    ) {
      raised.add(ChartEventType.ROLLBACK_WINDOW_ELAPSED);
    }
  }
  return [...raised];
}

/**
 * The effects this step added: a command starts with none, while a step the chart takes for a
 * raised event appends to those of the command that raised it.
 */
function freshEffects(before: GroupContext, after: GroupContext) {
  const continued =
    before.effects.length > 0 &&
    after.effects.length >= before.effects.length &&
    after.effects[0] === before.effects[0];
  return continued ? after.effects.slice(before.effects.length) : after.effects;
}

/** REVOKE_REQUESTED, SHARDS_RELEASED and SHARDS_GRANTED, from one pass over the shards. */
function shardChanges(before: GroupState, after: GroupState): ChartEventName[] {
  const found = new Set<ChartEventName>();
  for (const record of allShards(after)) {
    const was = before.shards[record.shard];
    if (was === record) continue;
    if (record.state === 'revoking' && was?.state !== 'revoking') {
      found.add(ChartEventType.REVOKE_REQUESTED);
    } else if (record.state === 'released' && was !== undefined && was.state !== 'released') {
      found.add(ChartEventType.SHARDS_RELEASED);
    } else if (record.state === 'assigned' && was?.state !== 'assigned') {
      found.add(ChartEventType.SHARDS_GRANTED);
    }
  }
  for (const shard of Object.keys(before.shards)) {
    const was = before.shards[Number(shard)];
    if (was && was.state !== 'released' && !Object.hasOwn(after.shards, shard)) {
      found.add(ChartEventType.SHARDS_RELEASED);
    }
  }
  return [...found];
}

/**
 * RECOVER: the group continues from what the host restored or rewrote and claimed, as a load
 * from the store would start it (every member gets a full session timeout of grace), keeping
 * the rollback signals seen so far.
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
  recover: chartStep<RecoverEvent>(recover),
  scale: chartStep<Extract<GroupEvent, { type: 'SCALE' }>>(applyScale),
  rollback: chartStep<Extract<GroupEvent, { type: 'ROLLBACK' }>>(applyRollback),
  adoptLayout: chartStep<Extract<GroupEvent, { type: 'ADOPT_LAYOUT' }>>(applyAdoptLayout),
  retiredShardsDrained:
    chartStep<Extract<GroupEvent, { type: 'RETIRED_SHARDS_DRAINED' }>>(applyRetiredShardsDrained),
  convergeMigration: chartStep<GroupEvent>((ctx) => convergeMigration(ctx, ctx.lastEventAt)),
  completeMigration: chartStep<GroupEvent>((ctx) => completeMigration(ctx, ctx.lastEventAt)),
};

/**
 * What a refused admin event answers, by the state that refused it: the chart decides THAT it
 * is refused (its state has no transition for it); this says why, in the API's words.
 */
export function refuse(ctx: GroupContext, event: GroupEvent, now: number): GroupContext {
  const refused = refusal(beginEvent(ctx, now), event);
  // Time passed all the same: a migration whose rollback window ended completes now.
  return { ...refused, raised: raisedBy(ctx, refused) };
}

function refusal(start: GroupContext, event: GroupEvent): GroupContext {
  const { group } = start;
  const id = `${group.streamPrefix}:${group.consumerGroup}`;
  if (group.status === 'FAILED_CLOSED' && event.type !== 'RECOVER') {
    return fail(
      start,
      'GROUP_FAILED_CLOSED_ADMIN',
      `group ${id} is failed closed; only recovery is allowed`,
    );
  }
  switch (event.type) {
    case 'FREEZE':
      return fail(start, 'GROUP_FROZEN', `group ${id} is already frozen`);
    case 'UNFREEZE':
      return fail(start, 'GROUP_NOT_FROZEN', `group ${id} is not frozen`);
    case 'RECOVER':
      return fail(
        start,
        'GROUP_NOT_FAILED_CLOSED',
        'recovery applies only to a failed-closed group',
        {
          status: group.status,
        },
      );
    case 'SCALE':
      // The protocol function phrases every refusal of a scale in the documented order.
      return applyScale(start, event);
    case 'ROLLBACK':
      return applyRollback(start, event);
    default:
      return fail(start, 'GROUP_FROZEN', `group ${id} is frozen; unfreeze it first`);
  }
}
