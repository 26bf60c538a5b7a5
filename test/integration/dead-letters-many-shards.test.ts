/**
 * The dead-letter endpoints on a 1,024-shard group over a slow streams Redis
 * (docs/operations.md#dead-letters): listing, replaying and purging read and write the shards
 * a slice at a time, so each is answered after a bounded number of round trips, not one round
 * trip after the other for each of the group's 2,048 dead-letter streams.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHANGE, startStreamsCoordinator, type TestCoordinator } from '../support/coordinator.js';
import { startRedisServer, type RedisServerHandle } from '../support/redis-server.js';
import { TcpProxy } from '../support/tcp-proxy.js';

const SHARDS = 1_024;
/** Added by the proxy to every chunk between the coordinator and the streams Redis. */
const LATENCY_MS = 100;
/**
 * How long a caller waits for an answer. Read one stream after the other, the 2,048 streams
 * take 2,048 round trips (200 s at this latency); the point is that an answer comes at all.
 */
const ANSWER_WITHIN_MS = 40_000;

let redis: RedisServerHandle;
let proxy: TcpProxy;
let c: TestCoordinator;
let streams: Redis;

beforeAll(async () => {
  redis = await startRedisServer();
  proxy = await TcpProxy.start(redis.url);
  c = await startStreamsCoordinator(proxy.url.replace('http:', 'redis:'));
  streams = new Redis(redis.url);
});
afterAll(async () => {
  streams?.disconnect();
  await c?.close();
  await proxy?.close();
  await redis?.stop();
});

const letter = (n: number) => [
  'originalId',
  `${n}-0`,
  'deliveries',
  '5',
  'error',
  'boom',
  'n',
  `${n}`,
];

async function call(method: string, path: string, body?: unknown) {
  const res = await fetch(`${c.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${c.token('admin')}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(ANSWER_WITHIN_MS),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('dead letters of a 1,024-shard group on a slow streams Redis', () => {
  it('are listed, replayed and purged in bounded time', async () => {
    const sp = `dlmany-${randomBytes(4).toString('hex')}`;
    const created = await c.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: sp, consumerGroup: 'g', shardCount: SHARDS, ...CHANGE },
    });
    expect(created.status).toBe(201);
    // Dead letters on a few shards: two of the group's own on shard 3, one shared on 700, and
    // 5 own ones on 1,000.
    await streams.xadd(`${sp}:3:dead:g`, '*', ...letter(1));
    await streams.xadd(`${sp}:3:dead:g`, '*', ...letter(2));
    await streams.xadd(`${sp}:700:dead`, '*', ...letter(3));
    for (let n = 0; n < 5; n++) await streams.xadd(`${sp}:1000:dead:g`, '*', ...letter(10 + n));

    proxy.setMode('latency', LATENCY_MS);
    try {
      const base = `/coord/v1/monitoring/streams/${sp}/groups/g/dead-letters`;
      const list = await call('GET', `${base}?limit=4`);
      expect(list.status).toBe(200);
      const listed = list.body as {
        shards: { shard: number; count: number }[];
        deadLetters: { shard: number; shared: boolean; fields: { n: string } }[];
        more: boolean;
      };
      expect(listed.shards).toHaveLength(SHARDS);
      expect(listed.shards.filter((s) => s.count > 0)).toEqual([
        expect.objectContaining({ shard: 3, count: 2 }),
        expect.objectContaining({ shard: 700, count: 1 }),
        expect.objectContaining({ shard: 1000, count: 5 }),
      ]);
      // At most `limit`, shards ascending, oldest first.
      expect(listed.deadLetters.map((d) => [d.shard, d.shared, d.fields.n])).toEqual([
        [3, false, '1'],
        [3, false, '2'],
        [700, true, '3'],
        [1000, false, '10'],
      ]);
      expect(listed.more).toBe(true);

      const admin = `/coord/v1/admin/streams/${sp}/groups/g/dead-letters`;
      const replay = await call('POST', `${admin}/replay`, { shards: [3, 700], ...CHANGE });
      expect(replay.status).toBe(200);
      expect((replay.body as { replayed: unknown[] }).replayed).toHaveLength(3);

      const purge = await call('POST', `${admin}/purge`, CHANGE);
      expect(purge.status).toBe(200);
      expect(purge.body).toMatchObject({ purged: 5 });
      expect((purge.body as { shards: unknown[] }).shards).toHaveLength(SHARDS);
    } finally {
      proxy.setMode('pass');
    }
    expect(await streams.xlen(`${sp}:1000:dead:g`)).toBe(0);
    expect(await streams.xlen(`${sp}:3:dead:g`)).toBe(0);
  }, 120_000);
});
