/**
 * Per-shard lag of a group on its streams, read by the coordinator from a real Redis
 * (docs/operations.md#lag): known numbers, a stream nobody reads yet, a missing stream, the
 * metrics, and the streams Redis down.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Consumer, CoordinatorClient, Producer, type SendResult } from '../../src/client/index.js';
import { ManualClock } from '../../src/machines/clock.js';
import {
  CHANGE,
  mintToken,
  startTestCoordinator,
  type TestCoordinator,
  waitUntilSeenByEach,
} from '../support/coordinator.js';
import { SimulatedMember } from '../support/members.js';
import {
  randomKeyPrefix,
  startRedisServer,
  waitFor,
  type RedisServerHandle,
} from '../support/redis-server.js';

interface ShardLag {
  shard: number;
  stream: string;
  owner: string | null;
  memberEpoch: number | null;
  length: number;
  lagEntries: number;
  lagExact: boolean;
  pending: number;
  oldestPendingMs: number | null;
  lastDeliveredId: string | null;
  lastEntryId: string | null;
  lagSeconds: number;
  deadLetters: number;
  retiring: boolean;
  missing: boolean;
  noConsumerGroup: boolean;
  error: string | null;
}
interface Lag {
  available: boolean;
  reason?: string;
  streams?: string;
  measuredAt: string;
  shards: ShardLag[];
  totals: {
    lagEntries: number;
    pending: number;
    maxLagSeconds: number;
    shardsBehind: number;
    shardsUnreadable: number;
  } | null;
}

const lagPath = (sp: string, g = 'g') => `/coord/v1/monitoring/streams/${sp}/groups/${g}/lag`;

async function createGroup(
  c: TestCoordinator,
  sp: string,
  shardCount: number,
  startAt: 'earliest' | 'latest' = 'latest',
): Promise<void> {
  const res = await c.call('POST', '/coord/v1/admin/groups', {
    user: 'writer',
    body: { streamPrefix: sp, consumerGroup: 'g', shardCount, startAt, ...CHANGE },
  });
  expect(res.status).toBe(201);
}

async function lagOf(c: TestCoordinator, sp: string): Promise<Lag> {
  const res = await c.call('GET', lagPath(sp), { user: 'reader' });
  expect(res.status).toBe(200);
  return (await res.json()) as Lag;
}

describe('lag on a redis store (streams on the same Redis)', () => {
  let redis: RedisServerHandle;
  let c: TestCoordinator;
  let streams: Redis;
  const clock = new ManualClock(Date.now());

  beforeAll(async () => {
    redis = await startRedisServer();
    c = await startTestCoordinator({
      store: 'redis',
      redisUrl: redis.url,
      clock,
      overrides: { 'streams.lag-cache': '1s', 'streams.lag-interval': '0ms' },
    });
    streams = new Redis(redis.url);
  });
  afterAll(async () => {
    streams.disconnect();
    await c.close();
    await redis.stop();
  });

  it('known numbers: entries behind, pending, oldest pending, a stream nobody reads yet, a missing one', async () => {
    const sp = `lag-${randomBytes(3).toString('hex')}`;
    await createGroup(c, sp, 3);
    // The SDK producer fills the streams; the key decides the shard.
    const producer = new Producer({
      client: new CoordinatorClient({ baseUrl: c.url, token: c.token('producer') }),
      redis: redis.url,
      streamPrefix: sp,
      consumerGroup: 'g',
    });
    const sent: SendResult[] = [];
    for (let i = 0; i < 30; i++) sent.push(await producer.send(`k-${i}`, { n: String(i) }));
    await producer.close();
    const perShard = [0, 1, 2].map((s) => sent.filter((r) => r.shard === s).length);
    expect(perShard.filter((n) => n > 0).length).toBe(3);
    // A consumer of shard 0 read 6 entries and acknowledged 2 of them, then stopped.
    await streams.xgroup('CREATE', `${sp}:0`, 'g', '0');
    const read = (await streams.xreadgroup(
      'GROUP',
      'g',
      'worker',
      'COUNT',
      6,
      'STREAMS',
      `${sp}:0`,
      '>',
    )) as Array<[string, Array<[string, string[]]>]>;
    const ids = read[0]![1].map(([id]) => id);
    await streams.xack(`${sp}:0`, 'g', ids[0]!, ids[1]!);
    // Shard 2's stream is deleted under the group.
    await streams.del(`${sp}:2`);

    const lag = await lagOf(c, sp);
    expect(lag.available).toBe(true);
    expect(lag.streams).toBe(`127.0.0.1:${redis.port}`);
    const [s0, s1, s2] = lag.shards;
    expect(s0).toMatchObject({
      shard: 0,
      stream: `${sp}:0`,
      length: perShard[0],
      lagEntries: perShard[0]! - 6,
      lagExact: true,
      pending: 4,
      lastDeliveredId: ids[5],
      lastEntryId: sent.filter((r) => r.shard === 0).at(-1)!.id,
      noConsumerGroup: false,
      missing: false,
      retiring: false,
    });
    expect(s0!.oldestPendingMs).toBeGreaterThanOrEqual(0);
    expect(s0!.lagSeconds).toBeGreaterThanOrEqual(0);
    // Nobody created shard 1's consumer group yet: all of it is behind.
    expect(s1).toMatchObject({
      length: perShard[1],
      lagEntries: perShard[1],
      noConsumerGroup: true,
      pending: 0,
    });
    expect(s2).toMatchObject({ length: 0, lagEntries: 0, missing: true });
    expect(lag.totals).toEqual({
      lagEntries: perShard[0]! - 6 + perShard[1]!,
      pending: 4,
      maxLagSeconds: Math.max(s0!.lagSeconds, s1!.lagSeconds),
      shardsBehind: 2,
      shardsUnreadable: 0,
    });
  });

  it("a shard whose key Redis answers WRONGTYPE is named with the error; the group's other shards read on", async () => {
    const sp = `lag-${randomBytes(3).toString('hex')}`;
    await createGroup(c, sp, 3, 'earliest');
    await streams.xadd(`${sp}:0`, '*', 'n', '1');
    await streams.xadd(`${sp}:0`, '*', 'n', '2');
    // Shard 1's key holds a string (a SET by mistake), shard 2's dead letters a list.
    await streams.set(`${sp}:1`, 'not a stream');
    await streams.xadd(`${sp}:2`, '*', 'n', '3');
    await streams.rpush(`${sp}:2:dead`, 'not a stream');

    const lag = await lagOf(c, sp);
    expect(lag.available).toBe(true);
    const [s0, s1, s2] = lag.shards;
    expect(s0).toMatchObject({ length: 2, lagEntries: 2, lagExact: true, error: null });
    expect(s1).toMatchObject({ length: 0, lagEntries: 0, lagExact: false, missing: false });
    expect(s1!.error).toMatch(new RegExp(`^${sp}:1: WRONGTYPE Operation against a key`));
    // The script's own location is not part of what the operator reads.
    expect(s1!.error).not.toMatch(/script|@user_script/);
    expect(s2).toMatchObject({ length: 1, lagEntries: 1, lagExact: true, deadLetters: 0 });
    expect(s2!.error).toMatch(new RegExp(`^${sp}:2:dead: WRONGTYPE`));
    expect(lag.totals).toMatchObject({ lagEntries: 3, shardsBehind: 2, shardsUnreadable: 2 });
    // The metrics say so too: an alert on lag alone would read 0 for the broken shard.
    clock.advance(1_001);
    await c.host.refreshLag();
    const metrics = await (await c.call('GET', '/metrics')).text();
    expect(metrics).toContain(
      `coord_group_lag_unreadable_shards{stream_prefix="${sp}",consumer_group="g"} 2`,
    );
  });

  it('a caught-up shard reads 0 entries and 0 seconds behind; the owner and epoch are shown', async () => {
    const sp = `lag-${randomBytes(3).toString('hex')}`;
    await createGroup(c, sp, 1);
    const member = new SimulatedMember(c, 'm-1', sp, 'g');
    await member.beat();
    const reply = await member.beat();
    await streams.xadd(`${sp}:0`, '*', 'key', 'a');
    await streams.xgroup('CREATE', `${sp}:0`, 'g', '0');
    const read = (await streams.xreadgroup(
      'GROUP',
      'g',
      'm-1',
      'STREAMS',
      `${sp}:0`,
      '>',
    )) as Array<[string, Array<[string, string[]]>]>;
    await streams.xack(`${sp}:0`, 'g', read[0]![1][0]![0]);
    const lag = await lagOf(c, sp);
    expect(lag.shards[0]).toMatchObject({
      owner: 'm-1',
      memberEpoch: reply.memberEpoch,
      lagEntries: 0,
      lagSeconds: 0,
      pending: 0,
      oldestPendingMs: null,
    });
    expect(lag.totals).toMatchObject({ lagEntries: 0, shardsBehind: 0, maxLagSeconds: 0 });
  });

  it('is cached for lag-cache: a second read within it is the same reading', async () => {
    const sp = `lag-${randomBytes(3).toString('hex')}`;
    await createGroup(c, sp, 1);
    const first = await lagOf(c, sp);
    await streams.xadd(`${sp}:0`, '*', 'key', 'a');
    expect(await lagOf(c, sp)).toEqual(first);
    clock.advance(1_001);
    const later = await lagOf(c, sp);
    expect(later.shards[0]!.lagEntries).toBe(1);
  });

  it('metrics: the owner refreshes lag, pending and lag seconds per group; FALLING_BEHIND while it grows with live members', async () => {
    const sp = `lag-${randomBytes(3).toString('hex')}`;
    await createGroup(c, sp, 1);
    const member = new SimulatedMember(c, 'm-1', sp, 'g');
    await member.beat();
    for (let round = 1; round <= 4; round++) {
      await streams.xadd(`${sp}:0`, '*', 'key', `r${round}`);
      clock.advance(1_001);
      await c.host.refreshLag();
    }
    const metrics = await (await c.call('GET', '/metrics')).text();
    const labels = `{stream_prefix="${sp}",consumer_group="g"}`;
    expect(metrics).toContain(`coord_group_lag_entries${labels} 4`);
    expect(metrics).toContain(`coord_group_pending_entries${labels} 0`);
    expect(metrics).toMatch(
      new RegExp(`coord_group_lag_seconds\\{stream_prefix="${sp}",consumer_group="g"\\} \\d`),
    );
    expect(metrics).toContain(`coord_group_lag_measured_age_seconds${labels} 0`);
    const view = (await (
      await c.call('GET', `/coord/v1/monitoring/streams/${sp}/groups/g`, { user: 'reader' })
    ).json()) as { hints: string[] };
    expect(view.hints).toEqual(['FALLING_BEHIND']);
  });

  it('the SDK: Consumer.stats() counts per shard what only it knows; CoordinatorClient.lag() reads the rest', async () => {
    const sp = `lag-${randomBytes(3).toString('hex')}`;
    // earliest: the coordinator's clock is a test clock, ahead of the stream ids written now.
    await createGroup(c, sp, 2, 'earliest');
    const client = (user: string) =>
      new CoordinatorClient({ baseUrl: c.url, token: c.token(user) });
    const producer = new Producer({
      client: client('producer'),
      redis: redis.url,
      streamPrefix: sp,
      consumerGroup: 'g',
    });
    const sent: SendResult[] = [];
    for (let i = 0; i < 12; i++) sent.push(await producer.send(`k-${i}`, { n: String(i) }));
    const bad = await producer.send('bad', { n: 'x' });
    await producer.close();
    const consumer = new Consumer({
      client: client('consumer'),
      redis: redis.url,
      streamPrefix: sp,
      consumerGroup: 'g',
      memberId: 'stats-1',
      blockMs: 50,
      handler: ({ key }) => {
        if (key === 'bad') throw new Error('cannot handle this one');
      },
    });
    consumer.on('error', () => undefined);
    await consumer.start();
    try {
      await waitFor(() => consumer.stats().totals.handled === 13, { what: 'all 13 handled' });
      const stats = consumer.stats();
      expect(stats.totals).toMatchObject({ handled: 13, acked: 12, failed: 1, inFlight: 0 });
      const onBadShard = stats.shards.find((s) => s.shard === bad.shard)!;
      expect(onBadShard.failed).toBe(1);
      const last = sent.filter((r) => r.shard === bad.shard).at(-1)!;
      expect(onBadShard.lastAckedId).toBe(last.id);
      clock.advance(1_001);
      const lag = await client('reader').lag(sp, 'g');
      expect(lag.totals).toMatchObject({ lagEntries: 0, pending: 1 });
      expect(lag.shards.find((s) => s.shard === bad.shard)).toMatchObject({
        pending: 1,
        owner: 'stats-1',
      });
    } finally {
      await consumer.close();
    }
  });

  it('a token without READ, or outside its group scope, gets 403', async () => {
    const sp = `lag-${randomBytes(3).toString('hex')}`;
    await createGroup(c, sp, 1);
    expect((await c.call('GET', lagPath(sp), { user: 'consumer' })).status).toBe(403);
    const scoped = mintToken('scoped', ['READ'], Date.now(), ['other:g']);
    const elsewhere = await c.call('GET', lagPath(sp), {
      headers: { authorization: `Bearer ${scoped}` },
    });
    expect(elsewhere.status).toBe(403);
    expect(((await elsewhere.json()) as { error: { code: string } }).error.code).toBe(
      'GROUP_NOT_PERMITTED',
    );
  });

  it('an unknown group is 404', async () => {
    expect((await c.call('GET', lagPath('nope'), { user: 'reader' })).status).toBe(404);
  });
});

describe('lag when the streams cannot be read', () => {
  it('embedded mode without coordinator.streams.url: unavailable with the reason, never zeros', async () => {
    const c = await startTestCoordinator({ store: 'memory' });
    try {
      await createGroup(c, 'em', 2);
      const lag = await lagOf(c, 'em');
      expect(lag).toMatchObject({ available: false, shards: [], totals: null });
      expect(lag.reason).toMatch(/coordinator\.streams\.url/);
    } finally {
      await c.close();
    }
  });

  it('embedded mode with coordinator.streams.url reads the streams there; a streams Redis that is down is 503 STREAMS_UNAVAILABLE naming it', async () => {
    const redis = await startRedisServer();
    const c = await startTestCoordinator({
      store: 'memory',
      overrides: { 'streams.url': redis.url, 'streams.lag-cache': '0ms' },
    });
    try {
      await createGroup(c, 'em', 1);
      const streams = new Redis(redis.url);
      await streams.xadd('em:0', '*', 'key', 'a');
      streams.disconnect();
      expect((await lagOf(c, 'em')).shards[0]).toMatchObject({ length: 1, lagEntries: 1 });
      await redis.kill();
      const res = await c.call('GET', lagPath('em'), { user: 'reader' });
      expect(res.status).toBe(503);
      const body = (await res.json()) as {
        error: { code: string; message: string; details: object };
      };
      expect(body.error.code).toBe('STREAMS_UNAVAILABLE');
      expect(body.error.details).toMatchObject({ streams: `127.0.0.1:${redis.port}` });
      expect(body.error.message).toContain(`127.0.0.1:${redis.port}`);
    } finally {
      await c.close();
      await redis.stop();
    }
  });
});

describe('lag metrics of groups nobody asked for', () => {
  const streamsOf = (redis: RedisServerHandle) => new Redis(redis.url);
  const lagLine = (sp: string, entries: number) =>
    `coord_group_lag_entries{stream_prefix="${sp}",consumer_group="g"} ${entries}`;
  const metricsOf = async (c: TestCoordinator) => (await c.call('GET', '/metrics')).text();

  it('after a restart, an idle group (no member, no producer) has its lag series after one refresh round, and keeps it current with the store down', async () => {
    const redis = await startRedisServer();
    const streamsRedis = await startRedisServer();
    const overrides = {
      'store.key-prefix': randomKeyPrefix(),
      'streams.url': streamsRedis.url,
      'streams.lag-interval': '0ms',
    };
    let c: TestCoordinator | null = null;
    try {
      c = await startTestCoordinator({ store: 'redis', redisUrl: redis.url, overrides });
      await createGroup(c, 'idle', 2);
      const streams = streamsOf(streamsRedis);
      for (let i = 0; i < 3; i++) await streams.xadd('idle:0', '*', 'key', `a${i}`);
      for (let i = 0; i < 4; i++) await streams.xadd('idle:1', '*', 'key', `b${i}`);
      await c.close();
      // The same Redis and key prefix, a new coordinator: nothing has loaded the group.
      c = await startTestCoordinator({ store: 'redis', redisUrl: redis.url, overrides });
      const restarted = c;
      await waitFor(() => restarted.services.replicas?.joined() === true, { what: 'joined' });
      expect(c.host.groupsOwned()).toBe(0);
      await c.host.refreshLag();
      const metrics = await metricsOf(c);
      expect(metrics).toContain(lagLine('idle', 7));
      expect(metrics).toContain(
        'coord_group_lag_measured_age_seconds{stream_prefix="idle",consumer_group="g"} 0',
      );
      // The registry cannot be read with the store down: the group loaded here is read still.
      await redis.kill();
      await streams.xadd('idle:0', '*', 'key', 'a3');
      streams.disconnect();
      await c.host.refreshLag();
      expect(await metricsOf(c)).toContain(lagLine('idle', 8));
    } finally {
      await c?.close();
      await streamsRedis.stop();
      await redis.stop();
    }
  });

  it('after a restart with the streams Redis down, a group never measured here has an age gauge, and it grows', async () => {
    const redis = await startRedisServer();
    const streamsRedis = await startRedisServer();
    const overrides = {
      'store.key-prefix': randomKeyPrefix(),
      'streams.url': streamsRedis.url,
      'streams.lag-interval': '0ms',
    };
    let c: TestCoordinator | null = null;
    const ageLine =
      /^coord_group_lag_measured_age_seconds\{stream_prefix="unread",consumer_group="g"\} (\S+)$/m;
    try {
      c = await startTestCoordinator({ store: 'redis', redisUrl: redis.url, overrides });
      await createGroup(c, 'unread', 2);
      await c.close();
      await streamsRedis.kill();
      // A new coordinator on the same store: the streams have not been readable since it started.
      c = await startTestCoordinator({ store: 'redis', redisUrl: redis.url, overrides });
      const restarted = c;
      await waitFor(() => restarted.services.replicas?.joined() === true, { what: 'joined' });
      await c.host.refreshLag();
      const first = ageLine.exec(await metricsOf(c));
      // The alert on the age (docs/operations.md#lag) needs the series: absent, it never fires.
      expect(first).not.toBeNull();
      // Never measured is not "measured just now": no lag figures, and the age grows.
      expect(await metricsOf(c)).not.toContain('coord_group_lag_entries{stream_prefix="unread"');
      await waitFor(
        async () => {
          await restarted.host.refreshLag();
          return Number(ageLine.exec(await metricsOf(restarted))?.[1]) > Number(first![1]);
        },
        { what: 'the age of the lag metrics to grow' },
      );
    } finally {
      await c?.close();
      await streamsRedis.stop();
      await redis.stop();
    }
  });

  it('a group failed closed without its metadata (shards unknown) has no lag figures, never zeros, and the lag endpoint says why', async () => {
    const redis = await startRedisServer();
    const streamsRedis = await startRedisServer();
    const keyPrefix = randomKeyPrefix();
    const overrides = {
      'store.key-prefix': keyPrefix,
      'streams.url': streamsRedis.url,
      'streams.lag-interval': '0ms',
    };
    let c: TestCoordinator | null = null;
    const series = (name: string) => `${name}{stream_prefix="gone",consumer_group="g"}`;
    try {
      c = await startTestCoordinator({ store: 'redis', redisUrl: redis.url, overrides });
      await createGroup(c, 'gone', 2);
      const streams = streamsOf(streamsRedis);
      for (let i = 0; i < 5; i++) await streams.xadd('gone:0', '*', 'key', `a${i}`);
      streams.disconnect();
      await c.close();
      // The metadata key is lost while no replica runs (docs/operations.md#lost-metadata); the
      // five entries behind on gone:0 stay unread.
      const store = new Redis(redis.url);
      await store.del(`${keyPrefix}:{gone:g}:metadata`);
      store.disconnect();
      c = await startTestCoordinator({ store: 'redis', redisUrl: redis.url, overrides });
      const restarted = c;
      await waitFor(() => restarted.services.replicas?.joined() === true, { what: 'joined' });
      await c.host.refreshLag();
      const view = (await (
        await c.call('GET', '/coord/v1/monitoring/streams/gone/groups/g', { user: 'reader' })
      ).json()) as { status: string; failureReason: string };
      expect(view).toMatchObject({ status: 'FAILED_CLOSED', failureReason: 'METADATA_LOST' });
      const metrics = await metricsOf(c);
      // Zeros would read "caught up" while nothing consumes (docs/operations.md#lag).
      expect(metrics).not.toContain(series('coord_group_lag_entries'));
      expect(metrics).not.toContain(series('coord_group_lag_seconds'));
      expect(metrics).toContain(series('coord_group_lag_measured_age_seconds'));
      const lag = await lagOf(c, 'gone');
      expect(lag).toMatchObject({ available: false, totals: null });
      expect(lag.reason).toMatch(/failed closed/);
    } finally {
      await c?.close();
      await streamsRedis.stop();
      await redis.stop();
    }
  });

  it('a group that leaves the replica (handed over, deleted) leaves its lag series at once, not at the next refresh', async () => {
    const redis = await startRedisServer();
    const keyPrefix = randomKeyPrefix();
    const start = (id: string) =>
      startTestCoordinator({
        store: 'redis',
        redisUrl: redis.url,
        overrides: {
          'store.key-prefix': keyPrefix,
          'replica.id': id,
          'streams.lag-interval': '0ms',
          'streams.lag-shard-metrics': true,
        },
      });
    const groups = ['q0', 'q1', 'q2', 'q3', 'q4', 'q5'];
    const replicas: TestCoordinator[] = [];
    try {
      const first = await start('s1');
      replicas.push(first);
      for (const sp of groups) await createGroup(first, sp, 2);
      await first.host.refreshLag();
      for (const sp of groups) expect(await metricsOf(first)).toContain(lagLine(sp, 0));
      // Deleted: its series go with it.
      const deleted = await first.call('DELETE', '/coord/v1/admin/streams/q0/groups/g', {
        user: 'writer',
        body: CHANGE,
      });
      expect(deleted.status).toBe(204);
      expect(await metricsOf(first)).not.toContain('stream_prefix="q0"');
      // A second replica joins: the groups it now owns are handed over to it.
      const second = await start('s2');
      replicas.push(second);
      const moved = (sp: string) =>
        first.services.replicas?.ownerOf({ streamPrefix: sp, consumerGroup: 'g' }) === 's2';
      await waitFor(
        () =>
          groups.slice(1).some(moved) &&
          first.host.heldGroups().every((ref) => !moved(ref.streamPrefix)),
        { what: 'the groups of s2 handed over by s1' },
      );
      const left = await metricsOf(first);
      for (const sp of groups.slice(1)) {
        // Reported by its new owner from now on, never by both (docs/operations.md#lag).
        if (moved(sp)) expect(left).not.toContain(`stream_prefix="${sp}"`);
        else expect(left).toContain(lagLine(sp, 0));
      }
    } finally {
      for (const c of replicas) await c.close();
      await redis.stop();
    }
  });

  it('with two replicas, each group is read by its owner only, and no replica loads a group the other owns', async () => {
    const redis = await startRedisServer();
    const keyPrefix = randomKeyPrefix();
    const overrides = (id: string) => ({
      'store.key-prefix': keyPrefix,
      'replica.id': id,
      'streams.lag-interval': '0ms',
    });
    const start = (id: string) =>
      startTestCoordinator({ store: 'redis', redisUrl: redis.url, overrides: overrides(id) });
    const groups = ['p0', 'p1', 'p2', 'p3', 'p4', 'p5'];
    const replicas: TestCoordinator[] = [];
    try {
      const first = await start('r0');
      replicas.push(first);
      const streams = streamsOf(redis);
      for (const [i, sp] of groups.entries()) {
        await createGroup(first, sp, 1);
        for (let n = 0; n <= i; n++) await streams.xadd(`${sp}:0`, '*', 'key', `k${n}`);
      }
      streams.disconnect();
      await replicas.pop()!.close();
      replicas.push(await start('r1'), await start('r2'));
      await waitUntilSeenByEach(replicas, ['r1', 'r2']);
      for (const c of replicas) await c.host.refreshLag();
      const metrics = await Promise.all(replicas.map(metricsOf));
      for (const [i, sp] of groups.entries()) {
        const ref = { streamPrefix: sp, consumerGroup: 'g' };
        const owner = replicas[0]!.services.replicas?.ownerOf(ref);
        expect(replicas[1]!.services.replicas?.ownerOf(ref)).toBe(owner);
        replicas.forEach((c, k) => {
          const held = c.host.heldGroups().some((g) => g.streamPrefix === sp);
          if (owner === `r${k + 1}`) {
            expect(metrics[k]).toContain(lagLine(sp, i + 1));
            expect(held).toBe(true);
          } else {
            expect(metrics[k]).not.toContain(`stream_prefix="${sp}"`);
            expect(held).toBe(false);
          }
        });
      }
    } finally {
      for (const c of replicas) await c.close();
      await redis.stop();
    }
  });
});
