/**
 * Entry points of the membership protocol (docs/protocol.md) as pure functions of
 * (context, input, now): a heartbeat, and the deadline sweep the host runs as TICK.
 */
import type { GroupContext } from './context.js';
import { beginEvent, succeed, touched } from './context.js';
import { memberIds, ownedShards } from './group-state.js';
import { decideHeartbeat } from './heartbeat.js';
import { recompute, removeMember } from './member-changes.js';
import type { HeartbeatRequest } from './protocol.js';

export { recompute, removeMember } from './member-changes.js';

/** What a TICK did; the result reply of a TICK event. */
export interface TickReport {
  readonly expired: readonly string[];
  readonly fenced: readonly string[];
}

/**
 * Handles one heartbeat. `ctx.result` becomes `{ok: true, reply: HeartbeatReply}` for every
 * protocol outcome (FENCED_MEMBER_EPOCH included: it is an instruction, not a failure) or an
 * error result for a failed-closed group or an unsupported coordination version.
 */
export function applyHeartbeat(
  ctx: GroupContext,
  request: HeartbeatRequest,
  now: number,
): GroupContext {
  const start = beginEvent(ctx, now);
  return touched(start, decideHeartbeat(start, request, now), now);
}

/**
 * The deadline sweep: expires silent members, fences members still revoking at their revoke
 * deadline, and runs a due recompute. Nothing changes in a failed-closed group: its members
 * cannot heartbeat, and must not be expired for it.
 */
export function applyTick(ctx: GroupContext, now: number): GroupContext {
  const start = beginEvent(ctx, now);
  return touched(start, sweep(start, now), now);
}

function sweep(ctx: GroupContext, now: number): GroupContext {
  if (ctx.group.status === 'FAILED_CLOSED') return succeed(ctx, { expired: [], fenced: [] });
  const expired: string[] = [];
  const fenced: string[] = [];
  const settled: string[] = [];
  for (const memberId of memberIds(ctx.group)) {
    const live = ctx.liveness.get(memberId);
    if (!live) continue;
    if (live.sessionExpiresAt <= now) expired.push(memberId);
    else if (live.revokeDeadline !== null && live.revokeDeadline <= now) {
      if (ownedShards(ctx.group, memberId, 'revoking').length > 0) fenced.push(memberId);
      else settled.push(memberId);
    }
  }
  let next = clearRevokeDeadlines(ctx, settled);
  for (const memberId of expired) {
    next = removeMember(next, { type: 'MEMBER_EXPIRED', memberId }, now);
  }
  for (const memberId of fenced) {
    next = removeMember(
      next,
      { type: 'MEMBER_FENCED', memberId, reason: 'REBALANCE_TIMEOUT' },
      now,
    );
  }
  if (expired.length > 0 || fenced.length > 0) next = recompute(next);
  else if (next.recomputeAt !== null && next.recomputeAt <= now) next = recompute(next);
  const report: TickReport = { expired, fenced };
  return succeed(next, report);
}

/** A passed deadline with nothing left to revoke would make the sweep tick this group forever. */
function clearRevokeDeadlines(
  ctx: GroupContext,
  memberIdsToClear: readonly string[],
): GroupContext {
  for (const memberId of memberIdsToClear) {
    const live = ctx.liveness.get(memberId);
    if (live) ctx.liveness.set(memberId, { ...live, revokeDeadline: null });
  }
  return ctx;
}
