import type { Redis } from 'ioredis';

/*
 * A lease-per-shard coordinator in the style of the Kinesis Client Library (KCL), written from
 * scratch for the benchmarks (docs/BENCHMARKS.md#method): the baseline the coordinator's handoff
 * and failover times are compared with, on the same Redis.
 *
 * The KCL model, as its documentation and defaults describe it (KCL 1.x `KinesisClientLibConfiguration`,
 * KCL 2.x `LeaseManagementConfig` / `DynamoDBLeaseCoordinator`):
 *   - one lease per shard, owned by one worker; here a Redis key `SET key worker NX PX failover`,
 *     where KCL keeps a DynamoDB item with an owner and a counter;
 *   - failover time (`failoverTimeMillis`) 10 s: a lease not renewed for that long is expired and
 *     may be taken. Here Redis's own key expiry (PX) does what KCL's counter-watching does;
 *   - the renewer runs every `failoverTime / 3 − epsilon` (epsilon 25 ms): 3,308 ms;
 *   - the taker runs every `(failoverTime + epsilon) × 2`: 20,050 ms, the first time at start;
 *   - each taker cycle: target = ceil(leases / workers), workers being the distinct owners of
 *     unexpired leases plus this one. Below target it takes expired (free) leases, as many as it
 *     needs; if there are none, it steals at most `maxLeasesToStealAtOneTime` = 1 lease from the
 *     most loaded worker, and only if that one holds more than the target;
 *   - a worker learns that a lease was stolen when its next renewal fails; until then it keeps
 *     processing the shard (KCL shuts the record processor down with reason ZOMBIE). The new
 *     owner starts at once: KCL has no revoke-first handoff, so both may process the shard for up
 *     to one renewer interval;
 *   - at start a worker picks up the leases it already owns (KCL's `LeaseRenewer.initialize`);
 *   - expired leases are taken in random order and a stolen lease is a random one of the most
 *     loaded worker's (KCL shuffles both "so workers don't all try to contend for the same
 *     leases"); and the workers' taker timers are not in step: real workers start at different
 *     times, while the bench starts them together, so each worker's periodic taker starts at a
 *     random phase of the interval. Without these, two survivors of a crash ran their takers in
 *     the same millisecond, both tried the same expired leases in shard order, and half the
 *     leases stayed free for another whole taker interval.
 */

export interface KclOptions {
  readonly redis: Redis;
  readonly keyPrefix: string;
  readonly workerId: string;
  readonly shardCount: number;
  /** @default 10_000 (KCL `failoverTimeMillis`) */
  readonly failoverMs?: number;
  /** @default 25 (KCL `epsilonMillis`) */
  readonly epsilonMs?: number;
  /** @default 1 (KCL `maxLeasesToStealAtOneTime`) */
  readonly maxStealsPerCycle?: number;
  /** A lease was acquired: start processing the shard. */
  readonly onStart: (shard: number) => void;
  /** A lease was lost (found at renewal): stop processing the shard. */
  readonly onStop: (shard: number) => void;
}

const RENEW = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end`;
const STEAL = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) return 1 else return 0 end`;

/** A copy of `items` in random order (Fisher–Yates). */
function shuffled<T>(items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

export const leaseKey = (prefix: string, shard: number) => `${prefix}:lease:${shard}`;

/** One KCL-style worker: a lease renewer and a lease taker on timers. */
export class KclWorker {
  readonly failoverMs: number;
  readonly renewerIntervalMs: number;
  readonly takerIntervalMs: number;
  private readonly maxSteals: number;
  private readonly held = new Set<number>();
  private readonly timers: NodeJS.Timeout[] = [];
  private phase: NodeJS.Timeout | undefined;

  constructor(private readonly options: KclOptions) {
    this.failoverMs = options.failoverMs ?? 10_000;
    const epsilon = options.epsilonMs ?? 25;
    this.renewerIntervalMs = Math.floor(this.failoverMs / 3) - epsilon;
    this.takerIntervalMs = (this.failoverMs + epsilon) * 2;
    this.maxSteals = options.maxStealsPerCycle ?? 1;
  }

  /** Picks up its own leases, then runs the taker (at once, then every interval) and the renewer. */
  async start(): Promise<void> {
    const owners = await this.owners();
    owners.forEach((owner, shard) => {
      if (owner === this.options.workerId) this.acquired(shard);
    });
    /** Runs `fn` every `ms` (never two at once); returns a run to start one now. */
    const loop = (ms: number, fn: () => Promise<void>) => {
      let busy = false;
      const run = () => {
        if (busy) return;
        busy = true;
        void fn().finally(() => (busy = false));
      };
      this.timers.push(setInterval(run, ms));
      return run;
    };
    await this.take();
    loop(this.renewerIntervalMs, () => this.renew());
    // As if this worker had started at another moment than the others (see the header): its
    // takes fall at that phase of the interval, the first of them when the phase comes (not an
    // interval later, which left up to two intervals without a take after the start).
    this.phase = setTimeout(
      () => loop(this.takerIntervalMs, () => this.take())(),
      Math.random() * this.takerIntervalMs,
    );
  }

  stop(): void {
    clearTimeout(this.phase);
    for (const t of this.timers.splice(0)) clearInterval(t);
  }

  private key(shard: number): string {
    return leaseKey(this.options.keyPrefix, shard);
  }

  private async owners(): Promise<Array<string | null>> {
    const keys = Array.from({ length: this.options.shardCount }, (_, s) => this.key(s));
    return this.options.redis.mget(...keys);
  }

  private acquired(shard: number): void {
    if (this.held.has(shard)) return;
    this.held.add(shard);
    this.options.onStart(shard);
  }

  private async renew(): Promise<void> {
    const shards = [...this.held];
    const results = await Promise.all(
      shards.map(
        (s) =>
          this.options.redis.eval(
            RENEW,
            1,
            this.key(s),
            this.options.workerId,
            this.failoverMs,
          ) as Promise<number>,
      ),
    );
    shards.forEach((shard, i) => {
      if (results[i] === 1) return;
      this.held.delete(shard);
      this.options.onStop(shard);
    });
  }

  private async take(): Promise<void> {
    const me = this.options.workerId;
    const owners = await this.owners();
    const counts = new Map<string, number>([[me, 0]]);
    const free: number[] = [];
    owners.forEach((owner, shard) => {
      if (owner === null) free.push(shard);
      else counts.set(owner, (counts.get(owner) ?? 0) + 1);
    });
    const target = Math.ceil(this.options.shardCount / counts.size);
    const mine = counts.get(me) ?? 0;
    const need = target - mine;
    if (need <= 0) return;
    if (free.length > 0) {
      for (const shard of shuffled(free).slice(0, need)) {
        const ok = await this.options.redis.set(this.key(shard), me, 'PX', this.failoverMs, 'NX');
        if (ok === 'OK') this.acquired(shard);
      }
      return;
    }
    let victim: string | null = null;
    let most = 0;
    for (const [owner, n] of counts) if (owner !== me && n > most) [victim, most] = [owner, n];
    if (victim === null || most <= target) return;
    const theirs = owners.flatMap((owner, shard) => (owner === victim ? [shard] : []));
    for (const shard of shuffled(theirs).slice(0, Math.min(need, this.maxSteals))) {
      const ok = (await this.options.redis.eval(
        STEAL,
        1,
        this.key(shard),
        victim,
        me,
        this.failoverMs,
      )) as number;
      if (ok === 1) this.acquired(shard);
    }
  }
}
