/**
 * A request that failed and waits to be tried again ends when its caller gives it up: the retry
 * backoff listens to the request's signal, so an aborted call, or a Producer closed while its
 * routing read waits to be retried, does not wait the backoff out. A real coordinator on a real
 * port behind a TCP proxy that cuts the first attempt off; the backoff is made ten minutes long,
 * so waiting it out would outlast the test.
 */
import { randomBytes } from 'node:crypto';
import { getEventListeners } from 'node:events';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  CoordinatorClient,
  CoordinatorUnreachableError,
  Producer,
} from '../../src/client/index.js';
import { CHANGE, startTestCoordinator, type TestCoordinator } from '../support/coordinator.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';
import { TcpProxy } from '../support/tcp-proxy.js';

const LONG_BACKOFF = { maxAttempts: 2, baseDelayMs: 600_000, maxDelayMs: 600_000 };

let streams: RedisServerHandle;
let coordinator: TestCoordinator;
const closers: (() => Promise<void>)[] = [];

beforeAll(async () => {
  streams = await startRedisServer();
  coordinator = await startTestCoordinator({ store: 'memory' });
}, 60_000);
afterAll(async () => {
  await coordinator?.close();
  await streams?.stop();
});
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function createGroup(): Promise<string> {
  const sp = `orders-${randomBytes(4).toString('hex')}`;
  await new CoordinatorClient({
    baseUrl: coordinator.url,
    token: coordinator.token('writer'),
  }).createGroup(sp, 'billing', 2, CHANGE);
  return sp;
}

/**
 * A proxy to the coordinator that holds the first request it gets; `cut(signal)` cuts that
 * request off and resolves once the client has taken the failure: the request no longer
 * listens to its caller's `signal` as it did while it was sent (the retry waits its backoff).
 */
async function cutFirstRequest(): Promise<{
  proxy: TcpProxy;
  cut: (signal: () => AbortSignal) => Promise<void>;
}> {
  const proxy = await TcpProxy.start(coordinator.url);
  closers.push(() => proxy.close());
  proxy.setMode('stall');
  return {
    proxy,
    cut: async (signal) => {
      await waitFor(() => proxy.stats().stalledChunks > 0, { what: 'the request held' });
      const sending = getEventListeners(signal(), 'abort');
      expect(sending.length).toBeGreaterThan(0);
      proxy.reset();
      proxy.setMode('pass');
      await waitFor(
        () => !getEventListeners(signal(), 'abort').some((listener) => sending.includes(listener)),
        { what: 'the failed attempt over' },
      );
    },
  };
}

describe('a retried request whose caller gives it up during the backoff', () => {
  it('ends at once with the failure, not after the backoff', async () => {
    const sp = await createGroup();
    const { proxy, cut } = await cutFirstRequest();
    const client = new CoordinatorClient({
      baseUrl: proxy.url,
      token: coordinator.token('producer'),
      retry: LONG_BACKOFF,
    });
    const controller = new AbortController();
    const reading = client.routing(sp, 'billing', undefined, { signal: controller.signal });
    const settled = reading.then(
      () => 'answered',
      (error: unknown) => error,
    );
    await cut(() => controller.signal);
    controller.abort(new Error('given up'));
    // Well inside the backoff: the call ends because it was given up.
    const outcome = await settled;
    expect(outcome).toBeInstanceOf(CoordinatorUnreachableError);
    // One attempt only: the backoff did not end in a second one.
    expect(proxy.stats().connections).toBe(1);
  });

  it('of a Producer: close() ends its first routing read, which waited to be retried', async () => {
    const sp = await createGroup();
    const { proxy, cut } = await cutFirstRequest();
    const client = new CoordinatorClient({
      baseUrl: proxy.url,
      token: coordinator.token('producer'),
      retry: LONG_BACKOFF,
    });
    let signal: AbortSignal | undefined;
    const producer = new Producer({
      // The real client; the signal the producer gives its routing read is kept to watch it.
      client: {
        routing: (...args: Parameters<CoordinatorClient['routing']>) => {
          signal = args[3]?.signal;
          return client.routing(...args);
        },
      },
      redis: streams.url,
      streamPrefix: sp,
      consumerGroup: 'billing',
      closeTimeoutMs: 60_000,
    });
    closers.push(() => producer.close());
    const starting = producer.start().then(
      () => 'started',
      (error: unknown) => error,
    );
    await cut(() => signal!);
    await producer.close();
    expect(await starting).toBeInstanceOf(CoordinatorUnreachableError);
    expect(proxy.stats().connections).toBe(1);
  });
});
