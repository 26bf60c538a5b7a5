/**
 * How long taking over a group keeps a request waiting (docs/operations.md#a-paused-owner): the
 * acquire of a lease another replica still holds waits for it to run out only within
 * `acquireWaitMs`, so that a replica taking a group over is never taken for one that does not
 * answer (the forwarding answer timeout is longer).
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseManager, leaseCommandTimeoutMs } from '../../src/actors/ownership/lease.js';
import { ManualClock } from '../../src/machines/clock.js';
import type { GroupRef } from '../../src/machines/types.js';
import { keyNames } from '../../src/store/keys.js';
import {
  randomKeyPrefix,
  startRedisServer,
  waitFor,
  type RedisServerHandle,
} from '../support/redis-server.js';
import { TcpProxy } from '../support/tcp-proxy.js';

const REF: GroupRef = { streamPrefix: 'orders', consumerGroup: 'billing' };

describe('acquiring a lease held by a replica that stopped', () => {
  let server: RedisServerHandle;
  beforeAll(async () => {
    server = await startRedisServer();
  }, 20_000);
  afterAll(async () => {
    await server.stop();
  });

  async function attempt(remainingMs: number, acquireWaitMs: number, acquireRetryMs = 60_000) {
    const prefix = randomKeyPrefix();
    // The lease of a stopped owner: nobody renews it; `remainingMs` are left of it.
    await server.client().set(keyNames(prefix).lease(REF), 'a-stopped-replica', 'PX', remainingMs);
    const client = new Redis(server.url);
    const leases = new LeaseManager({
      clients: [client],
      leaseKey: (ref) => keyNames(prefix).lease(ref),
      ttlMs: 3_000,
      onLost: () => undefined,
      acquireRetryMs,
      acquireWaitMs,
    });
    const began = performance.now();
    try {
      const lease = await leases.acquire(REF);
      return { lease, ms: performance.now() - began };
    } finally {
      await leases.releaseAll();
      client.disconnect();
    }
  }

  it('takes it as it runs out when that is within acquireWaitMs', async () => {
    // A long base delay: only the wait for the expiry can take the lease in time.
    const { lease, ms } = await attempt(600, 1_000);
    expect(lease).not.toBeNull();
    expect(ms).toBeGreaterThanOrEqual(550);
    expect(ms).toBeLessThan(1_000 + 500);
  });

  it('with a short base delay, the last of its attempts goes as the lease runs out', async () => {
    // Attempts 1 and 2 after 50–100 ms each find it held; the third waits for the expiry.
    const { lease, ms } = await attempt(600, 1_000, 50);
    expect(lease).not.toBeNull();
    expect(ms).toBeGreaterThanOrEqual(550);
  });

  it('gives up at once, without waiting, when it runs out later than that', async () => {
    const { lease, ms } = await attempt(2_500, 1_000);
    expect(lease).toBeNull();
    // Two attempts and one PTTL, no wait: well within acquireWaitMs.
    expect(ms).toBeLessThan(1_000);
  });
});

describe('acquiring a lease over a connection that went silent', () => {
  let server: RedisServerHandle;
  let proxy: TcpProxy;
  beforeAll(async () => {
    server = await startRedisServer();
    proxy = await TcpProxy.start(server.url.replace(/^redis:/, 'http:'));
  }, 20_000);
  afterAll(async () => {
    await proxy?.close();
    await server?.stop();
  });

  it('gives up within acquireWaitMs, not after the lease command timeout, and takes no lease late', async () => {
    const prefix = randomKeyPrefix();
    const ttlMs = 10_000;
    // The lease client as the replica builds it: a command may go unanswered for 8 s.
    const client = new Redis(proxy.url.replace(/^http:/, 'redis:'), {
      maxRetriesPerRequest: 1,
      commandTimeout: leaseCommandTimeoutMs(ttlMs),
    });
    await client.ping();
    const clock = new ManualClock();
    const leases = new LeaseManager({
      clients: [client],
      leaseKey: (ref) => keyNames(prefix).lease(ref),
      ttlMs,
      onLost: () => undefined,
      clock,
      monotonicNow: () => clock.now(),
      acquireWaitMs: 1_000,
    });
    try {
      // One lease taken and given back first, so that Redis knows the script: after the stall
      // the acquire runs in one round trip, ahead of the PING below.
      await leases.acquire({ ...REF, consumerGroup: 'warm-up' });
      await leases.release({ ...REF, consumerGroup: 'warm-up' });
      proxy.setMode('stall');
      let settled: { lease: unknown } | null = null;
      const acquiring = leases.acquire(REF).then((lease) => (settled = { lease }));
      await waitFor(() => proxy.stats().stalledChunks > 0, { what: 'the acquire sent' });
      clock.advance(1_000);
      // Answered within the wait: null (the caller answers GROUP_MOVED and is asked again),
      // long before the 8 s the command itself could take.
      await waitFor(() => settled !== null, { timeoutMs: 4_000, what: 'the acquire given up' });
      expect(settled).toEqual({ lease: null });
      await acquiring;
      // The connection answers again: the lock granted after the caller gave up is not kept.
      proxy.setMode('pass');
      await client.ping(); // behind the acquire on the same connection: it has run
      await waitFor(async () => (await server.client().exists(keyNames(prefix).lease(REF))) === 0, {
        what: 'no lease left behind',
      });
      expect(leases.status(REF)).toBeNull();
    } finally {
      proxy.setMode('pass');
      await leases.releaseAll();
      client.disconnect();
    }
  });
});
