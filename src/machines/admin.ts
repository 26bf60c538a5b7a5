/**
 * Admin commands that go through the group actor: freeze/unfreeze and
 * pausing/resuming producers. A failed-closed group refuses them all: the only way out of
 * FAILED_CLOSED is the recovery command.
 */
import type { GroupContext } from './context.js';
import { beginEvent, fail, succeed, touched } from './context.js';
import type { GroupState, GroupStatus } from './types.js';
import { groupId } from './types.js';

/** Reply of a successful admin command. */
export interface AdminSummary {
  readonly status: GroupStatus;
  readonly producersPaused: boolean;
  readonly metadataVersion: number;
  /** False when the command found the group already as asked (an idempotent no-op). */
  readonly changed: boolean;
}

/**
 * ACTIVE → FROZEN: admin mutations stop until UNFREEZE (step 1 of
 * docs/operations.md#recovery-procedure).
 */
export function applyFreeze(ctx: GroupContext, now: number): GroupContext {
  return command(ctx, now, (group) => {
    if (group.status === 'FROZEN')
      return refusal('GROUP_FROZEN', `group ${groupId(group)} is already frozen`);
    return { ...group, status: 'FROZEN' };
  });
}

/** FROZEN → ACTIVE. */
export function applyUnfreeze(ctx: GroupContext, now: number): GroupContext {
  return command(ctx, now, (group) => {
    if (group.status !== 'FROZEN')
      return refusal('GROUP_NOT_FROZEN', `group ${groupId(group)} is not frozen`);
    return { ...group, status: 'ACTIVE' };
  });
}

/** Sets `producersPaused`; routing metadata changes, so `metadataVersion` goes up. */
export function applyPauseProducers(ctx: GroupContext, now: number): GroupContext {
  return setProducersPaused(ctx, now, true);
}

/** Clears `producersPaused`; routing metadata changes, so `metadataVersion` goes up. */
export function applyResumeProducers(ctx: GroupContext, now: number): GroupContext {
  return setProducersPaused(ctx, now, false);
}

function setProducersPaused(ctx: GroupContext, now: number, paused: boolean): GroupContext {
  return command(ctx, now, (group) => {
    const blocked = mutationRefusal(group);
    if (blocked) return blocked;
    if (group.producersPaused === paused) return group;
    return { ...group, producersPaused: paused, metadataVersion: group.metadataVersion + 1 };
  });
}

/** Why an admin command may not run. */
export interface Refusal {
  readonly refused: true;
  readonly code: 'GROUP_FROZEN' | 'GROUP_NOT_FROZEN' | 'GROUP_FAILED_CLOSED_ADMIN';
  readonly message: string;
}

function refusal(code: Refusal['code'], message: string): Refusal {
  return { refused: true, code, message };
}

/**
 * Why an admin mutation (producers, scale, rollback) may not run on `group` now, or null:
 * a failed-closed group takes nothing but recovery, a frozen one nothing but UNFREEZE.
 * FREEZE and UNFREEZE judge a frozen group themselves.
 */
export function mutationRefusal(group: GroupState): Refusal | null {
  if (group.status === 'FAILED_CLOSED') {
    return refusal(
      'GROUP_FAILED_CLOSED_ADMIN',
      `group ${groupId(group)} is failed closed; only recovery is allowed`,
    );
  }
  if (group.status === 'FROZEN') {
    return refusal('GROUP_FROZEN', `group ${groupId(group)} is frozen; unfreeze it first`);
  }
  return null;
}

function command(
  ctx: GroupContext,
  now: number,
  change: (group: GroupState) => GroupState | Refusal,
): GroupContext {
  const start = beginEvent(ctx, now);
  const { group } = start;
  const blocked = mutationRefusal(group);
  if (blocked?.code === 'GROUP_FAILED_CLOSED_ADMIN')
    return fail(start, blocked.code, blocked.message);
  const outcome = change(group);
  if ('refused' in outcome) return fail(start, outcome.code, outcome.message);
  const summary: AdminSummary = {
    status: outcome.status,
    producersPaused: outcome.producersPaused,
    metadataVersion: outcome.metadataVersion,
    changed: outcome !== group,
  };
  return touched(start, succeed({ ...start, group: outcome }, summary), now);
}
