/**
 * The SDK against a real coordinator (real HTTP) and real Redis streams: CoordinatorClient,
 * Consumer and Producer together, as an application would use them.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  ConflictError,
  Consumer,
  CoordinatorClient,
  InvalidRequestError,
  NotFoundError,
  Producer,
} from '../../src/client/index.js';
import { scaleDuplicateSensitive } from '../../src/cli/scale-procedure.js';
import {
  CHANGE,
  PASSWORD,
  useCoordinator,
  type TestCoordinator,
  QUICK_MEMBERSHIP,
} from '../support/coordinator.js';
import {
  duplicateCount,
  lostKeys,
  overlaps,
  type Processed,
  recordingHandler,
} from '../support/processing-log.js';
import {
  freePort,
  startRedisServer,
  waitFor,
  type RedisServerHandle,
} from '../support/redis-server.js';
import { TcpProxy } from '../support/tcp-proxy.js';

let streams: RedisServerHandle;
let coordinator: TestCoordinator;
const closers: (() => Promise<void>)[] = [];

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
beforeAll(async () => {
  streams = await startRedisServer();
});
afterAll(async () => {
  await streams.stop();
});
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

function client(user: string): CoordinatorClient {
  return new CoordinatorClient({ baseUrl: coordinator.url, token: coordinator.token(user) });
}

async function createGroup(shardCount: number): Promise<string> {
  const sp = `orders-${randomBytes(4).toString('hex')}`;
  await client('writer').createGroup(sp, 'billing', shardCount, CHANGE);
  return sp;
}

/** A consumer whose handler records each message in `log`. */
async function startConsumer(sp: string, name: string, log: Processed[]): Promise<Consumer> {
  const consumer = new Consumer({
    client: client('consumer'),
    redis: streams.url,
    streamPrefix: sp,
    consumerGroup: 'billing',
    memberId: name,
    blockMs: 50,
    sessionTimeoutMs: 6_000,
    handler: recordingHandler(log, name),
  });
  consumer.on('error', () => undefined);
  await consumer.start();
  closers.push(() => consumer.close());
  return consumer;
}

function startProducer(sp: string): Producer {
  const producer = new Producer({
    client: client('producer'),
    redis: streams.url,
    streamPrefix: sp,
    consumerGroup: 'billing',
    longPollWaitMs: 2_000,
  });
  closers.push(() => producer.close());
  return producer;
}

/** Sends `count` keys `<tag>-<i>` one after another; resolves to the keys sent. */
async function sendKeys(producer: Producer, tag: string, count: number): Promise<string[]> {
  const keys: string[] = [];
  for (let i = 0; i < count; i++) {
    await producer.send(`${tag}-${i}`, { n: String(i) });
    keys.push(`${tag}-${i}`);
  }
  return keys;
}

describe('every message a producer sends is processed by the consumers', () => {
  it('while a second consumer joins, shards hand over without two consumers on one shard', async () => {
    const sp = await createGroup(4);
    const log: Processed[] = [];
    const a = await startConsumer(sp, 'consumer-a', log);
    await waitFor(() => a.shards().length === 4, { what: 'a owns all shards' });
    const producer = startProducer(sp);
    const sending = sendKeys(producer, 'k', 400);
    await waitFor(() => log.length > 50, { what: 'first messages processed' });
    const b = await startConsumer(sp, 'consumer-b', log);
    const keys = await sending;
    await waitFor(() => lostKeys(keys, log).length === 0, { timeoutMs: 10_000, what: 'all keys' });
    await waitFor(() => a.shards().length === 2 && b.shards().length === 2, {
      what: 'shards shared two and two',
    });
    expect(overlaps(log)).toEqual([]);
    expect(new Set(log.filter((p) => p.consumer === 'consumer-b').map((p) => p.shard)).size).toBe(
      2,
    );
    expect(duplicateCount(log)).toBe(0); // drained handoffs: nothing processed twice
  });
});

describe('scale-in with producers running', () => {
  it('consumes the retiring shards to their end: no key is lost', async () => {
    const sp = await createGroup(4);
    const log: Processed[] = [];
    await startConsumer(sp, 'consumer-a', log);
    await startConsumer(sp, 'consumer-b', log);
    const producer = startProducer(sp);
    const sending = sendKeys(producer, 'k', 600);
    await waitFor(() => log.length > 100, { what: 'traffic flowing' });
    await client('writer').scale(sp, 'billing', 2, CHANGE);
    const keys = await sending;
    // A key that never arrives fails here, naming the stream entry that holds it.
    await waitFor(() => lostKeys(keys, log).length === 0, {
      timeoutMs: 30_000,
      what: 'all keys',
    }).catch(async (error: unknown) => {
      const lost = new Set(lostKeys(keys, log));
      const where: string[] = [];
      for (const shard of [0, 1, 2, 3]) {
        const entries = await streams.client().xrange(`${sp}:${shard}`, '-', '+');
        for (const [id, fields] of entries) {
          const key = fields[fields.indexOf('key') + 1];
          if (key !== undefined && lost.has(key)) where.push(`${key} at ${sp}:${shard} ${id}`);
        }
      }
      throw new Error(`keys never processed: ${where.join(', ') || [...lost].join(', ')}`, {
        cause: error,
      });
    });
    expect(producer.routing()?.shardCount).toBe(2);
    expect(overlaps(log)).toEqual([]);
    // The retired streams were read to their end and everything read was acked.
    const redis = streams.client();
    for (const shard of [2, 3]) {
      const pending = (await redis.xpending(`${sp}:${shard}`, 'billing')) as [number];
      expect(pending[0]).toBe(0);
    }
    await waitFor(
      async () => {
        const res = await coordinator.call(
          'GET',
          `/coord/v1/monitoring/streams/${sp}/groups/billing/assignments`,
          { user: 'reader' },
        );
        const body = (await res.json()) as { shards: { shard: number }[] };
        return body.shards.every((s) => s.shard < 2);
      },
      { timeoutMs: 10_000, what: 'retired shards gone from the group' },
    );
  }, 60_000); // above the waits inside, so a lost key is reported with where it lies
});

