/**
 * Moving a consumer group's position on its shard streams, on a real redis-server and a real
 * Redis Cluster: what the plan counts, and what members read after the move.
 */
import { randomBytes } from 'node:crypto';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoordinatorError } from '../../src/errors.js';
import {
  moveShardPosition,
  planPositions,
  type ResetTo,
  type ShardPositionPlan,
} from '../../src/streams/positions.js';
import {
  freePort,
  startRedisCluster,
  startRedisServer,
  type RedisClusterHandle,
  type RedisServerHandle,
} from '../support/redis-server.js';

const GROUP = 'billing';

function prefix(): string {
  return `orders-${randomBytes(4).toString('hex')}`;
}

/** The ids `10-0`, `20-0`, … of `count` entries. */
function ids(count: number, from = 1): string[] {
  return Array.from({ length: count }, (_, i) => `${(from + i) * 10}-0`);
}

async function write(client: Redis | Cluster, stream: string, entryIds: readonly string[]) {
  for (const id of entryIds) await client.xadd(stream, id, 'n', id);
}

/** Reads up to `count` new entries as consumer `c1`; their ids. */
async function readNew(client: Redis | Cluster, stream: string, count = 1_000): Promise<string[]> {
  const reply = (await client.xreadgroup(
    'GROUP',
    GROUP,
    'c1',
    'COUNT',
    count,
    'STREAMS',
    stream,
    '>',
  )) as [string, [string, string[]][]][] | null;
  return reply === null ? [] : reply[0]![1].map(([id]) => id);
}

async function pendingIds(client: Redis | Cluster, stream: string): Promise<string[]> {
  const reply = (await client.xpending(stream, GROUP, '-', '+', 100_000)) as [string][];
  return reply.map(([id]) => id);
}

/** The group's fields in XINFO GROUPS, or undefined. */
async function groupInfo(
  client: Redis | Cluster,
  stream: string,
): Promise<Record<string, unknown> | undefined> {
  const groups = (await client.xinfo('GROUPS', stream)) as unknown[][];
  for (const fields of groups) {
    const info: Record<string, unknown> = {};
    for (let i = 0; i < fields.length; i += 2) info[String(fields[i])] = fields[i + 1];
    if (info.name === GROUP) return info;
  }
  return undefined;
}

async function planOne(
  client: Redis | Cluster,
  streamPrefix: string,
  to: ResetTo,
  countBound?: number,
): Promise<ShardPositionPlan> {
  const [plan] = await planPositions(client, {
    streamPrefix,
    consumerGroup: GROUP,
    shards: [0],
    to,
    ...(countBound === undefined ? {} : { countBound }),
  });
  return plan!;
}

/**
 * Ten entries `10-0` … `100-0`; the group read the first six, acknowledged four: `50-0` and
 * `60-0` are pending, `70-0` … `100-0` not delivered yet.
 */
async function readSome(client: Redis | Cluster, streamPrefix: string): Promise<string> {
  const stream = `${streamPrefix}:0`;
  await write(client, stream, ids(10));
  await client.xgroup('CREATE', stream, GROUP, '0');
  expect(await readNew(client, stream, 6)).toEqual(ids(6));
  await client.xack(stream, GROUP, ...ids(4));
  return stream;
}

