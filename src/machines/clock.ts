/**
 * Time source for everything time-dependent, so tests can drive time instead of sleeping.
 */
export interface Clock {
  now(): number;
  /** Calls `fn` every `ms` until the returned function is called. */
  every(ms: number, fn: () => void): () => void;
  /** Calls `fn` once after `ms` unless the returned function is called first. */
  after(ms: number, fn: () => void): () => void;
}

/** The wall clock. */
export const systemClock: Clock = {
  now: () => Date.now(),
  every(ms, fn) {
    const handle = setInterval(fn, ms);
    handle.unref();
    return () => clearInterval(handle);
  },
  after(ms, fn) {
    const handle = setTimeout(fn, ms);
    handle.unref();
    return () => clearTimeout(handle);
  },
};

interface ManualTimer {
  due: number;
  readonly period: number | null;
  readonly fn: () => void;
  cancelled: boolean;
}

/** A clock that moves only when told to; timers fire in due order during `advance`. */
export class ManualClock implements Clock {
  private current: number;
  private timers: ManualTimer[] = [];

  constructor(start = Date.UTC(2026, 0, 1)) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  every(ms: number, fn: () => void): () => void {
    return this.schedule(ms, ms, fn);
  }

  after(ms: number, fn: () => void): () => void {
    return this.schedule(ms, null, fn);
  }

  /** Moves time forward by `ms`, firing every timer that falls due on the way. */
  advance(ms: number): void {
    const end = this.current + ms;
    for (;;) {
      const next = this.timers
        .filter((t) => !t.cancelled && t.due <= end)
        .sort((a, b) => a.due - b.due)[0];
      if (!next) break;
      this.current = next.due;
      if (next.period === null) next.cancelled = true;
      else next.due += next.period;
      next.fn();
    }
    this.timers = this.timers.filter((t) => !t.cancelled);
    this.current = end;
  }

  /** Sets the time, backwards too (a clock jump). Timers are not fired by a jump backwards. */
  set(time: number): void {
    if (time >= this.current) this.advance(time - this.current);
    else this.current = time;
  }

  private schedule(ms: number, period: number | null, fn: () => void): () => void {
    const timer: ManualTimer = {
      due: this.current + ms,
      period: period ?? null,
      fn,
      cancelled: false,
    };
    this.timers.push(timer);
    return () => {
      timer.cancelled = true;
    };
  }
}
