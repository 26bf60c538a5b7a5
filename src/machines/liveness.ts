/**
 * The liveness of a group's members (DESIGN.md §4: in memory only), in one mutable table per
 * group, outside the immutable context: a heartbeat refreshes its member in O(1), where a copy
 * of a record of every member cost O(members) per heartbeat (DESIGN.md §12).
 *
 * The context holds the table by reference, so a context thrown away does not take its
 * liveness changes with it. Whoever may throw a change away (a step rejected by the invariant
 * guard, a step that failed, a write the store refused) opens a journal with {@link begin} and
 * undoes to its mark with {@link undo}; journals nest, and only changes made while one is open
 * are recorded, so a steady heartbeat outside any journal records nothing.
 */
import type { MemberLiveness, RevokeProgress } from './types.js';

type Undo = readonly [memberId: string, previous: MemberLiveness | undefined];
type Mutable<T> = { -readonly [K in keyof T]: T[K] };

export class LivenessTable {
  /** Typed mutable for {@link refresh}, which alone writes into a record. */
  private readonly entries = new Map<string, Mutable<MemberLiveness>>();
  private journal: Undo[] | null = null;
  private depth = 0;
  /** The earliest deadline of the records set (or restored) since {@link takeEarliestSet}. */
  private earliestSet = Infinity;

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

  set(memberId: string, live: MemberLiveness): void {
    this.remember(memberId);
    this.entries.set(memberId, live);
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
   * heartbeat leaves no garbage that outlives it (DESIGN.md §12). Whoever read the record
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
  ): void {
    const current = this.entries.get(memberId);
    if (this.journal !== null || current === undefined) {
      this.set(memberId, {
        lastHeartbeatAt,
        sessionExpiresAt,
        revokeDeadline,
        reportedMetadataVersion,
        reportedAssignmentEpoch,
        currentAssignments,
        revokeProgress,
      });
      return;
    }
    current.lastHeartbeatAt = lastHeartbeatAt;
    current.sessionExpiresAt = sessionExpiresAt;
    current.revokeDeadline = revokeDeadline;
    current.reportedMetadataVersion = reportedMetadataVersion;
    current.reportedAssignmentEpoch = reportedAssignmentEpoch;
    current.currentAssignments = currentAssignments;
    current.revokeProgress = revokeProgress;
    this.noteDeadlines(current);
  }

  delete(memberId: string): void {
    if (!this.entries.has(memberId)) return;
    this.remember(memberId);
    this.entries.delete(memberId);
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
