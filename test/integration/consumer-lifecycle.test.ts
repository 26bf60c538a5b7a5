/**
 * The Consumer's lifecycle against a real coordinator (real HTTP, through a TCP proxy that can
 * hold bytes) and real Redis streams.
 */
import { randomBytes } from 'node:crypto';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
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

/**
 * An HTTP proxy to `upstream` that, while `foreign` is set, answers every request itself with
 * an HTML 404 page (an ingress whose route is being replaced).
 */
async function ingress(upstream: string) {
  const target = new URL(upstream);
  let answered = 0;
  const state = { foreign: false };
  const server = createServer((req, res) => {
    if (state.foreign) {
      answered++;
      req.resume();
      res.writeHead(404, { 'content-type': 'text/html' });
      res.end('<html><body><h1>404 Not Found</h1><hr>nginx</body></html>');
      return;
    }
    const upstreamReq = request(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: target.host },
      },
      (upstreamRes) => {
        res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.headers);
        upstreamRes.pipe(res);
      },
    );
    upstreamReq.on('error', () => res.destroy());
    req.pipe(upstreamReq);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    state,
    answered: () => answered,
  };
}

describe("a proxy's own 404 page after the consumer joined", () => {
  it('is no answer from the coordinator: the consumer keeps its shards and retries', async () => {
    const sp = `orders-${randomBytes(4).toString('hex')}`;
    await new CoordinatorClient({
      baseUrl: coordinator.url,
      token: coordinator.token('writer'),
    }).createGroup(sp, 'billing', 2, CHANGE);
    const proxy = await ingress(coordinator.url);
    const consumer = new Consumer({
      client: new CoordinatorClient({ baseUrl: proxy.url, token: coordinator.token('consumer') }),
      redis: streams.url,
      streamPrefix: sp,
      consumerGroup: 'billing',
      memberId: 'consumer-a',
      sessionTimeoutMs: 30_000,
      // Plain heartbeats: each one meets the proxy's page.
      holdHeartbeats: false,
      handler: async () => undefined,
    });
    const errors: unknown[] = [];
    consumer.on('error', (error) => errors.push(error));
    const fenced: unknown[] = [];
    consumer.on('fenced', (event) => fenced.push(event));
    closers.push(() => consumer.close());
    await consumer.start();
    await waitFor(() => consumer.shards().length === 2, { what: 'both shards' });

    proxy.state.foreign = true;
    await waitFor(() => proxy.answered() >= 3, { timeoutMs: 20_000, what: 'three 404 pages' });
    expect(consumer.shards()).toEqual([0, 1]);
    proxy.state.foreign = false;

    expect(fenced).toEqual([]);
    expect(errors.length).toBeGreaterThan(0);
    expect(String(errors[0])).toContain('HTTP 404 from');
    expect(await members(sp)).toEqual(['consumer-a']);
  });
});

describe('a listener that throws', () => {
  it("is the application's error: the revoke still finishes and the other member gets the shard", async () => {
    const sp = `orders-${randomBytes(4).toString('hex')}`;
    await new CoordinatorClient({
      baseUrl: coordinator.url,
      token: coordinator.token('writer'),
    }).createGroup(sp, 'billing', 2, CHANGE);
    const start = async (memberId: string) => {
      const consumer = new Consumer({
        client: new CoordinatorClient({
          baseUrl: coordinator.url,
          token: coordinator.token('consumer'),
        }),
        redis: streams.url,
        streamPrefix: sp,
        consumerGroup: 'billing',
        memberId,
        blockMs: 50,
        handler: async () => undefined,
      });
      closers.push(() => consumer.close());
      return consumer;
    };
    const a = await start('consumer-a');
    const errors: unknown[] = [];
    a.on('error', (error) => errors.push(error));
    a.on('revoked', () => {
      throw new Error('listener bug');
    });
    await a.start();
    await waitFor(() => a.shards().length === 2, { what: 'a reads both shards' });

    const b = await start('consumer-b');
    b.on('error', () => undefined);
    await b.start();
    await waitFor(() => a.shards().length === 1 && b.shards().length === 1, {
      timeoutMs: 15_000,
      what: 'one shard each',
    });
    await waitFor(() => errors.some((e) => String(e).includes('listener bug')), {
      what: 'the listener error reported',
    });
  });
});
