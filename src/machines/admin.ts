/**
 * Admin commands that go through the group actor: freeze/unfreeze and pausing/resuming
 * producers, as the chart accepts them. Which state refuses which of them is the chart's
 * (`group-machine.ts`, phrased by `refusals.ts`), so nothing here checks the status again.
 */
import type { GroupContext } from './context.js';
import { beginEvent, succeed, touched } from './context.js';
import type { GroupState, GroupStatus } from './types.js';

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
  return command(ctx, now, (group) => ({ ...group, status: 'FROZEN' }));
}

/** FROZEN → ACTIVE. */
export function applyUnfreeze(ctx: GroupContext, now: number): GroupContext {
  return command(ctx, now, (group) => ({ ...group, status: 'ACTIVE' }));
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
    if (group.producersPaused === paused) return group;
    return { ...group, producersPaused: paused, metadataVersion: group.metadataVersion + 1 };
  });
}

function command(
  ctx: GroupContext,
  now: number,
  change: (group: GroupState) => GroupState,
): GroupContext {
  const start = beginEvent(ctx, now);
  const { group } = start;
  const outcome = change(group);
  const summary: AdminSummary = {
    status: outcome.status,
    producersPaused: outcome.producersPaused,
    metadataVersion: outcome.metadataVersion,
    changed: outcome !== group,
  };
  return touched(start, succeed({ ...start, group: outcome }, summary), now);
}
