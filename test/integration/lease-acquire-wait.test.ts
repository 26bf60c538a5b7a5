/**
 * How long taking over a group keeps a request waiting (docs/operations.md#a-paused-owner): the
 * acquire of a lease another replica still holds waits for it to run out only within
 * `acquireWaitMs`, so that a replica taking a group over is never taken for one that does not
 * answer (the forwarding answer timeout is longer).
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseManager } from '../../src/actors/ownership/lease.js';
import type { GroupRef } from '../../src/machines/types.js';
import { keyNames } from '../../src/store/keys.js';
import {
  randomKeyPrefix,
  startRedisServer,
  type RedisServerHandle,
} from '../support/redis-server.js';

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
