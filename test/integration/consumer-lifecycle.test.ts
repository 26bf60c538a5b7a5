/**
 * The Consumer's lifecycle against a real coordinator (real HTTP, through a TCP proxy that can
 * hold bytes) and real Redis streams.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Consumer, CoordinatorClient } from '../../src/client/index.js';
import { CHANGE, useCoordinator, type TestCoordinator } from '../support/coordinator.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';
import { TcpProxy } from '../support/tcp-proxy.js';

let streams: RedisServerHandle;
let coordinator: TestCoordinator;
const closers: (() => Promise<void>)[] = [];

useCoordinator({ store: 'memory' }, (c) => {
  coordinator = c;
});
beforeAll(async () => {
  streams = await startRedisServer();
});
afterAll(async () => {
  await streams.stop();
});
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function members(sp: string): Promise<string[]> {
  const res = await coordinator.call(
    'GET',
    `/coord/v1/monitoring/streams/${sp}/groups/billing/members`,
    { user: 'reader' },
  );
  const body = (await res.json()) as { members: { memberId: string }[] };
  return body.members.map((m) => m.memberId);
}

describe('close() while start() waits for the join', () => {
  it('start() rejects, and a join answered after close() is left at once, not held for the session', async () => {
    const sp = `orders-${randomBytes(4).toString('hex')}`;
    await new CoordinatorClient({
      baseUrl: coordinator.url,
      token: coordinator.token('writer'),
    }).createGroup(sp, 'billing', 2, CHANGE);
    const proxy = await TcpProxy.start(coordinator.url);
    closers.push(() => proxy.close());
    const consumer = new Consumer({
      client: new CoordinatorClient({ baseUrl: proxy.url, token: coordinator.token('consumer') }),
      redis: streams.url,
      streamPrefix: sp,
      consumerGroup: 'billing',
      memberId: 'consumer-a',
      sessionTimeoutMs: 30_000,
      handler: async () => undefined,
    });
    consumer.on('error', () => undefined);
    closers.push(() => consumer.close());

    // The join is held on its way to the coordinator until close() was called.
    proxy.setMode('stall');
    const starting = consumer.start();
    starting.catch(() => undefined);
    await waitFor(() => proxy.stats().stalledChunks > 0, { what: 'the join held' });
    const closing = consumer.close();
    proxy.setMode('pass');
    await closing;

    expect(consumer.shards()).toEqual([]);
    // Joined on the coordinator after close() began: left again by close(), so the group does
    // not wait out the member's 30 s session for the shards.
    expect(await members(sp)).toEqual([]);
    await expect(starting).rejects.toThrow('consumer closed before it joined');
  });
});
