import { EntryDroppedError } from '../errors.js';
import type { Clock } from '../machines/clock.js';
import {
  deadlineWithin,
  earliestDeadlineOf,
  earliestMemberDeadline,
  waitsForNothing,
  type GroupContext,
} from '../machines/context.js';
import type { MemberLiveness } from '../machines/types.js';
import type { Logger } from '../observability/logger.js';
import type { Committer } from './committer.js';
import type { GroupEntry } from './group-entry.js';
import type { Stale } from './mailbox.js';
import { forEachSlice } from './slices.js';
import { TimerWheel, type WheelSlot } from './timer-wheel.js';

/**
 * How long a group's actor stays started after it was last asked for. A steady group needs no
 * actor (its heartbeats are answered from the snapshot), and one costs about 4 KB of heap.
 */
export const PARK_AFTER_MS = 10_000;

/** Groups whose deadlines are looked at in one turn of the event loop. */
const CHECK_SLICE = 500;
/**
 * The most groups the periodic sweep looks at per interval: with more, each interval looks at
 * the next ones in turn, so every group is looked at once per ⌈groups / this⌉ intervals
 * (every 2.5 s at 10,000 groups and the default 250 ms). The sweep only stands behind the timers,
 * and looking at 10,000 groups four times a second was half a replica's CPU with no heartbeat
 * arriving.
 */
export const SWEEP_GROUPS_PER_INTERVAL = 1_000;
/** Groups ticked in one turn of the event loop. */
const TICK_SLICE = 50;
/** Deadlines are kept to the millisecond: a member expires within a few ms of its deadline. */
const DEADLINE_RESOLUTION_MS = 1;

export interface DeadlineSweepOptions {
  readonly clock: Clock;
  readonly logger: Logger;
  /**
   * How often the sweep runs (`membership.sweep-interval`), and how soon a group whose tick
   * failed (a store error) is looked at again.
   */
  readonly intervalMs: number;
  /** The entries to look at. */
  readonly entries: () => readonly GroupEntry[];
  /** Runs work in the group's mailbox. */
  readonly run: <T>(entry: GroupEntry, work: () => Promise<T>) => Promise<T | Stale>;
  readonly committer: Pick<Committer, 'dispatch'>;
}

/**
 * The timers of every group (session expiry, revoke deadline, debounced recompute, end of a
 * rollback window): each group is ticked (TICK) when its earliest deadline falls due.
 *
 * **On time: one timer wheel.** Each group waits in it at most once, at a time no later than
 * its earliest deadline (1 ms slots, one clock timer for all groups). Kept lazily, so a heartbeat
 * costs nothing here: heartbeats only move a member's session deadline later, so the time a
 * group waits for stays at or before its earliest deadline ({@link noteMember} is one
 * comparison). When it comes, the group is looked at: a due deadline ticks it, and it waits
 * again for its next one. An event that may bring a deadline forward (a join, a revoke, a
 * debounce, a converged migration) reports the members whose liveness it touched
 * ({@link noteChanges}); a group loaded or recovered is read whole ({@link track}).
 *
 * **Looking at a group is O(1) until a member's deadline may have come.** Per group the entry
 * keeps a time no member's deadline comes before: the earliest one found when every member was
 * last read, lowered by the deadlines of liveness records set or refreshed since
 * (`LivenessTable.takeEarliestSet`), for the liveness table it was read from. The group's own
 * deadlines (a recompute, a rollback window) are read from its context each time. Its members
 * are read again (O(members)) only when that bound has passed: with members heartbeating at
 * most every half session (the advised interval, the longest hold), about once per half session
 * timeout, O(1) per heartbeat amortised. During a flood of joins the debounced recompute wakes
 * the group every few hundred milliseconds, and reading up to 5,000 members each time held the
 * loop for up to 7.3 ms in one run of the joins benchmark.
 *
 * **Behind it: the periodic sweep** (every `sweep-interval`; with more than
 * {@link SWEEP_GROUPS_PER_INTERVAL} groups, that many per interval in turn) ticks whatever has
 * come due and was not ticked, looking at each group the same way: a sweep costs O(groups), not
 * O(members).
 */
