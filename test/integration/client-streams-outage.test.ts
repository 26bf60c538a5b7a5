/**
 * A consumer whose streams Redis cannot be read, against a real coordinator (real HTTP) and a
 * real redis-server that is killed and started again: the consumer gives its shards back
 * within `streamsUnreachableMs`, so that another member takes them, joins again once Redis
 * answers, and `close()` ends within its bound with Redis down. One shard whose stream key is
 * broken is that shard's trouble: the consumer keeps it and reads the others on.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  Consumer,
  CoordinatorClient,
  type ConsumerMessage,
  type ConsumerOptions,
  type StreamsUnreachableEvent,
} from '../../src/client/index.js';
import {
  CHANGE,
  useCoordinator,
  type TestCoordinator,
  QUICK_MEMBERSHIP,
} from '../support/coordinator.js';
import {
  freePort,
  startRedisServer,
  waitFor,
  type RedisServerHandle,
} from '../support/redis-server.js';
import { timed } from '../support/timed.js';

let coordinator: TestCoordinator;
let streams: RedisServerHandle;
const consumers: Consumer[] = [];

useCoordinator(
  {
    store: 'memory',
    overrides: {
      ...QUICK_MEMBERSHIP,
    },
  },
  (c) => {
    coordinator = c;
  },
);
// A server of its own per test: some tests kill it.
beforeEach(async () => {
  streams = await startRedisServer();
});
afterEach(async () => {
  await Promise.all(consumers.splice(0).map((c) => c.close()));
  await streams.stop();
});

function client(user: string): CoordinatorClient {
  return new CoordinatorClient({ baseUrl: coordinator.url, token: coordinator.token(user) });
}

async function createGroup(shardCount: number): Promise<string> {
  const sp = `orders-${randomBytes(4).toString('hex')}`;
  await client('writer').createGroup(sp, 'billing', shardCount, CHANGE);
  return sp;
}

interface MemberView {
  memberId: string;
  assignedShards: number[];
}

async function members(sp: string): Promise<{
  members: MemberView[];
  departedMembers: { memberId: string; state: string }[];
}> {
  const res = await coordinator.call(
    'GET',
    `/coord/v1/monitoring/streams/${sp}/groups/billing/members`,
    { user: 'reader' },
  );
  return (await res.json()) as Awaited<ReturnType<typeof members>>;
}

/** A started consumer of group `sp`, with what it handled, its errors and its outages. */
async function startConsumer(sp: string, memberId: string, extra: Partial<ConsumerOptions> = {}) {
  const seen: ConsumerMessage[] = [];
  const errors: unknown[] = [];
  const unreachable: StreamsUnreachableEvent[] = [];
  let reachable = 0;
  const consumer = new Consumer({
    client: client('consumer'),
    redis: streams.url,
    streamPrefix: sp,
    consumerGroup: 'billing',
    memberId,
    blockMs: 50,
    sessionTimeoutMs: 6_000,
    handler: (message) => {
      seen.push(message);
    },
    ...extra,
  });
  consumer.on('error', (error) => errors.push(error));
  consumer.on('streamsUnreachable', (event) => unreachable.push(event));
  consumer.on('streamsReachable', () => reachable++);
  consumers.push(consumer);
  await consumer.start();
  return { consumer, seen, errors, unreachable, reachable: () => reachable };
}

describe('a consumer whose streams Redis goes down', () => {
  it('gives its shards back within streamsUnreachableMs and joins again once Redis is back', async () => {
    const sp = await createGroup(2);
    const a = await startConsumer(sp, 'consumer-a', { streamsUnreachableMs: 1_000 });
    await waitFor(() => a.consumer.shards().length === 2, { what: 'a reads both shards' });

    await streams.kill();
    const killedAt = Date.now();
    await waitFor(() => a.unreachable.length === 1, { what: 'the shards given back' });
    expect(Date.now() - killedAt).toBeGreaterThanOrEqual(900);
    expect(a.unreachable[0]!.shards).toEqual([0, 1]);
    expect(a.unreachable[0]!.cause).not.toContain('\n');
    // The coordinator no longer counts it as a member: another member would get the shards.
    await waitFor(async () => (await members(sp)).members.length === 0, {
      what: 'consumer-a gone from the members view',
    });
    expect(Date.now() - killedAt).toBeLessThan(1_000 + 2_000);
    expect((await members(sp)).departedMembers).toContainEqual(
      expect.objectContaining({ memberId: 'consumer-a', state: 'left' }),
    );
    // Every failed reconnect meanwhile was one episode: one error event.
    expect(a.errors).toHaveLength(1);

    await streams.restart();
    await waitFor(() => a.reachable() === 1, { timeoutMs: 10_000, what: 'Redis seen back' });
    await waitFor(
      async () =>
        (await members(sp)).members.some(
          (m) => m.memberId === 'consumer-a' && m.assignedShards.length === 2,
        ),
      { timeoutMs: 10_000, what: 'consumer-a a member again with both shards' },
    );
    await waitFor(() => a.consumer.shards().length === 2, { what: 'a reads both shards again' });
    const redis = streams.client();
    for (const shard of [0, 1]) {
      await waitFor(
        async () => ((await redis.xinfo('GROUPS', `${sp}:${shard}`)) as unknown[]).length === 1,
        { what: `the consumer group of shard ${shard} created again` },
      );
      await redis.xadd(`${sp}:${shard}`, '*', 'key', `after-${shard}`);
    }
    await waitFor(() => a.seen.length === 2, { what: 'messages read after the outage' });
    expect(a.seen.map((m) => m.key).sort()).toEqual(['after-0', 'after-1']);
  });

  it('with a streams URL where nothing listens: a member that can read takes every shard', async () => {
    const sp = await createGroup(4);
    const wrong = `redis://127.0.0.1:${await freePort()}`;
    const a = await startConsumer(sp, 'consumer-a', { redis: wrong, streamsUnreachableMs: 500 });
    const b = await startConsumer(sp, 'consumer-b');
    await waitFor(() => a.unreachable.length >= 1, { what: 'consumer-a gives its shards back' });
    expect(a.unreachable[0]!.shards.length).toBeGreaterThan(0);
    expect(a.unreachable[0]!.cause).toContain('ECONNREFUSED');
    await waitFor(() => b.consumer.shards().length === 4, {
      timeoutMs: 10_000,
      what: 'consumer-b reads every shard',
    });
    const view = await members(sp);
    expect(view.members.map((m) => m.memberId)).toEqual(['consumer-b']);
    expect(view.members[0]!.assignedShards).toEqual([0, 1, 2, 3]);
    expect(a.consumer.shards()).toEqual([]);
    expect(a.errors).toHaveLength(1);
    expect(b.errors).toEqual([]);
  });
});

