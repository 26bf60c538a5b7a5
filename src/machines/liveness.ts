/**
 * The liveness of a group's members (in memory only), in one mutable table per
 * group, outside the immutable context: a heartbeat refreshes its member in O(1), where a copy
 * of a record of every member cost O(members) per heartbeat
 * (docs/architecture.md#performance-rules).
 *
 * The context holds the table by reference, so a context thrown away does not take its
 * liveness changes with it. Whoever may throw a change away (a step rejected by the invariant
 * guard, a step that failed, a write the store refused) opens a journal with {@link begin} and
 * undoes to its mark with {@link undo}; journals nest, and only changes made while one is open
 * are recorded, so a steady heartbeat outside any journal records nothing.
 */
import type { MemberLiveness, RevokeProgress } from './types.js';

type Undo = readonly [memberId: string, previous: MemberLiveness | undefined];

/**
 * What a steady heartbeat wrote into its member's record, kept with its decision to write it
 * again ({@link LivenessTable.repeat}) without the member's lookup or its request's lists: the
 * record, the table's {@link LivenessTable.version} then, and the values that came from the
 * request and the member (the clock's come at each repeat). A repeat that had to go the long
 * way keeps the record it wrote then (`repeatSteady`).
 */
export interface KeptRefresh {
  /** The table the record is in. */
  readonly liveness: LivenessTable;
  /** Null: never kept (a held heartbeat, whose times count from its arrival). */
  record: MemberLiveness | null;
  version: number;
  readonly sessionTimeoutMs: number;
  /** The member's rebalance timeout while it has shards to revoke, else null (no deadline). */
  readonly revokeTimeoutMs: number | null;
  readonly reportedMetadataVersion: number;
  readonly reportedAssignmentEpoch: number;
  readonly currentAssignments: readonly number[];
  readonly revokeProgress: readonly RevokeProgress[];
}
type Mutable<T> = { -readonly [K in keyof T]: T[K] };

export class LivenessTable {
  /** Typed mutable for {@link refresh}, which alone writes into a record. */
  private readonly entries = new Map<string, Mutable<MemberLiveness>>();
  private journal: Undo[] | null = null;
  private depth = 0;
  /** The earliest deadline of the records set (or restored) since {@link takeEarliestSet}. */
  private earliestSet = Infinity;
  /** See {@link version}. */
  private replaced = 0;

  /** A table holding `entries`, journal closed. */
  static of(entries: Iterable<readonly [string, MemberLiveness]> = []): LivenessTable {
    const table = new LivenessTable();
    for (const [memberId, live] of entries) table.entries.set(memberId, live);
    return table;
  }

  get(memberId: string): MemberLiveness | undefined {
    return this.entries.get(memberId);
  }

  get size(): number {
    return this.entries.size;
  }

  /**
   * Changes whenever a record is put in, replaced or taken out ({@link set}, {@link delete},
   * {@link undo}), not when one is refreshed in place: while it reads the same, every record
   * read before is still its member's.
   */
  get version(): number {
    return this.replaced;
  }

  set(memberId: string, live: MemberLiveness): void {
    this.remember(memberId);
    this.entries.set(memberId, live);
    this.replaced++;
    this.noteDeadlines(live);
  }

  /**
   * The earliest deadline (session expiry or revoke deadline) of any record set or restored
   * since the last call (Infinity: none), and starts over. With the deadlines seen when every
   * record was last looked at, a lower bound of the table's deadlines: the deadline sweep
   * looks at every member again only when that bound has passed.
   */
  takeEarliestSet(): number {
    const earliest = this.earliestSet;
    this.earliestSet = Infinity;
    return earliest;
  }

