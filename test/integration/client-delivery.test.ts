/**
 * What a consumer does with the messages it read when the streams Redis fails one of its
 * commands, against a real coordinator (real HTTP) and a real redis-server: no message read is
 * left behind, unhandled or unacknowledged, while the consumer reads on.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  Consumer,
  CoordinatorClient,
  type ConsumerMessage,
  type ConsumerOptions,
} from '../../src/client/index.js';
import {
  CHANGE,
  useCoordinator,
  type TestCoordinator,
  QUICK_MEMBERSHIP,
} from '../support/coordinator.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';
import { monitorRedis } from '../support/redis-monitor.js';
import { TcpProxy } from '../support/tcp-proxy.js';

let coordinator: TestCoordinator;
let streams: RedisServerHandle;
const closers: (() => Promise<void> | void)[] = [];

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
beforeEach(async () => {
  streams = await startRedisServer();
});
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
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

/** A connection of the test's own to the streams Redis. */
function connection(): Redis {
  const redis = new Redis(streams.url, { maxRetriesPerRequest: null });
  redis.on('error', () => undefined);
  closers.push(() => redis.disconnect());
  return redis;
}

async function startConsumer(
  sp: string,
  handler: ConsumerOptions['handler'],
  extra: Partial<ConsumerOptions> = {},
) {
  const errors: unknown[] = [];
  const consumer = new Consumer({
    client: client('consumer'),
    redis: streams.url,
    streamPrefix: sp,
    consumerGroup: 'billing',
    memberId: 'consumer-a',
    blockMs: 50,
    sessionTimeoutMs: 6_000,
    handler,
    ...extra,
  });
  consumer.on('error', (error) => errors.push(error));
  closers.push(() => consumer.close());
  await consumer.start();
  return { consumer, errors };
}

/**
 * Keeps the streams Redis busy in a script (its other clients are answered `BUSY`) until
 * {@link stopBusyScript}; resolves once Redis answers so.
 */
async function startBusyScript(busy: Redis, probe: Redis): Promise<void> {
  await probe.config('SET', 'busy-reply-threshold', '20');
  void busy.eval('while true do end', 0).catch(() => undefined);
  await waitFor(
    () =>
      probe.ping().then(
        () => false,
        (error: Error) => error.message.startsWith('BUSY'),
      ),
    { what: 'Redis busy in the script' },
  );
}

/** Ends the script of {@link startBusyScript}; resolves once Redis answers again. */
async function stopBusyScript(probe: Redis): Promise<void> {
  await probe.script('KILL');
  await waitFor(
    () =>
      probe.ping().then(
        () => true,
        () => false,
      ),
    { what: 'Redis answering again' },
  );
}

describe('a consumer whose acknowledgement fails', () => {
  it('acknowledges the message later and handles the rest of the batch it had read', async () => {
    const sp = await createGroup(1);
    const stream = `${sp}:0`;
    const redis = connection();
    const busy = connection();
    const probe = connection();
    const handled: ConsumerMessage[] = [];
    let firstDone = false;
    const a = await startConsumer(sp, async (message) => {
      handled.push(message);
      if (!firstDone) {
        firstDone = true;
        // The message is done; Redis answers its XACK (and everything else) BUSY for a while.
        await startBusyScript(busy, probe);
      }
    });
    await waitFor(() => a.consumer.shards().length === 1, { what: 'a reads shard 0' });
    // One batch: all five are delivered to the consumer by one XREADGROUP.
    const pipeline = redis.multi();
    for (let i = 0; i < 5; i++) pipeline.xadd(stream, '*', 'key', `k-${i}`);
    await pipeline.exec();

    await waitFor(
      () => a.errors.some((error) => error instanceof Error && error.message.startsWith('BUSY')),
      { what: 'the XACK answered BUSY' },
    );
    await stopBusyScript(probe);
    await redis.xadd(stream, '*', 'key', 'k-5');
    await waitFor(() => handled.some((m) => m.key === 'k-5'), { what: 'k-5 handled' });

    // Every message is handled (once: the first one succeeded already) and acknowledged.
    await waitFor(() => handled.length >= 6, { timeoutMs: 10_000 }).catch(() => undefined);
    expect(handled.map((m) => m.key)).toEqual(['k-0', 'k-1', 'k-2', 'k-3', 'k-4', 'k-5']);
    await waitFor(async () => ((await redis.xpending(stream, 'billing')) as [number])[0] === 0, {
      timeoutMs: 5_000,
      what: 'nothing left pending',
    });
  });
});