describe('a consumer with one broken shard stream', () => {
  it('keeps every shard and reads the others on; reports the broken one once; reads it once fixed', async () => {
    const sp = await createGroup(2);
    const redis = streams.client();
    // Shard 1's stream key holds a string: every command on it is answered WRONGTYPE.
    await redis.set(`${sp}:1`, 'not a stream');
    const a = await startConsumer(sp, 'consumer-a', { streamsUnreachableMs: 500 });
    await waitFor(() => a.consumer.shards().length === 2, { what: 'a holds both shards' });
    // Shard 0 is read throughout, for five times streamsUnreachableMs: the broken key is no
    // outage of the streams Redis, and nothing is given back.
    const started = Date.now();
    for (let i = 0; Date.now() - started < 2_500; i++) {
      await redis.xadd(`${sp}:0`, '*', 'key', `k${i}`);
      await waitFor(() => a.seen.some((m) => m.key === `k${i}`), { what: `k${i} read` });
    }
    expect(a.unreachable).toEqual([]);
    expect(a.consumer.shards()).toEqual([0, 1]);
    const view = await members(sp);
    expect(view.members).toEqual([
      expect.objectContaining({ memberId: 'consumer-a', assignedShards: [0, 1] }),
    ]);
    // Every retry of shard 1 failed the same way: one error event.
    expect(a.errors).toHaveLength(1);
    expect(String(a.errors[0])).toContain('WRONGTYPE');

    // Fixed: the next retry creates the stream and its consumer group, and shard 1 is read.
    await redis.del(`${sp}:1`);
    await waitFor(
      async () =>
        (await redis.exists(`${sp}:1`)) === 1 &&
        ((await redis.xinfo('GROUPS', `${sp}:1`)) as unknown[]).length === 1,
      { what: 'the consumer group of shard 1 created' },
    );
    await redis.xadd(`${sp}:1`, '*', 'key', 'fixed');
    await waitFor(() => a.seen.some((m) => m.key === 'fixed'), { what: 'shard 1 read' });
    expect(a.unreachable).toEqual([]);
    expect(a.errors).toHaveLength(1);
  });
});

async function consumption(sp: string, action: 'PAUSE' | 'RESUME', shards: number[]) {
  const res = await coordinator.call(
    'POST',
    `/coord/v1/admin/streams/${sp}/groups/billing/consumption`,
    { user: 'admin', body: { ...CHANGE, action, shards } },
  );
  expect(res.status).toBe(200);
}

describe('a shard broken again after it came back', () => {
  it('is reported again: each reader of the shard starts without trouble', async () => {
    const sp = await createGroup(2);
    const redis = streams.client();
    await redis.set(`${sp}:1`, 'not a stream');
    const a = await startConsumer(sp, 'consumer-a', { streamsUnreachableMs: 500 });
    await waitFor(() => a.errors.length === 1, { what: 'the broken shard reported' });
    // The shard is taken away (paused here) while broken, fixed meanwhile, and comes back.
    await consumption(sp, 'PAUSE', [1]);
    await waitFor(() => a.consumer.shards().length === 1, { what: 'shard 1 given up' });
    await redis.del(`${sp}:1`);
    await consumption(sp, 'RESUME', [1]);
    await waitFor(() => a.consumer.shards().length === 2, { what: 'shard 1 back' });
    await redis.xadd(`${sp}:1`, '*', 'key', 'fixed');
    await waitFor(() => a.seen.some((m) => m.key === 'fixed'), { what: 'shard 1 read' });
    // Broken again: a new episode, reported.
    await redis.del(`${sp}:1`);
    await redis.set(`${sp}:1`, 'broken again');
    await waitFor(() => a.errors.length === 2, { what: 'the new breakage reported' });
    expect(a.unreachable).toEqual([]);
  });
});

describe('close() with the streams Redis down', () => {
  it('resolves within closeTimeoutMs and the member leaves', async () => {
    const sp = await createGroup(2);
    const wrong = `redis://127.0.0.1:${await freePort()}`;
    const a = await startConsumer(sp, 'consumer-a', {
      redis: wrong,
      streamsUnreachableMs: 60_000,
      closeTimeoutMs: 1_000,
    });
    await waitFor(() => a.consumer.shards().length === 2, { what: 'a holds both shards' });
    consumers.splice(consumers.indexOf(a.consumer), 1);
    const took = await timed(a.consumer.close(), 5_000, 'close()');
    expect(took).toBeLessThan(1_000 + 500);
    const view = await members(sp);
    expect(view.members).toEqual([]);
    expect(view.departedMembers).toContainEqual(
      expect.objectContaining({ memberId: 'consumer-a', state: 'left' }),
    );
  });
});
