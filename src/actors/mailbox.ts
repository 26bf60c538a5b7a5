/** Returned by mailbox work that found its entry gone: the caller retries (or forwards). */
export const STALE = Symbol('stale entry');
export type Stale = typeof STALE;

/** What one item of a batch came to: its value, or what it threw. */
export type Settled<T> =
  { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: unknown };

/** The most items one batch takes; more start the next batch. */
export const MAX_BATCH = 256;

interface Waiter<R> {
  readonly resolve: (value: R | Stale) => void;
  readonly reject: (error: unknown) => void;
}

/** A batch queued in the mailbox that has not started yet: items of its kind still join it. */
interface OpenBatch {
  readonly kind: object;
  readonly items: unknown[];
  readonly waiters: Array<Waiter<unknown>>;
}

/**
 * A group's mailbox: work runs one at a time, in arrival order, and a failure does not stop
 * the work queued behind it. Work queued behind an entry that stopped being current (dropped,
 * deleted) is not run: it resolves with {@link STALE}.
 *
 * Items of one kind (heartbeats) that arrive while the work before them runs wait in one batch,
 * which runs as one piece of work when its turn comes: a burst of joins is handled, and
 * written, together. A batch takes items until it starts or until other work
 * is queued behind it, so nothing overtakes work queued before it.
 */
export class Mailbox {
  /**
   * Work waiting its turn, in order. Nothing of finished work is kept: an idle mailbox holds
   * no promise (a promise chain would keep the last one alive until the group's next event,
   * long enough to reach the old generation, for every heartbeat of every group).
   */
  private readonly queue: Array<() => Promise<void>> = [];
  private running = false;
  private open: OpenBatch | null = null;
  private readonly idleWaiters: Array<() => void> = [];

  /** Runs `work` after everything queued before it, if `current()` still holds by then. */
  run<T>(current: () => boolean, work: () => Promise<T>): Promise<T | Stale> {
    this.open = null;
    return this.enqueue(current, work);
  }

  /**
   * Adds `item` to the batch of `kind` waiting at the end of the mailbox, or queues a new one.
   * When its turn comes, `process` gets every item of the batch, in arrival order, and settles
   * each (one result per item, in order).
   */
  batch<I, R>(
    kind: object,
    current: () => boolean,
    item: I,
    process: (items: readonly I[]) => Promise<ReadonlyArray<Settled<R>>>,
  ): Promise<R | Stale> {
    const open = this.open;
    if (open !== null && open.kind === kind && open.items.length < MAX_BATCH) {
      return new Promise<R | Stale>((resolve, reject) => {
        open.items.push(item);
        open.waiters.push({ resolve, reject } as Waiter<unknown>);
      });
    }
    const batch: OpenBatch = { kind, items: [item], waiters: [] };
    const first = new Promise<R | Stale>((resolve, reject) => {
      batch.waiters.push({ resolve, reject } as Waiter<unknown>);
    });
    this.open = batch;
    this.push(async () => {
      if (this.open === batch) this.open = null;
      const waiters = batch.waiters as Array<Waiter<R>>;
      if (!current()) {
        for (const waiter of waiters) waiter.resolve(STALE);
        return;
      }
      try {
        const results = await process(batch.items as I[]);
        waiters.forEach((waiter, i) => {
          const result = results[i];
          if (result?.ok) waiter.resolve(result.value);
          else waiter.reject(result ? result.error : new Error('batch item left unsettled'));
        });
      } catch (error) {
        for (const waiter of waiters) waiter.reject(error);
      }
    });
    return first;
  }

  /**
   * Whether nothing is queued or running: work done synchronously now is then exactly what
   * {@link run} would do next (the steady heartbeat).
   */
  isIdle(): boolean {
    return !this.running;
  }

  /** Resolves once everything queued so far has run and nothing else is queued. */
  idle(): Promise<void> {
    if (!this.running) return Promise.resolve();
    return new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  private enqueue<T>(current: () => boolean, work: () => Promise<T>): Promise<T | Stale> {
    return new Promise<T | Stale>((resolve) => {
      this.push(async () => {
        // (A work that throws at once rejects like one that fails later.)
        const result = current()
          ? new Promise<T>((settle) => settle(work()))
          : Promise.resolve(STALE);
        // The caller gets the work's result or its rejection as it is.
        resolve(result);
        await result.catch(() => undefined);
      });
    });
  }

  /** Queues a task (which never throws); the first one starts in a microtask, as a `then` would. */
  private push(task: () => Promise<void>): void {
    this.queue.push(task);
    if (this.running) return;
    this.running = true;
    queueMicrotask(() => void this.drain());
  }

  private async drain(): Promise<void> {
    for (let task = this.queue.shift(); task !== undefined; task = this.queue.shift()) {
      // Tasks settle their callers themselves and never throw; nothing may stop the queue.
      await task().catch(() => undefined);
    }
    this.running = false;
    for (const resolve of this.idleWaiters.splice(0)) resolve();
  }
}