describe('a consumer retrying rejected messages (maxDeliveries)', () => {
  it('retries them after a Redis command of the retry failed', async () => {
    const sp = await createGroup(1);
    const stream = `${sp}:0`;
    const redis = connection();
    const admin = connection();
    const handled: string[] = [];
    const a = await startConsumer(
      sp,
      (message) => {
        handled.push(message.key!);
        // Rejected the first time only: its retry succeeds.
        if (handled.length === 1) throw new Error('not yet');
      },
      { maxDeliveries: 3, retryBackoffMs: 50 },
    );
    await waitFor(() => a.consumer.shards().length === 1, { what: 'a reads shard 0' });
    // Redis refuses the retry's XCLAIM (an error reply, as BUSY or LOADING would be) until the
    // consumer has seen it refused.
    await admin.acl('SETUSER', 'default', '-xclaim');
    await redis.xadd(stream, '*', 'key', 'k-0');
    await waitFor(() => a.errors.some(isNoPerm), { what: 'the XCLAIM refused' });
    await admin.acl('SETUSER', 'default', '+xclaim');

    await waitFor(() => handled.length >= 2, { timeoutMs: 10_000 }).catch(() => undefined);
    expect(handled).toEqual(['k-0', 'k-0']);
    await waitFor(async () => ((await redis.xpending(stream, 'billing')) as [number])[0] === 0, {
      timeoutMs: 5_000,
      what: 'nothing left pending',
    });
  });

  it('moves one to the dead-letter stream after the move failed once', async () => {
    const sp = await createGroup(1);
    const stream = `${sp}:0`;
    const redis = connection();
    const admin = connection();
    const a = await startConsumer(
      sp,
      () => {
        throw new Error('never');
      },
      { maxDeliveries: 1, retryBackoffMs: 50 },
    );
    const moved: string[] = [];
    a.consumer.on('deadLettered', (letter) => moved.push(letter.id));
    await waitFor(() => a.consumer.shards().length === 1, { what: 'a reads shard 0' });
    // The move is a script: Redis refuses it until the consumer has seen it refused.
    await admin.acl('SETUSER', 'default', '-evalsha', '-eval');
    const id = await redis.xadd(stream, '*', 'key', 'k-0');
    await waitFor(() => a.errors.some(isNoPerm), { what: 'the move refused' });
    await admin.acl('SETUSER', 'default', '+evalsha', '+eval');

    await waitFor(() => moved.length >= 1, { timeoutMs: 10_000 }).catch(() => undefined);
    expect(moved).toEqual([id]);
    expect(await redis.xlen(`${stream}:dead:billing`)).toBe(1);
    expect(((await redis.xpending(stream, 'billing')) as [number])[0]).toBe(0);
  });
});

function isNoPerm(error: unknown): boolean {
  return error instanceof Error && error.message.includes('NOPERM');
}

