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

  /** Runs `work` after everything queued before it, if `current()` still holds by then. */
  run<T>(current: () => boolean, work: () => Promise<T>): Promise<T | Stale> {
    const step = async () => (current() ? work() : STALE);
    const result = this.tail.then(step, step);
    this.tail = result.catch(() => undefined);
    return result;
  }

  /** Resolves once everything queued so far has run. */
  idle(): Promise<void> {
    return this.tail.then(() => undefined);
  }
}