describe('the duplicate-sensitive scale procedure with producers running', () => {
  it('appends nothing while paused, and nothing under the new count before the last append under the old', async () => {
    const sp = await createGroup(4);
    const log: Processed[] = [];
    await startConsumer(sp, 'consumer-a', log);
    await startConsumer(sp, 'consumer-b', log);
    const sends: { key: string; shardCount: number; id: string }[] = [];
    let stop = false;
    const run = async (producer: Producer, tag: string) => {
      for (let i = 0; !stop; i++) {
        const key = `${tag}-customer-${i % 20}`;
        const { shardCount, id } = await producer.send(key, { n: String(i) });
        sends.push({ key: `${tag}-${i}`, shardCount, id });
      }
    };
    const producing = Promise.all([run(startProducer(sp), 'p0'), run(startProducer(sp), 'p1')]);
    await waitFor(() => sends.length > 100, { what: 'traffic flowing' });
    producing.catch(() => undefined); // a failing test closes the producers under it
    const steps: { line: string; at: number }[] = [];
    await scaleDuplicateSensitive(client('admin'), {
      streamPrefix: sp,
      consumerGroup: 'billing',
      shardCount: 8,
      change: CHANGE,
      groupsOnPrefix: async () => ['billing'],
      drainMs: 300,
      refreshMs: 300,
      routingTimeoutMs: 10_000,
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
      progress: (line) => steps.push({ line, at: Date.now() }),
    });
    await waitFor(() => sends.filter((s) => s.shardCount === 8).length > 100, {
      what: 'traffic under 8 shards',
    });
    stop = true;
    await producing;
    // Stream ids carry the Redis server's clock: every append under 4 shards precedes every
    // append under 8, so no key was ever published under both counts at once.
    const ms = (id: string) => Number(id.split('-')[0]);
    const lastOld = Math.max(...sends.filter((s) => s.shardCount === 4).map((s) => ms(s.id)));
    const firstNew = Math.min(...sends.filter((s) => s.shardCount === 8).map((s) => ms(s.id)));
    expect(lastOld).toBeLessThan(firstNew);
    // Nothing was appended while producers were paused (from the drain to the resume; the
    // producers see the pause within a long-poll round trip, well inside the 300 ms drain).
    const paused = steps.find((s) => s.line.startsWith('2/6'))!.at + 200;
    const resumed = steps.find((s) => s.line.startsWith('6/6'))!.at;
    expect(sends.filter((s) => ms(s.id) > paused && ms(s.id) < resumed)).toEqual([]);
    expect(new Set(sends.map((s) => s.shardCount))).toEqual(new Set([4, 8]));
  });
});

describe('the duplicate-sensitive scale procedure when the scale gets no answer', () => {
  it('leaves producers paused: the scale may have been made', async () => {
    const sp = await createGroup(4);
    // The procedure talks to the coordinator through a proxy that will hold its answers.
    const proxy = await TcpProxy.start(coordinator.url);
    closers.push(() => proxy.close());
    const admin = new CoordinatorClient({
      baseUrl: proxy.url,
      token: coordinator.token('admin'),
      timeoutMs: 1_500,
    });
    const steps: string[] = [];
    const outcome = await scaleDuplicateSensitive(admin, {
      streamPrefix: sp,
      consumerGroup: 'billing',
      shardCount: 8,
      change: CHANGE,
      groupsOnPrefix: async () => ['billing'],
      drainMs: 10,
      refreshMs: 10,
      routingTimeoutMs: 5_000,
      // The scale, sent after the drain, reaches the coordinator; its answer does not.
      sleep: async () => proxy.setMode('stall-replies'),
      progress: (line) => steps.push(line),
    }).then(
      () => 'resolved',
      (error: unknown) => String(error),
    );
    proxy.setMode('pass');
    expect(outcome).not.toBe('resolved');
    // The coordinator made the scale; producers must not have been told to go on.
    const routing = await client('producer').routing(sp, 'billing');
    expect({ shardCount: routing.shardCount, producersPaused: routing.producersPaused }).toEqual({
      shardCount: 8,
      producersPaused: true,
    });
    expect(steps.join('\n')).not.toMatch(/scale not started/);
    expect(outcome).toMatch(/may have|paused/);
  });
});

