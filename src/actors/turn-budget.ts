import { performance } from 'node:perf_hooks';
import { setImmediate, setTimeout } from 'node:timers';

/**
 * How much of one turn of the event loop the work that may wait (docs/architecture.md#fairness-between-groups)
 * takes, all of it together: the steps of every busy group's batch, the answers written after a
 * batch's write, and the checks and decisions of heartbeats no steady answer covers (the heartbeat
 * fast path's intake). A steady heartbeat of another group waits for the turn it arrives in:
 * with each kind of work holding its own share (2 ms of steps per busy group, 1 ms of answers),
 * a replica flooded with joins into one group ran turns of 10 to 50 ms, and the other groups'
 * heartbeats waited that long.
 */
export const TURN_BUDGET_MS = 1;

/**
 * How long a piece of work may run in a turn before it yields, even when the turn's budget is
 * spent (by others): with many busy groups, yielding after every single step cost a turn of the
 * loop per step and group; 10,000 groups built in-process took half as long again.
 */
export const OWN_SHARE_MS = 0.25;

/**
 * The share of the loop's time that deferrable work gets, all of it together, while steady
 * heartbeats are being answered at once: after it ran for t ms, its next turn waits
 * t × (1 / share − 1) ms (about 5.7 t), and meanwhile the loop reads the sockets, answers steady
 * heartbeats and runs its timers (and the cores are left to Redis and the clients). With no
 * steady heartbeat answered it never rests: a flood alone goes at full speed. The default of
 * `coordinator.fairness.busy-share`. What a flood of joins costs the loop is more than its
 * own turns: the young GCs of what it allocates and the parsing of its requests fall in other
 * turns, so its rate sets how often another group's heartbeat meets a pause, and the share
 * trades the flood's rate against the other groups' pauses. During 5,000 unpaced joins into one
 * group with another group under load, interleaved on one machine: at a tenth the flood ran at
 * 851–1,199 joins/s (three floods of 14 under 1,000) with that group's worst 1 s window of p99
 * at 5.7–9.6 ms; at 0.15, at 1,313–1,951 joins/s, 6.5–9.9 ms in nine floods of ten
 * (docs/BENCHMARKS.md#notes).
 */
export const BUSY_SHARE = 0.15;

/** The longest rest, however long the work before it took. */
export const MAX_REST_MS = 50;

/**
 * The smallest share `coordinator.fairness.busy-share` takes: below it the cap on a rest
 * ({@link MAX_REST_MS}) would give a 1 ms turn of work the same share (about 1/51) whatever the
 * setting said.
 */
export const MIN_BUSY_SHARE = 0.02;

export interface TurnBudgetOptions {
  /** {@link BUSY_SHARE} by default; 1 never rests. */
  readonly share?: number;
  /** How a rest is waited out: `setTimeout` by default (a manual timer in tests). */
  readonly wait?: (fn: () => void, ms: number) => void;
}

/**
 * The one budget per turn that deferrable work draws on, shared by every group on a replica.
 * Work {@link begin}s where it starts, asks {@link spentFor} (a batch's steps) or {@link spent}
 * (the answers) at each point it could stop, and when the answer is yes, continues in a later
 * turn ({@link after}). The clock starts with the first work after the loop's check
 * phase and stops at the next one, so between two reads of the sockets the loop runs about
 * twice the budget (once from an I/O callback, once in the check phase) plus, for each other
 * piece of work in progress, its own share ({@link OWN_SHARE_MS}, at least one step) or one
 * answer. Each runs at least that much per turn, so nothing starves.
 */
export class TurnBudget {
  /** When this turn's deferrable work began; null when none did yet. */
  private started: number | null = null;

  /** {@link OWN_SHARE_MS}, never more than the budget. */
  private readonly ownMs: number;

  /** Deferrable work waits until then (the budget's clock), see {@link BUSY_SHARE}. */
  private restUntil = Number.NEGATIVE_INFINITY;

  /** The rests so far, all together (ms): `coord_deferred_work_rest_seconds_total`. */
  private rested = 0;

  /** Until when (the budget's clock) the work of this turn has earned its rest already. */
  private earnedTo = Number.NEGATIVE_INFINITY;

  /** How many {@link holdRests} are in force: no rest while any is. */
  private held = 0;

  /** Whether a heartbeat was answered at once since the last rest was set. */
  private steadyServed = false;

  /** {@link BUSY_SHARE} of this budget, or what {@link setShare} set. */
  private share: number;

  /** Calls a function after a rest (ms); a timer of the loop but in tests. */
  private readonly wait: (fn: () => void, ms: number) => void;

