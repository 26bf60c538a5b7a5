/**
 * Rollback signals (docs/operations.md#what-the-coordinator-notices): a client that reports a
 * version above the stored one has seen state the store no longer has. Never trusted, always
 * recorded.
 */
import type { Effect, GroupContext, RollbackField, RollbackSource } from './context.js';
import { beginEvent, succeed, withEffects } from './context.js';
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
  source: RollbackSource = 'heartbeat',
): GroupContext {
  if (reports.length === 0) return ctx;
  const previous = ctx.signals;
  const signals = {
    count: (previous?.count ?? 0) + 1,
    firstAt: previous?.firstAt ?? now,
    lastAt: now,
    highestVersionSeen: Math.max(previous?.highestVersionSeen ?? 0, reportedMetadataVersion),
    lastSource: source,
  };
  const effects: Effect[] = reports.map((r) => ({
    type: 'ROLLBACK_SIGNAL',
    source,
    ...r,
  }));
  return withEffects({ ...ctx, signals }, ...effects);
}

/**
 * OBSERVE_VERSION: a producer's routing read carried the highest metadataVersion it has seen
 * (header X-Observed-Metadata-Version). Above ours, it is a rollback signal; never trusted.
 */
export function applyObservedVersion(
  ctx: GroupContext,
  version: number,
  source: RollbackSource,
  now: number,
): GroupContext {
  const start = beginEvent(ctx, now);
  const stored = start.group.metadataVersion;
  const reports: VersionReport[] =
    version > stored ? [{ field: 'metadataVersion', reported: version, stored }] : [];
  return succeed(recordRollbackSignal(start, reports, version, now, source), {
    signalled: reports.length > 0,
  });
}
