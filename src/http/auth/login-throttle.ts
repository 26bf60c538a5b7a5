import type { Clock } from '../../machines/clock.js';

interface Window {
  failures: number;
  startedAt: number;
}

/**
 * Counts failed logins per (username, client address); after `maxFailures` within `windowMs`
 * further attempts are refused until the window ends, whatever the password.
 */
export class LoginThrottle {
  private readonly windows = new Map<string, Window>();

  constructor(
    private readonly maxFailures: number,
    private readonly windowMs: number,
    private readonly clock: Clock,
  ) {}

  /** Milliseconds until the caller may try again, or 0 when it may try now. */
  retryAfterMs(username: string, address: string): number {
    const window = this.current(`${username}\u0000${address}`);
    if (!window || window.failures < this.maxFailures) return 0;
    return window.startedAt + this.windowMs - this.clock.now();
  }

  recordFailure(username: string, address: string): void {
    const key = `${username}\u0000${address}`;
    const window = this.current(key) ?? { failures: 0, startedAt: this.clock.now() };
    window.failures += 1;
    this.windows.set(key, window);
    if (this.windows.size > 100_000) this.prune();
  }

  recordSuccess(username: string, address: string): void {
    this.windows.delete(`${username}\u0000${address}`);
  }

  private current(key: string): Window | undefined {
    const window = this.windows.get(key);
    if (window && window.startedAt + this.windowMs <= this.clock.now()) {
      this.windows.delete(key);
      return undefined;
    }
    return window;
  }

  private prune(): void {
    for (const key of [...this.windows.keys()]) this.current(key);
  }
}
