/**
 * The two membership changes every path shares: removing a member (leave, fence, expiry) and
 * recomputing targets afterwards.
 */
import type { GroupContext } from './context.js';
import { withEffects } from './context.js';
import { isMember, releaseShardsOf } from './group-state.js';
import { handOverRetiring } from './retiring.js';
import { recomputeTargets } from './targets.js';

/** Recomputes targets now and clears any pending recompute. */
export function recompute(ctx: GroupContext): GroupContext {
  const group = recomputeTargets(ctx.group);
  const next: GroupContext = { ...ctx, group, recomputeAt: null, recomputeBy: null };
  if (group === ctx.group) return next;
  return withEffects(next, {
    type: 'ASSIGNMENT_RECOMPUTED',
    assignmentEpoch: group.assignmentEpoch,
  });
}

/**
 * Removes a member with its liveness and releases its shards, except retiring ones, which are
 * handed over, still retiring, to a remaining member (or wait ownerless when none is left).
 * Targets are left to the caller.
 */
export function removeMember(ctx: GroupContext, memberId: string, now: number): GroupContext {
  if (!isMember(ctx.group, memberId)) return ctx;
  const released = releaseShardsOf(ctx.group, memberId, now);
  ctx.liveness.delete(memberId);
  const members = released.members.delete(memberId);
  const group = handOverRetiring({ ...released, members }, memberId, now);
  return { ...ctx, group };
}