  /**
   * A member's heartbeat, as {@link set} with these values; when no journal is open (a steady
   * heartbeat) written into the record the member has, in place, allocating nothing: a
   * heartbeat leaves no garbage that outlives it. Whoever read the record
   * before sees the refresh.
   */
  refresh(
    memberId: string,
    lastHeartbeatAt: number,
    sessionExpiresAt: number,
    revokeDeadline: number | null,
    reportedMetadataVersion: number,
    reportedAssignmentEpoch: number,
    currentAssignments: readonly number[],
    revokeProgress: readonly RevokeProgress[],
  ): MemberLiveness {
    const current = this.entries.get(memberId);
    if (this.journal !== null || current === undefined) {
      const live = {
        lastHeartbeatAt,
        sessionExpiresAt,
        revokeDeadline,
        reportedMetadataVersion,
        reportedAssignmentEpoch,
        currentAssignments,
        revokeProgress,
      };
      this.set(memberId, live);
      return live;
    }
    current.lastHeartbeatAt = lastHeartbeatAt;
    current.sessionExpiresAt = sessionExpiresAt;
    current.revokeDeadline = revokeDeadline;
    current.reportedMetadataVersion = reportedMetadataVersion;
    current.reportedAssignmentEpoch = reportedAssignmentEpoch;
    current.currentAssignments = currentAssignments;
    current.revokeProgress = revokeProgress;
    this.noteDeadlines(current);
    return current;
  }

  /**
   * The refresh `kept` describes, again at `now`, in place: what {@link refresh} writes for the
   * same heartbeat (its session from now, its revoke deadline kept once set), with no lookup.
   * False, nothing written, when the record may no longer be its member's (another table's,
   * or the table's {@link version} moved) or a journal is open: refresh it the long way.
   */
  repeat(kept: KeptRefresh, now: number): boolean {
    // Readonly to everyone else: the table alone writes into a record.
    const record: Mutable<MemberLiveness> | null = kept.record;
    if (
      record === null ||
      kept.liveness !== this ||
      kept.version !== this.replaced ||
      this.journal !== null
    )
      return false;
    record.lastHeartbeatAt = now;
    record.sessionExpiresAt = now + kept.sessionTimeoutMs;
    record.revokeDeadline =
      kept.revokeTimeoutMs === null ? null : (record.revokeDeadline ?? now + kept.revokeTimeoutMs);
    record.reportedMetadataVersion = kept.reportedMetadataVersion;
    record.reportedAssignmentEpoch = kept.reportedAssignmentEpoch;
    record.currentAssignments = kept.currentAssignments;
    record.revokeProgress = kept.revokeProgress;
    this.noteDeadlines(record);
    return true;
  }

  delete(memberId: string): void {
    if (!this.entries.has(memberId)) return;
    this.remember(memberId);
    this.entries.delete(memberId);
    this.replaced++;
  }

  /**
   * Every member's liveness as it is now, as a plain record of copies (monitoring and tests;
   * O(members)): records are refreshed in place, so a later heartbeat does not change it.
   */
  toRecord(): Record<string, MemberLiveness> {
    const record: Record<string, MemberLiveness> = {};
    for (const [memberId, live] of this.entries) record[memberId] = { ...live };
    return record;
  }

  /** Opens (or nests in) a journal; returns the mark {@link undo} goes back to. */
  begin(): number {
    this.journal ??= [];
    this.depth++;
    return this.journal.length;
  }

  /** Undoes every change recorded since `mark`, newest first. */
  undo(mark: number): void {
    const journal = this.journal;
    if (!journal) return;
    if (journal.length > mark) this.replaced++;
    while (journal.length > mark) {
      const [memberId, previous] = journal.pop()!;
      if (previous === undefined) {
        this.entries.delete(memberId);
      } else {
        this.entries.set(memberId, previous);
        this.noteDeadlines(previous);
      }
    }
  }

  /** The members whose liveness changed since `mark` (while a journal is open), each once. */
  changedSince(mark: number): Set<string> {
    const changed = new Set<string>();
    const journal = this.journal;
    if (journal) for (let i = mark; i < journal.length; i++) changed.add(journal[i]![0]);
    return changed;
  }

  /** Closes the journal opened by the matching {@link begin}; the outermost drops it. */
  end(): void {
    if (this.depth === 0) return;
    this.depth--;
    if (this.depth === 0) this.journal = null;
  }

  private noteDeadlines(live: MemberLiveness): void {
    if (live.sessionExpiresAt < this.earliestSet) this.earliestSet = live.sessionExpiresAt;
    if (live.revokeDeadline !== null && live.revokeDeadline < this.earliestSet)
      this.earliestSet = live.revokeDeadline;
  }

  private remember(memberId: string): void {
    this.journal?.push([memberId, this.entries.get(memberId)]);
  }
}
