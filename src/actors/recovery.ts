import { randomUUID } from 'node:crypto';
import { CoordinatorError } from '../errors.js';
import { newGroupState } from '../machines/new-group.js';
import type { GroupRef, GroupState } from '../machines/types.js';
import { groupLogFields, type Logger } from '../observability/logger.js';
import { diffFields, encodeGroup, isEmptyPatch } from '../store/codec.js';
import type { Store, StoredGroup } from '../store/store.js';
import {
  evidenceOfFields,
  evidenceOfGroup,
  evidenceOfRecord,
  mergeEvidence,
  type Evidence,
} from './evidence.js';
import type { ActorFactory, GroupEntry } from './group-entry.js';
import type { Ownership } from './group-ownership.js';
import type { LostGroups } from './lost-groups.js';
import type { Publication } from './publication.js';
import type { StoreGuard } from './store-guard.js';
import type { RecoveryRequest } from './types.js';

export interface RecoveryOptions {
  readonly store: Pick<
    Store,
    | 'readFailure'
    | 'loadGroup'
    | 'commitGroup'
    | 'exportGroup'
    | 'importGroup'
    | 'clearFailure'
    | 'adoptLayout'
  >;
  readonly guard: StoreGuard;
  readonly factory: ActorFactory;
  readonly publication: Pick<Publication, 'observe'>;
  readonly ownership: Pick<Ownership, 'claim'>;
  readonly logger: Logger;
  /** Forgets a recovered group that was remembered as lost (docs/operations.md#lost-metadata). */
  readonly lost?: Pick<LostGroups, 'recovered'>;
}

/**
 * Brings a failed-closed group back (docs/operations.md#recovery-procedure): RESUME the stored
 * metadata, or RECREATE a new lifecycle. Versions and epochs continue above every piece of
 * evidence. The caller holds the group's mailbox.
 */
export class Recovery {
  constructor(private readonly options: RecoveryOptions) {}

  async recover(entry: GroupEntry, request: RecoveryRequest): Promise<void> {
    const { store, guard, logger } = this.options;
    const { ref } = entry;
    const before = entry.snapshot().context;
    if (before.group.status !== 'FAILED_CLOSED') {
      throw new CoordinatorError(
        'GROUP_NOT_FAILED_CLOSED',
        'recovery applies only to a failed-closed group',
        { details: { status: before.group.status } },
      );
    }
    const recorded = await guard(() => store.readFailure(ref));
    const evidence = mergeEvidence(
      evidenceOfGroup(before.group, before.signals),
      entry.floor,
      evidenceOfRecord(recorded),
    );
    const stored =
      request.action === 'RESUME'
        ? await this.resume(ref, evidence)
        : await this.recreate(ref, evidence, request.shardCount);
    await guard(() => store.clearFailure(ref));
    this.options.lost?.recovered(ref);
    this.resumeActor(entry, stored);
    logger.warn('group recovered', {
      ...groupLogFields(ref),
      action: request.action,
      requestedBy: request.requestedBy,
      lifecycleId: stored.state.lifecycleId,
    });
  }

  private async resume(ref: GroupRef, evidence: Evidence): Promise<StoredGroup> {
    const { store, guard } = this.options;
    const highest = evidence.highestVersionSeen;
    const found = await guard(() => store.loadGroup(ref));
    if (!found) {
      throw new CoordinatorError(
        'RESUME_REFUSED',
        'the metadata key is missing: restore a backup first, or RECREATE',
      );
    }
    if (found.state.metadataVersion < highest) {
      throw new CoordinatorError(
        'RESUME_REFUSED',
        `the stored metadataVersion ${found.state.metadataVersion} is below the highest version seen (${highest}): RECREATE instead`,
        {
          details: {
            storedMetadataVersion: found.state.metadataVersion,
            highestVersionSeen: highest,
          },
        },
      );
    }
    const owned = await guard(() => this.options.ownership.claim(ref));
    return this.raiseEpochs(ref, owned, evidence);
  }

  /**
   * RESUME takes the restored metadata as it is, except that epochs continue above everything
   * issued before: a process still holding an epoch from before the restore is fenced, never
   * taken for a member that rejoined (ONE fenced write).
   */
  private async raiseEpochs(
    ref: GroupRef,
    owned: StoredGroup,
    evidence: Evidence,
  ): Promise<StoredGroup> {
    const state: GroupState = {
      ...owned.state,
      assignmentEpoch: Math.max(owned.state.assignmentEpoch, evidence.assignmentEpoch + 1),
      memberEpochSeq: Math.max(owned.state.memberEpochSeq, evidence.memberEpochSeq + 1),
    };
    const patch = diffFields(encodeGroup(owned.state), encodeGroup(state));
    if (isEmptyPatch(patch)) return owned;
    const revision = await this.options.guard(() =>
      this.options.store.commitGroup(ref, owned.fence, owned.revision, patch),
    );
    return { ...owned, state, revision };
  }

  /** Writes a new lifecycle over the group (RECREATE): versions and epochs keep going up. */
  private async recreate(ref: GroupRef, known: Evidence, shardCount: number): Promise<StoredGroup> {
    const { store, guard, factory, ownership } = this.options;
    // Whatever is still readable in the current key counts too, even if it does not decode.
    const raw = await guard(() => store.exportGroup(ref));
    const evidence = mergeEvidence(known, evidenceOfFields(raw));
    const now = factory.clock.now();
    // The new lifecycle is on its prefix's layout too: alone on it, it sets the count again;
    // beside other groups, a count other than theirs is refused (SHARD_COUNT_MISMATCH).
    const layout = await guard(() =>
      store.adoptLayout(ref, { shardCount, mode: 'reset', now, newId: randomUUID() }),
    );
    const state = newGroupState(ref, {
      shardCount,
      lifecycleId: randomUUID(),
      now,
      layout: { id: layout.id, version: layout.version },
      startAt: raw?.startAt === 'earliest' ? 'earliest' : 'latest',
      metadataVersion: evidence.highestVersionSeen + 1,
      assignmentEpoch: evidence.assignmentEpoch + 1,
      memberEpochSeq: evidence.memberEpochSeq + 1,
    });
    // No fence: the claim below starts one above every fence of the earlier lifecycle.
    const fields = { ...encodeGroup(state), storeRevision: '1' };
    await guard(() => store.importGroup(ref, fields));
    return guard(() => ownership.claim(ref));
  }

  /**
   * Hands the recovered group to its actor: RECOVER takes the chart out of failedClosed (the
   * actor keeps its rollback signals and restarts every member's liveness).
   */
  private resumeActor(entry: GroupEntry, stored: StoredGroup): void {
    const { factory, publication } = this.options;
    entry.actor.send({
      type: 'RECOVER',
      now: factory.clock.now(),
      group: stored.state,
      storeRevision: stored.revision,
    });
    entry.persisted = stored.state;
    entry.revision = stored.revision;
    entry.fence = stored.fence;
    entry.floor = null;
    publication.observe(entry, entry.snapshot().context);
  }
}
