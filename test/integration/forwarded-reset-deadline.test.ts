/**
 * A position reset forwarded to its group's owner is answered before the forwarder's deadline
 * (docs/operations.md#a-paused-owner, #replay-or-skip): when the plan over many shards on a slow
 * streams Redis would outlast it, the owner answers 503 `FORWARDED_PLAN_TOO_SLOW` (nothing done)
 * instead of going on and starting the reset after the forwarder told the caller the owner may
 * be down. Two replicas in this process on one real redis-server, the streams behind a TCP proxy
 * that holds every chunk 100 ms.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CHANGE,
  startReplicaOn,
  type TestCoordinator,
  waitUntilSeenByEach,
} from '../support/coordinator.js';
import {
  randomKeyPrefix,
  startRedisServer,
  waitFor,
  type RedisServerHandle,
} from '../support/redis-server.js';
import { TcpProxy } from '../support/tcp-proxy.js';

const SHARDS = 1024;

let redis: RedisServerHandle;
let streams: TcpProxy;
const replicas = new Map<string, TestCoordinator>();
const prefix = randomKeyPrefix();

beforeAll(async () => {
  redis = await startRedisServer();
  streams = await TcpProxy.start(redis.url.replace('redis://', 'http://'));
  const streamsUrl = streams.url.replace('http://', 'redis://');
  for (const id of ['r1', 'r2'])
    replicas.set(id, await startReplicaOn(redis.url, prefix, id, { 'streams.url': streamsUrl }));
  await waitUntilSeenByEach(replicas.values(), ['r1', 'r2']);
}, 60_000);
afterAll(async () => {
  for (const c of replicas.values()) await c.close();
  await streams?.close();
  await redis?.stop();
});

interface Answer {
  error?: { code: string; details?: Record<string, unknown> };
  consumption?: { reset: unknown; lastReset: unknown };
}

/** Creates groups `<name>-<i>:g` of `shardCount` shards until one is owned by r1; its prefix. */
async function groupOwnedByR1(name: string, shardCount: number): Promise<string> {
  const r1 = replicas.get('r1')!;
  for (let i = 0; i < 50; i++) {
    const res = await r1.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: `${name}-${i}`, consumerGroup: 'g', shardCount, ...CHANGE },
    });
    expect(res.status).toBe(201);
    if (res.headers.get('x-coord-owner') === 'r1') return `${name}-${i}`;
  }
  throw new Error('no group owned by r1');
}

describe('a forwarded position reset on a slow streams Redis', () => {
  it('whose moves outlast the forward deadline is answered 202 at once; the moves go on', async () => {
    const sp = await groupOwnedByR1('moves', 16);
    // Each shard read up to an entry, so that a reset to the beginning moves every one of them.
    const direct = redis.client();
    for (let shard = 0; shard < 16; shard++) {
      await direct.xadd(`${sp}:${shard}`, '*', 'n', '1');
      await direct.xgroup('CREATE', `${sp}:${shard}`, 'g', '$');
    }
    const other = replicas.get('r2')!;
    // Every chunk held 100 ms: the plan of 16 shards fits the forwarded bound; 16 moves, each
    // planned again and made in turn, do not fit the forwarder's 2 s.
    streams.setMode('latency', 100);
    try {
      const res = await other.call('POST', `/coord/v1/admin/streams/${sp}/groups/g/positions`, {
        user: 'writer',
        body: { to: 'earliest', dryRun: false, ...CHANGE },
      });
      expect(res.status).toBe(202);
      await waitFor(
        async () => {
          const read = await other.call('GET', `/coord/v1/monitoring/streams/${sp}/groups/g`, {
            user: 'reader',
          });
          return ((await read.json()) as Answer).consumption?.lastReset != null;
        },
        { what: 'the reset to end', timeoutMs: 60_000 },
      );
    } finally {
      streams.setMode('pass');
    }
    for (let shard = 0; shard < 16; shard++) {
      const groups = (await direct.xinfo('GROUPS', `${sp}:${shard}`)) as unknown[][];
      expect(groups[0]![7]).toBe('0-0');
    }
  }, 120_000);

  it('is answered by the owner before the forwarder gives up, and no reset starts', async () => {
    const sp = await groupOwnedByR1('slow', SHARDS);
    const owner = replicas.get('r1')!;
    const other = replicas.get('r2')!;
    const positions = `/coord/v1/admin/streams/${sp}/groups/g/positions`;
    const view = `/coord/v1/monitoring/streams/${sp}/groups/g`;

    // Every chunk held 400 ms: each command answers within the reader's 1 s, but the plan (the
    // streams' TIME, then the shards) takes 1.6 s at least, past the forwarded bound (1.5 s).
    streams.setMode('latency', 400);
    try {
      const res = await other.call('POST', positions, {
        user: 'writer',
        body: { to: 'earliest', dryRun: false, ...CHANGE },
      });
      const body = (await res.json()) as Answer;
      expect(res.status).toBe(503);
      expect(res.headers.get('x-coord-owner')).toBe('r1');
      expect(body.error?.code).toBe('FORWARDED_PLAN_TOO_SLOW');

      // The forwarding replica does not take the owner for a paused one.
      const read = await other.call('GET', view, { user: 'reader' });
      expect(read.status).toBe(200);
    } finally {
      streams.setMode('pass');
    }
    // A plan sent to the owner itself: its commands queue behind those of the forwarded
    // request's plan on the one streams connection, so once one is answered 200 that plan ended.
    await waitFor(
      async () =>
        (
          await owner.call('POST', positions, {
            user: 'writer',
            body: { to: 'earliest', dryRun: true, ...CHANGE },
          })
        ).status === 200,
      { what: 'a direct plan answered' },
    );
    for (const c of [owner, other]) {
      const res = await c.call('GET', view, { user: 'reader' });
      expect(res.status).toBe(200);
      const group = (await res.json()) as Answer;
      expect(group.consumption?.reset).toBeNull();
      expect(group.consumption?.lastReset).toBeNull();
    }
  }, 120_000);
});
