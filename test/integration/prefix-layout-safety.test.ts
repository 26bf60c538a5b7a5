/**
 * What keeps the groups of one stream prefix from losing messages while the prefix moves
 * (docs/protocol.md#one-shard-layout-per-stream-prefix): no group joins a prefix mid-migration,
 * the prefix does not move while a group on it cannot follow, a scale-in of a group without
 * members never drops unread shards, and `latest` starts by the streams Redis's clock.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Consumer, CoordinatorClient, Producer } from '../../src/client/index.js';
import { ManualClock } from '../../src/machines/clock.js';
import { CHANGE, startTestCoordinator, type TestCoordinator } from '../support/coordinator.js';
import { SimulatedMember } from '../support/members.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';

let redis: RedisServerHandle;
let c: TestCoordinator;
let streams: Redis;
// An hour ahead of the streams Redis: `latest` must still not skip anything written later.
const clock = new ManualClock(Date.now() + 3_600_000);

beforeAll(async () => {
  redis = await startRedisServer();
  c = await startTestCoordinator({
    store: 'redis',
    redisUrl: redis.url,
    clock,
    overrides: { 'membership.assignment-debounce': '0ms', 'streams.lag-cache': '0ms' },
  });
  streams = new Redis(redis.url);
});
afterAll(async () => {
  streams.disconnect();
  await c.close();
  await redis.stop();
});

const prefix = () => `ps-${randomBytes(3).toString('hex')}`;
const client = (user: string) => new CoordinatorClient({ baseUrl: c.url, token: c.token(user) });
const admin = (sp: string, g: string) => `/coord/v1/admin/streams/${sp}/groups/${g}`;
const create = (sp: string, g: string, extra: object = {}) =>
  c.call('POST', '/coord/v1/admin/groups', {
    user: 'writer',
    body: { streamPrefix: sp, consumerGroup: g, ...CHANGE, ...extra },
  });
const scale = (sp: string, g: string, shardCount: number) =>
  c.call('POST', `${admin(sp, g)}/scale`, { user: 'writer', body: { shardCount, ...CHANGE } });
const errorOf = async (res: Response) =>
  ((await res.json()) as { error: { code: string; details?: Record<string, unknown> } }).error;
const migrationOf = async (sp: string, g: string) =>
  (
    (await (
      await c.call('GET', `/coord/v1/monitoring/streams/${sp}/groups/${g}/migrations`, {
        user: 'reader',
      })
    ).json()) as { active: { state: string } | null }
  ).active;
const shardsOf = async (sp: string, g: string) =>
  (
    (await (
      await c.call('GET', `/coord/v1/monitoring/streams/${sp}/groups/${g}/assignments`, {
        user: 'reader',
      })
    ).json()) as { shards: Array<{ shard: number; state: string; owner: string | null }> }
  ).shards;

describe('a group joins a prefix only when no group on it is migrating', () => {
  it('a create (and a desired-state PUT) during a sibling scale-in is refused with 409, and taken once it converged', async () => {
    const sp = prefix();
    await create(sp, 'billing', { shardCount: 4 });
    const member = new SimulatedMember(c, 'm', sp, 'billing');
    for (let i = 0; i < 4; i++) await member.beat();
    expect((await scale(sp, 'billing', 2)).status).toBe(202);
    const refused = await create(sp, 'emails');
    expect(refused.status).toBe(409);
    expect(await errorOf(refused)).toMatchObject({
      code: 'MIGRATION_IN_PROGRESS',
      details: { consumerGroup: 'billing' },
    });
    const put = await c.call('PUT', admin(sp, 'emails'), {
      user: 'writer',
      body: { shardCount: 2, ...CHANGE },
    });
    expect(put.status).toBe(409);
    // The member reads the retiring shards to their end and reports them DONE.
    for (let i = 0; i < 6; i++) await member.beat({ revokeDone: true });
    await waitFor(async () => (await migrationOf(sp, 'billing'))?.state === 'CONVERGED', {
      what: 'billing converged',
    });
    expect((await create(sp, 'emails')).status).toBe(201);
  });
});

describe('the prefix does not move while a group on it cannot follow', () => {
  it('a scale and a rollback are refused while another group is frozen', async () => {
    const sp = prefix();
    await create(sp, 'a', { shardCount: 4 });
    await create(sp, 'b');
    expect((await scale(sp, 'a', 6)).status).toBe(202);
    await c.call('POST', `${admin(sp, 'b')}/freeze`, { user: 'writer', body: CHANGE });
    const rollback = await c.call('POST', `${admin(sp, 'a')}/migrations/current/rollback`, {
      user: 'writer',
      body: CHANGE,
    });
    expect(rollback.status).toBe(409);
    expect(await errorOf(rollback)).toMatchObject({
      code: 'GROUP_FROZEN',
      details: { consumerGroup: 'b' },
    });
  });

  it('a scale is refused while another group is failed closed', async () => {
    const sp = prefix();
    await create(sp, 'a', { shardCount: 4 });
    await create(sp, 'b');
    // b's metadata is lost behind the coordinator's back; its owner notices on its next look.
    await streams.del(`${c.keyPrefix}:{${sp}:b}:metadata`);
    await c.host.verify();
    const res = await scale(sp, 'a', 6);
    expect(res.status).toBe(409);
    expect(await errorOf(res)).toMatchObject({
      code: 'GROUP_FAILED_CLOSED_ADMIN',
      details: { consumerGroup: 'b', failureReason: 'METADATA_LOST' },
    });
  });
});

describe('a scale-in of a group without members never drops unread shards', () => {
  it('removed shards nothing is left in are sealed and leave at once; the migration converges', async () => {
    const sp = prefix();
    await create(sp, 'g', { shardCount: 4 });
    expect((await scale(sp, 'g', 2)).status).toBe(202);
    await waitFor(async () => (await shardsOf(sp, 'g')).every((s) => s.shard < 2), {
      what: 'removed shards gone',
    });
    expect((await migrationOf(sp, 'g'))?.state).toBe('CONVERGED');
    // Sealed: a producer with the old routing is refused there and routes again.
    const last = await streams.xrevrange(`${sp}:3`, '+', '-', 'COUNT', 1);
    expect(last[0]?.[1][0]).toBe('__coord_seal');
  });

  it('removed shards with unread entries wait, ownerless, for a member that reads them to the end', async () => {
    const sp = prefix();
    await create(sp, 'g', { shardCount: 4, startAt: 'earliest' });
    const producer = new Producer({
      client: client('producer'),
      redis: redis.url,
      streamPrefix: sp,
      consumerGroup: 'g',
    });
    const keys: string[] = [];
    for (let i = 0; i < 40; i++) {
      await producer.send(`k-${i}`, { n: String(i) });
      keys.push(`k-${i}`);
    }
    expect((await scale(sp, 'g', 2)).status).toBe(202);
    await c.host.sweepRetired();
    const retiring = (await shardsOf(sp, 'g')).filter((s) => s.shard >= 2);
    expect(retiring.map((s) => [s.shard, s.state, s.owner])).toEqual([
      [2, 'retiring', null],
      [3, 'retiring', null],
    ]);
    expect((await migrationOf(sp, 'g'))?.state).toBe('IN_PROGRESS');
    // Sent after the scale-in with the new routing: shards 0 and 1 only.
    for (let i = 40; i < 60; i++) {
      await producer.send(`k-${i}`, { n: String(i) });
      keys.push(`k-${i}`);
    }
    await producer.close();
    const seen = new Set<string>();
    const consumer = new Consumer({
      client: client('consumer'),
      redis: redis.url,
      streamPrefix: sp,
      consumerGroup: 'g',
      memberId: 'late',
      blockMs: 50,
      handler: ({ key }) => {
        seen.add(key!);
      },
    });
    consumer.on('error', () => undefined);
    await consumer.start();
    try {
      await waitFor(() => keys.every((k) => seen.has(k)), { what: 'every key', timeoutMs: 15_000 });
      await waitFor(async () => (await shardsOf(sp, 'g')).every((s) => s.shard < 2), {
        what: 'retired shards read to their end and gone',
        timeoutMs: 15_000,
      });
    } finally {
      await consumer.close();
    }
  });
});

describe('latest starts by the streams Redis clock', () => {
  it('a consumer that starts after the producer reads everything sent after the group was created, with the coordinator an hour ahead', async () => {
    const sp = prefix();
    await streams.xadd(`${sp}:0`, '*', 'key', 'before');
    await create(sp, 'g', { shardCount: 1 });
    const producer = new Producer({
      client: client('producer'),
      redis: redis.url,
      streamPrefix: sp,
      consumerGroup: 'g',
    });
    for (let i = 0; i < 5; i++) await producer.send(`after-${i}`, {});
    await producer.close();
    const seen: string[] = [];
    const consumer = new Consumer({
      client: client('consumer'),
      redis: redis.url,
      streamPrefix: sp,
      consumerGroup: 'g',
      blockMs: 50,
      handler: ({ key }) => {
        seen.push(key!);
      },
    });
    consumer.on('error', () => undefined);
    await consumer.start();
    try {
      await waitFor(() => seen.length === 5, { what: 'the five sent after the create' });
      expect(seen).toEqual(['after-0', 'after-1', 'after-2', 'after-3', 'after-4']);
    } finally {
      await consumer.close();
    }
  });

  it('a desired-state PUT that creates the group takes startAt; anything else is 400', async () => {
    const sp = prefix();
    const put = (startAt: unknown) =>
      c.call('PUT', admin(sp, 'g'), {
        user: 'writer',
        body: { shardCount: 1, startAt, ...CHANGE },
      });
    expect((await put('beginning')).status).toBe(400);
    const created = await put('earliest');
    expect(created.status).toBe(201);
    expect(((await created.json()) as { startAt: string }).startAt).toBe('earliest');
  });
});

describe('deletion with three groups on one prefix', () => {
  it('the prefix keeps its count while any group is left; the last one frees it', async () => {
    const sp = prefix();
    await create(sp, 'a', { shardCount: 3 });
    await create(sp, 'b');
    await create(sp, 'c');
    const del = (g: string) => c.call('DELETE', admin(sp, g), { user: 'writer', body: CHANGE });
    expect((await del('b')).status).toBe(204);
    expect((await create(sp, 'd', { shardCount: 5 })).status).toBe(409);
    expect((await scale(sp, 'a', 4)).status).toBe(202);
    await waitFor(async () => (await migrationOf(sp, 'c'))?.state !== 'IN_PROGRESS', {
      what: 'c followed',
    });
    expect((await del('a')).status).toBe(204);
    expect((await del('c')).status).toBe(204);
    expect((await create(sp, 'd', { shardCount: 5 })).status).toBe(201);
  });
});
