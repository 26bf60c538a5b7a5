import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Cluster, Redis } from 'ioredis';
import {
  LeaseManager,
  RENEW_BATCH,
  leaseCommandTimeoutMs,
} from '../../src/actors/ownership/lease.js';
import type { LeaseManagerOptions } from '../../src/actors/ownership/lease.js';
import { LeaseNotHeldError } from '../../src/errors.js';
import { ManualClock, systemClock, type Clock } from '../../src/machines/clock.js';
import type { GroupRef } from '../../src/machines/types.js';
import { Metrics } from '../../src/observability/metrics.js';
import { hashSlot } from '../../src/store/hash-slot.js';
import { keyNames } from '../../src/store/keys.js';
import { RedisStore } from '../../src/store/redis-store.js';
import { makeGroupState, refOf } from '../support/fixtures.js';
import {
  randomKeyPrefix,
  startRedisCluster,
  startRedisServer,
  waitFor,
} from '../support/redis-server.js';
import type { RedisClusterHandle, RedisServerHandle } from '../support/redis-server.js';

const REF: GroupRef = { streamPrefix: 'orders', consumerGroup: 'billing' };

async function leaseCount(metrics: Metrics, event: string): Promise<number> {
  const metric = await metrics.leaseChanges.get();
  return metric.values.find((value) => value.labels.event === event)?.value ?? 0;
}

/**
 * Script calls (EVAL, EVALSHA) a server executed since its last `CONFIG RESETSTAT`, from
 * `INFO commandstats` (no MONITOR). A NOSCRIPT answer (ioredis then sends EVAL) is a failed call
 * and not counted.
 */
async function scriptCalls(client: Redis): Promise<number> {
  const info = await client.info('commandstats');
  let calls = 0;
  for (const command of ['eval', 'evalsha']) {
    const line = new RegExp(`^cmdstat_${command}:(.*)$`, 'm').exec(info)?.[1] ?? '';
    const field = (name: string) =>
      Number(new RegExp(`(?:^|,)${name}=(\\d+)`).exec(line)?.[1] ?? 0);
    calls += field('calls') - field('failed_calls');
  }
  return calls;
}

/** `count` groups of one stream prefix. */
const refs = (count: number): GroupRef[] =>
  Array.from({ length: count }, (_, i) => ({ streamPrefix: 'orders', consumerGroup: `g${i}` }));

/** The real timers, recording the delay each `after` is asked for. */
function recordingClock(delays: number[]): Clock {
  return {
    ...systemClock,
    after: (ms, fn) => {
      delays.push(ms);
      return systemClock.after(ms, fn);
    },
  };
}

