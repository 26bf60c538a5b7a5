import { performance } from 'node:perf_hooks';
import type { Cluster, Redis } from 'ioredis';
import Redlock from 'redlock';
import type { Lock } from 'redlock';
import type { Clock } from '../../machines/clock.js';
import { systemClock } from '../../machines/clock.js';
import { groupId } from '../../machines/types.js';
import type { GroupRef } from '../../machines/types.js';
import type { Metrics } from '../../observability/metrics.js';
import { StoreUnavailableError } from '../../errors.js';
import { hashSlot } from '../../store/hash-slot.js';
import { luaScript } from '../../store/lua-scripts.js';
import { writeRefusalOf } from '../../store/refused-writes.js';

/** Values of `coord_lease_changes_total{event}` (docs/operations.md). */
export type LeaseEvent = 'acquired' | 'renewed-failed' | 'lost' | 'released';

/** Past a held lease's expiry, how long an acquire retry waits before trying (timer slack). */
const EXPIRY_MARGIN_MS = 5;

/** What {@link LeaseManager} gets of a lease command not answered within the acquire wait. */
const LATE = Symbol('late');

/** Share of the TTL a lease is served from memory after its last acquire or renew. */
export const SERVE_FRACTION = 0.8;

/**
 * How long a command of the lease client may go unanswered before it fails (ioredis
 * `commandTimeout`): the serving window, {@link SERVE_FRACTION} of the TTL (8 s at the default
 * 10 s). A renewal counts from when it was sent, so one answered later than that could no longer
 * let the group be served, and a slow store or a paused process short of it must not cost a
 * lease; one never answered (a connection that went silent) would otherwise leave the lease
 * renewing for good, neither renewed nor lost, and the group neither served here nor given up.
 */
export function leaseCommandTimeoutMs(ttlMs: number): number {
  return Math.max(1, Math.ceil(ttlMs * SERVE_FRACTION));
}

/** Leases renewed by one script call (one round trip, one Redis command). */
export const RENEW_BATCH = 256;

/** Renews a batch of leases in one call (`src/store/lua/renewLeases-n.lua`). */
const RENEW_SCRIPT = luaScript('renewLeases').lua;
const RENEW_COMMAND = 'coordRenewLeases';

/** A lease client with the renewal script defined on it. */
type RenewClient = (Redis | Cluster) & {
  [RENEW_COMMAND](numberOfKeys: number, ...keysThenArgs: string[]): Promise<number[]>;
};

/** Options of {@link LeaseManager}. */
export interface LeaseManagerOptions {
  /** The Redis (one standalone client, or one Cluster client): quorum 1. */
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
  /**
   * The longest an acquire keeps its caller (a request) waiting: a retry that would start later
   * is not made, and an attempt Redis has not answered by then is given up (the caller answers
   * 503 `GROUP_MOVED`, and is asked again). It stays below the
   * forwarding answer timeout, so that a replica taking a group over is not taken for one that
   * does not answer (docs/operations.md#a-paused-owner). @default min(ttlMs, 1000)
   */
  readonly acquireWaitMs?: number;
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
  readonly key: string;
  readonly lock: Lock;
  readonly acquiredAt: number;
  renewedAt: number;
  /** In a renewal batch whose answer has not come yet: not put in another one meanwhile. */
  renewing: boolean;
  /** Set on release or loss: a renewal still in flight must not resurrect the entry. */
  ended: boolean;
}

