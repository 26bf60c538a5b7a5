import type { Clock } from '../machines/clock.js';
import type { Logger } from '../observability/logger.js';
import type { Store } from '../store/store.js';
import type { FailClosed } from './fail-closed.js';
import { groupOf, isFailedClosed, type GroupEntry } from './group-entry.js';
import type { Stale } from './mailbox.js';
import { forEachSlice } from './slices.js';

/** Groups checked in one turn of the event loop. */
const CHECK_SLICE = 500;

export interface VerifyLoopOptions {
  readonly store: Pick<Store, 'readRevisions'>;
  readonly clock: Clock;
  readonly logger: Logger;
  /** How often the loop runs (`store.verify-interval`). */
  readonly intervalMs: number;
  readonly entries: () => readonly GroupEntry[];
  readonly run: <T>(entry: GroupEntry, work: () => Promise<T>) => Promise<T | Stale>;
  readonly failClosed: Pick<FailClosed, 'failClosed' | 'recordFailure'>;
  /** Whether a group whose metadata is gone was deleted by us (its entry is then dropped). */
  readonly deletedMeanwhile: (entry: GroupEntry) => Promise<boolean>;
  readonly drop: (entry: GroupEntry) => void;
}

/**
 * Re-reads revision and lifecycle of every held group in one round trip
 * (docs/architecture.md#failure-detection), so a lost or rolled-back metadata key is noticed even
 * when nothing is being written; and retries failure records that could not be written.
 */
export class VerifyLoop {
  constructor(private readonly options: VerifyLoopOptions) {}

  /** Starts verifying; returns the function that stops it. */
  start(): () => void {
    const { clock, intervalMs, logger } = this.options;
    return clock.every(intervalMs, () => {
      this.verify().catch((error: unknown) =>
        logger.warn('store verification failed', { error: String(error) }),
      );
    });
  }

  /** One round. A group written to meanwhile is skipped: its write checked the revision itself. */
  async verify(): Promise<void> {
    const { store, entries, run, failClosed } = this.options;
    const failed = entries().filter((e) => e.unrecorded !== null);
    await Promise.allSettled(
      failed.map((entry) => run(entry, () => failClosed.recordFailure(entry))),
    );
    const checked = entries().filter((e) => !isFailedClosed(e));
    if (checked.length === 0) return;
    const expected = checked.map((e) => e.revision);
    const revisions = await store.readRevisions(checked.map((e) => e.ref));
    // A group whose reading agrees with what it held when the round began is done with: its
    // mailbox would find nothing to do either (a write meanwhile only moves the revision on, and
    // a new lifecycle comes with a write). Each other group is checked in its mailbox,
    // CHECK_SLICE groups per turn of the event loop.
    const checks: Array<Promise<unknown>> = [];
    let i = 0;
    await forEachSlice(checked, CHECK_SLICE, (entry) => {
      const index = i++;
      const seen = revisions[index];
      if (
        seen &&
        seen.revision >= (expected[index] as number) &&
        seen.lifecycleId === groupOf(entry).lifecycleId
      ) {
        return;
      }
      checks.push(
        run(entry, async () => {
          if (isFailedClosed(entry) || entry.revision !== expected[index]) return;
          const seen = revisions[index] ?? null;
          if (seen === null) {
            if (await this.options.deletedMeanwhile(entry)) this.options.drop(entry);
            else await failClosed.failClosed(entry, 'METADATA_LOST', null, 'replica');
          } else if (
            seen.revision < entry.revision ||
            seen.lifecycleId !== groupOf(entry).lifecycleId
          ) {
            await failClosed.failClosed(entry, 'STORE_REVISION_REGRESSION', seen.revision);
          }
        }),
      );
    });
    await Promise.allSettled(checks);
  }
}