export class DeadlineSweep {
  private readonly wheel: TimerWheel<GroupEntry>;
  /** Per entry: when it waits in the wheel (no later than its earliest deadline). */
  private readonly waiting = new Map<
    GroupEntry,
    { readonly at: number; readonly slot: WheelSlot }
  >();
  private started = false;
  /** Where the next share of the periodic sweep begins ({@link sweepShare}). */
  private nextShare = 0;

  constructor(private readonly options: DeadlineSweepOptions) {
    this.wheel = new TimerWheel(options.clock, DEADLINE_RESOLUTION_MS, (due) => {
      for (const entry of due) {
        this.waiting.delete(entry);
        void this.check(entry);
      }
    });
  }

  /**
   * Starts the timers (of every entry held now, and of later ones) and the periodic sweep;
   * returns the function that stops both.
   */
  start(): () => void {
    const { clock, intervalMs, logger } = this.options;
    this.started = true;
    for (const entry of this.options.entries()) this.track(entry);
    const stopSweep = clock.every(intervalMs, () => {
      this.sweepShare().catch((error: unknown) =>
        logger.error('sweep failed', { error: String(error) }),
      );
    });
    return () => {
      stopSweep();
      this.started = false;
      this.wheel.clear();
      this.waiting.clear();
    };
  }

  /**
   * Ticks every actor whose earliest deadline has passed, and parks the actors of groups idle
   * for {@link PARK_AFTER_MS} (their snapshot stays; the next event starts them again);
   * resolves when they are done. Groups
   * are looked at {@link CHECK_SLICE} per turn of the event loop and ticked
   * {@link TICK_SLICE} per turn (a tick runs the chart), so a sweep over many groups never
   * holds the loop for long.
   */
  sweep(): Promise<void> {
    return this.sweepOver(this.options.entries());
  }

  /**
   * The periodic sweep's share of one interval: every group while there are at most
   * {@link SWEEP_GROUPS_PER_INTERVAL}, else the next that many after those of the last share
   * (round robin; groups removed meanwhile shift the others by as many places, so a few may wait
   * one more pass: the timers are what acts on time).
   */
  sweepShare(): Promise<void> {
    const all = this.options.entries();
    if (all.length <= SWEEP_GROUPS_PER_INTERVAL) {
      this.nextShare = 0;
      return this.sweepOver(all);
    }
    if (this.nextShare >= all.length) this.nextShare = 0;
    const share = all.slice(this.nextShare, this.nextShare + SWEEP_GROUPS_PER_INTERVAL);
    this.nextShare += share.length;
    return this.sweepOver(share);
  }

  private async sweepOver(entries: readonly GroupEntry[]): Promise<void> {
    const { clock, run, committer } = this.options;
    const now = clock.now();
    const due: GroupEntry[] = [];
    const idle: GroupEntry[] = [];
    await forEachSlice(entries, CHECK_SLICE, (entry) => {
      if (this.isDue(entry, now)) due.push(entry);
      else if (!entry.parked && now - entry.lastActiveAt >= PARK_AFTER_MS) idle.push(entry);
    });
    const ticks: Array<Promise<unknown>> = [];
    await forEachSlice(due, TICK_SLICE, (entry) => {
      ticks.push(run(entry, () => committer.dispatch(entry, { type: 'TICK', now: clock.now() })));
    });
    // Idle groups hold no actor: parked in their mailbox, unless asked for meanwhile.
    await forEachSlice(idle, TICK_SLICE, (entry) => {
      ticks.push(
        run(entry, async () => {
          if (clock.now() - entry.lastActiveAt >= PARK_AFTER_MS) entry.park();
        }),
      );
    });
    await Promise.allSettled(ticks);
  }

