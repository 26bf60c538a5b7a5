import { groupId, type GroupRef } from '../machines/types.js';
import type { Metrics } from '../observability/metrics.js';
import type { EntryPhase, GroupEntry } from './group-entry.js';
import type { Settled, Stale } from './mailbox.js';

/**
 * The groups this replica holds, and where each is in its lifecycle (loading, owned,
 * releasing, dropped). The gauges of owned groups (and the members and revocations they
 * count) follow what is in the table.
 */
export class GroupTable {
  private readonly entries = new Map<string, GroupEntry>();
  /** Loads and creates in flight: a second request for the group waits for the first. */
  readonly loading = new Map<string, Promise<GroupEntry>>();
  /** Told once an entry is removed (released, dropped, deleted), after `onLeave`. */
  afterRemove: ((entry: GroupEntry) => void) | null = null;

  constructor(
    private readonly metrics: Pick<
      Metrics,
      'groupsOwned' | 'members' | 'revokePending' | 'pausedShards'
    >,
    /**
     * Called when an entry stops taking new work (released, dropped, cleared): whatever waits
     * on it (its deadline timers, held heartbeats) must stop waiting.
     */
    private readonly onLeave: (entry: GroupEntry) => void = () => undefined,
  ) {}

  get(ref: GroupRef): GroupEntry | undefined {
    return this.entries.get(groupId(ref));
  }

  /** The group's phase here; null when this replica holds nothing of it. */
  phase(ref: GroupRef): EntryPhase | null {
    const entry = this.get(ref);
    if (entry) return entry.phase;
    return this.loading.has(groupId(ref)) ? 'loading' : null;
  }

  /** Whether work may still run on `entry`: it is the group's entry and not dropped. */
  isCurrent(entry: GroupEntry): boolean {
    return entry.phase !== 'dropped' && this.entries.get(groupId(entry.ref)) === entry;
  }

  all(): GroupEntry[] {
    return [...this.entries.values()];
  }

  /** Adds `entry` as owned, unless the group has one already (adopted meanwhile): returns the one kept. */
  add(entry: GroupEntry): GroupEntry {
    const existing = this.entries.get(groupId(entry.ref));
    if (existing) return existing;
    entry.phase = 'owned';
    this.entries.set(groupId(entry.ref), entry);
    this.metrics.groupsOwned.set(this.entries.size);
    return entry;
  }

  /** Marks `entry` releasing: it takes no new work, what is queued still runs. */
  beginRelease(entry: GroupEntry): void {
    if (!this.isCurrent(entry)) return;
    entry.phase = 'releasing';
    this.onLeave(entry);
  }

  /** Drops `entry` (if still current): its actor stops, queued work goes back to its callers. */
  remove(entry: GroupEntry): void {
    if (!this.isCurrent(entry)) return;
    entry.phase = 'dropped';
    entry.stopActor();
    this.entries.delete(groupId(entry.ref));
    this.metrics.groupsOwned.set(this.entries.size);
    this.metrics.members.dec(entry.counts.members);
    this.metrics.revokePending.dec(entry.counts.revoking);
    this.metrics.pausedShards.dec(entry.counts.paused);
    this.onLeave(entry);
    this.afterRemove?.(entry);
  }

  /** Runs `work` alone on the group; {@link STALE} if the entry was dropped meanwhile. */
  run<T>(entry: GroupEntry, work: () => Promise<T>): Promise<T | Stale> {
    return entry.mailbox.run(() => this.isCurrent(entry), work);
  }

  /**
   * Adds `item` to the group's batch of `kind` (see `Mailbox.batch`); {@link STALE} if the entry
   * was dropped before the batch ran.
   */
  runBatch<I, R>(
    entry: GroupEntry,
    kind: object,
    item: I,
    process: (items: readonly I[]) => Promise<ReadonlyArray<Settled<R>>>,
  ): Promise<R | Stale> {
    return entry.mailbox.batch(kind, () => this.isCurrent(entry), item, process);
  }

  /** Drops every entry (shutdown). */
  clear(): void {
    for (const entry of this.all()) entry.phase = 'dropped';
    for (const entry of this.entries.values()) entry.stopActor();
    for (const entry of this.entries.values()) this.onLeave(entry);
    this.entries.clear();
    this.metrics.groupsOwned.set(0);
  }
}
