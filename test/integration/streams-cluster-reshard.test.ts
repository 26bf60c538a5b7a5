/**
 * The streams on a 3-master Redis Cluster whose slots move (`redis-cli --cluster reshard`, done
 * here by hand with CLUSTER SETSLOT and MIGRATE): what the coordinator reads and writes on the
 * shard streams keeps answering, redirected to the slot's new master, rather than failing with
 * Redis's MOVED (docs/operations.md#lag).
 */
import { randomBytes } from 'node:crypto';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashSlot } from '../../src/store/hash-slot.js';
import { CHANGE, startTestCoordinator, type TestCoordinator } from '../support/coordinator.js';
import {
  moveSlotOf,
  randomKeyPrefix,
  slotOwner,
  startRedisCluster,
  type RedisClusterHandle,
} from '../support/redis-server.js';

let cluster: RedisClusterHandle;
let c: TestCoordinator;
let client: Cluster;

beforeAll(async () => {
  cluster = await startRedisCluster();
  client = new Cluster(cluster.nodes);
  c = await startTestCoordinator({
    store: 'redis',
    overrides: {
      'store.type': 'redis-cluster',
      'store.cluster-nodes': cluster.nodes,
      'store.key-prefix': randomKeyPrefix(),
      'streams.lag-cache': '0ms',
    },
  });
}, 90_000);
afterAll(async () => {
  client?.disconnect();
  await c?.close();
  await cluster?.stop();
});

const SHARDS = 8;

/** A group of {@link SHARDS} shards, one entry written to each shard stream. */
async function groupWithEntries(): Promise<string> {
  const sp = `reshard-${randomBytes(4).toString('hex')}`;
  const created = await c.call('POST', '/coord/v1/admin/groups', {
    user: 'writer',
    body: {
      streamPrefix: sp,
      consumerGroup: 'g',
      shardCount: SHARDS,
      startAt: 'earliest',
      ...CHANGE,
    },
  });
  expect(created.status).toBe(201);
  for (let shard = 0; shard < SHARDS; shard++) await client.xadd(`${sp}:${shard}`, '*', 'n', '1');
  return sp;
}

/** A shard whose master also holds another shard stream of `sp`: read in the same batch. */
async function shardSharingItsMaster(sp: string): Promise<number> {
  const owners: number[] = [];
  for (let shard = 0; shard < SHARDS; shard++) {
    owners.push(
      await slotOwner(cluster, Number(await client.cluster('KEYSLOT', `${sp}:${shard}`))),
    );
  }
  const shard = owners.findIndex((owner, i) => owners.some((o, j) => j !== i && o === owner));
  expect(shard).toBeGreaterThanOrEqual(0);
  return shard;
}

describe('shard streams whose slot moved to another master', () => {
  it('are read for lag at their new master', async () => {
    const sp = await groupWithEntries();
    const lagPath = `/coord/v1/monitoring/streams/${sp}/groups/g/lag`;
    expect((await c.call('GET', lagPath, { user: 'reader' })).status).toBe(200);

    const shard = await shardSharingItsMaster(sp);
    await moveSlotOf(cluster, `${sp}:${shard}`);

    const res = await c.call('GET', lagPath, { user: 'reader' });
    const body = (await res.json()) as {
      shards?: { shard: number; length: number; lagEntries: number }[];
      error?: unknown;
    };
    expect({ status: res.status, error: body.error }).toEqual({ status: 200, error: undefined });
    expect(body.shards?.[shard]).toMatchObject({ shard, length: 1, lagEntries: 1 });
    expect(body.shards?.every((s) => s.length === 1)).toBe(true);
  });
});

describe('dead letters on a Redis Cluster', () => {
  it('are replayed once when two replays of them run at once', async () => {
    const sp = await groupWithEntries();
    // Without a key each goes back to its own shard, a stream in another slot than its
    // dead-letter stream: the replay cannot be one script there.
    const letters = 40;
    for (let i = 0; i < letters; i++) {
      await client.xadd(
        `${sp}:0:dead`,
        '*',
        'originalId',
        `1-${i}`,
        'deliveries',
        '3',
        'error',
        'e',
        'n',
        String(i),
      );
    }
    expect(hashSlot(`${sp}:0:dead`)).not.toBe(hashSlot(`${sp}:0`));
    const replay = () =>
      c.call('POST', `/coord/v1/admin/streams/${sp}/groups/g/dead-letters/replay`, {
        user: 'writer',
        body: { shards: [0], limit: 1_000, ...CHANGE },
      });
    const answers = await Promise.all([replay(), replay(), replay()]);
    const bodies = (await Promise.all(answers.map((res) => res.json()))) as {
      replayed: { newId: string | null }[];
    }[];
    expect(answers.map((res) => res.status)).toEqual([200, 200, 200]);
    expect(bodies.reduce((sum, body) => sum + body.replayed.length, 0)).toBe(letters);
    // The one entry written at the start, then each dead letter once.
    expect(await client.xlen(`${sp}:0`)).toBe(1 + letters);
    expect(await client.xlen(`${sp}:0:dead`)).toBe(0);
    // Each for the group that replayed it alone (docs/protocol.md#dead-letters).
    const back = (await client.xrange(`${sp}:0`, '-', '+')).slice(1);
    expect(
      back.every(([, fields]) => fields[0] === '__coord_replay_for' && fields[1] === 'g'),
    ).toBe(true);
  });
});
