import { createHash } from 'node:crypto';
import type { Clock } from '../../machines/clock.js';
import type { Store } from '../../store/store.js';

/**
 * Counts failed logins per (username, client address); after `maxFailures` within `windowMs`
 * (from the first failure) further attempts are refused until the window ends, whatever the
 * password (docs/operations.md#login-throttling).
 */
export interface LoginThrottle {
  /** Milliseconds until the caller may try again, or 0 when it may try now. */
  retryAfterMs(username: string, address: string): Promise<number>;
  recordFailure(username: string, address: string): Promise<void>;
  recordSuccess(username: string, address: string): Promise<void>;
}

interface Window {
  failures: number;
  startedAt: number;
}

/**
 * The throttle of one process (embedded mode: one replica, a memory store): counts kept in
 * memory, gone on restart.
 */
export class LocalLoginThrottle implements LoginThrottle {
  private readonly windows = new Map<string, Window>();

  constructor(
    private readonly maxFailures: number,
    private readonly windowMs: number,
    private readonly clock: Clock,
  ) {}

  async retryAfterMs(username: string, address: string): Promise<number> {
    const window = this.current(`${username}\u0000${address}`);
    if (!window || window.failures < this.maxFailures) return 0;
    return window.startedAt + this.windowMs - this.clock.now();
  }

  async recordFailure(username: string, address: string): Promise<void> {
    const key = `${username}\u0000${address}`;
    const window = this.current(key) ?? { failures: 0, startedAt: this.clock.now() };
    window.failures += 1;
    this.windows.set(key, window);
    if (this.windows.size > 100_000) this.prune();
  }

  async recordSuccess(username: string, address: string): Promise<void> {
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

/**
 * The throttle of several replicas (redis, redis-cluster): the counts live in the store
 * (`Store.recordLoginFailure`), so a caller refused on one replica is refused on every one, and
 * a failure counted anywhere counts everywhere. The store key is a digest of username and
 * address, so neither appears in it. While the store cannot be reached, logins are answered
 * 503 `STORE_UNAVAILABLE` (the count cannot be checked) rather than let through unthrottled.
 */
export class StoreLoginThrottle implements LoginThrottle {
  constructor(
    private readonly store: Pick<
      Store,
      'recordLoginFailure' | 'readLoginFailures' | 'clearLoginFailures'
    >,
    private readonly maxFailures: number,
    private readonly windowMs: number,
  ) {}

  async retryAfterMs(username: string, address: string): Promise<number> {
    const { failures, remainingMs } = await this.store.readLoginFailures(idOf(username, address));
    return failures >= this.maxFailures ? remainingMs : 0;
  }

  async recordFailure(username: string, address: string): Promise<void> {
    await this.store.recordLoginFailure(idOf(username, address), this.windowMs);
  }

  async recordSuccess(username: string, address: string): Promise<void> {
    await this.store.clearLoginFailures(idOf(username, address));
  }
}

/** The store id of (username, address): a SHA-256 of both, hex. */
function idOf(username: string, address: string): string {
  return createHash('sha256').update(username).update('\u0000').update(address).digest('hex');
}
