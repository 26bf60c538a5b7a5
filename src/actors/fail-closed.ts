import { CoordinatorError } from '../errors.js';
import type { Clock } from '../machines/clock.js';
import type { FailureReason } from '../machines/types.js';
import { groupLogFields, type Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { Store } from '../store/store.js';
import { applyEffects } from './effects.js';
import { evidenceOfGroup, evidenceOfRecord, mergeEvidence } from './evidence.js';
import { groupOf, type GroupEntry } from './group-entry.js';
import type { LostSource } from './lost-groups.js';
import type { Publication } from './publication.js';

export interface FailClosedOptions {
  readonly store: Pick<Store, 'readFailure' | 'recordFailure' | 'recordLostGroup'>;
  readonly clock: Clock;
  readonly metrics: Metrics;
  readonly logger: Logger;
  readonly publication: Publication;
}

/**
 * Failing a group closed (docs/operations.md#fail-closed-behaviour): the actor is told, the
 * metadata key is left alone (never recreated, never edited) and the decision is recorded in the
 * group's own failure key so it survives a restart. A record that could not be written stays to do
 * (`unrecorded`).
 */
export class FailClosed {
  constructor(private readonly options: FailClosedOptions) {}

  /**
   * Fails the group of `entry` closed for `reason`. `lostBy` names who remembered a group whose
   * metadata key was found missing (counted in `coord_metadata_lost_total`); a group adopted
   * from its failure record was counted when that record was written. `fromRecord`: the reason
   * is its failure record's, so no read found a lower revision now
   * (`coord_store_revision_regression_total` counts the reads that did), and the group was
   * counted in `coord_groups_failed_closed_total` by whoever wrote the record: loaded again (a
   * handover, a restart), it is not counted again.
   */
  async failClosed(
    entry: GroupEntry,
    reason: FailureReason,
    storeRevision: number | null,
    lostBy?: LostSource,
    fromRecord = false,
  ): Promise<void> {
    const { metrics, logger, clock, publication } = this.options;
    if (reason === 'STORE_REVISION_REGRESSION' && !fromRecord)
      metrics.storeRevisionRegression.inc();
    if (lostBy !== undefined) metrics.metadataLost.inc({ source: lostBy });
    if (!fromRecord) metrics.groupsFailedClosed.inc({ reason });
    logger.error('group failed closed', {
      ...groupLogFields(entry.ref),
      reason,
      knownRevision: entry.revision,
      storeRevision,
    });
    entry.actor.send({ type: 'FAIL_CLOSED', now: clock.now(), reason });
    const after = entry.actor.getSnapshot().context;
    applyEffects(after.effects, metrics, logger, entry.ref);
    publication.observe(entry, after);
    entry.unrecorded = { reason, storeRevision };
    await this.recordFailure(entry);
  }

  /**
   * Writes (merges) the failure record of a failed-closed group. On a store error it stays to do:
   * the verify loop tries again, so the decision reaches the store once it can.
   */
  async recordFailure(entry: GroupEntry): Promise<void> {
    const pending = entry.unrecorded;
    if (!pending) return;
    const { store, clock, logger } = this.options;
    const { group, signals } = entry.snapshot().context;
    try {
      // Merged with an earlier record: its first reason and the highest evidence are kept.
      const earlier = await store.readFailure(entry.ref);
      const evidence = mergeEvidence(
        evidenceOfGroup(group, signals),
        entry.floor,
        evidenceOfRecord(earlier),
      );
      entry.floor = evidence;
      const record = {
        reason: earlier?.reason ?? pending.reason,
        at: earlier?.at ?? clock.now(),
        knownRevision: Math.max(entry.revision, earlier?.knownRevision ?? 0),
        storeRevision: earlier ? earlier.storeRevision : pending.storeRevision,
        lifecycleId: earlier?.lifecycleId ?? group.lifecycleId,
        metadataVersion: Math.max(group.metadataVersion, earlier?.metadataVersion ?? 0),
        ...evidence,
      };
      await store.recordFailure(entry.ref, record);
      // A lost key also registers the group again: Redis restarted empty took the registry
      // too, and every replica must still list the group (docs/operations.md#lost-metadata).
      // Nothing is written there when the key is back meanwhile.
      if (pending.reason === 'METADATA_LOST') await store.recordLostGroup(entry.ref, record);
      entry.unrecorded = null;
    } catch (error) {
      logger.error('could not record the failure of a group; will retry', {
        ...groupLogFields(entry.ref),
        error: String(error),
      });
    }
  }
}

/** The refusal an admin gets from a failed-closed group (409: only recovery is allowed). */
export function failedClosedAdminError(entry: GroupEntry): CoordinatorError {
  return new CoordinatorError(
    'GROUP_FAILED_CLOSED_ADMIN',
    'the group failed closed; only recovery is allowed',
    { details: { failureReason: groupOf(entry).failureReason } },
  );
}

/** The refusal a consumer or producer gets from a failed-closed group (503). */
export function failedClosedClientError(entry: GroupEntry): CoordinatorError {
  return new CoordinatorError(
    'GROUP_FAILED_CLOSED',
    'the group failed closed; nothing was changed',
    {
      details: { failureReason: groupOf(entry).failureReason },
    },
  );
}
