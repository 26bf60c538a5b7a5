import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { registryTiming, Replication } from '../../../src/actors/ownership/replication.js';
import { createLogger } from '../../../src/observability/logger.js';
import { Metrics } from '../../../src/observability/metrics.js';
import { MemoryStore } from '../../../src/store/memory-store.js';

describe('the registry entry follows the lease TTL (docs/operations.md#a-paused-owner)', () => {
  it.each([30, 600, 1_500, 2_000, 3_000, 10_000, 30_000, 120_000])(
    'lease TTL %i ms: a stopped replica leaves every live set before its leases can expire',
    (leaseTtlMs) => {
      const { ttlMs, refreshMs } = registryTiming(leaseTtlMs);
      expect(ttlMs).toBeLessThanOrEqual(leaseTtlMs);
      expect(ttlMs).toBeLessThanOrEqual(5_000);
      expect(refreshMs).toBeGreaterThan(0);
      expect(refreshMs).toBeLessThan(ttlMs);
      // Gone from the store at most ttlMs after its last refresh, from every other replica's
      // list one refresh later; a lease lasts at least 2/3 of its TTL after the last renewal.
      expect(ttlMs + refreshMs).toBeLessThanOrEqual((2 * leaseTtlMs) / 3);
    },
  );

  it('refuses a registry TTL above the lease TTL', () => {
    // A real client that never connects: the constructor only defines the renewal script.
    const client = new Redis({ lazyConnect: true });
    const options = {
      store: new MemoryStore({ keyPrefix: 'test:coord', auditMaxLen: 10 }),
      self: { id: 'replica-a', url: 'http://a:8080' },
      clients: [client],
      leaseKey: () => 'lease',
      leaseTtlMs: 3_000,
      metrics: new Metrics(),
      logger: createLogger({ level: 'error', format: 'text', silent: true }),
    };
    try {
      expect(() => new Replication({ ...options, registryTtlMs: 5_000 })).toThrow(RangeError);
      expect(new Replication(options).registry).toBeDefined();
    } finally {
      client.disconnect();
    }
  });
});