describe('group leases on a real redis-server (docs/architecture.md#replicas-leases-and-fences)', () => {
  let server: RedisServerHandle;
  const closers: Array<() => Promise<unknown>> = [];

  beforeAll(async () => {
    server = await startRedisServer();
  }, 20_000);
  afterAll(async () => {
    await server.stop();
  });
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  /** A replica's lease manager with its own connection; `lost` collects onLost calls. */
  function replica(prefix: string, overrides: Partial<LeaseManagerOptions> = {}) {
    const client = new Redis(server.url);
    const metrics = new Metrics();
    const lost: GroupRef[] = [];
    const leases = new LeaseManager({
      clients: [client],
      leaseKey: (ref) => keyNames(prefix).lease(ref),
      ttlMs: 600,
      onLost: (ref) => lost.push(ref),
      metrics,
      acquireAttempts: 2,
      acquireRetryMs: 20,
      ...overrides,
    });
    closers.push(async () => {
      await leases.releaseAll();
      client.disconnect();
    });
    return { leases, metrics, lost, client };
  }

  it('acquires: the key holds our value, the group may be served, and a claim with it succeeds', async () => {
    const prefix = randomKeyPrefix();
    const store = new RedisStore({ url: server.url, keyPrefix: prefix, auditMaxLen: 10 });
    closers.push(() => store.close());
    const state = makeGroupState();
    const created = await store.createGroup(state);
    const { leases, metrics } = replica(prefix);

    const lease = await leases.acquire(refOf(state));
    expect(lease).not.toBeNull();
    expect(await server.client().get(keyNames(prefix).lease(refOf(state)))).toBe(lease?.value);
    expect(leases.mayServe(refOf(state))).toBe(true);
    expect(await leaseCount(metrics, 'acquired')).toBe(1);
    expect((await store.claimGroup(refOf(state), lease?.value ?? '')).fence).toBe(
      created.fence + 1,
    );
  });

  it('a second replica cannot acquire a held lease, and gets it once the holder releases', async () => {
    const prefix = randomKeyPrefix();
    const a = replica(prefix);
    const b = replica(prefix);
    const held = await a.leases.acquire(REF);
    expect(held).not.toBeNull();
    expect(await b.leases.acquire(REF)).toBeNull();
    expect(b.leases.mayServe(REF)).toBe(false);
    expect(b.leases.servingCheck(REF)()).toBe(false);

    // A serving check bound to the lease held: false once it is released, and stays so.
    const serving = a.leases.servingCheck(REF);
    expect(serving()).toBe(true);
    await a.leases.release(REF);
    expect(a.leases.mayServe(REF)).toBe(false);
    expect(serving()).toBe(false);
    expect(await leaseCount(a.metrics, 'released')).toBe(1);
    expect(await server.client().exists(keyNames(prefix).lease(REF))).toBe(0);
    const taken = await b.leases.acquire(REF);
    expect(taken?.value).not.toBe(held?.value);
  });

  it('renews at TTL/3: the lease outlives several TTLs and keeps its value', async () => {
    const prefix = randomKeyPrefix();
    const { leases, lost } = replica(prefix);
    const first = await leases.acquire(REF);
    const key = keyNames(prefix).lease(REF);
    await waitFor(() => (leases.status(REF)?.renewedAt ?? 0) > (first?.acquiredAt ?? 0) + 1_800, {
      timeoutMs: 5_000,
      what: 'renewals past three TTLs',
    });
    expect(await server.client().get(key)).toBe(first?.value);
    expect(await server.client().pttl(key)).toBeGreaterThan(0);
    expect(leases.mayServe(REF)).toBe(true);
    expect(lost).toEqual([]);
  });

  for (const [how, interfere] of [
    [
      'stolen by another value',
      (key: string) => server.client().set(key, 'someone-else', 'PX', 10_000),
    ],
    ['expired (the key is gone)', (key: string) => server.client().del(key)],
  ] as const) {
    it(`is lost when the key is ${how}: onLost once, counted, no longer served or claimable`, async () => {
      const prefix = randomKeyPrefix();
      const store = new RedisStore({ url: server.url, keyPrefix: prefix, auditMaxLen: 10 });
      closers.push(() => store.close());
      const state = makeGroupState(REF);
      await store.createGroup(state);
      const { leases, metrics, lost } = replica(prefix);
      const lease = await leases.acquire(REF);
      const serving = leases.servingCheck(REF);
      await interfere(keyNames(prefix).lease(REF));

      await waitFor(() => lost.length > 0, { timeoutMs: 3_000, what: 'the lease to be lost' });
      expect(lost).toEqual([REF]);
      expect(leases.mayServe(REF)).toBe(false);
      expect(serving()).toBe(false);
      expect(leases.status(REF)).toBeNull();
      expect(await leaseCount(metrics, 'renewed-failed')).toBe(1);
      expect(await leaseCount(metrics, 'lost')).toBe(1);
      await expect(store.claimGroup(REF, lease?.value ?? '')).rejects.toBeInstanceOf(
        LeaseNotHeldError,
      );
    });
  }

  it('mayServe turns false at renewedAt + ttl × 0.8 on the monotonic clock, renew or not', async () => {
    let monotonic = 1_000;
    const { leases } = replica(randomKeyPrefix(), {
      ttlMs: 10_000,
      // A clock nobody advances: no renew runs, as in a paused process.
      clock: new ManualClock(),
      monotonicNow: () => monotonic,
    });
    const lease = await leases.acquire(REF);
    expect(lease?.deadline).toBe(1_000 + 8_000);
    const serving = leases.servingCheck(REF);
    monotonic = 8_999;
    expect(leases.mayServe(REF)).toBe(true);
    expect(serving()).toBe(true);
    monotonic = 9_000;
    expect(leases.mayServe(REF)).toBe(false);
    expect(serving()).toBe(false);
    // The wall clock plays no part: the key itself is still ours.
    expect(leases.status(REF)?.value).toBe(lease?.value);
  });

  it('the acquire loop retries after a jittered delay and takes a lease that frees up meanwhile', async () => {
    const prefix = randomKeyPrefix();
    const a = replica(prefix);
    const clock = new ManualClock();
    let failedAttempts = 0;
    const b = replica(prefix, {
      clock,
      acquireAttempts: 5,
      acquireRetryMs: 100,
      // Drawn once per failed attempt, for that attempt's delay: base × (1 + 0.5) = 150 ms.
      random: () => {
        failedAttempts++;
        return 0.5;
      },
    });
    await a.leases.acquire(REF);
    const pending = b.leases.acquire(REF);
    await waitFor(() => failedAttempts === 1, { what: 'the first attempt to fail' });
    await a.leases.release(REF);
    expect(b.leases.status(REF)).toBeNull();
    await waitFor(
      () => {
        clock.advance(150);
        return b.leases.status(REF) !== null;
      },
      { what: 'the retry to take the lease' },
    );
    expect((await pending)?.value).toBe(b.leases.status(REF)?.value);
    expect(failedAttempts).toBe(1);
    expect(await leaseCount(b.metrics, 'acquired')).toBe(1);
  });

  it('a retry waits only until the lease held elsewhere expires (a dead owner), not the full jittered delay', async () => {
    const prefix = randomKeyPrefix();
    // The owner died holding the lease: nobody renews or releases it; 300 ms are left of it.
    const key = keyNames(prefix).lease(REF);
    await server.client().set(key, 'a-dead-replica', 'PX', 300);
    const delays: number[] = [];
    const b = replica(prefix, {
      clock: recordingClock(delays),
      acquireAttempts: 2,
      acquireRetryMs: 60_000,
    });
    const lease = await b.leases.acquire(REF);
    expect(lease).not.toBeNull();
    expect(await server.client().get(key)).toBe(lease?.value);
    // The first timer is the acquire's wait (acquireWaitMs, the TTL here). The retry was
    // scheduled at the key's remaining time (≤ 300 ms) + a 5 ms margin, where the jittered base
    // delay would have been 60–120 s (the next timer is the renewal).
    expect(delays[0]).toBe(600);
    expect(delays[1]).toBeGreaterThan(0);
    expect(delays[1]).toBeLessThanOrEqual(305);
  });

  it('a retry after the lease was released meanwhile goes at once', async () => {
    const prefix = randomKeyPrefix();
    const a = replica(prefix);
    await a.leases.acquire(REF);
    const delays: number[] = [];
    let released = false;
    const b = replica(prefix, {
      clock: recordingClock(delays),
      acquireAttempts: 2,
      acquireRetryMs: 60_000,
      // Drawn after the failed attempt, before the key's remaining time is read: the old owner
      // hands the group over in between (its lease key deleted, as a release deletes it). Sent on
      // b's own connection, so that Redis runs it before b reads the key's remaining time: the
      // old owner's own release goes through redlock and may arrive after that read.
      random: () => {
        void b.client.del(keyNames(prefix).lease(REF)).then(() => (released = true));
        return 0;
      },
    });
    const lease = await b.leases.acquire(REF);
    expect(released).toBe(true);
    expect(lease).not.toBeNull();
    // After the acquire's wait (acquireWaitMs), the retry; then the renewal's timer.
    expect(delays.slice(0, 2)).toEqual([600, 0]);
    await a.leases.release(REF);
  });

  describe('batched renewals (docs/decisions.md)', () => {
    /**
     * A replica whose renewal timer and monotonic clock the test moves: leases acquired at
     * monotonic 0, TTL 1,200 ms, so each is due for renewal at 400 ms (TTL/3), or up to 100 ms
     * earlier (TTL/12) with others.
     */
    function pausedReplica(prefix: string, overrides: Partial<LeaseManagerOptions> = {}) {
      const clock = new ManualClock();
      const time = { monotonic: 0 };
      const r = replica(prefix, {
        ttlMs: 1_200,
        clock,
        monotonicNow: () => time.monotonic,
        ...overrides,
      });
      const advanceTo = (monotonic: number) => {
        const by = monotonic - time.monotonic;
        time.monotonic = monotonic;
        clock.advance(by);
      };
      return { ...r, advanceTo };
    }

    it(`renews every due lease with one script call per ${RENEW_BATCH} keys, renewedAt = when the batch was sent`, async () => {
      const prefix = randomKeyPrefix();
      const { leases, lost, advanceTo } = pausedReplica(prefix);
      const groups = refs(RENEW_BATCH + 44);
      for (const ref of groups) expect(await leases.acquire(ref)).not.toBeNull();
      // Half the TTL, so that a renewal shows in PTTL (1,200 ms again), with 600 ms to spare for
      // reading them on a busy machine.
      for (const ref of groups) await server.client().pexpire(keyNames(prefix).lease(ref), 600);
      await server.client().config('RESETSTAT');

      advanceTo(400);
      await waitFor(() => groups.every((ref) => leases.status(ref)?.renewedAt === 400), {
        what: 'every lease renewed',
      });
      expect(await scriptCalls(server.client())).toBe(2);
      const read = server.client().pipeline();
      for (const ref of groups) read.pttl(keyNames(prefix).lease(ref));
      for (const [, pttl] of (await read.exec()) ?? []) expect(pttl).toBeGreaterThan(600);
      expect(leases.mayServe(groups[0] as GroupRef)).toBe(true);
      expect(leases.status(groups[0] as GroupRef)?.deadline).toBe(400 + 1_200 * 0.8);
      expect(lost).toEqual([]);
    });

    it('leases due within TTL/12 of the first are renewed with it; later ones wait for their turn', async () => {
      const prefix = randomKeyPrefix();
      const { leases, advanceTo } = pausedReplica(prefix);
      const [early, soon, late] = refs(3) as [GroupRef, GroupRef, GroupRef];
      await leases.acquire(early);
      advanceTo(90);
      await leases.acquire(soon); // due at 490: within 100 ms of 400
      advanceTo(150);
      await leases.acquire(late); // due at 550
      await server.client().config('RESETSTAT');

      advanceTo(400);
      await waitFor(() => leases.status(soon)?.renewedAt === 400, { what: 'the first batch' });
      expect(leases.status(early)?.renewedAt).toBe(400);
      expect(leases.status(late)?.renewedAt).toBe(150);
      expect(await scriptCalls(server.client())).toBe(1);

      advanceTo(550);
      await waitFor(() => leases.status(late)?.renewedAt === 550, { what: 'the second batch' });
      expect(await scriptCalls(server.client())).toBe(2);
    });

    it('a key changed by another replica is lost; the other leases of the same batch are renewed', async () => {
      const prefix = randomKeyPrefix();
      const { leases, metrics, lost, advanceTo } = pausedReplica(prefix);
      const groups = refs(5);
      for (const ref of groups) await leases.acquire(ref);
      const [stolen, gone] = groups as [GroupRef, GroupRef];
      await server.client().set(keyNames(prefix).lease(stolen), 'someone-else', 'PX', 10_000);
      await server.client().del(keyNames(prefix).lease(gone));
      await server.client().config('RESETSTAT');

      advanceTo(400);
      await waitFor(() => lost.length === 2, { what: 'two leases lost' });
      expect(await scriptCalls(server.client())).toBe(1);
      expect(lost).toEqual([stolen, gone]);
      for (const ref of [stolen, gone]) {
        expect(leases.status(ref)).toBeNull();
        expect(leases.mayServe(ref)).toBe(false);
      }
      for (const ref of groups.slice(2)) expect(leases.status(ref)?.renewedAt).toBe(400);
      expect(leases.heldGroups()).toEqual(groups.slice(2));
      expect(await leaseCount(metrics, 'renewed-failed')).toBe(2);
      expect(await leaseCount(metrics, 'lost')).toBe(2);
      // The other replica's key is left alone.
      expect(await server.client().get(keyNames(prefix).lease(stolen))).toBe('someone-else');
    });

    it('an onLost that throws costs nothing to the other leases: they are lost or renewed, and renewed again later', async () => {
      const prefix = randomKeyPrefix();
      const lost: GroupRef[] = [];
      const { leases, advanceTo } = pausedReplica(prefix, {
        onLost: (ref) => {
          lost.push(ref);
          throw new Error('a drop handler that fails');
        },
      });
      const [first, second, kept] = refs(3) as [GroupRef, GroupRef, GroupRef];
      for (const ref of [first, second, kept]) await leases.acquire(ref);
      for (const ref of [first, second])
        await server.client().set(keyNames(prefix).lease(ref), 'someone-else', 'PX', 10_000);

      advanceTo(400);
      await waitFor(() => lost.length === 2 && leases.status(kept)?.renewedAt === 400, {
        what: 'both stolen leases lost and the third renewed',
      });
      expect(lost).toEqual([first, second]);
      advanceTo(800);
      await waitFor(() => leases.status(kept)?.renewedAt === 800, {
        what: 'the third renewed again',
      });
    });

    it('a lease released while its batch is in flight is not brought back', async () => {
      const prefix = randomKeyPrefix();
      const { leases, lost, advanceTo } = pausedReplica(prefix);
      const [released, kept] = refs(2) as [GroupRef, GroupRef];
      await leases.acquire(released);
      await leases.acquire(kept);
      await server.client().config('RESETSTAT');

      advanceTo(400); // the batch is sent now, on the same connection as the release after it
      const releasing = leases.release(released);
      await waitFor(() => leases.status(kept)?.renewedAt === 400, { what: 'the batch answered' });
      await releasing;
      expect(await scriptCalls(server.client())).toBe(2); // the batch, then the release
      expect(leases.status(released)).toBeNull();
      expect(leases.mayServe(released)).toBe(false);
      expect(leases.heldGroups()).toEqual([kept]);
      expect(await server.client().exists(keyNames(prefix).lease(released))).toBe(0);
      expect(lost).toEqual([]);

      // Not renewed again either: the next batch holds the kept lease alone.
      await server.client().config('RESETSTAT');
      advanceTo(800);
      await waitFor(() => leases.status(kept)?.renewedAt === 800, { what: 'the next batch' });
      expect(await server.client().exists(keyNames(prefix).lease(released))).toBe(0);
      expect(await scriptCalls(server.client())).toBe(1);
    });

    it('a renewal Redis does not answer fails after the lease command timeout: the lease is lost, not left renewing', async () => {
      const prefix = randomKeyPrefix();
      // The lease client as the coordinator makes it (src/server.ts): with a command timeout.
      const client = new Redis(server.url, { commandTimeout: leaseCommandTimeoutMs(1_200) });
      closers.push(async () => client.disconnect());
      const { leases, lost, advanceTo } = pausedReplica(prefix, { clients: [client] });
      const [group] = refs(1) as [GroupRef];
      expect(await leases.acquire(group)).not.toBeNull();
      // Redis holds every command for 3 s: the renewal sent at 400 ms gets no answer meanwhile.
      await server.client().client('PAUSE', 3_000, 'ALL');
      try {
        advanceTo(400);
        await waitFor(() => lost.length === 1, {
          what: 'the lease lost after the command timeout (960 ms), during the pause',
          timeoutMs: 2_000,
        });
        expect(lost).toEqual([group]);
        expect(leases.mayServe(group)).toBe(false);
      } finally {
        await server.client().client('UNPAUSE');
      }
    });

    it('a lease already past its TTL when its turn comes (a paused process) is lost without asking', async () => {
      const prefix = randomKeyPrefix();
      const { leases, metrics, lost, advanceTo } = pausedReplica(prefix);
      await leases.acquire(REF);
      await server.client().config('RESETSTAT');
      advanceTo(1_300);
      expect(lost).toEqual([REF]);
      expect(leases.status(REF)).toBeNull();
      expect(await leaseCount(metrics, 'lost')).toBe(1);
      expect(await scriptCalls(server.client())).toBe(0);
    });
  });

  it('oldest(n): the n leases held longest, oldest first (what the registry lists)', async () => {
    let monotonic = 0;
    const { leases } = replica(randomKeyPrefix(), {
      clock: new ManualClock(),
      monotonicNow: () => monotonic,
    });
    const [a, b, c, d] = refs(4) as [GroupRef, GroupRef, GroupRef, GroupRef];
    for (const [ref, at] of [
      [b, 20],
      [a, 10],
      [d, 40],
      [c, 30],
    ] as const) {
      monotonic = at;
      await leases.acquire(ref);
    }
    expect(leases.oldest(2)).toEqual([
      { ref: a, acquiredAt: 10 },
      { ref: b, acquiredAt: 20 },
    ]);
    expect(leases.oldest(10).map((lease) => lease.ref)).toEqual([a, b, c, d]);
    expect(leases.size).toBe(4);
  });

  it('gives up after its attempts while another replica holds the lease', async () => {
    const prefix = randomKeyPrefix();
    const a = replica(prefix);
    const b = replica(prefix);
    await a.leases.acquire(REF);
    expect(await b.leases.acquire(REF)).toBeNull();
    expect(await leaseCount(b.metrics, 'acquired')).toBe(0);
  });
});

