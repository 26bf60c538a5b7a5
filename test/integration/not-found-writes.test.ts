/**
 * A request for a group that does not exist is answered 404 from reads alone: no lease is
 * taken and released for it (docs/architecture.md#replicas-leases-and-fences). Two replicas in
 * this process on one real redis-server, real HTTP, every Redis command seen through MONITOR.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyNames } from '../../src/store/keys.js';
import {
  CHANGE,
  startReplicaOn,
  type TestCoordinator,
  waitUntilSeenByEach,
} from '../support/coordinator.js';
import { joinBody } from '../support/members.js';
import { monitorRedis } from '../support/redis-monitor.js';
import {
  randomKeyPrefix,
  startRedisServer,
  waitFor,
  type RedisServerHandle,
} from '../support/redis-server.js';

/** Redis commands that write (what a lookup of a missing group must never send). */
const WRITES = new Set(['set', 'del', 'eval', 'evalsha', 'pexpire', 'hset', 'zadd', 'multi']);

describe('a request for a group that does not exist', () => {
  let redis: RedisServerHandle;
  const prefix = randomKeyPrefix();
  const replicas: TestCoordinator[] = [];

  beforeAll(async () => {
    redis = await startRedisServer();
    for (const id of ['r1', 'r2']) replicas.push(await startReplicaOn(redis.url, prefix, id));
    await waitUntilSeenByEach(replicas, ['r1', 'r2']);
  }, 60_000);

  afterAll(async () => {
    for (const c of replicas) await c.close();
    await redis?.stop();
  });

  it('is answered 404 on every replica without a write to the group’s keys', async () => {
    const sp = 'missing';
    const tag = `{${sp}:g}`;
    const monitor = await monitorRedis(redis.port);
    try {
      for (const c of replicas) {
        const read = await c.call('GET', `/coord/v1/monitoring/streams/${sp}/groups/g`, {
          user: 'reader',
        });
        expect(read.status).toBe(404);
        expect(((await read.json()) as { error: { code: string } }).error.code).toBe(
          'GROUP_NOT_FOUND',
        );
        const join = await c.call('POST', `/coord/v1/consumer/streams/${sp}/groups/g/heartbeat`, {
          user: 'consumer',
          body: joinBody('m1'),
        });
        expect(join.status).toBe(404);
      }
      // A marker command after the requests: every command they sent is seen before it.
      await redis.client().ping('after-the-requests');
      await waitFor(
        () => monitor.seen.some((c) => c[0] === 'ping' && c[1] === 'after-the-requests'),
        {
          what: 'the marker seen',
        },
      );
    } finally {
      await monitor.stop();
    }
    const touching = monitor.seen.filter((command) => command.some((arg) => arg.includes(tag)));
    // The reads that found nothing were made (the group was looked up)…
    expect(touching.map((command) => command[0])).toContain('hgetall');
    // …and nothing was written: no lease taken, nor given back.
    expect(touching.filter((command) => WRITES.has(command[0] ?? ''))).toEqual([]);
    expect(
      await redis.client().exists(keyNames(prefix).lease({ streamPrefix: sp, consumerGroup: 'g' })),
    ).toBe(0);
  });

  it('does not hide a group created meanwhile: once created, every replica serves it', async () => {
    const sp = 'racing';
    const [r1, r2] = replicas as [TestCoordinator, TestCoordinator];
    const look = (c: TestCoordinator) =>
      c.call('GET', `/coord/v1/monitoring/streams/${sp}/groups/g`, { user: 'reader' });
    const looks = Array.from({ length: 20 }, (_, i) => look(i % 2 === 0 ? r1 : r2));
    const created = await r2.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: sp, consumerGroup: 'g', shardCount: 2, ...CHANGE },
    });
    expect(created.status).toBe(201);
    for (const res of await Promise.all(looks)) expect([200, 404, 503]).toContain(res.status);
    for (const c of replicas) {
      const res = await look(c);
      expect(res.status).toBe(200);
      expect(res.headers.get('x-coord-owner')).toBe(created.headers.get('x-coord-owner'));
    }
  });
});
