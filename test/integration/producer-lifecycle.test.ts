/**
 * The Producer's lifecycle against a real coordinator (real HTTP) and real Redis streams: what
 * a caller can bound, and what it is told when routing cannot be read.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Consumer, CoordinatorClient, NotFoundError, Producer } from '../../src/client/index.js';
import {
  CHANGE,
  PASSWORD,
  QUICK_MEMBERSHIP,
  groupView,
  useCoordinator,
  type TestCoordinator,
} from '../support/coordinator.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { appendSeal } from '../../src/client/stream-seal.js';

let streams: RedisServerHandle;
let coordinator: TestCoordinator;
const closers: (() => Promise<void>)[] = [];

useCoordinator({ store: 'memory', overrides: QUICK_MEMBERSHIP }, (c) => {
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

function admin(): CoordinatorClient {
  return new CoordinatorClient({ baseUrl: coordinator.url, username: 'admin', password: PASSWORD });
}

async function createGroup(shardCount: number): Promise<string> {
  const sp = `orders-${randomBytes(4).toString('hex')}`;
  await admin().createGroup(sp, 'billing', shardCount, CHANGE);
  return sp;
}

function startProducer(sp: string): Producer {
  const producer = new Producer({
    client: new CoordinatorClient({
      baseUrl: coordinator.url,
      token: coordinator.token('producer'),
    }),
    redis: streams.url,
    streamPrefix: sp,
    consumerGroup: 'billing',
    longPollWaitMs: 2_000,
  });
  closers.push(() => producer.close());
  return producer;
}

async function entries(sp: string, shardCount: number): Promise<number> {
  let total = 0;
  for (let shard = 0; shard < shardCount; shard++) {
    total += await streams.client().xlen(`${sp}:${shard}`);
  }
  return total;
}

describe('a send waiting while producers are paused', () => {
  it('gives up when its signal aborts, appends nothing, and the producer sends on after the resume', async () => {
    const sp = await createGroup(2);
    const producer = startProducer(sp);
    await producer.start();
    await admin().pauseProducers(sp, 'billing', CHANGE);
    await waitFor(() => producer.routing()?.producersPaused === true, { what: 'paused seen' });

    const controller = new AbortController();
    const waiting = producer.send('customer-1', { n: '1' }, { signal: controller.signal });
    controller.abort(new Error('gave up waiting'));
    await expect(waiting).rejects.toThrow('gave up waiting');
    // An already aborted signal refuses at once.
    await expect(
      producer.send('customer-2', {}, { signal: AbortSignal.abort(new Error('too late')) }),
    ).rejects.toThrow('too late');

    await admin().resumeProducers(sp, 'billing', CHANGE);
    const sent = await producer.send('customer-3', { n: '3' });
    expect(sent.shardCount).toBe(2);
    expect(await entries(sp, 2)).toBe(1);
  });
});

describe('routing that cannot be read', () => {
  it('is reported once per episode on the error event, however many long polls fail', async () => {
    const sp = await createGroup(2);
    const real = new CoordinatorClient({
      baseUrl: coordinator.url,
      token: coordinator.token('producer'),
    });
    let reads = 0;
    const producer = new Producer({
      // The real client, counting the routing reads it is asked for.
      client: {
        routing: (...args: Parameters<CoordinatorClient['routing']>) => {
          reads++;
          return real.routing(...args);
        },
      },
      redis: streams.url,
      streamPrefix: sp,
      consumerGroup: 'billing',
      longPollWaitMs: 500,
    });
    closers.push(() => producer.close());
    const errors: unknown[] = [];
    producer.on('error', (error) => errors.push(error));
    await producer.start();

    await admin().request('DELETE', admin().groupPath('admin', sp, 'billing'), CHANGE);
    await waitFor(() => errors.length > 0, { what: 'the routing failure reported' });
    const failedFrom = reads;
    await waitFor(() => reads >= failedFrom + 3, { what: 'more failed routing reads' });
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(NotFoundError);
    expect((errors[0] as NotFoundError).code).toBe('GROUP_NOT_FOUND');

    // Routing read again ends the episode; the next failure is a new one.
    await admin().createGroup(sp, 'billing', 2, CHANGE);
    const lifecycle = producer.routing()!.lifecycleId;
    await waitFor(() => producer.routing()!.lifecycleId !== lifecycle, { what: 'new lifecycle' });
    await admin().request('DELETE', admin().groupPath('admin', sp, 'billing'), CHANGE);
    await waitFor(() => errors.length === 2, { what: 'the second episode reported' });
  });
});

describe('a closed producer', () => {
  it('refuses to send, and appends nothing, also on a Redis connection it does not own', async () => {
    const sp = await createGroup(2);
    const redis = streams.client();
    const producer = new Producer({
      client: new CoordinatorClient({
        baseUrl: coordinator.url,
        token: coordinator.token('producer'),
      }),
      redis,
      streamPrefix: sp,
      consumerGroup: 'billing',
      longPollWaitMs: 2_000,
    });
    await producer.send('customer-1');
    await producer.close();

    // It no longer follows routing: a send now would ignore a pause or a scale it cannot see.
    await expect(producer.send('customer-2')).rejects.toThrow('producer closed');
    await expect(producer.start()).rejects.toThrow('producer closed');
    expect(await entries(sp, 2)).toBe(1);
  });

  it('that never started refuses to send too', async () => {
    const sp = await createGroup(2);
    const producer = startProducer(sp);
    await producer.close();
    await expect(producer.send('customer-1')).rejects.toThrow('producer closed');
    expect(await entries(sp, 2)).toBe(0);
  });
});

describe('the routing long poll wait', () => {
  it('longer than the coordinator allows is cut to its longest: the producer still sees a pause', async () => {
    const sp = await createGroup(2);
    const producer = new Producer({
      client: new CoordinatorClient({
        baseUrl: coordinator.url,
        token: coordinator.token('producer'),
      }),
      redis: streams.url,
      streamPrefix: sp,
      consumerGroup: 'billing',
      longPollWaitMs: 120_000,
    });
    closers.push(() => producer.close());
    const errors: unknown[] = [];
    producer.on('error', (error) => errors.push(error));
    await producer.start();
    await admin().pauseProducers(sp, 'billing', CHANGE);
    await waitFor(() => producer.routing()?.producersPaused === true, { what: 'paused seen' });
    expect(errors).toEqual([]);
  });

  it('of zero or less is refused at once: it would poll without a pause', () => {
    for (const longPollWaitMs of [0, -1, Number.NaN]) {
      expect(
        () =>
          new Producer({
            client: new CoordinatorClient({ baseUrl: coordinator.url }),
            redis: streams.url,
            streamPrefix: 'orders',
            consumerGroup: 'billing',
            longPollWaitMs,
          }),
      ).toThrow(RangeError);
    }
  });
});

describe('a send whose append gets no answer from the streams Redis', () => {
  it('gives up when its signal aborts, and close() still resolves', async () => {
    const sp = await createGroup(2);
    const proxy = await TcpProxy.start(`http://127.0.0.1:${new URL(streams.url).port}`);
    closers.push(() => proxy.close());
    const producer = new Producer({
      client: new CoordinatorClient({
        baseUrl: coordinator.url,
        token: coordinator.token('producer'),
      }),
      redis: `redis://127.0.0.1:${new URL(proxy.url).port}`,
      streamPrefix: sp,
      consumerGroup: 'billing',
      longPollWaitMs: 2_000,
    });
    closers.push(() => producer.close());
    await producer.send('customer-1');

    // The streams Redis stops answering (a stalled network): the append waits for its reply.
    proxy.setMode('stall');
    const controller = new AbortController();
    const sending = producer.send('customer-2', {}, { signal: controller.signal });
    await waitFor(() => proxy.stats().stalledChunks > 0, { what: 'the append held' });
    controller.abort(new Error('gave up waiting'));
    await expect(sending).rejects.toThrow('gave up waiting');
    await producer.close();
  });
});

describe('a group deleted and created again under a following producer', () => {
  it('is followed at once, not after a long poll on the old version', async () => {
    const sp = await createGroup(4);
    const producer = new Producer({
      client: new CoordinatorClient({
        baseUrl: coordinator.url,
        token: coordinator.token('producer'),
      }),
      redis: streams.url,
      streamPrefix: sp,
      consumerGroup: 'billing',
      // The default: a long poll on a version the new group has not reached waits this long.
      longPollWaitMs: 30_000,
    });
    closers.push(() => producer.close());
    const errors: unknown[] = [];
    producer.on('error', (error) => errors.push(error));
    await producer.start();
    // A few versions up, as a group that lived a while: pause and resume.
    await admin().pauseProducers(sp, 'billing', CHANGE);
    await admin().resumeProducers(sp, 'billing', CHANGE);
    await waitFor(() => producer.routing()!.metadataVersion >= 3, { what: 'version 3' });
    const old = producer.routing()!;

    await admin().request('DELETE', admin().groupPath('admin', sp, 'billing'), CHANGE);
    await waitFor(() => errors.length > 0, { what: 'the deleted group seen' });
    await admin().createGroup(sp, 'billing', 2, CHANGE);

    // Well under the 30 s long poll: the producer asks for the group as it is now.
    await waitFor(() => producer.routing()!.lifecycleId !== old.lifecycleId, {
      timeoutMs: 15_000,
      what: 'the new group followed',
    });
    expect((await producer.send('customer-1')).shardCount).toBe(2);
  });
});

/** `coord_metadata_version_regression_total{source}` as the coordinator's /metrics has it now. */
async function regressions(source: 'routing' | 'heartbeat'): Promise<number> {
  const text = await (await coordinator.call('GET', '/metrics')).text();
  const line = new RegExp(
    `^coord_metadata_version_regression_total\\{source="${source}"\\} (\\d+)$`,
    'm',
  );
  return Number(line.exec(text)?.[1] ?? 0);
}

