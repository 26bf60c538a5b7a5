import { CoordinatorError } from '../errors.js';
import { groupLogFields, type Logger } from '../observability/logger.js';
import type { Store } from '../store/store.js';
import { failedClosedAdminError } from './fail-closed.js';
import { groupOf, type GroupEntry } from './group-entry.js';
import type { LostGroups } from './lost-groups.js';
import type { StoreGuard } from './store-guard.js';
import type { WriteRefusal } from './write-refusal.js';

export interface GroupDeletionOptions {
  readonly store: Pick<Store, 'deleteGroup' | 'isRegistered' | 'loadGroup' | 'releaseLayout'>;
  readonly guard: StoreGuard;
  readonly refusal: Pick<WriteRefusal, 'explain'>;
  readonly drop: (entry: GroupEntry) => void;
  readonly logger: Logger;
  /**
   * Told of every delete, so a deleted group is never taken for a lost one, on any replica
   * (docs/operations.md#lost-metadata).
   */
  readonly lost?: Pick<LostGroups, 'deleted'>;
}

/**
 * Deleting a group, and telling a delete whose reply was lost from a lost metadata key: the
 * entry is marked before the write, so a group found gone and unregistered afterwards is known
 * to be this delete.
 */
export class GroupDeletion {
  constructor(private readonly options: GroupDeletionOptions) {}

  /** Deletes the group of `entry` (the caller holds its mailbox). */
  async delete(entry: GroupEntry, options: { force: boolean }): Promise<void> {
    const { store, guard, refusal, drop, logger } = this.options;
    const group = groupOf(entry);
    if (group.status === 'FROZEN')
      throw new CoordinatorError('GROUP_FROZEN', 'the group is frozen');
    if (group.status === 'FAILED_CLOSED') throw failedClosedAdminError(entry);
    const members = group.members.size;
    if (members > 0 && !options.force) {
      throw new CoordinatorError(
        'GROUP_HAS_MEMBERS',
        `the group has ${members} live members; pass force=true`,
        { details: { members } },
      );
    }
    // Marked first: if the reply of a delete that did happen is lost, a retry (or the verify
    // loop) finds the group gone and unregistered, and knows that is this delete, not a loss.
    entry.deleting = true;
    try {
      await guard(() => store.deleteGroup(entry.ref, entry.fence, entry.revision));
    } catch (error) {
      if (!(await this.deletedMeanwhile(entry, error))) {
        throw await refusal.explain(entry, 'DELETE', error);
      }
    }
    // Before the entry goes: work queued behind the delete finds the group deleted, not lost.
    await this.options.lost?.deleted(entry.ref, group.lifecycleId);
    drop(entry);
    logger.info('group deleted', { ...groupLogFields(entry.ref), force: options.force });
    // The prefix's layout forgets the group; with none left, the next group sets the count.
    // Not released (store down), the name is dropped by the next group that joins the layout.
    await guard(() => store.releaseLayout(entry.ref)).catch((error: unknown) =>
      logger.warn('group deleted but not released from its prefix layout', {
        ...groupLogFields(entry.ref),
        error: String(error),
      }),
    );
  }

  /** Whether a group whose delete was started is gone: no metadata and no registry entry. */
  async deletedMeanwhile(entry: GroupEntry, error?: unknown): Promise<boolean> {
    if (!entry.deleting) return false;
    if (
      error !== undefined &&
      !(error instanceof CoordinatorError && error.code === 'GROUP_NOT_FOUND')
    ) {
      return false;
    }
    const { store, guard } = this.options;
    return (
      !(await guard(() => store.isRegistered(entry.ref))) &&
      !(await guard(() => store.loadGroup(entry.ref)))
    );
  }
}