/** The cases that must hold on a standalone Redis and on a Cluster alike. */
function commonCases(clientOf: () => Redis | Cluster): void {
  it('plans earliest: every delivered entry again, nothing skipped', async () => {
    const client = clientOf();
    const sp = prefix();
    const stream = await readSome(client, sp);
    expect(await planOne(client, sp, 'earliest')).toEqual({
      shard: 0,
      stream,
      from: '60-0',
      to: '0-0',
      redeliver: 6,
      skip: 0,
      exact: true,
      pendingSkipped: 0,
    });
  });

  it('plans latest: the undelivered entries skipped, the pending ones acknowledged', async () => {
    const client = clientOf();
    const sp = prefix();
    const stream = await readSome(client, sp);
    expect(await planOne(client, sp, 'latest')).toEqual({
      shard: 0,
      stream,
      from: '60-0',
      to: '100-0',
      redeliver: 0,
      skip: 4,
      exact: true,
      pendingSkipped: 2,
    });
    // The plan wrote nothing.
    expect((await groupInfo(client, stream))?.['last-delivered-id']).toBe('60-0');
    expect(await pendingIds(client, stream)).toEqual(['50-0', '60-0']);
  });

  it('moves to latest with acknowledgement: only later entries are read, nothing skipped stays pending', async () => {
    const client = clientOf();
    const sp = prefix();
    const stream = await readSome(client, sp);
    expect(
      await moveShardPosition(client, {
        stream,
        consumerGroup: GROUP,
        to: '100-0',
        acknowledgeUpTo: true,
      }),
    ).toEqual({ acknowledged: 2, created: false, repeated: false });
    expect(await pendingIds(client, stream)).toEqual([]);
    expect(await readNew(client, stream)).toEqual([]);
    await write(client, stream, ['110-0']);
    expect(await readNew(client, stream)).toEqual(['110-0']);
  });

  it('moves to earliest: every entry is delivered again', async () => {
    const client = clientOf();
    const sp = prefix();
    const stream = await readSome(client, sp);
    expect(
      await moveShardPosition(client, {
        stream,
        consumerGroup: GROUP,
        to: '0-0',
        acknowledgeUpTo: false,
      }),
    ).toEqual({ acknowledged: 0, created: false, repeated: false });
    expect(await readNew(client, stream)).toEqual(ids(10));
  });

  it('makes a named move once: a late repeat does not take back what members read since', async () => {
    const client = clientOf();
    const sp = prefix();
    const stream = await readSome(client, sp);
    const move = {
      stream,
      consumerGroup: GROUP,
      to: '80-0',
      acknowledgeUpTo: true,
      moveId: '1700000000000:reset-a',
    };
    expect(await moveShardPosition(client, move)).toEqual({
      acknowledged: 2,
      created: false,
      repeated: false,
    });
    // The shard is granted again: members read on from the new position.
    expect(await readNew(client, stream, 1)).toEqual(['90-0']);
    // The same move, sent late by an owner that lost the group meanwhile.
    expect(await moveShardPosition(client, move)).toEqual({
      acknowledged: 0,
      created: false,
      repeated: true,
    });
    expect((await groupInfo(client, stream))?.['last-delivered-id']).toBe('90-0');
    expect(await pendingIds(client, stream)).toEqual(['90-0']);
    expect(await readNew(client, stream)).toEqual(['100-0']);

    // A later reset moves again, and its marker replaces the first one.
    const replay = { ...move, to: '0-0', acknowledgeUpTo: false, moveId: '1700000100000:reset-b' };
    expect(await moveShardPosition(client, replay)).toMatchObject({ repeated: false });
    expect((await groupInfo(client, stream))?.['last-delivered-id']).toBe('0-0');
    const consumers = (await client.xinfo('CONSUMERS', stream, GROUP)) as unknown[][];
    expect(consumers.map((fields) => fields[1]).sort()).toEqual([
      'c1',
      'coord-move:1700000100000:reset-b',
    ]);

    // A missing group is created with the marker: a repeat does not set it back either.
    const missing = `${prefix()}:0`;
    const create = { ...move, stream: missing, to: '0-0', moveId: '1700000200000:reset-c' };
    expect(await moveShardPosition(client, create)).toMatchObject({ created: true });
    await write(client, missing, ['5-0']);
    expect(await readNew(client, missing)).toEqual(['5-0']);
    expect(await moveShardPosition(client, create)).toMatchObject({ repeated: true });
    expect((await groupInfo(client, missing))?.['last-delivered-id']).toBe('5-0');
  });

  it('creates a missing stream and group at the position', async () => {
    const client = clientOf();
    const sp = prefix();
    const stream = `${sp}:0`;
    const plan = await planOne(client, sp, 'latest');
    expect(plan).toMatchObject({ from: null, to: '0-0', redeliver: 0, skip: 0, exact: true });
    expect(
      await moveShardPosition(client, {
        stream,
        consumerGroup: GROUP,
        to: plan.to,
        acknowledgeUpTo: true,
      }),
    ).toEqual({ acknowledged: 0, created: true, repeated: false });
    expect((await groupInfo(client, stream))?.['last-delivered-id']).toBe('0-0');
    await write(client, stream, ['5-0']);
    expect(await readNew(client, stream)).toEqual(['5-0']);
  });
}

