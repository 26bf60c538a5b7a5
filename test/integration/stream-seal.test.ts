/**
 * The end of a retiring shard on a real redis-server: the seal a retiring consumer appends, and
 * the producer's append that refuses to write past a seal newer than its routing.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Producer, type RoutingMetadata, type RoutingSource } from '../../src/client/index.js';
import { appendSeal, appendUnlessSealed, compareStreamIds } from '../../src/client/stream-seal.js';
import { shardForKey } from '../../src/machines/routing.js';
import { startRedisServer, type RedisServerHandle } from '../support/redis-server.js';

let server: RedisServerHandle;
let redis: Redis;

beforeAll(async () => {
  server = await startRedisServer();
  redis = server.client();
});
afterAll(async () => {
  await server.stop();
});

function stream(): string {
  return `orders-${randomBytes(4).toString('hex')}:3`;
}

describe('appendUnlessSealed', () => {
  it('appends to an unsealed stream, with MAXLEN when asked', async () => {
    const s = stream();
    for (let i = 0; i < 5; i++) {
      const result = await appendUnlessSealed(
        redis,
        s,
        { lifecycleId: 'L', metadataVersion: 1 },
        2,
        ['key', `k${i}`],
      );
      expect(result).toHaveProperty('id');
    }
    // MAXLEN ~ trims whole nodes only: the cap is honoured loosely, but it was passed.
    expect(await redis.xlen(s)).toBeLessThanOrEqual(5);
    expect((await redis.xrevrange(s, '+', '-', 'COUNT', 1))[0]![1]).toEqual(['key', 'k4']);
  });

  it('refuses routing older than the seal of the same lifecycle, and nothing is written', async () => {
    const s = stream();
    await redis.xadd(s, '*', 'key', 'before');
    await appendSeal(redis, s, { lifecycleId: 'L', metadataVersion: 5 });
    const refused = await appendUnlessSealed(
      redis,
      s,
      { lifecycleId: 'L', metadataVersion: 4 },
      undefined,
      ['key', 'late'],
    );
    expect(refused).toEqual({ sealedAt: 5 });
    expect(await redis.xlen(s)).toBe(2);
  });

  it('lets routing of the seal version or newer write (a rolled-back scale-in), and other lifecycles', async () => {
    const s = stream();
    await appendSeal(redis, s, { lifecycleId: 'L', metadataVersion: 5 });
    expect(
      await appendUnlessSealed(redis, s, { lifecycleId: 'other', metadataVersion: 1 }, undefined, [
        'key',
        'a',
      ]),
    ).toHaveProperty('id');
    await appendSeal(redis, s, { lifecycleId: 'L', metadataVersion: 5 });
    expect(
      await appendUnlessSealed(redis, s, { lifecycleId: 'L', metadataVersion: 6 }, undefined, [
        'key',
        'b',
      ]),
    ).toHaveProperty('id');
  });

  it('loads its script again after SCRIPT FLUSH', async () => {
    const s = stream();
    await appendUnlessSealed(redis, s, { lifecycleId: 'L', metadataVersion: 1 }, undefined, [
      'key',
      'a',
    ]);
    await redis.script('FLUSH');
    const result = await appendUnlessSealed(
      redis,
      s,
      { lifecycleId: 'L', metadataVersion: 1 },
      undefined,
      ['key', 'b'],
    );
    expect(result).toHaveProperty('id');
  });
});

describe('compareStreamIds', () => {
  it('orders by time, then sequence, numerically', () => {
    expect(compareStreamIds('10-0', '9-5')).toBe(1);
    expect(compareStreamIds('10-2', '10-10')).toBe(-1);
    expect(compareStreamIds('10-2', '10-2')).toBe(0);
  });
});

/** Routing the test sets; a long poll waits until the version passes `afterVersion`. */
class ScriptedRouting implements RoutingSource {
  private waiters: (() => void)[] = [];
  reads = 0;
  constructor(public current: RoutingMetadata) {}
  set(next: RoutingMetadata, announce: boolean): void {
    this.current = next;
    if (announce) for (const wake of this.waiters.splice(0)) wake();
  }
  async routing(
    _sp: string,
    _cg: string,
    poll?: { afterVersion: number; waitMs: number },
    options?: { signal?: AbortSignal },
  ): Promise<RoutingMetadata> {
    this.reads++;
    if (poll && this.current.metadataVersion <= poll.afterVersion) {
      await new Promise<void>((resolve, reject) => {
        this.waiters.push(resolve);
        options?.signal?.addEventListener('abort', () => reject(new Error('aborted')));
      });
    }
    return this.current;
  }
}

function routing(sp: string, shardCount: number, metadataVersion: number): RoutingMetadata {
  return {
    streamPrefix: sp,
    consumerGroup: 'billing',
    lifecycleId: 'L',
    shardCount,
    metadataVersion,
    streams: Array.from({ length: shardCount }, (_, i) => `${sp}:${i}`),
    partitioner: 'fnv1a32-mod',
    producersPaused: false,
  };
}

describe('a producer that has not seen a scale-in yet', () => {
  it('is refused by the seal of a removed shard and sends under the new routing', async () => {
    const sp = `orders-${randomBytes(4).toString('hex')}`;
    // A key that moves from a removed shard (2 or 3) when 4 shards become 2.
    const key = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].find((k) => shardForKey(k, 4) >= 2)!;
    const removed = shardForKey(key, 4);
    const source = new ScriptedRouting(routing(sp, 4, 4));
    const producer = new Producer({
      client: source,
      redis,
      streamPrefix: sp,
      consumerGroup: 'billing',
    });
    try {
      await producer.send('warm-up');
      // The scale-in reached the consumer (which sealed) but not the producer's long poll.
      source.set(routing(sp, 2, 5), false);
      await appendSeal(redis, `${sp}:${removed}`, { lifecycleId: 'L', metadataVersion: 5 });
      const sent = await producer.send(key, { n: '1' });
      expect(sent).toMatchObject({ shard: shardForKey(key, 2), shardCount: 2, metadataVersion: 5 });
      const tail = await redis.xrevrange(`${sp}:${removed}`, '+', '-', 'COUNT', 1);
      expect(tail[0]![1][0]).toBe('__coord_seal'); // nothing after the seal
      const landed = await redis.xrange(`${sp}:${sent.shard}`, sent.id, sent.id);
      expect(landed[0]![1]).toEqual(['key', key, 'n', '1']);
    } finally {
      await producer.close();
    }
  });
});
