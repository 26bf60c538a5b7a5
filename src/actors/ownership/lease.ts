import { performance } from 'node:perf_hooks';
import type { Cluster, Redis } from 'ioredis';
import Redlock from 'redlock';
import type { Lock } from 'redlock';
import type { Clock } from '../../machines/clock.js';
import { systemClock } from '../../machines/clock.js';
import { groupId } from '../../machines/types.js';
import type { GroupRef } from '../../machines/types.js';
import type { Metrics } from '../../observability/metrics.js';

/** Values of `coord_lease_changes_total{event}` (DESIGN.md §11). */
export type LeaseEvent = 'acquired' | 'renewed-failed' | 'lost' | 'released';

/** Past a held lease's expiry, how long an acquire retry waits before trying (timer slack). */
const EXPIRY_MARGIN_MS = 5;

/** Share of the TTL a lease is served from memory after its last acquire or renew (§8). */
export const SERVE_FRACTION = 0.8;

/** Options of {@link LeaseManager}. */
export interface LeaseManagerOptions {
  /** The Redis (one standalone client, or one Cluster client): quorum 1 (DESIGN.md §15). */
  readonly clients: ReadonlyArray<Redis | Cluster>;
  /** The lease key of a group: `KeyNames.lease`, `kp:{sp:cg}:lease`. */
  readonly leaseKey: (ref: GroupRef) => string;
  /** `coordinator.lease.ttl` in ms. */
  readonly ttlMs: number;
  /** Called once when a held lease is lost (any renew error): the caller drops the group. */
  readonly onLost: (ref: GroupRef, cause: unknown) => void;
  readonly metrics?: Pick<Metrics, 'leaseChanges'>;
  /** Schedules renewals and acquire retries. @default systemClock */
  readonly clock?: Clock;
  /** Monotonic ms for the serving deadline; never the wall clock. @default performance.now */
  readonly monotonicNow?: () => number;
  /** Acquire attempts before giving up for now. @default 3 */
  readonly acquireAttempts?: number;
  /**
   * Base delay between attempts; each waits base × (1 + random), or only until the lease held
   * elsewhere expires when that comes sooner. @default ttlMs / 10
   */
  readonly acquireRetryMs?: number;
  /** @default Math.random */
  readonly random?: () => number;
}

/** What this replica knows about one lease it holds. */
export interface LeaseStatus {
  /** The lock value in `kp:G:lease`: what `Store.claimGroup` checks. */
  readonly value: string;
  /** Monotonic ms when it was first acquired and when the last successful renew was sent. */
  readonly acquiredAt: number;
  readonly renewedAt: number;
  /** Monotonic ms after which the group must not be served from memory. */
  readonly deadline: number;
}

interface HeldLease {
  readonly ref: GroupRef;
  lock: Lock;
  readonly acquiredAt: number;
  renewedAt: number;
  cancelRenew: () => void;
  /** Set on release or loss: a renew still in flight must not resurrect the entry. */
  ended: boolean;
}

/**
 * The Redlock leases of the groups this replica owns (DESIGN.md §8, §15): `retryCount: 0` with
 * our own acquire loop (jittered), `extend` every TTL/3, and any extend error taken as a lost
 * lease. The lease alone is not safe against pauses; the fence check in every Lua write is.
 * What the lease bounds is serving from memory: {@link mayServe} turns false at
 * `renewedAt + ttl × 0.8` on the monotonic clock, whether or not a renew timer got to run.
 */
export class LeaseManager {
  private readonly redlock: Redlock;
  private readonly held = new Map<string, HeldLease>();
  private readonly acquiring = new Map<string, Promise<LeaseStatus | null>>();
  private readonly clock: Clock;
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly attempts: number;
  private readonly retryMs: number;

  constructor(private readonly options: LeaseManagerOptions) {
    if (!Number.isInteger(options.ttlMs) || options.ttlMs < 30) {
      throw new RangeError('the lease TTL must be an integer of at least 30 ms');
    }
    this.redlock = new Redlock([...options.clients], { retryCount: 0 });
    this.clock = options.clock ?? systemClock;
    this.now = options.monotonicNow ?? (() => performance.now());
    this.random = options.random ?? Math.random;
    this.attempts = Math.max(1, options.acquireAttempts ?? 3);
    this.retryMs = options.acquireRetryMs ?? Math.ceil(options.ttlMs / 10);
  }

  /**
   * Acquires the group's lease (or returns the one held). Null when another replica holds it or
   * Redis does not answer within the attempts: the ownership layer tries again later.
   */
  acquire(ref: GroupRef): Promise<LeaseStatus | null> {
    const id = groupId(ref);
    const known = this.held.get(id);
    if (known) return Promise.resolve(this.statusOf(known));
    let pending = this.acquiring.get(id);
    if (!pending) {
      pending = this.acquireLoop(ref).finally(() => this.acquiring.delete(id));
      this.acquiring.set(id, pending);
    }
    return pending;
  }