describe('positions on a standalone Redis', () => {
  let server: RedisServerHandle;
  let client: Redis;
  beforeAll(async () => {
    server = await startRedisServer();
    client = server.client();
  });
  afterAll(async () => {
    await server.stop();
  });

  commonCases(() => client);

  it('counts by reading the stream where Redis cannot say the lag, deleted entries left out', async () => {
    const sp = prefix();
    const stream = await readSome(client, sp);
    await client.xdel(stream, '30-0', '80-0');
    expect(await planOne(client, sp, 'earliest')).toMatchObject({ redeliver: 5, exact: true });
    expect(await planOne(client, sp, 'latest')).toMatchObject({
      skip: 3,
      pendingSkipped: 2,
      exact: true,
    });
    expect(await planOne(client, sp, { ids: { '0': '20-0' } })).toMatchObject({
      from: '60-0',
      to: '20-0',
      redeliver: 3,
      skip: 0,
      pendingSkipped: 0,
      exact: true,
    });
    expect(await planOne(client, sp, { ids: { '0': '90-0' } })).toMatchObject({
      to: '90-0',
      redeliver: 0,
      skip: 2,
      pendingSkipped: 2,
      exact: true,
    });
    expect(await planOne(client, sp, { ids: { '0': '55-0' } })).toMatchObject({
      redeliver: 1,
      pendingSkipped: 1,
      exact: true,
    });
  });

  it('moves to a time: the first entry at or after it is the next delivered', async () => {
    const sp = prefix();
    const stream = await readSome(client, sp);
    expect(await planOne(client, sp, { timestamp: 45 })).toMatchObject({
      from: '60-0',
      to: '40-0',
      redeliver: 2,
      skip: 0,
      pendingSkipped: 0,
    });
    expect((await planOne(client, sp, { timestamp: 50 })).to).toBe('40-0');
    expect((await planOne(client, sp, { timestamp: 51 })).to).toBe('50-0');
    expect((await planOne(client, sp, { timestamp: 10 })).to).toBe('0-0');
    expect((await planOne(client, sp, { timestamp: 0 })).to).toBe('0-0');
    expect(await planOne(client, sp, { timestamp: 85 })).toMatchObject({
      to: '80-0',
      redeliver: 0,
      skip: 2,
      pendingSkipped: 2,
    });
    const back = await planOne(client, sp, { timestamp: 45 });
    await moveShardPosition(client, {
      stream,
      consumerGroup: GROUP,
      to: back.to,
      acknowledgeUpTo: false,
    });
    expect(await readNew(client, stream, 1)).toEqual(['50-0']);
    const ahead = await planOne(client, sp, { timestamp: 85 });
    expect(
      await moveShardPosition(client, {
        stream,
        consumerGroup: GROUP,
        to: ahead.to,
        acknowledgeUpTo: true,
      }),
    ).toEqual({ acknowledged: 2, created: false, repeated: false });
    expect(await pendingIds(client, stream)).toEqual([]);
    expect(await readNew(client, stream)).toEqual(['90-0', '100-0']);
  });

  it('creates a missing group on a stream with entries: the entries up to the position are skipped', async () => {
    const sp = prefix();
    const stream = `${sp}:0`;
    await write(client, stream, ids(3));
    const plan = await planOne(client, sp, 'latest');
    expect(plan).toEqual({
      shard: 0,
      stream,
      from: null,
      to: '30-0',
      redeliver: 0,
      skip: 3,
      exact: true,
      pendingSkipped: 0,
    });
    expect((await planOne(client, sp, { ids: { '0': '20-0' } })).skip).toBe(2);
    expect(await planOne(client, sp, 'earliest')).toMatchObject({ to: '0-0', skip: 0 });
    expect(
      await moveShardPosition(client, {
        stream,
        consumerGroup: GROUP,
        to: plan.to,
        acknowledgeUpTo: false,
      }),
    ).toEqual({ acknowledged: 0, created: true, repeated: false });
    expect(await readNew(client, stream)).toEqual([]);
    await write(client, stream, ['40-0']);
    expect(await readNew(client, stream)).toEqual(['40-0']);
  });

  it('a move run twice ends in the same state as once', async () => {
    const sp = prefix();
    const stream = await readSome(client, sp);
    const move = { stream, consumerGroup: GROUP, to: '80-0', acknowledgeUpTo: true };
    expect(await moveShardPosition(client, move)).toEqual({
      acknowledged: 2,
      created: false,
      repeated: false,
    });
    const once = {
      info: await groupInfo(client, stream),
      pending: await pendingIds(client, stream),
    };
    expect(await moveShardPosition(client, move)).toEqual({
      acknowledged: 0,
      created: false,
      repeated: false,
    });
    expect({
      info: await groupInfo(client, stream),
      pending: await pendingIds(client, stream),
    }).toEqual(once);
    expect(once.info?.['last-delivered-id']).toBe('80-0');

    const missing = `${prefix()}:0`;
    const create = { stream: missing, consumerGroup: GROUP, to: '0-0', acknowledgeUpTo: true };
    expect(await moveShardPosition(client, create)).toEqual({
      acknowledged: 0,
      created: true,
      repeated: false,
    });
    expect(await moveShardPosition(client, create)).toEqual({
      acknowledged: 0,
      created: false,
      repeated: false,
    });
    expect((await groupInfo(client, missing))?.['last-delivered-id']).toBe('0-0');
  });

  it('a replay keeps the pending entries before the position pending', async () => {
    const sp = prefix();
    const stream = await readSome(client, sp);
    expect(
      await moveShardPosition(client, {
        stream,
        consumerGroup: GROUP,
        to: '55-0',
        acknowledgeUpTo: false,
      }),
    ).toEqual({ acknowledged: 0, created: false, repeated: false });
    expect(await pendingIds(client, stream)).toEqual(['50-0', '60-0']);
    expect(await readNew(client, stream, 1)).toEqual(['60-0']);
  });

  it('says exact: false when a count reaches its bound, and exact at the bound itself', async () => {
    const sp = prefix();
    await readSome(client, sp);
    const at = { ids: { '0': '90-0' } };
    expect(await planOne(client, sp, at, 2)).toMatchObject({ skip: 2, exact: false });
    expect(await planOne(client, sp, at, 3)).toMatchObject({ skip: 3, exact: true });
    // Redis's own lag needs no count: the bound does not apply.
    expect(await planOne(client, sp, 'latest', 1)).toMatchObject({ skip: 4, exact: true });
    expect(await planOne(client, sp, { ids: { '0': '5-0' } }, 5)).toMatchObject({
      redeliver: 5,
      exact: false,
    });
    expect(await planOne(client, sp, { ids: { '0': '90-0' } }, 1)).toMatchObject({
      skip: 1,
      pendingSkipped: 1,
      exact: false,
    });
  });

  it('counts and acknowledges beyond one script call', async () => {
    const sp = prefix();
    const stream = `${sp}:0`;
    const total = 25_000;
    const pipeline = client.pipeline();
    for (let i = 1; i <= total; i++) pipeline.xadd(stream, `${i}-0`, 'n', String(i));
    await pipeline.exec();
    await client.xgroup('CREATE', stream, GROUP, '0');
    expect((await readNew(client, stream, 2_500)).length).toBe(2_500);
    const to = { ids: { '0': `${total - 1}-0` } };
    expect(await planOne(client, sp, to)).toMatchObject({
      redeliver: 0,
      skip: total - 2_501,
      pendingSkipped: 2_500,
      exact: true,
    });
    expect(await planOne(client, sp, { ids: { '0': '2499-0' } })).toMatchObject({
      pendingSkipped: 2_499,
      exact: true,
    });
    expect(await planOne(client, sp, to, 20_000)).toMatchObject({ skip: 20_000, exact: false });
    expect(
      await moveShardPosition(client, {
        stream,
        consumerGroup: GROUP,
        to: '2400-0',
        acknowledgeUpTo: true,
      }),
    ).toEqual({ acknowledged: 2_400, created: false, repeated: false });
    expect(await pendingIds(client, stream)).toEqual(
      Array.from({ length: 100 }, (_, i) => `${2_401 + i}-0`),
    );
  });

  it('plans several shards at once, each on its own stream', async () => {
    const sp = prefix();
    await write(client, `${sp}:0`, ids(2));
    await write(client, `${sp}:2`, ids(5));
    await client.xgroup('CREATE', `${sp}:2`, GROUP, '20-0');
    const plans = await planPositions(client, {
      streamPrefix: sp,
      consumerGroup: GROUP,
      shards: [2, 0, 1],
      to: 'latest',
    });
    expect(plans.map((p) => [p.shard, p.stream, p.from, p.to, p.skip])).toEqual([
      [2, `${sp}:2`, '20-0', '50-0', 3],
      [0, `${sp}:0`, null, '20-0', 2],
      [1, `${sp}:1`, null, '0-0', 0],
    ]);
  });

  it('refuses ids it cannot set, before any command', async () => {
    const sp = prefix();
    await expect(
      moveShardPosition(client, {
        stream: `${sp}:0`,
        consumerGroup: GROUP,
        to: '$',
        acknowledgeUpTo: false,
      }),
    ).rejects.toMatchObject({ code: 'INVALID_STREAM_ID' });
    await expect(
      planPositions(client, {
        streamPrefix: sp,
        consumerGroup: GROUP,
        shards: [0, 1],
        to: { ids: { '0': '1-0' } },
      }),
    ).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    await expect(
      planPositions(client, {
        streamPrefix: sp,
        consumerGroup: GROUP,
        shards: [0, 0],
        to: 'latest',
      }),
    ).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(await client.exists(`${sp}:0`)).toBe(0);
  });

  it('answers STREAMS_UNAVAILABLE when the streams Redis cannot be reached', async () => {
    const down = new Redis({
      port: await freePort(),
      host: '127.0.0.1',
      lazyConnect: true,
      enableOfflineQueue: false,
      retryStrategy: () => null,
      maxRetriesPerRequest: 0,
    });
    down.on('error', () => undefined);
    try {
      const plan = planPositions(down, {
        streamPrefix: prefix(),
        consumerGroup: GROUP,
        shards: [0],
        to: 'latest',
      });
      await expect(plan).rejects.toBeInstanceOf(CoordinatorError);
      await expect(plan).rejects.toMatchObject({ code: 'STREAMS_UNAVAILABLE' });
      await expect(
        moveShardPosition(down, {
          stream: `${prefix()}:0`,
          consumerGroup: GROUP,
          to: '0-0',
          acknowledgeUpTo: true,
        }),
      ).rejects.toMatchObject({ code: 'STREAMS_UNAVAILABLE' });
    } finally {
      down.disconnect();
    }
  });
});