describe('a group deleted and created again under its producer and consumer', () => {
  it('is no rollback signal: the versions the old lifecycle reached are not compared with the new one', async () => {
    const sp = await createGroup(2);
    const producer = startProducer(sp);
    const errors: unknown[] = [];
    producer.on('error', (error) => errors.push(error));
    const consumer = new Consumer({
      client: new CoordinatorClient({
        baseUrl: coordinator.url,
        token: coordinator.token('consumer'),
      }),
      redis: streams.url,
      streamPrefix: sp,
      consumerGroup: 'billing',
      memberId: 'consumer-a',
      handler: async () => undefined,
    });
    consumer.on('error', () => undefined);
    closers.push(() => consumer.close());
    await consumer.start();
    await producer.start();
    // The old lifecycle goes a few versions up (pause, resume), and both clients see it.
    await admin().pauseProducers(sp, 'billing', CHANGE);
    await admin().resumeProducers(sp, 'billing', CHANGE);
    await waitFor(() => producer.routing()!.metadataVersion >= 3, { what: 'version 3 read' });
    const old = producer.routing()!;
    const before = {
      routing: await regressions('routing'),
      heartbeat: await regressions('heartbeat'),
    };

    await admin().request(
      'DELETE',
      `${admin().groupPath('admin', sp, 'billing')}?force=true`,
      CHANGE,
    );
    await waitFor(() => errors.length > 0, { what: 'the deleted group seen' });
    await admin().createGroup(sp, 'billing', 2, CHANGE);
    await waitFor(() => producer.routing()!.lifecycleId !== old.lifecycleId, {
      what: 'the new group followed by the producer',
    });
    await waitFor(async () => (await groupView(coordinator, sp, 'billing')).assignmentEpoch > 0, {
      what: 'the consumer in the new group',
    });
    // A routing read and heartbeats of the new lifecycle after it, all answered.
    expect((await producer.send('customer-1')).shardCount).toBe(2);

    const view = await groupView(coordinator, sp, 'billing');
    expect(view.lifecycleId).not.toBe(old.lifecycleId);
    expect(view.metadataVersion).toBeLessThan(old.metadataVersion);
    expect(view.rollbackSignals).toBeNull();
    expect(await regressions('routing')).toBe(before.routing);
    expect(await regressions('heartbeat')).toBe(before.heartbeat);

    // A version above the group's, reported for its own lifecycle, is still a rollback signal.
    const read = await coordinator.call('GET', admin().groupPath('routing', sp, 'billing'), {
      user: 'producer',
      headers: {
        'x-observed-metadata-version': String(view.metadataVersion + 5),
        'x-observed-lifecycle-id': view.lifecycleId,
      },
    });
    expect(read.status).toBe(200);
    expect(await regressions('routing')).toBe(before.routing + 1);
    expect((await groupView(coordinator, sp, 'billing')).rollbackSignals?.count).toBe(1);
  });
});

