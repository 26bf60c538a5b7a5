/**
 * Failing a group closed (docs/operations.md#fail-closed-behaviour): the host found its stored
 * metadata lost or rolled back. From then on heartbeats and routing are refused and admin mutations
 * other than recovery too; nothing else about the group changes, so what clients report can still
 * be compared against it, and recovery starts from exactly what was known.
 */
import type { GroupContext } from './context.js';
import { beginEvent, succeed, touched, withEffects } from './context.js';
import type { FailureReason, GroupStatus } from './types.js';

/** Reply of FAIL_CLOSED. */
export interface FailClosedReply {
  readonly status: GroupStatus;
  readonly failureReason: FailureReason | null;
  /** False when the group had already failed closed (the first reason is kept). */
  readonly changed: boolean;
}

/**
 * Sets status FAILED_CLOSED with `reason`. Idempotent: a group already failed closed keeps
 * its first reason (the original cause is what recovery needs) and emits no second effect.
 */
export function applyFailClosed(
  ctx: GroupContext,
  now: number,
  reason: FailureReason,
): GroupContext {
  const start = beginEvent(ctx, now);
  const { group } = start;
  if (group.status === 'FAILED_CLOSED') {
    const reply: FailClosedReply = {
      status: group.status,
      failureReason: group.failureReason,
      changed: false,
    };
    return succeed(start, reply);
  }
  const failed = { ...group, status: 'FAILED_CLOSED' as const, failureReason: reason };
  const reply: FailClosedReply = { status: failed.status, failureReason: reason, changed: true };
  const next = withEffects({ ...start, group: failed }, { type: 'FAILED_CLOSED', reason });
  return touched(start, succeed(next, reply), now);
}