  constructor(
    readonly budgetMs: number = TURN_BUDGET_MS,
    private readonly now: () => number = () => performance.now(),
    options: TurnBudgetOptions = {},
  ) {
    this.ownMs = Math.min(OWN_SHARE_MS, budgetMs);
    this.share = checkedShare(options.share ?? BUSY_SHARE);
    this.wait = options.wait ?? ((fn, ms) => setTimeout(fn, ms));
  }

  /**
   * The share of the loop deferrable work gets from now on (`coordinator.fairness.busy-share`,
   * {@link MIN_BUSY_SHARE} to 1); a rest already under way keeps its end. The replica's budget is
   * one per process: a coordinator sets it when it starts and puts the previous share back when
   * it closes.
   */
  setShare(share: number): void {
    this.share = checkedShare(share);
  }

  /** The share of the loop deferrable work gets while steady heartbeats arrive. */
  get busyShare(): number {
    return this.share;
  }

  /** The budget's clock (ms). */
  clock(): number {
    return this.now();
  }

  /** Work starts: this turn's clock starts, unless other work already started it. */
  begin(): void {
    if (this.started !== null) return;
    this.started = this.now();
    // Queued before any work that yields this turn, so that such work finds a fresh turn.
    setImmediate(this.endTurn);
  }

  /**
   * Whether this turn's budget is used up, or deferrable work rests (see {@link BUSY_SHARE}):
   * work that can stop should wait for its next turn ({@link after}).
   */
  spent(): boolean {
    const now = this.now();
    return now < this.restUntil || (this.started !== null && now - this.started >= this.budgetMs);
  }

  /**
   * A heartbeat was answered at once (a steady one, from memory): the loop is serving more than
   * deferrable work, which rests between its turns from now on (see {@link BUSY_SHARE}).
   */
  servedAtOnce(): void {
    this.steadyServed = true;
  }

  /**
   * Whether work that has run since `since` (its start in this turn) should wait for the next
   * turn: the turn's budget is used up and so is its own share ({@link OWN_SHARE_MS}).
   */
  spentFor(since: number): boolean {
    return this.spent() && this.now() - since >= this.ownMs;
  }

  /**
   * Calls `fn` in deferrable work's next turn: the next turn of the loop, or, while heartbeats
   * are answered at once ({@link servedAtOnce}), once the rest is over. Called by work that stops
   * for now: `since` is when its own work began in this turn (the budget's clock), and the time
   * from then on earns rest; work that only queued and has not run passes none, and waits out a
   * rest under way without earning one. Steady answers or anything else that ran meanwhile are
   * not counted as its work.
   */
  after(fn: () => void, since?: number): void {
    const now = this.now();
    const resting = now < this.restUntil;
    if (since !== undefined && this.held === 0 && (this.steadyServed || resting)) {
      this.steadyServed = false;
      // Its work, less what already earned rest in this turn (another piece's, or its own).
      const worked = now - Math.max(since, this.earnedTo);
      this.earnedTo = now;
      // Never before `from` (which is never past the cap), so the rest only grows.
      const from = Math.max(this.restUntil, now);
      const until = Math.min(from + worked * (1 / this.share - 1), now + MAX_REST_MS);
      this.rested += until - from;
      this.restUntil = until;
    }
    const rest = this.restUntil - now;
    if (rest > 0) this.wait(fn, rest);
    else setImmediate(fn);
  }

  /**
   * No rests until the returned function is called: a replica that shuts down answers what waits
   * at full speed, within its handover time, while steady heartbeats still arrive. A rest under
   * way ends at once; a turn already waiting on its timer still waits for it (at most
   * {@link MAX_REST_MS}).
   */
  holdRests(): () => void {
    this.held++;
    this.restUntil = Number.NEGATIVE_INFINITY;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.held--;
    };
  }

  /** How long deferrable work has rested so far, all rests together (ms). */
  get restedMs(): number {
    return this.rested;
  }

  /** {@link after} as a promise. */
  nextTurn(since?: number): Promise<void> {
    return new Promise((resolve) => this.after(resolve, since));
  }

  private readonly endTurn = (): void => {
    this.started = null;
  };
}

function checkedShare(share: number): number {
  if (!(share >= MIN_BUSY_SHARE && share <= 1))
    throw new RangeError(
      `coordinator.fairness.busy-share must be from ${MIN_BUSY_SHARE} to 1: ${share}`,
    );
  return share;
}

/** The budget of the replica's deferrable work (one event loop, one budget). */
export const replicaTurnBudget = new TurnBudget();