describe('routing answered out of order around a recreate', () => {
  it('a late answer of the lifecycle already replaced does not switch the producer back', async () => {
    const sp = await createGroup(2);
    const proxy = await TcpProxy.start(coordinator.url);
    closers.push(() => proxy.close());
    const token = coordinator.token('producer');
    const direct = new CoordinatorClient({ baseUrl: coordinator.url, token });
    const proxied = new CoordinatorClient({ baseUrl: proxy.url, token });
    // The real clients: long polls go through the proxy, which can hold their answers; plain
    // reads go straight to the coordinator. Each long poll is noted as it is sent.
    const polls: { afterVersion: number; lifecycleId: string | undefined }[] = [];
    const producer = new Producer({
      client: {
        routing: (sp_, cg, poll, options) => {
          if (!poll) return direct.routing(sp_, cg, poll, options);
          polls.push({
            afterVersion: poll.afterVersion,
            lifecycleId: options?.observedLifecycleId,
          });
          return proxied.routing(sp_, cg, poll, options);
        },
      },
      redis: streams.url,
      streamPrefix: sp,
      consumerGroup: 'billing',
      longPollWaitMs: 30_000,
    });
    closers.push(() => producer.close());
    producer.on('error', () => undefined);
    await producer.start();
    const old = producer.routing()!;
    await waitFor(() => polls.length === 1 && proxy.stats().connections > 0, {
      what: 'the long poll sent',
    });

    // The long poll is answered (producers paused: a new version of the old lifecycle), and
    // the answer is held on its way back.
    proxy.setMode('stall-replies');
    await admin().pauseProducers(sp, 'billing', CHANGE);
    await waitFor(() => proxy.stats().stalledChunks > 0, { what: 'the answer held' });

    // Meanwhile the group is deleted and created again, and a consumer of the old lifecycle
    // sealed its shards: the next send is refused there and reads routing again, plainly.
    await admin().request(
      'DELETE',
      `${admin().groupPath('admin', sp, 'billing')}?force=true`,
      CHANGE,
    );
    await admin().createGroup(sp, 'billing', 2, CHANGE);
    const seal = { lifecycleId: old.layoutId!, metadataVersion: (old.layoutVersion ?? 0) + 1 };
    for (let shard = 0; shard < 2; shard++)
      await appendSeal(streams.client(), `${sp}:${shard}`, seal);
    await producer.send('customer-1');
    const renewed = producer.routing()!;
    expect(renewed.lifecycleId).not.toBe(old.lifecycleId);

    // The old lifecycle's answer arrives now; the producer has taken it once it polls again.
    proxy.setMode('pass');
    await waitFor(() => polls.length === 2, { what: 'the next long poll' });
    expect(producer.routing()!.lifecycleId).toBe(renewed.lifecycleId);
    expect(producer.routing()!.producersPaused).toBe(false);
    expect(polls[1]!.lifecycleId).toBe(renewed.lifecycleId);
    // Sends go on with the new lifecycle's routing, not paused by the old one's.
    expect((await producer.send('customer-2')).metadataVersion).toBe(renewed.metadataVersion);
  });
});
