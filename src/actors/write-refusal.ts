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
  readonly store: Pick<Store, 'readRevisions' | 'readDeletions'>;
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