/**
 * The Redlock leases of the groups this replica owns (README.md, "Running several replicas"):
 * acquired and released through redlock (`retryCount: 0` with our own acquire loop, jittered).
 * Renewed in batches (docs/decisions.md): one timer for the replica; when it fires, every held
 * lease that is due within the next {@link windowMs} (TTL/12) is renewed, {@link RENEW_BATCH}
 * keys per script call (compare the value, PEXPIRE; on a Cluster, one call per hash slot), so
 * that each lease is renewed between TTL/4 and TTL/3 after its last renewal and the leases
 * renewed together stay together. Any failure for a key (value changed, key gone, the call
 * failed, or the lease already past its TTL when its turn came) is a lost lease. The lease alone
 * is not safe against pauses; the fence check in every Lua write is. What the lease bounds is
 * serving from memory: {@link mayServe} turns false at `renewedAt + ttl × 0.8` on the monotonic
 * clock (`renewedAt`: when the batch that renewed it was sent), whether or not the renewal timer
 * got to run.
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
  private readonly waitMs: number;
  private readonly renewClient: RenewClient;
  /** A lease is renewed TTL/3 after its last renewal at the latest… */
  private readonly renewAfterMs: number;
  /** …and up to this much earlier, with the others due by then. */
  private readonly windowMs: number;
  /** The renewal timer: when it fires (monotonic ms), and how to cancel it. */
  private timer: { readonly at: number; readonly cancel: () => void } | null = null;

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
    this.waitMs = options.acquireWaitMs ?? Math.min(options.ttlMs, 1_000);
    this.renewAfterMs = Math.floor(options.ttlMs / 3);
    this.windowMs = Math.floor(options.ttlMs / 12);
    const client = options.clients[0] as Redis | Cluster;
    if (!(RENEW_COMMAND in client)) {
      client.defineCommand(RENEW_COMMAND, { lua: RENEW_SCRIPT });
    }
    this.renewClient = client as RenewClient;
  }

  /**
   * Acquires the group's lease (or returns the one held). Null when another replica holds it or
   * Redis does not answer within the attempts: the ownership layer tries again later. Rejects
   * with `STORE_UNAVAILABLE` when Redis refuses the write (`READONLY`, `OOM`, ...): the store
   * answers but cannot take a lease (docs/operations.md#when-the-store-is-down).
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

  /**
   * {@link mayServe} bound to the lease held now (see `Ownership.servingCheck`): a lease
   * released or lost is ended, and one acquired again is another lease.
   */
  servingCheck(ref: GroupRef): () => boolean {
    const lease = this.held.get(groupId(ref));
    if (lease === undefined) return NEVER;
    return () => !lease.ended && this.now() < this.deadlineOf(lease);
  }

  /** The lease as held now, or null. */
  status(ref: GroupRef): LeaseStatus | null {
    const lease = this.held.get(groupId(ref));
    return lease ? this.statusOf(lease) : null;
  }

  /**
   * The `count` leases held longest, oldest first, with when each was acquired (monotonic ms):
   * one pass over the leases, no copy of them (the registry reports these on every refresh).
   */
  oldest(count: number): Array<{ readonly ref: GroupRef; readonly acquiredAt: number }> {
    const kept: HeldLease[] = [];
    for (const lease of this.held.values()) {
      if (kept.length === count && lease.acquiredAt >= (kept[count - 1] as HeldLease).acquiredAt) {
        continue;
      }
      let at = kept.length;
      while (at > 0 && (kept[at - 1] as HeldLease).acquiredAt > lease.acquiredAt) at--;
      kept.splice(at, 0, lease);
      if (kept.length > count) kept.pop();
    }
    return kept.map((lease) => ({ ref: lease.ref, acquiredAt: lease.acquiredAt }));
  }

  /** How many leases this replica holds. */
  get size(): number {
    return this.held.size;
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

  /**
   * The attempts of one acquire, all within `acquireWaitMs` from its start: an attempt (or the
   * PTTL before a retry) that Redis has not answered by then is given up, rather than left to
   * the lease client's command timeout (80 % of the TTL), so a connection gone silent keeps the
   * request no longer than the wait (docs/operations.md#a-paused-owner). A lock granted after
   * its attempt was given up is released at once: nobody renews it.
   */
  private async acquireLoop(ref: GroupRef): Promise<LeaseStatus | null> {
    let cancel = (): void => undefined;
    const late = new Promise<typeof LATE>((resolve) => {
      cancel = this.clock.after(this.waitMs, () => resolve(LATE));
    });
    try {
      return await this.attemptWithin(ref, late);
    } finally {
      cancel();
    }
  }

  /** The attempts of {@link acquireLoop}; `late` resolves when the acquire's wait is over. */
  private async attemptWithin(
    ref: GroupRef,
    late: Promise<typeof LATE>,
  ): Promise<LeaseStatus | null> {
    const key = this.options.leaseKey(ref);
    const giveUpAt = this.now() + this.waitMs;
    for (let attempt = 1; ; attempt++) {
      const sentAt = this.now();
      try {
        const pending = this.redlock.acquire([key], this.options.ttlMs);
        const lock = await Promise.race([pending, late]);
        if (lock === LATE) {
          pending.then((granted) => granted.release()).catch(() => undefined);
          return null;
        }
        const lease: HeldLease = {
          ref,
          key,
          lock,
          acquiredAt: sentAt,
          renewedAt: sentAt,
          renewing: false,
          ended: false,
        };
        this.held.set(groupId(ref), lease);
        this.count('acquired');
        this.renewBy(sentAt + this.renewAfterMs);
        return this.statusOf(lease);
      } catch (error) {
        const refused = await refusalOf(error);
        if (refused !== null) {
          throw new StoreUnavailableError(
            `the store refuses writes (${refused}): the lease of group ${groupId(ref)} was not taken`,
            { cause: error, details: { cause: `writes refused (${refused})` } },
          );
        }
        if (attempt >= this.attempts) return null;
      }
      const delay = await Promise.race([this.retryDelay(key, attempt + 1 === this.attempts), late]);
      if (delay === LATE || this.now() + delay > giveUpAt) return null;
      await new Promise<void>((resolve) => this.clock.after(delay, resolve));
    }
  }

  /**
   * How long to wait before the next attempt: the jittered base delay, or less when the lease
   * runs out sooner. A dead owner's lease is then taken within a few ms of its expiry rather than
   * up to one base delay (2 × TTL / 10) later; a lease handed over (deleted) is retried at once.
   * The `last` attempt goes when the lease runs out, however long the base delay: earlier, only a
   * handover could have freed it, and that is what the earlier attempts were for.
   */
  private async retryDelay(key: string, last = false): Promise<number> {
    const base = Math.round(this.retryMs * (1 + this.random()));
    let remaining: number;
    try {
      remaining = await this.renewClient.pttl(key);
    } catch {
      return base; // Redis does not answer: the next attempt will say so too.
    }
    if (remaining === -2) return 0; // gone since the attempt
    if (remaining < 0) return base; // no expiry: not a lease of ours to reason about
    return last ? remaining + EXPIRY_MARGIN_MS : Math.min(base, remaining + EXPIRY_MARGIN_MS);
  }

  /** Makes the renewal timer fire no later than `at` (monotonic ms). O(1). */
  private renewBy(at: number): void {
    if (this.timer !== null && this.timer.at <= at) return;
    this.timer?.cancel();
    const cancel = this.clock.after(Math.max(0, Math.ceil(at - this.now())), () => {
      this.timer = null;
      this.renewDue();
    });
    this.timer = { at, cancel };
  }

  /**
   * Renews every held lease due within the window, in batches sent now; then waits for the
   * earliest of the others. A lease past its TTL already (the process was paused, the timer
   * late) is lost without asking: its key may be another replica's by now.
   */
  private renewDue(): void {
    const now = this.now();
    const due: HeldLease[] = [];
    let next = Infinity;
    for (const lease of this.held.values()) {
      if (lease.renewing) continue;
      const at = lease.renewedAt + this.renewAfterMs;
      if (at <= now + this.windowMs) due.push(lease);
      else next = Math.min(next, at);
    }
    const expired = due.filter((lease) => now >= lease.renewedAt + this.options.ttlMs);
    for (const lease of expired) {
      this.lose(lease, new Error('the lease expired before it was renewed'));
    }
    const batches = this.batchesOf(due.filter((lease) => !lease.ended));
    for (const batch of batches) void this.renewBatch(batch);
    if (next !== Infinity) this.renewBy(next);
  }

  /** {@link RENEW_BATCH} leases per call; on a Cluster, the keys of one call share a hash slot. */
  private batchesOf(leases: HeldLease[]): HeldLease[][] {
    const groups: HeldLease[][] = [];
    if ((this.renewClient as Partial<Cluster>).isCluster === true) {
      const bySlot = new Map<number, HeldLease[]>();
      for (const lease of leases) {
        const slot = hashSlot(lease.key);
        const same = bySlot.get(slot);
        if (same) same.push(lease);
        else bySlot.set(slot, [lease]);
      }
      groups.push(...bySlot.values());
    } else {
      groups.push(leases);
    }
    const batches: HeldLease[][] = [];
    for (const group of groups) {
      for (let i = 0; i < group.length; i += RENEW_BATCH) {
        batches.push(group.slice(i, i + RENEW_BATCH));
      }
    }
    return batches;
  }

  private async renewBatch(batch: readonly HeldLease[]): Promise<void> {
    for (const lease of batch) lease.renewing = true;
    // The new TTL starts no earlier than the request leaves: measuring from here is safe.
    const sentAt = this.now();
    let renewed: readonly number[] | null = null;
    let failure: unknown = null;
    try {
      renewed = await this.renewClient[RENEW_COMMAND](
        batch.length,
        ...batch.map((lease) => lease.key),
        String(this.options.ttlMs),
        ...batch.map((lease) => lease.lock.value),
      );
    } catch (error) {
      failure = error;
    }
    let next = Infinity;
    batch.forEach((lease, i) => {
      lease.renewing = false;
      // Released or lost meanwhile: never brought back.
      if (lease.ended) return;
      if (renewed?.[i] === 1) {
        lease.renewedAt = sentAt;
        next = Math.min(next, sentAt + this.renewAfterMs);
      } else {
        // Any failure is a lost lease: another replica may hold it already.
        this.lose(lease, failure ?? new Error('the lease key no longer holds our value'));
      }
    });
    if (next !== Infinity) this.renewBy(next);
  }

  private lose(lease: HeldLease, cause: unknown): void {
    this.end(lease);
    this.count('renewed-failed');
    this.count('lost');
    try {
      this.options.onLost(lease.ref, cause);
    } catch {
      // The lease is gone whatever the handler did (nothing serves the group past its deadline);
      // one failing handler must not stop the renewal of every other lease of the batch.
    }
  }

  private end(lease: HeldLease): void {
    lease.ended = true;
    const id = groupId(lease.ref);
    if (this.held.get(id) === lease) this.held.delete(id);
    if (this.held.size === 0) {
      this.timer?.cancel();
      this.timer = null;
    }
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

const NEVER = () => false;

/**
 * The first word of a write refusal (`READONLY`, `OOM`, ...) among the answers of a failed
 * redlock acquire (its attempts' votes against), or null when none refused: the lease was held
 * elsewhere, or Redis did not answer.
 */
async function refusalOf(error: unknown): Promise<string | null> {
  const direct = writeRefusalOf(error);
  if (direct !== null) return direct;
  const attempts = (error as { attempts?: unknown } | null)?.attempts;
  if (!Array.isArray(attempts)) return null;
  for (const attempt of attempts as unknown[]) {
    const stats = (await Promise.resolve(attempt).catch(() => null)) as {
      votesAgainst?: Map<unknown, Error>;
    } | null;
    for (const vote of stats?.votesAgainst?.values() ?? []) {
      const refused = writeRefusalOf(vote);
      if (refused !== null) return refused;
    }
  }
  return null;
}
