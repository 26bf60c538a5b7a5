/** Returned by mailbox work that found its entry gone: the caller retries (or forwards). */
export const STALE = Symbol('stale entry');
export type Stale = typeof STALE;

/**
 * A group's mailbox: work runs one at a time, in arrival order, and a failure does not stop
 * the work queued behind it. Work queued behind an entry that stopped being current (dropped,
 * deleted) is not run: it resolves with {@link STALE}.
 */
export class Mailbox {
  private tail: Promise<unknown> = Promise.resolve();
  /** Work queued or running (settled work leaves before the next in line starts). */
  private queued = 0;

  /** Runs `work` after everything queued before it, if `current()` still holds by then. */
  run<T>(current: () => boolean, work: () => Promise<T>): Promise<T | Stale> {
    this.queued++;
    const step = async () => (current() ? work() : STALE);
    const result = this.tail.then(step, step);
    const settled = () => {
      this.queued--;
    };
    this.tail = result.then(settled, settled);
    return result;
  }

  /**
   * Whether nothing is queued or running: work done synchronously now is then exactly what
   * {@link run} would do next (the steady heartbeat, DESIGN.md §12).
   */
  isIdle(): boolean {
    return this.queued === 0;
  }

  /** Resolves once everything queued so far has run. */
  idle(): Promise<void> {
    return this.tail.then(() => undefined);
  }
}