describe('group leases on a real 3-master Redis Cluster', () => {
  let cluster: RedisClusterHandle;
  beforeAll(async () => {
    cluster = await startRedisCluster();
  }, 30_000);
  afterAll(async () => {
    await cluster.stop();
  });

  it('acquire, claim in the same slot as the metadata, renew, release', async () => {
    const prefix = randomKeyPrefix();
    const client = new Cluster(cluster.nodes);
    const store = new RedisStore({
      clusterNodes: cluster.nodes,
      keyPrefix: prefix,
      auditMaxLen: 10,
    });
    const leases = new LeaseManager({
      clients: [client],
      leaseKey: (ref) => keyNames(prefix).lease(ref),
      ttlMs: 600,
      onLost: () => undefined,
    });
    try {
      const state = makeGroupState(REF);
      const created = await store.createGroup(state);
      const lease = await leases.acquire(REF);
      expect(lease).not.toBeNull();
      expect((await store.claimGroup(REF, lease?.value ?? '')).fence).toBe(created.fence + 1);
      await waitFor(() => (leases.status(REF)?.renewedAt ?? 0) > (lease?.acquiredAt ?? 0), {
        what: 'a renewal on the cluster',
      });
      expect(leases.mayServe(REF)).toBe(true);
      await leases.release(REF);
      expect(await client.exists(keyNames(prefix).lease(REF))).toBe(0);
      await expect(store.claimGroup(REF, lease?.value ?? '')).rejects.toBeInstanceOf(
        LeaseNotHeldError,
      );
    } finally {
      await leases.releaseAll();
      await store.close();
      await client.quit();
    }
  });
  it('renews the leases of one hash slot with one script call (CLUSTER KEYSLOT agrees with ours)', async () => {
    const prefix = randomKeyPrefix();
    const client = new Cluster(cluster.nodes);
    const clock = new ManualClock();
    let monotonic = 0;
    const leases = new LeaseManager({
      clients: [client],
      leaseKey: (ref) => keyNames(prefix).lease(ref),
      ttlMs: 1_200,
      onLost: () => undefined,
      clock,
      monotonicNow: () => monotonic,
    });
    try {
      // Three groups in one slot and two elsewhere.
      const bySlot = new Map<number, GroupRef[]>();
      for (let i = 0; ; i++) {
        const ref = { streamPrefix: 'orders', consumerGroup: `g${i}` };
        const slot = hashSlot(keyNames(prefix).lease(ref));
        bySlot.set(slot, [...(bySlot.get(slot) ?? []), ref]);
        if (bySlot.get(slot)?.length === 3) break;
      }
      const shared = [...bySlot.values()].find((same) => same.length === 3) as GroupRef[];
      const others = [...bySlot.values()]
        .filter((same) => same.length === 1)
        .slice(0, 2)
        .flat();
      const groups = [...shared, ...others];
      for (const ref of groups) {
        const key = keyNames(prefix).lease(ref);
        expect(await client.cluster('KEYSLOT', key)).toBe(hashSlot(key));
        expect(await leases.acquire(ref)).not.toBeNull();
      }
      for (const node of cluster.clients()) await node.config('RESETSTAT');

      monotonic = 400;
      clock.advance(400);
      await waitFor(() => groups.every((ref) => leases.status(ref)?.renewedAt === 400), {
        what: 'every lease renewed',
      });
      let calls = 0;
      for (const node of cluster.clients()) calls += await scriptCalls(node);
      expect(calls).toBe(3); // one for the shared slot, one for each of the two others
      expect(groups.every((ref) => leases.mayServe(ref))).toBe(true);
    } finally {
      await leases.releaseAll();
      await client.quit();
    }
  });
});