describe('a consumer retiring a shard (scale-in) with a rejected message awaiting its retry', () => {
  // Without a retry policy too: a retired shard has no next owner to claim the message.
  it.each([
    ['with maxDeliveries', { maxDeliveries: 3, retryBackoffMs: 1_500 }],
    ['without a retry policy', {}],
  ])('retries it before it reports the shard retired (%s)', async (_, options) => {
    const sp = await createGroup(2);
    const redis = connection();
    const handled: string[] = [];
    const a = await startConsumer(
      sp,
      (message) => {
        handled.push(message.key!);
        if (handled.length === 1) throw new Error('not yet');
      },
      options,
    );
    const retired: number[] = [];
    a.consumer.on('revoked', (shards) => retired.push(...shards));
    await waitFor(() => a.consumer.shards().length === 2, { what: 'a reads both shards' });
    await redis.xadd(`${sp}:1`, '*', 'key', 'k-0');
    await waitFor(() => handled.length === 1, { what: 'k-0 rejected once' });

    // Shard 1 retires while k-0 waits for its retry.
    await client('writer').scale(sp, 'billing', 1, CHANGE);
    await waitFor(() => retired.includes(1), { timeoutMs: 10_000, what: 'shard 1 retired' });
    expect(handled).toEqual(['k-0', 'k-0']);
    expect(((await redis.xpending(`${sp}:1`, 'billing')) as [number])[0]).toBe(0);
  });
});

describe('a consumer whose connection to the streams Redis is reset', () => {
  it('handles the entries of a read whose reply the reset lost', async () => {
    const sp = await createGroup(1);
    const stream = `${sp}:0`;
    const redis = connection();
    const proxy = await TcpProxy.start(streams.url.replace('redis:', 'http:'));
    closers.push(() => proxy.close());
    const handled: string[] = [];
    const a = await startConsumer(sp, (message) => void handled.push(message.key!), {
      redis: proxy.url.replace('http:', 'redis:'),
      blockMs: 10_000,
    });
    await waitFor(() => a.consumer.shards().length === 1, { what: 'a reads shard 0' });
    await waitFor(async () => String(await redis.client('LIST')).includes('cmd=xreadgroup'), {
      what: 'a blocked in XREADGROUP',
    });
    // Redis hands k-0 to the blocked read; the reply never reaches the consumer.
    proxy.setMode('stall');
    await redis.xadd(stream, '*', 'key', 'k-0');
    await waitFor(async () => ((await redis.xpending(stream, 'billing')) as [number])[0] === 1, {
      what: 'k-0 delivered',
    });
    proxy.reset();
    proxy.setMode('pass');
    await redis.xadd(stream, '*', 'key', 'k-1');
    await waitFor(() => handled.includes('k-1'), { timeoutMs: 10_000, what: 'k-1 handled' });

    await waitFor(() => handled.includes('k-0'), { timeoutMs: 10_000 }).catch(() => undefined);
    expect(handled).toEqual(['k-0', 'k-1']);
  });
});

describe('a consumer retrying a rejected message whose claim reply is lost to a reset', () => {
  it('retries it all the same', async () => {
    const sp = await createGroup(1);
    const stream = `${sp}:0`;
    const redis = connection();
    const proxy = await TcpProxy.start(streams.url.replace('redis:', 'http:'));
    closers.push(() => proxy.close());
    const handled: string[] = [];
    const a = await startConsumer(
      sp,
      (message) => {
        handled.push(message.key!);
        if (handled.length === 1) throw new Error('not yet');
      },
      { redis: proxy.url.replace('http:', 'redis:'), maxDeliveries: 5, retryBackoffMs: 1_000 },
    );
    await waitFor(() => a.consumer.shards().length === 1, { what: 'a reads shard 0' });
    // The retry's XCLAIM runs in Redis; its reply, held up in the proxy, is lost to a reset,
    // and ioredis sends the XCLAIM again on its new connection.
    let reset = false;
    const monitor = await monitorRedis(streams.port, ([name]) => {
      if (name === 'xclaim' && !reset) {
        reset = true;
        proxy.reset();
        proxy.setMode('pass');
      }
    });
    closers.push(() => monitor.stop());
    await redis.xadd(stream, '*', 'key', 'k-0');
    await waitFor(() => handled.length === 1, { what: 'k-0 rejected once' });
    proxy.setMode('latency', 300);
    await waitFor(() => reset, { what: 'the XCLAIM reply lost' });

    await waitFor(() => handled.length >= 2, { timeoutMs: 10_000 }).catch(() => undefined);
    expect(handled).toEqual(['k-0', 'k-0']);
  });
});
