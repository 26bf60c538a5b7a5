import { replicaTurnBudget, type TurnBudget } from '../actors/turn-budget.js';

/**
 * When turns of the loop are long (a replica saturated by other work), the answers still get
 * this share of the time since their previous turn: a fixed 1 ms per 100 ms turn would let a
 * burst of joins wait seconds for its answers while steady heartbeats go straight out.
 */
export const PACED_WRITE_SHARE = 0.25;

/**
 * Writes answers that were decided after their request was read (heartbeats decided together
 * after their batch's one write: a burst of joins) while the turn's budget lasts (the replica's
 * {@link TurnBudget}, shared with the groups' steps); the rest are written in its next turns
 * (`TurnBudget.after`), in order. Writing an answer costs a system call (about 0.1 ms on loopback
 * here), so 64 joins answered at once would hold the loop for several milliseconds, and every
 * other group's heartbeats that arrive meanwhile would wait for them
 * (docs/architecture.md#fairness-between-groups).
 *
 * An answer is only ever written later than it would have been, never earlier: a reply that
 * grants a shard is still sent after the write that records it.
 */
export class PacedWrites {
  private readonly queue: Array<() => void> = [];
  /** When the previous turn of answers began; null when none is under way. */
  private turnStart: number | null = null;
  private readonly drained: Array<() => void> = [];

  constructor(private readonly budget: TurnBudget = replicaTurnBudget) {}

  /**
   * Runs `write` now if this turn's budget allows and nothing waits before it, else later.
   * `write` answers its request itself, errors included (it must not throw).
   */
  write(write: () => void): void {
    if (!this.wouldWait()) {
      this.budget.begin();
      write();
      return;
    }
    this.queue.push(write);
    if (this.turnStart === null) {
      this.turnStart = this.budget.clock();
      this.budget.after(this.nextTurn);
    }
  }

  /** Whether a write handed over now would wait for a later turn (see {@link write}). */
  wouldWait(): boolean {
    return this.queue.length > 0 || this.budget.spent();
  }

  /** Resolves once every answer handed over so far is written. */
  flushed(): Promise<void> {
    if (this.turnStart === null && this.queue.length === 0) return Promise.resolve();
    return new Promise<void>((resolve) => this.drained.push(resolve));
  }

  private readonly nextTurn = (): void => {
    if (this.queue.length === 0) {
      this.turnStart = null;
      for (const resolve of this.drained.splice(0)) resolve();
      return;
    }
    // This turn's clock first: its reset is then queued before the next turn of answers, which
    // finds a fresh budget (the other way round it would find this turn's, spent).
    this.budget.begin();
    const start = this.budget.clock();
    const share = this.turnStart === null ? 0 : (start - this.turnStart) * PACED_WRITE_SHARE;
    this.turnStart = start;
    try {
      // At least one answer per turn, however long it takes.
      do this.queue.shift()!();
      while (
        this.queue.length > 0 &&
        (!this.budget.spent() || this.budget.clock() - start < share)
      );
    } finally {
      // The next turn is due whatever happened: an answer that throws stops nothing.
      this.budget.after(this.nextTurn, start);
    }
  };
}