describe('positions on a 3-master Redis Cluster', () => {
  let cluster: RedisClusterHandle;
  let client: Cluster;
  beforeAll(async () => {
    cluster = await startRedisCluster();
    client = new Cluster(cluster.nodes);
  });
  afterAll(async () => {
    // Either is missing when the cluster did not start: its error is the one to read.
    await client?.quit();
    await cluster?.stop();
  });

  commonCases(() => client);

  it('plans and moves shards held by different masters', async () => {
    const sp = prefix();
    const shards = [0, 1, 2, 3, 4, 5, 6, 7];
    const slots = new Set<number>();
    for (const shard of shards) {
      const stream = `${sp}:${shard}`;
      slots.add(Number(await client.cluster('KEYSLOT', stream)));
      await write(client, stream, ids(shard + 1));
      await client.xgroup('CREATE', stream, GROUP, '0');
      await readNew(client, stream, 1);
    }
    expect(slots.size).toBeGreaterThan(1);
    const plans = await planPositions(client, {
      streamPrefix: sp,
      consumerGroup: GROUP,
      shards,
      to: 'latest',
    });
    expect(plans.map((p) => [p.shard, p.from, p.to, p.skip, p.pendingSkipped, p.exact])).toEqual(
      shards.map((shard) => [shard, '10-0', `${(shard + 1) * 10}-0`, shard, 1, true]),
    );
    for (const plan of plans) {
      expect(
        await moveShardPosition(client, {
          stream: plan.stream,
          consumerGroup: GROUP,
          to: plan.to,
          acknowledgeUpTo: true,
        }),
      ).toEqual({ acknowledged: 1, created: false, repeated: false });
      expect(await pendingIds(client, plan.stream)).toEqual([]);
      expect(await readNew(client, plan.stream)).toEqual([]);
    }
  });
});
