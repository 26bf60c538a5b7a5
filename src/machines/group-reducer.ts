/**
 * One pure step of a group actor: (context, event) → context. The statechart's only context
 * action calls this, so the host can equally run it without XState (tests, replays).
 */
import { applyFreeze, applyPauseProducers, applyResumeProducers, applyUnfreeze } from './admin.js';
import type { GroupContext } from './context.js';
import type { CommandEvent, GroupEvent, PersistedEvent } from './events.js';
import { applyFailClosed } from './fail-closed.js';
import { guardInvariants } from './invariants.js';
import { applyHeartbeat, applyTick } from './membership.js';
import { applyRollback, applyScale, settleMigration } from './migration.js';
import { applyObservedVersion } from './rollback-signals.js';

/**
 * Applies one event. Never throws: a bug in a step becomes an INTERNAL result with an
 * EVENT_FAILED effect and leaves the context as it was (a throwing action would put the actor
 * in its error state, DESIGN.md §13). A step that would break an invariant is rejected the
 * same way, with INVARIANT_VIOLATION effects.
 *
 * Every command event ends by settling the active migration: whatever event made the group
 * converge (a heartbeat, an expiry on TICK) converges it in the same commit, and a passed
 * rollback window completes it.
 */
export function reduceGroupEvent(ctx: GroupContext, event: GroupEvent): GroupContext {
  try {
    if (event.type === 'PERSISTED') return persisted(ctx, event);
    return guardInvariants(ctx, settleMigration(applyCommand(ctx, event), event.now));
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return {
      ...ctx,
      lastEventAt: 'now' in event ? event.now : ctx.lastEventAt,
      result: { ok: false, code: 'INTERNAL', message: `${event.type} failed: ${message}` },
      effects: [{ type: 'EVENT_FAILED', event: event.type, message }],
    };
  }
}

function applyCommand(ctx: GroupContext, event: CommandEvent): GroupContext {
  switch (event.type) {
    case 'HEARTBEAT':
      return applyHeartbeat(ctx, event.request, event.now);
    case 'TICK':
      return applyTick(ctx, event.now);
    case 'FREEZE':
      return applyFreeze(ctx, event.now);
    case 'UNFREEZE':
      return applyUnfreeze(ctx, event.now);
    case 'PAUSE_PRODUCERS':
      return applyPauseProducers(ctx, event.now);
    case 'RESUME_PRODUCERS':
      return applyResumeProducers(ctx, event.now);
    case 'SCALE':
      return applyScale(ctx, event);
    case 'ROLLBACK':
      return applyRollback(ctx, event);
    case 'FAIL_CLOSED':
      return applyFailClosed(ctx, event.now, event.reason);
    case 'OBSERVE_VERSION':
      return applyObservedVersion(ctx, event.version, event.source, event.now);
  }
}

/**
 * Records a committed write. The group is not touched (the host compares it against what it
 * wrote), nor are `result` and `effects`, which the host may still be replying from.
 */
function persisted(ctx: GroupContext, event: PersistedEvent): GroupContext {
  return { ...ctx, storeRevision: event.revision, lastPersistedAt: event.updatedAt };
}
