/**
 * Rollback signals (spec §7.3, DESIGN.md §7): a client that reports a version above the stored
 * one has seen state the store no longer has. Never trusted, always recorded.
 */
import type { Effect, GroupContext, RollbackField } from './context.js';
import { withEffects } from './context.js';
import type { HeartbeatRequest } from './protocol.js';

/** Reported versus stored value of one field. */
export interface VersionReport {
  readonly field: RollbackField;
  readonly reported: number;
  readonly stored: number;
}

/** The fields of a heartbeat that report a `metadataVersion` or `assignmentEpoch` above ours. */
export function versionsAhead(ctx: GroupContext, request: HeartbeatRequest): VersionReport[] {
  const ahead: VersionReport[] = [];
  const { group } = ctx;
  if (request.metadataVersion > group.metadataVersion) {
    ahead.push({
      field: 'metadataVersion',
      reported: request.metadataVersion,
      stored: group.metadataVersion,
    });
  }
  if (request.assignmentEpoch > group.assignmentEpoch) {
    ahead.push({
      field: 'assignmentEpoch',
      reported: request.assignmentEpoch,
      stored: group.assignmentEpoch,
    });
  }
  return ahead;
}

/** Counts one rollback signal (however many fields it names) and emits one effect per field. */
export function recordRollbackSignal(
  ctx: GroupContext,
  reports: readonly VersionReport[],
  reportedMetadataVersion: number,
  now: number,
): GroupContext {
  if (reports.length === 0) return ctx;
  const previous = ctx.signals;
  const signals = {
    count: (previous?.count ?? 0) + 1,
    firstAt: previous?.firstAt ?? now,
    lastAt: now,
    highestVersionSeen: Math.max(previous?.highestVersionSeen ?? 0, reportedMetadataVersion),
    lastSource: 'heartbeat' as const,
  };
  const effects: Effect[] = reports.map((r) => ({
    type: 'ROLLBACK_SIGNAL',
    source: 'heartbeat',
    ...r,
  }));
  return withEffects({ ...ctx, signals }, ...effects);
}
