import { createHash } from 'node:crypto';
import type { Clock } from '../../machines/clock.js';
import type { Store } from '../../store/store.js';

/**
 * Counts failed logins per (username, client address); after `maxFailures` within `windowMs`
 * (from the first failure) further attempts are refused until the window ends, whatever the
 * password (docs/operations.md#login-throttling).
 *
 * The count is taken before the password is checked: {@link LoginThrottle.reserve} counts the
 * attempt as a failure, or refuses it when the window already holds `maxFailures`, in one
 * atomic step; a login that proves its password then clears the count. So however many
 * attempts arrive at once, on however many replicas, at most `maxFailures` of them have their
 * password checked in a window.
 */
export interface LoginThrottle {
  /**
   * Counts this attempt, unless the window is full: 0 when it was counted (its password may
   * now be checked), else the milliseconds until the caller may try again (nothing counted).
   */
  reserve(username: string, address: string): Promise<number>;
  /** The password was right: the count of (username, address) starts over. */
  recordSuccess(username: string, address: string): Promise<void>;
}

interface Window {
  failures: number;
  startedAt: number;
}

/** How many (username, address) pairs {@link LocalLoginThrottle} keeps at most. */
export const LOCAL_THROTTLE_MAX_ENTRIES = 100_000;

/**
 * The throttle of one process (embedded mode: one replica, a memory store): counts kept in
 * memory, gone on restart. Each reservation checks and counts in one synchronous step, so
 * attempts that overlap cannot all pass the check.
 *
 * At most `maxEntries` pairs are kept. The map holds windows in the order they started (a window
 * is only ever added when it starts), so making room drops expired windows from the old end and,
 * when none has expired, the oldest window: each step costs what it removes, never a scan of the
 * map. A pair that is kept is throttled exactly as before (docs/operations.md#login-throttling).
 */
export class LocalLoginThrottle implements LoginThrottle {
  private readonly windows = new Map<string, Window>();

  constructor(
    private readonly maxFailures: number,
    private readonly windowMs: number,
    private readonly clock: Clock,
    private readonly maxEntries = LOCAL_THROTTLE_MAX_ENTRIES,
  ) {}

  /** How many pairs are kept now. */
  get size(): number {
    return this.windows.size;
  }

  async reserve(username: string, address: string): Promise<number> {
    const key = `${username}\u0000${address}`;
    const now = this.clock.now();
    const window = this.current(key) ?? { failures: 0, startedAt: now };
    if (window.failures >= this.maxFailures) {
      return Math.max(1, window.startedAt + this.windowMs - now);
    }
    window.failures += 1;
    if (!this.windows.has(key)) {
      this.makeRoom(now);
      this.windows.set(key, window);
    }
    return 0;
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

  /** Leaves room for one more window: expired ones go first, then the oldest kept ones. */
  private makeRoom(now: number): void {
    for (const [key, window] of this.windows) {
      const expired = window.startedAt + this.windowMs <= now;
      if (!expired && this.windows.size < this.maxEntries) return;
      this.windows.delete(key);
    }
  }
}

/**
 * The throttle of several replicas (redis, redis-cluster): the counts live in the store
 * (`Store.reserveLoginAttempt`, one script that checks and counts), so a caller refused on one
 * replica is refused on every one, and an attempt counted anywhere counts everywhere. The store
 * key is a digest of username and address, so neither appears in it. While the store cannot be
 * reached, logins are answered 503 `STORE_UNAVAILABLE` (the count cannot be checked) rather than
 * let through unthrottled.
 */
export class StoreLoginThrottle implements LoginThrottle {
  constructor(
    private readonly store: Pick<Store, 'reserveLoginAttempt' | 'clearLoginFailures'>,
    private readonly maxFailures: number,
    private readonly windowMs: number,
  ) {}

  async reserve(username: string, address: string): Promise<number> {
    const { allowed, remainingMs } = await this.store.reserveLoginAttempt(
      idOf(username, address),
      this.maxFailures,
      this.windowMs,
    );
    return allowed ? 0 : Math.max(1, remainingMs);
  }

  async recordSuccess(username: string, address: string): Promise<void> {
    await this.store.clearLoginFailures(idOf(username, address));
  }
}

/** The store id of (username, address): a SHA-256 of both, hex. */
function idOf(username: string, address: string): string {
  return createHash('sha256').update(username).update('\u0000').update(address).digest('hex');
}