  /** Whether the group may be answered from memory now: held, and its deadline not passed. */
  mayServe(ref: GroupRef): boolean {
    const lease = this.held.get(groupId(ref));
    return lease !== undefined && this.now() < this.deadlineOf(lease);
  }

  /** The lease as held now, or null. */
  status(ref: GroupRef): LeaseStatus | null {
    const lease = this.held.get(groupId(ref));
    return lease ? this.statusOf(lease) : null;
  }

  /** Every group whose lease this replica holds. */
  heldGroups(): GroupRef[] {
    return [...this.held.values()].map((lease) => lease.ref);
  }

  /**
   * Gives the lease up (handover, shutdown): stops renewing and deletes the key if it still holds
   * our value. A failed delete is harmless: the key expires within the TTL.
   */
  async release(ref: GroupRef): Promise<void> {
    const lease = this.held.get(groupId(ref));
    if (!lease) return;
    this.end(lease);
    this.count('released');
    try {
      await lease.lock.release();
    } catch {
      // Already expired or taken: nothing of ours is left to delete.
    }
  }

  /** Releases every lease (SIGTERM). */
  async releaseAll(): Promise<void> {
    await Promise.all(this.heldGroups().map((ref) => this.release(ref)));
  }

  private async acquireLoop(ref: GroupRef): Promise<LeaseStatus | null> {
    const key = this.options.leaseKey(ref);
    for (let attempt = 1; ; attempt++) {
      const sentAt = this.now();
      try {
        const lock = await this.redlock.acquire([key], this.options.ttlMs);
        const lease: HeldLease = {
          ref,
          lock,
          acquiredAt: sentAt,
          renewedAt: sentAt,
          cancelRenew: () => undefined,
          ended: false,
        };
        this.held.set(groupId(ref), lease);
        this.count('acquired');
        this.scheduleRenew(lease);
        return this.statusOf(lease);
      } catch {
        if (attempt >= this.attempts) return null;
      }
      const delay = await this.retryDelay(key);
      await new Promise<void>((resolve) => this.clock.after(delay, resolve));
    }
  }

  /**
   * How long to wait before the next attempt: the jittered base delay, or less when the lease
   * runs out sooner. A dead owner's lease is then taken within a few ms of its expiry rather than
   * up to one base delay (2 × TTL / 10) later; a lease handed over (deleted) is retried at once.
   */
  private async retryDelay(key: string): Promise<number> {
    const base = Math.round(this.retryMs * (1 + this.random()));
    let remaining: number;
    try {
      remaining = await (this.options.clients[0] as Redis | Cluster).pttl(key);
    } catch {
      return base; // Redis does not answer: the next attempt will say so too.
    }
    if (remaining === -2) return 0; // gone since the attempt
    if (remaining < 0) return base; // no expiry: not a lease of ours to reason about
    return Math.min(base, remaining + EXPIRY_MARGIN_MS);
  }

  private scheduleRenew(lease: HeldLease): void {
    lease.cancelRenew = this.clock.after(Math.floor(this.options.ttlMs / 3), () => {
      void this.renew(lease);
    });
  }

  private async renew(lease: HeldLease): Promise<void> {
    if (lease.ended) return;
    // The new TTL starts no earlier than the request leaves: measuring from here is safe.
    const sentAt = this.now();
    try {
      const extended = await lease.lock.extend(this.options.ttlMs);
      if (lease.ended) return;
      lease.lock = extended;
      lease.renewedAt = sentAt;
      this.scheduleRenew(lease);
    } catch (error) {
      if (lease.ended) return;
      // Any extend error is a lost lease: another replica may hold it already (DESIGN.md §15).
      this.end(lease);
      this.count('renewed-failed');
      this.count('lost');
      this.options.onLost(lease.ref, error);
    }
  }

  private end(lease: HeldLease): void {
    lease.ended = true;
    lease.cancelRenew();
    const id = groupId(lease.ref);
    if (this.held.get(id) === lease) this.held.delete(id);
  }

  private deadlineOf(lease: HeldLease): number {
    return lease.renewedAt + this.options.ttlMs * SERVE_FRACTION;
  }

  private statusOf(lease: HeldLease): LeaseStatus {
    return {
      value: lease.lock.value,
      acquiredAt: lease.acquiredAt,
      renewedAt: lease.renewedAt,
      deadline: this.deadlineOf(lease),
    };
  }

  private count(event: LeaseEvent): void {
    this.options.metrics?.leaseChanges.inc({ event });
  }
}