describe('close() drains and leaves', () => {
  it('the member is gone from the group and its shards go to the others at once', async () => {
    const sp = await createGroup(2);
    const log: Processed[] = [];
    const a = await startConsumer(sp, 'consumer-a', log);
    const b = await startConsumer(sp, 'consumer-b', log);
    await waitFor(() => a.shards().length === 1 && b.shards().length === 1, { what: 'shared' });
    await b.close();
    await waitFor(() => a.shards().length === 2, { timeoutMs: 3_000, what: 'a takes over' });
    const res = await coordinator.call(
      'GET',
      `/coord/v1/monitoring/streams/${sp}/groups/billing/members`,
      { user: 'reader' },
    );
    const body = (await res.json()) as { members: { memberId: string }[] };
    expect(body.members.map((m) => m.memberId)).toEqual(['consumer-a']);
  });
});

describe('the producer follows routing', () => {
  it('waits while producers are paused and sends once they resume, with the new version', async () => {
    const sp = await createGroup(2);
    const admin = new CoordinatorClient({
      baseUrl: coordinator.url,
      username: 'admin',
      password: PASSWORD,
    });
    const producer = startProducer(sp);
    const before = await producer.send('first');
    await admin.pauseProducers(sp, 'billing', CHANGE);
    await waitFor(() => producer.routing()?.producersPaused === true, { what: 'paused seen' });
    let sent = false;
    const waiting = producer.send('second').then((result) => {
      sent = true;
      return result;
    });
    await waitFor(() => producer.routing()!.metadataVersion > before.metadataVersion, {
      what: 'version',
    });
    expect(sent).toBe(false);
    await admin.resumeProducers(sp, 'billing', CHANGE);
    const after = await waiting;
    expect(after.metadataVersion).toBe(before.metadataVersion + 2);
    expect(await streams.client().xlen(`${sp}:${after.shard}`)).toBeGreaterThan(0);
  });
});

describe('CoordinatorClient', () => {
  it('logs in with credentials by itself and maps error answers to typed errors', async () => {
    const admin = new CoordinatorClient({
      baseUrl: coordinator.url,
      username: 'admin',
      password: PASSWORD,
    });
    const sp = await createGroup(2);
    await expect(admin.createGroup(sp, 'billing', 2, CHANGE)).rejects.toMatchObject({
      name: 'ConflictError',
      code: 'GROUP_EXISTS',
      status: 409,
    });
    await expect(admin.routing('nope', 'none')).rejects.toBeInstanceOf(NotFoundError);
    const invalid = await admin.scale(sp, 'billing', 0, CHANGE).catch((e: unknown) => e);
    expect(invalid).toBeInstanceOf(InvalidRequestError);
    expect((invalid as InvalidRequestError).requestId).toBeTruthy();
    expect(invalid).not.toBeInstanceOf(ConflictError);
  });

  it('with several base URLs, a replica that does not answer is skipped', async () => {
    const sp = await createGroup(2);
    const dead = `http://127.0.0.1:${await freePort()}`;
    const failover = new CoordinatorClient({
      baseUrl: [dead, coordinator.url],
      token: coordinator.token('reader'),
      retry: { baseDelayMs: 1 },
    });
    await expect(failover.routing(sp, 'billing')).resolves.toMatchObject({ shardCount: 2 });
    const single = new CoordinatorClient({
      baseUrl: dead,
      token: coordinator.token('reader'),
      retry: { maxAttempts: 2, baseDelayMs: 1 },
    });
    await expect(single.routing(sp, 'billing')).rejects.toMatchObject({
      name: 'CoordinatorUnreachableError',
      reason: 'ECONNREFUSED',
    });
  });

  it('logs in through the next base URL when the first one does not answer', async () => {
    const sp = await createGroup(2);
    const dead = `http://127.0.0.1:${await freePort()}`;
    const failover = new CoordinatorClient({
      baseUrl: [dead, coordinator.url],
      username: 'admin',
      password: PASSWORD,
      retry: { baseDelayMs: 1 },
    });
    await expect(failover.routing(sp, 'billing')).resolves.toMatchObject({ shardCount: 2 });
    // A change too: the login that found no replica sent nothing of it, so it goes on.
    const changer = new CoordinatorClient({
      baseUrl: [dead, coordinator.url],
      username: 'admin',
      password: PASSWORD,
      retry: { baseDelayMs: 1 },
    });
    await expect(changer.scale(sp, 'billing', 3, CHANGE)).resolves.toMatchObject({
      migration: { toShardCount: 3 },
    });
  });

  it('a wrong password is an AuthenticationError, not a retry loop', async () => {
    const wrong = new CoordinatorClient({
      baseUrl: coordinator.url,
      username: 'admin',
      password: 'not the password',
    });
    await expect(wrong.routing('x', 'y')).rejects.toMatchObject({
      name: 'AuthenticationError',
      code: 'INVALID_CREDENTIALS',
    });
  });
});
