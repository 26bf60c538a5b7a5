/**
 * The SDK with several base URLs when one replica does not answer (a paused process) or answers
 * 503 `OWNER_UNAVAILABLE` (it forwards to an owner that does not answer): that base URL is tried
 * after the others for a while, and a consumer keeps its session and its epoch through it
 * (docs/operations.md#a-paused-owner).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rendezvousOwner } from '../../src/actors/ownership/rendezvous.js';
import {
  Consumer,
  CoordinatorClient,
  CoordinatorUnreachableError,
  UnavailableError,
  type FencedEvent,
} from '../../src/client/index.js';
import {
  CHANGE,
  startTestCoordinator,
  type TestCoordinator,
  QUICK_MEMBERSHIP,
} from '../support/coordinator.js';
import { ChildProcesses, metricSum } from '../support/replica-processes.js';
import { randomKeyPrefix, startRedisServer, waitFor } from '../support/redis-server.js';
import type { RedisServerHandle } from '../support/redis-server.js';
import { startStandInOwner, type StandInOwner } from '../support/stand-in-owners.js';
import { watchedHeartbeats } from '../support/watched-heartbeats.js';

const STREAM = 'slow';

describe('a client with a replica that does not answer among its base URLs', () => {
  const children = new ChildProcesses('client-slow-replica');
  let redis: RedisServerHandle;
  /** A paused process: connections accepted, nothing answered. */
  let paused: StandInOwner;
  /** A replica whose group's owner is that paused process: it answers 503 OWNER_UNAVAILABLE. */
  let forwarding: TestCoordinator;
  /** A coordinator that serves the group. */
  let serving: TestCoordinator;
  let group = '';

  beforeAll(async () => {
    redis = await startRedisServer();
    paused = await startStandInOwner(children, 'paused-replica');
    forwarding = await startTestCoordinator({
      store: 'redis',
      redisUrl: redis.url,
      overrides: {
        'store.key-prefix': randomKeyPrefix(),
        'replica.id': 'replica-a',
        'forwarding.answer-timeout': '1s',
      },
    });
    await forwarding.services.store.registerReplica(
      { id: 'replica-paused', url: paused.url },
      300_000,
    );
    await waitFor(() => forwarding.services.replicas?.urlOf('replica-paused') === paused.url, {
      what: 'the paused replica in the live set',
    });
    const ids = [{ id: 'replica-a' }, { id: 'replica-paused' }];
    for (let i = 0; group === ''; i++) {
      if (
        rendezvousOwner({ streamPrefix: STREAM, consumerGroup: `g${i}` }, ids)?.id !== 'replica-a'
      )
        group = `g${i}`;
    }
    serving = await startTestCoordinator({
      store: 'memory',
      overrides: {
        ...QUICK_MEMBERSHIP,
      },
    });
    const admin = new CoordinatorClient({ baseUrl: serving.url, token: serving.token('writer') });
    await admin.createGroup(STREAM, group, 2, CHANGE);
    paused.pause();
  }, 60_000);

  afterAll(async () => {
    paused?.resume();
    await serving?.close();
    await forwarding?.close();
    await children.cleanUp();
    await redis?.stop();
  });

  const forwardedOutcomes = async () => {
    const text = await (await fetch(`${forwarding.url}/metrics`)).text();
    return {
      timeout: metricSum(text, 'coord_forwarded_requests_total', { outcome: 'owner_timeout' }),
      suspect: metricSum(text, 'coord_forwarded_requests_total', { outcome: 'owner_suspect' }),
    };
  };

  it('retries elsewhere after 503 OWNER_UNAVAILABLE and asks that base URL last for a while', async () => {
    const client = new CoordinatorClient({
      baseUrl: [forwarding.url, serving.url],
      token: serving.token('reader'),
      timeoutMs: 5_000,
    });
    await expect(client.routing(STREAM, group)).resolves.toMatchObject({ shardCount: 2 });
    const before = await forwardedOutcomes();
    expect(before.timeout).toBe(1);
    for (let i = 0; i < 5; i++) {
      const began = performance.now();
      await expect(client.routing(STREAM, group)).resolves.toMatchObject({ shardCount: 2 });
      // Answered by the serving coordinator at once: no Retry-After wait, no forward.
      expect(performance.now() - began).toBeLessThan(900);
    }
    expect(await forwardedOutcomes()).toEqual(before);
  });

  it('asks a base URL that gave no answer after one that answered OWNER_UNAVAILABLE', async () => {
    const client = new CoordinatorClient({
      baseUrl: [paused.url, forwarding.url, serving.url],
      token: serving.token('reader'),
      timeoutMs: 800,
      retry: { baseDelayMs: 1 },
    });
    // The paused one gives no answer, the forwarding one 503, the serving one its answer.
    await expect(client.routing(STREAM, group)).resolves.toMatchObject({ shardCount: 2 });
    // Without the serving one (one attempt each): the silent one costs its timeout once, then
    // the one that answered 503 is asked before it.
    const single = new CoordinatorClient({
      baseUrl: [paused.url, forwarding.url],
      token: serving.token('reader'),
      timeoutMs: 800,
    });
    await expect(
      single.request('GET', single.groupPath('routing', STREAM, group), undefined, {
        retry: false,
      }),
    ).rejects.toBeInstanceOf(CoordinatorUnreachableError);
    const second = await single
      .request('GET', single.groupPath('routing', STREAM, group), undefined, { retry: false })
      .catch((error: unknown) => error);
    expect(second).toBeInstanceOf(UnavailableError);
    expect(second).toMatchObject({ code: 'OWNER_UNAVAILABLE' });
    const third = await single
      .request('GET', single.groupPath('routing', STREAM, group), undefined, { retry: false })
      .catch((error: unknown) => error);
    // Both demoted: the one that answered comes before the one that did not.
    expect(third).toBeInstanceOf(UnavailableError);
  });

  it('does not repeat a write the owner may have done (sent, no answer in time)', async () => {
    // A fresh suspicion: the paused replica answers the forwarding one's probe, then pauses.
    paused.resume();
    await waitFor(() => !isSuspect(), {
      timeoutMs: 10_000,
      what: 'the suspicion to end',
    });
    paused.pause();
    const client = new CoordinatorClient({
      baseUrl: [forwarding.url, serving.url],
      token: serving.token('writer'),
      retry: { baseDelayMs: 1 },
    });
    const error = await client.scale(STREAM, group, 3, CHANGE).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnavailableError);
    expect(error).toMatchObject({ code: 'OWNER_UNAVAILABLE', details: { reason: 'no-answer' } });
    // Not sent again elsewhere: the serving coordinator's group was not scaled.
    const routing = await new CoordinatorClient({
      baseUrl: serving.url,
      token: serving.token('reader'),
    }).routing(STREAM, group);
    expect(routing.shardCount).toBe(2);
  });

  const isSuspect = () =>
    forwarding.services.replicas?.forwarder.isSuspect('replica-paused') ?? false;

  it('a consumer keeps its session and its epoch through a replica that does not answer', async () => {
    const client = new CoordinatorClient({
      baseUrl: [paused.url, serving.url],
      token: serving.token('consumer'),
    });
    const fenced: FencedEvent[] = [];
    const epochs: number[] = [];
    const consumer = new Consumer({
      client: watchedHeartbeats(client, (reply) => epochs.push(reply.memberEpoch)),
      redis: redis.url,
      streamPrefix: STREAM,
      consumerGroup: group,
      memberId: 'slow-member',
      sessionTimeoutMs: 6_000,
      blockMs: 50,
      handler: async () => undefined,
    });
    consumer.on('fenced', (event) => fenced.push(event));
    consumer.on('error', () => undefined);
    try {
      await consumer.start();
      await waitFor(() => consumer.shards().length === 2, { what: 'both shards assigned' });
      const seen = epochs.length;
      // Well past the session timeout (6 s), heartbeating every 200 ms through the serving one.
      await waitFor(() => epochs.length >= seen + 40, {
        timeoutMs: 30_000,
        intervalMs: 100,
        what: '40 more heartbeats',
      });
      expect(fenced).toEqual([]);
      expect(consumer.shards()).toEqual([0, 1]);
      expect(new Set(epochs.filter((e) => e > 0)).size).toBe(1);
    } finally {
      await consumer.close();
    }
    // The paused replica got the first heartbeat only (read now that it runs again).
    paused.resume();
    const counts = await paused.counts();
    expect(counts[`/coord/v1/consumer/streams/${STREAM}/groups/${group}/heartbeat`]).toBe(1);
  }, 60_000);
});
