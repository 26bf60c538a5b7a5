/**
 * The two membership changes every path shares: removing a member (leave, fence, expiry) and
 * recomputing targets afterwards. Each names the chart event it is (docs/architecture.md#the-statechart).
 */
import type { GroupContext } from './context.js';
import { raise, withEffects } from './context.js';
import { ChartEventType } from './events.js';
import { isMember } from './group-state.js';
import { DEPARTURES_KEPT, type MemberDeparture } from './member-machine.js';
import { handOverRetiring } from './retiring.js';
import { releaseShardsOf } from './shard-changes.js';
import { recomputeTargets } from './targets.js';

/**
 * Recomputes targets now and clears any pending recompute: TARGETS_RECOMPUTED when targets moved
 * or a recompute was due (a due recompute that moved no target still ends the wait for it).
 */
export function recompute(ctx: GroupContext): GroupContext {
  const group = recomputeTargets(ctx.group);
  const next: GroupContext = { ...ctx, group, recomputeAt: null, recomputeBy: null };
  if (group === ctx.group) {
    return ctx.recomputeAt === null ? next : raise(next, ChartEventType.TARGETS_RECOMPUTED);
  }
  return raise(
    withEffects(next, { type: 'ASSIGNMENT_RECOMPUTED', assignmentEpoch: group.assignmentEpoch }),
    ChartEventType.TARGETS_RECOMPUTED,
  );
}

/** How a member ended, as the effect and the chart event of the same name say it. */
export type Departure =
  | { readonly type: 'MEMBER_LEFT'; readonly memberId: string }
  | { readonly type: 'MEMBER_EXPIRED'; readonly memberId: string }
  | {
      readonly type: 'MEMBER_FENCED';
      readonly memberId: string;
      readonly reason: 'REBALANCE_TIMEOUT';
    };

const ENDS = { MEMBER_LEFT: 'left', MEMBER_EXPIRED: 'expired', MEMBER_FENCED: 'fenced' } as const;

/**
 * Removes a member with its liveness and releases its shards, except retiring ones, which are
 * handed over, still retiring, to a remaining member (or wait ownerless when none is left). The
 * departure is recorded for monitoring and raised. Targets are left to the caller.
 */
export function removeMember(ctx: GroupContext, departure: Departure, now: number): GroupContext {
  const { memberId } = departure;
  if (!isMember(ctx.group, memberId)) return ctx;
  const released = releaseShardsOf(ctx, memberId, now);
  ctx.liveness.delete(memberId);
  const members = released.group.members.delete(memberId);
  const group = handOverRetiring({ ...released.group, members }, memberId, now);
  const gone: MemberDeparture = { memberId, state: ENDS[departure.type], at: now };
  const departures = [gone, ...ctx.departures].slice(0, DEPARTURES_KEPT);
  return raise(withEffects({ ...released, group, departures }, departure), departure.type);
}
