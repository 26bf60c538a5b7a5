/**
 * A dead-letter replay whose target shard stream is broken (its key holds another type,
 * docs/operations.md#a-broken-shard-stream): that shard's trouble, not an outage of the streams
 * Redis. The letters bound there stay dead letters and are named with Redis's error; the others
 * are replayed, and the answer says which is which.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHANGE, startStreamsCoordinator, type TestCoordinator } from '../support/coordinator.js';
import { startRedisServer, type RedisServerHandle } from '../support/redis-server.js';

let redis: RedisServerHandle;
let c: TestCoordinator;
let streams: Redis;

beforeAll(async () => {
  redis = await startRedisServer();
  c = await startStreamsCoordinator(redis.url);
  streams = new Redis(redis.url);
});
afterAll(async () => {
  streams?.disconnect();
  await c?.close();
  await redis?.stop();
});

/** A keyless dead letter (it goes back to its own shard), as the consumer writes one. */
const keyless = (body: string) => [
  'originalId',
  '1-1',
  'deliveries',
  '3',
  'error',
  'e',
  'body',
  body,
];

describe('a replay to a shard whose stream key holds another type', () => {
  it('replays the other dead letters and names the ones it could not send, with 200', async () => {
    const sp = `dlb-${randomBytes(4).toString('hex')}`;
    const created = await c.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: sp, consumerGroup: 'g', shardCount: 2, ...CHANGE },
    });
    expect(created.status).toBe(201);
    const stuck = await streams.xadd(`${sp}:0:dead`, '*', ...keyless('to a broken shard'));
    const fine = await streams.xadd(`${sp}:1:dead`, '*', ...keyless('to a good shard'));
    // Shard 0's stream name is taken by a list (another application's, say).
    await streams.rpush(`${sp}:0`, 'not a stream');

    const res = await c.call('POST', `/coord/v1/admin/streams/${sp}/groups/g/dead-letters/replay`, {
      user: 'writer',
      body: CHANGE,
    });
    const body = (await res.json()) as Record<string, unknown>;
    expect(res.status).toBe(200);
    expect(body).toMatchObject({
      replayed: [{ shard: 1, id: fine, toShard: 1 }],
      failed: [{ shard: 0, id: stuck, toShard: 0 }],
      unreadable: [],
    });
    const [failed] = body.failed as { error: string }[];
    expect(failed!.error).toMatch(new RegExp(`^${sp}:0: WRONGTYPE`));

    // The one not sent is still a dead letter; the list is untouched; the other one was sent.
    expect((await streams.xrange(`${sp}:0:dead`, '-', '+')).map(([id]) => id)).toEqual([stuck]);
    expect(await streams.lrange(`${sp}:0`, 0, -1)).toEqual(['not a stream']);
    expect(await streams.xlen(`${sp}:1:dead`)).toBe(0);
    expect(await streams.xlen(`${sp}:1`)).toBe(1);
  });
});
