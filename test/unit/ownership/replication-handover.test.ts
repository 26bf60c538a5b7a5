import { setImmediate as flushIo } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { rendezvousOwner } from '../../../src/actors/ownership/rendezvous.js';
import { Replication } from '../../../src/actors/ownership/replication.js';
import { ManualClock } from '../../../src/machines/clock.js';
import { groupId, type GroupRef } from '../../../src/machines/types.js';
import { createLogger } from '../../../src/observability/logger.js';
import { Metrics } from '../../../src/observability/metrics.js';
import { MemoryStore } from '../../../src/store/memory-store.js';

/** Lets the store promises a timer started settle (MemoryStore answers in microtasks). */
const settle = async () => {
  for (let i = 0; i < 10; i++) await flushIo();
};

describe('a replica hands over the groups whose rendezvous owner is another replica', () => {
  it('also a group it came to hold after the replica set changed (a load under way then)', async () => {
    const store = new MemoryStore({ keyPrefix: 'test:coord', auditMaxLen: 10 });
    const clock = new ManualClock();
    // A real client that never connects: no lease is taken here.
    const client = new Redis({ lazyConnect: true });
    const a = { id: 'replica-a', url: 'http://a:8080' };
    const b = { id: 'replica-b', url: 'http://b:8080' };
    const replication = new Replication({
      store,
      self: b,
      clients: [client],
      leaseKey: () => 'lease',
      leaseTtlMs: 30_000,
      metrics: new Metrics(),
      logger: createLogger({ level: 'error', format: 'text', silent: true }),
      clock,
      registryRefreshMs: 1_000,
      registryTtlMs: 20_000,
    });
    let held: GroupRef[] = [];
    const released: string[] = [];
    replication.attach({
      heldGroups: () => held,
      release: (ref) => {
        released.push(groupId(ref));
        held = held.filter((r) => groupId(r) !== groupId(ref));
        return Promise.resolve();
      },
    });
    // A group replica-a owns once both are live; replica-b owned it alone.
    const ref = Array.from({ length: 100 }, (_, i) => ({
      streamPrefix: 'orders',
      consumerGroup: `g${i}`,
    })).find((r) => rendezvousOwner(r, [a, b])?.id === a.id)!;
    try {
      await replication.start();
      expect(replication.ownership.ownerOf(ref)).toEqual({ self: true });
      await store.registerReplica(a, 60_000);
      clock.advance(1_000);
      await settle();
      // replica-b saw replica-a join and looked at what it held: nothing yet.
      expect(replication.ownership.ownerOf(ref)).toEqual({ self: false, owner: a.id });
      expect(released).toEqual([]);
      // The load begun before the change ends: replica-b holds a group it no longer owns.
      held = [ref];
      clock.advance(1_000);
      await settle();
      expect(released).toEqual([groupId(ref)]);
    } finally {
      await replication.registry.stop();
      client.disconnect();
    }
  });
});
