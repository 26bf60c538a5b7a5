import { CoordinatorError } from '../errors.js';
import { groupLogFields, type Logger } from '../observability/logger.js';
import type { Store } from '../store/store.js';
import { failedClosedAdminError, failedClosedClientError, type FailClosed } from './fail-closed.js';
import { groupOf, type GroupEntry } from './group-entry.js';
import type { StoreGuard } from './store-guard.js';

/** Events that come from consumers or producers (503 when failed closed) rather than admins (409). */
const CLIENT_EVENTS = new Set(['HEARTBEAT', 'OBSERVE_VERSION', 'TICK']);

/** The codes of a write the store refused because of what it holds (not an outage). */
const REFUSALS = ['GROUP_NOT_FOUND', 'FENCED_WRITE', 'STALE_REVISION'];

export interface WriteRefusalOptions {
  readonly store: Pick<Store, 'readRevisions' | 'loadGroup' | 'readDeletions'>;
  readonly guard: StoreGuard;
  readonly failClosed: FailClosed;
  /** Drops the group's entry: another owner wrote, this one is no longer current. */
  readonly drop: (entry: GroupEntry) => void;
  readonly logger: Logger;
}

/**
 * What a refused write means. The stored metadata gone, or older than what we wrote, fails the
 * group closed (and the caller is told so); newer means another owner wrote, so the entry is
 * dropped and the caller's error is passed on.
 */
export class WriteRefusal {
  constructor(private readonly options: WriteRefusalOptions) {}

  /** Decides what the refusal `error` of an `eventType` write means; returns the error to throw. */
  async explain(entry: GroupEntry, eventType: string, error: unknown): Promise<unknown> {
    if (!(error instanceof CoordinatorError) || !REFUSALS.includes(error.code)) return error;
    const { store, guard, failClosed } = this.options;
    // A fence above ours: another owner claimed the group since, or deleted it and created it
    // again. This replica is deposed (it was paused past its lease,
    // docs/operations.md#a-paused-owner): what is stored is the new owner's to judge, and
    // nothing of it may be failed closed from here.
    if (error.code === 'FENCED_WRITE' && (await this.deposed(entry))) {
      return this.stepAside(entry, error);
    }
    // The fence is checked before the revision, so a restored backup (older fence) also lands
    // here as FENCED_WRITE: look at what is stored before deciding.
    const [seen] = await guard(() => store.readRevisions([entry.ref]));
    const { lifecycleId } = groupOf(entry);
    if (!seen) {
      // Gone because another owner deleted it on purpose while this one was deposed: it does
      // not exist, and is not lost (docs/operations.md#lost-metadata).
      if (await this.deletedOnPurpose(entry)) return this.stepAside(entry, error);
      await failClosed.failClosed(entry, 'METADATA_LOST', null, 'replica');
    } else if (seen.revision < entry.revision || seen.lifecycleId !== lifecycleId) {
      await failClosed.failClosed(entry, 'STORE_REVISION_REGRESSION', seen.revision);
    } else {
      return this.stepAside(entry, error);
    }
    return CLIENT_EVENTS.has(eventType)
      ? failedClosedClientError(entry)
      : failedClosedAdminError(entry);
  }

  /**
   * Whether another owner took the group since: the stored fence is above the entry's, and the
   * stored group is the entry's lifecycle, or a new one created after a delete that marked the
   * entry's lifecycle deleted (a new lifecycle's fence starts above every earlier one). A new
   * lifecycle without that mark was created over a loss: the checks below fail it closed.
   */
  private async deposed(entry: GroupEntry): Promise<boolean> {
    const { store, guard } = this.options;
    let stored;
    try {
      stored = await guard(() => store.loadGroup(entry.ref));
    } catch (error) {
      // Unreadable: the checks below decide (and fail it closed).
      if (error instanceof CoordinatorError && error.code === 'METADATA_CORRUPT') return false;
      throw error;
    }
    if (stored === null || stored.fence <= entry.fence) return false;
    return (
      stored.state.lifecycleId === groupOf(entry).lifecycleId ||
      (await this.deletedOnPurpose(entry))
    );
  }

  /** Whether a delete marked the entry's lifecycle as ended (the store's deletion marks). */
  private async deletedOnPurpose(entry: GroupEntry): Promise<boolean> {
    const { store, guard } = this.options;
    const { lifecycleId } = groupOf(entry);
    const deletions = await guard(() => store.readDeletions(entry.ref));
    return deletions.some((deletion) => deletion.lifecycleId === lifecycleId);
  }

  /** Another owner wrote: the entry goes (reloaded on next use), the caller's error is passed on. */
  private stepAside(entry: GroupEntry, error: CoordinatorError): CoordinatorError {
    this.options.logger.warn('group written by another owner; reloading on next use', {
      ...groupLogFields(entry.ref),
      code: error.code,
    });
    this.options.drop(entry);
    return error;
  }
}
