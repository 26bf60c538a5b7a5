/**
 * Held heartbeats (docs/protocol.md, "Held heartbeats"): a heartbeat may ask, with `waitMs`,
 * that its reply be held while it would tell the member nothing new, so the coordinator can
 * answer the moment something changes for the member instead of at its next heartbeat. The
 * rules, as pure functions; the host keeps the held requests (`src/actors/held-heartbeats.ts`).
 *
 * - A reply is held only when it tells the member nothing it does not know (`tellsNothingNew`
 *   in `protocol.ts`) and the member may stay held ({@link mayStayHeld}). A grant, a revoke, a
 *   retire, a fence, a new epoch or version, `SYNC_METADATA`, and every error are answered at
 *   once.
 * - While held, the request stays held only as long as {@link mayStayHeld}: the member is
 *   current, has nothing to act on and no grant is ready for it; any committed change that
 *   breaks that ends the hold, and the request is decided again on the group as it is then.
 * - The member's session counts from the arrival of the request (`HeartbeatRequest.heardAt`),
 *   so a hold never keeps a member alive that stopped talking.
 */
import type { GroupContext } from './context.js';
import { memberShards } from './group-state.js';
import { steadyMember } from './heartbeat.js';
import { MAX_HEARTBEAT_WAIT_MS, sameShards, type HeartbeatRequest } from './protocol.js';

export { tellsNothingNew } from './protocol.js';

/**
 * Whether the heartbeat `request` may stay held on `ctx`: the same checks as a steady heartbeat
 * (current member and epoch, same lifecycle, no version ahead, no recompute due, no migration
 * in progress, nothing to release, revoke or grant), plus nothing revoking or retiring, nothing
 * reported, and the member's assignment exactly what it reports. O(the member's shards).
 */
export function mayStayHeld(ctx: GroupContext, request: HeartbeatRequest, now: number): boolean {
  if (request.revokeProgress.length > 0) return false;
  const member = steadyMember(ctx, request, now);
  if (!member) return false;
  const view = memberShards(ctx.group, member.memberId);
  if (view.revoking.length > 0 || view.retiring.length > 0) return false;
  return sameShards(view.assigned, request.currentAssignments);
}

/**
 * How long a heartbeat asking for `waitMs` is held at most: never more than
 * {@link MAX_HEARTBEAT_WAIT_MS}, nor more than half the member's session timeout (the session
 * counts from the arrival, so the member has the other half to send its next heartbeat).
 */
export function holdLimitMs(waitMs: number, sessionTimeoutMs: number): number {
  return Math.max(0, Math.min(waitMs, MAX_HEARTBEAT_WAIT_MS, Math.floor(sessionTimeoutMs / 2)));
}
