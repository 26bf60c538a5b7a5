import type { Clock } from '../machines/clock.js';

interface Waiter {
  readonly afterVersion: number;
  readonly done: () => void;
}

/**
 * Long-poll waiters per group: each resolves as soon as the group's metadata version passes
 * the version it waits for, or when its time is up.
 */
export class VersionWaiters {
  private readonly waiters = new Map<string, Set<Waiter>>();
  private count = 0;

  constructor(
    private readonly clock: Clock,
    /** Told the number of open waits whenever it changes (a gauge). */
    private readonly onCount: (open: number) => void = () => undefined,
  ) {}

  /**
   * Resolves when `notify` reports a version above `afterVersion`, or after `waitMs`, or when
   * `signal` aborts (the caller went away).
   */
  wait(
    groupKey: string,
    afterVersion: number,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      let set = this.waiters.get(groupKey);
      if (!set) {
        set = new Set();
        this.waiters.set(groupKey, set);
      }
      const waiters = set;
      const waiter: Waiter = {
        afterVersion,
        done: () => {
          cancel();
          if (waiters.delete(waiter)) this.onCount(--this.count);
          if (waiters.size === 0) this.waiters.delete(groupKey);
          resolve();
        },
      };
      const timer = this.clock.after(waitMs, waiter.done);
      signal?.addEventListener('abort', waiter.done, { once: true });
      const cancel = () => {
        timer();
        signal?.removeEventListener('abort', waiter.done);
      };
      waiters.add(waiter);
      this.onCount(++this.count);
    });
  }

  /** Wakes the waiters of a group whose version is now above theirs (all of them with `all`). */
  notify(groupKey: string, version: number, all = false): void {
    const set = this.waiters.get(groupKey);
    if (!set) return;
    for (const waiter of [...set]) if (all || version > waiter.afterVersion) waiter.done();
  }

  /** Wakes every waiter of a group (it left this replica: deleted, handed over, lease lost). */
  wakeGroup(groupKey: string): void {
    this.notify(groupKey, 0, true);
  }

  /** Wakes every waiter (shutdown). */
  releaseAll(): void {
    for (const set of [...this.waiters.values()]) for (const waiter of [...set]) waiter.done();
  }
}