  /**
   * Waits for the group's earliest deadline (the caller holds its mailbox, or it is new): a group
   * loaded or recovered, whose liveness table is new, is read whole.
   */
  track(entry: GroupEntry): void {
    if (!this.started) return;
    this.waitFor(entry, this.deadlineBound(entry, this.options.clock.now()));
  }

  /**
   * After a committed event: the deadlines it may have brought forward (of the members whose
   * liveness it touched, a recompute, a rollback window). O(changed).
   */
  noteChanges(entry: GroupEntry, ctx: GroupContext, changed: Iterable<string>): void {
    if (!this.started) return;
    this.noteEarlier(entry, earliestDeadlineOf(ctx, changed));
  }

  /** After a steady heartbeat: its member's deadlines (O(1); they normally moved later). */
  noteMember(entry: GroupEntry, live: MemberLiveness | undefined): void {
    if (!this.started || !live) return;
    this.noteEarlier(entry, live.sessionExpiresAt);
    this.noteEarlier(entry, live.revokeDeadline);
  }

  /** Stops waiting for the group (it left this replica). */
  forget(entry: GroupEntry): void {
    const waiting = this.waiting.get(entry);
    if (!waiting) return;
    this.wheel.remove(waiting.slot, entry);
    this.waiting.delete(entry);
  }

  /** Whether a deadline of `entry` has passed; its members are looked at only if one may have. */
  private isDue(entry: GroupEntry, now: number): boolean {
    const deadline = this.deadlineBound(entry, now);
    return deadline !== null && deadline <= now;
  }

  /**
   * A time no deadline of the group comes before, and its next deadline itself whenever that
   * time has come (null: none). Its members are read whole (O(members)) only when the bound of
   * their deadlines kept on the entry has passed, or their liveness table is not the one it was
   * kept for; otherwise O(1). A bound that is early only wakes the group early once: it is then
   * read whole, and the bound is exact again.
   */
  private deadlineBound(entry: GroupEntry, now: number): number | null {
    const ctx = entry.snapshot().context;
    // Nothing of a failed-closed group is due, and its members stop beating: their bound would
    // pass and stay passed, and every look would read them all. What was set meanwhile stays
    // in the table (a recovered group gets a new one, read whole).
    if (waitsForNothing(ctx)) return null;
    // Taken on every look, so that what it reports is what was refreshed since the last one.
    const refreshed = ctx.liveness.takeEarliestSet();
    const bound = Math.min(entry.sweptBound, refreshed);
    if (entry.sweptLiveness === ctx.liveness && bound > now) {
      entry.sweptBound = bound;
    } else {
      entry.sweptLiveness = ctx.liveness;
      entry.sweptBound = earliestMemberDeadline(ctx);
    }
    return deadlineWithin(ctx, entry.sweptBound);
  }

  private noteEarlier(entry: GroupEntry, at: number | null): void {
    if (at === null) return;
    const waiting = this.waiting.get(entry);
    if (waiting && waiting.at <= at) return;
    this.waitFor(entry, at);
  }

  private waitFor(entry: GroupEntry, at: number | null): void {
    this.forget(entry);
    if (at === null) return;
    this.waiting.set(entry, { at, slot: this.wheel.add(at, entry) });
  }

  /** In the group's mailbox: ticks it if a deadline has come, then waits for the next one. */
  private async check(entry: GroupEntry): Promise<void> {
    const { clock, run, committer, logger, intervalMs } = this.options;
    await run(entry, async () => {
      if (this.isDue(entry, clock.now())) {
        try {
          await committer.dispatch(entry, { type: 'TICK', now: clock.now() });
        } catch (error) {
          // The group left this replica while its tick ran: nothing changed here, and nothing
          // is left to look at (the replica that serves it now has its own timers).
          if (error instanceof EntryDroppedError) return;
          // Nothing changed (the write failed): looked at again shortly, not in a tight loop.
          logger.error('sweep failed', { error: String(error) });
          if (this.started) this.waitFor(entry, clock.now() + intervalMs);
          return;
        }
      }
      this.track(entry);
    });
  }
}
