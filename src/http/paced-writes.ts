import { performance } from 'node:perf_hooks';

/** How long answers may be written back to back before the event loop serves others. */
export const PACED_WRITE_BUDGET_MS = 1;

/**
 * When turns of the loop are long (a replica saturated by other work), the answers still get
 * this share of the time since their previous turn: a fixed 1 ms per 100 ms turn would let a
 * burst of joins wait seconds for its answers while steady heartbeats go straight out.
 */
export const PACED_WRITE_SHARE = 0.25;

/**
 * Writes answers that were decided after their request was read (heartbeats decided together
 * after their batch's one write: a burst of joins), at most `budgetMs` worth of them per turn
 * of the event loop; the rest are written on the next turns (`setImmediate`), in order. Writing
 * an answer costs a system call (about 0.1 ms on loopback here), so 64 joins answered at once
 * would hold the loop for several milliseconds, and every other group's heartbeats that arrive
 * meanwhile would wait for them (docs/architecture.md#performance-rules: one busy group must not slow the others).
 *
 * An answer is only ever written later than it would have been, never earlier: a reply that
 * grants a shard is still sent after the write that records it.
 */
export class PacedWrites {
  private readonly queue: Array<() => void> = [];
  /** When the answers of this turn began to be written; null when no turn is under way. */
  private turnStart: number | null = null;
  private readonly drained: Array<() => void> = [];

  constructor(
    private readonly budgetMs = PACED_WRITE_BUDGET_MS,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /**
   * Runs `write` now if this turn's budget allows and nothing waits before it, else later.
   * `write` answers its request itself, errors included (it must not throw).
   */
  write(write: () => void): void {
    if (this.queue.length === 0) {
      if (this.turnStart === null) {
        this.turnStart = this.now();
        setImmediate(this.nextTurn);
      }
      if (this.now() - this.turnStart < this.budgetMs) {
        write();
        return;
      }
    }
    this.queue.push(write);
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
    // The next turn is due before anything is written: an answer that throws stops nothing.
    setImmediate(this.nextTurn);
    const start = this.now();
    const sincePrevious = this.turnStart === null ? 0 : start - this.turnStart;
    const budget = Math.max(this.budgetMs, sincePrevious * PACED_WRITE_SHARE);
    this.turnStart = start;
    // At least one answer per turn, however long it takes.
    do this.queue.shift()!();
    while (this.queue.length > 0 && this.now() - start < budget);
  };
}
