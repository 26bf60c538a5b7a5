/**
 * Every SDK request ends by its timeout, also a cancellable one (a held heartbeat, a routing long
 * poll) whose answer never comes while the garbage collector runs: a replica that is paused (the
 * kernel accepts the connection, nothing answers) must not leave a consumer waiting for ever. A
 * real coordinator on a real port, reached through a TCP proxy that stalls; V8's collector is
 * run on demand while the answer is awaited.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Consumer,
  CoordinatorClient,
  CoordinatorUnreachableError,
  type FencedEvent,
} from '../../src/client/index.js';
import { CHANGE, startTestCoordinator, type TestCoordinator } from '../support/coordinator.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { forcedGc } from '../support/gc.js';
import { watchedHeartbeats } from '../support/watched-heartbeats.js';

const STREAM = 'deadline';
const SESSION_TIMEOUT_MS = 10_000;

describe('a request whose answer never comes', () => {
  let redis: RedisServerHandle;
  let coordinator: TestCoordinator;
  const gc = forcedGc();

  beforeAll(async () => {
    redis = await startRedisServer();
    coordinator = await startTestCoordinator({
      store: 'memory',
      overrides: {
        // A paused replica closes nothing: neither may this one close an idle connection while
        // the proxy stalls (the proxy would pass the close on and end the request early).
        'http.keep-alive-timeout': '60s',
        'membership.heartbeat-interval': '500ms',
        'membership.assignment-debounce': '20ms',
      },
    });
    const admin = new CoordinatorClient({
      baseUrl: coordinator.url,
      token: coordinator.token('writer'),
    });
    await admin.createGroup(STREAM, 'g', 2, CHANGE);
  }, 60_000);

  afterAll(async () => {
    await coordinator?.close();
    await redis?.stop();
  });

  it('a cancellable request ends at its timeout though the collector runs meanwhile', async () => {
    const proxy = await TcpProxy.start(coordinator.url);
    try {
      const client = new CoordinatorClient({
        baseUrl: proxy.url,
        token: coordinator.token('reader'),
        timeoutMs: 1_000,
        retry: { maxAttempts: 1 },
      });
      proxy.setMode('stall');
      const cancel = new AbortController();
      let outcome: unknown = null;
      const began = Date.now();
      void client
        .request('GET', client.groupPath('routing', STREAM, 'g'), undefined, {
          signal: cancel.signal,
        })
        .then(
          () => (outcome = 'answered'),
          (error: unknown) => (outcome = error),
        );
      // Collected meanwhile or not, the timeout ends it.
      await waitFor(
        () => {
          gc();
          return outcome !== null;
        },
        { timeoutMs: 5_000, intervalMs: 50, what: 'the request to end' },
      );
      expect(outcome).toBeInstanceOf(CoordinatorUnreachableError);
      expect((outcome as CoordinatorUnreachableError).reason).toBe('no answer within 1000 ms');
      expect(Date.now() - began).toBeGreaterThanOrEqual(1_000 - 50);
      expect(cancel.signal.aborted).toBe(false);
    } finally {
      await proxy.close();
    }
  });

  it('a consumer whose held heartbeat went to a paused replica is served by another one in time', async () => {
    const proxy = await TcpProxy.start(coordinator.url);
    // The stalled proxy first: the heartbeats go through it until it stops answering.
    const client = new CoordinatorClient({
      baseUrl: [proxy.url, coordinator.url],
      token: coordinator.token('consumer'),
    });
    const answers: Array<{ sentAt: number; epoch: number; held: boolean }> = [];
    const fenced: FencedEvent[] = [];
    const consumer = new Consumer({
      client: watchedHeartbeats(client, (reply, args, sentAt) =>
        answers.push({ sentAt, epoch: reply.memberEpoch, held: (args[4]?.waitMs ?? 0) > 0 }),
      ),
      redis: redis.url,
      streamPrefix: STREAM,
      consumerGroup: 'g',
      memberId: 'paused-replica-member',
      sessionTimeoutMs: SESSION_TIMEOUT_MS,
      blockMs: 50,
      handler: async () => undefined,
    });
    consumer.on('fenced', (event) => fenced.push(event));
    consumer.on('error', () => undefined);
    try {
      await consumer.start();
      await waitFor(() => consumer.shards().length === 2 && answers.some((a) => a.held), {
        what: 'both shards assigned, heartbeats held',
      });
      const epoch = answers.at(-1)!.epoch;
      expect(proxy.stats().connections).toBeGreaterThan(0);
      // Paused: the held heartbeat in flight gets no answer, nor anything sent through it.
      const stalledAt = Date.now();
      proxy.setMode('stall');
      // A heartbeat sent after the stall and answered came through the other base URL: in time
      // only if the one in flight ended at its timeout. Before the session is lost (80 % of it).
      await waitFor(
        () => {
          gc();
          return answers.filter((a) => a.sentAt > stalledAt).length >= 2;
        },
        {
          timeoutMs: SESSION_TIMEOUT_MS * 0.8 - 500,
          intervalMs: 50,
          what: 'heartbeats served again through the other base URL',
        },
      );
      expect(fenced).toEqual([]);
      expect(consumer.shards()).toEqual([0, 1]);
      expect(new Set(answers.filter((a) => a.sentAt > stalledAt).map((a) => a.epoch))).toEqual(
        new Set([epoch]),
      );
    } finally {
      proxy.setMode('pass');
      await consumer.close();
      await proxy.close();
    }
  }, 60_000);

  it('a timeout longer than a timer can wait does not end the request at once', async () => {
    const client = new CoordinatorClient({
      baseUrl: coordinator.url,
      token: coordinator.token('reader'),
      // Past 2³¹ − 1 ms a Node timer fires after 1 ms instead.
      timeoutMs: 2 ** 32,
      retry: { maxAttempts: 1 },
    });
    const cancel = new AbortController();
    const answer = await client.request(
      'GET',
      client.groupPath('routing', STREAM, 'g'),
      undefined,
      {
        signal: cancel.signal,
      },
    );
    expect(answer).toMatchObject({ consumerGroup: 'g' });
  });
});
