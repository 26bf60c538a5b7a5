/**
 * A forwarded request never waits on an owner that does not answer
 * (docs/operations.md#a-paused-owner). First the Forwarder against a stand-in owner process that
 * is SIGSTOPped like a paused replica; then whole coordinators: a replica forwarding to a
 * registered owner that is paused, and two replicas passing held requests through.
 */
import http from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Forwarder, type ForwardOutcome } from '../../src/actors/ownership/forwarder.js';
import { rendezvousOwner } from '../../src/actors/ownership/rendezvous.js';
import { toErrorResponse } from '../../src/http/errors.js';
import { keyNames } from '../../src/store/keys.js';
import { Metrics } from '../../src/observability/metrics.js';
import {
  CHANGE,
  startTestCoordinator,
  type TestCoordinator,
  waitUntilSeenByEach,
} from '../support/coordinator.js';
import { captureLogs } from '../support/logs.js';
import { heartbeatOf, joinBody, SimulatedMember } from '../support/members.js';
import { randomKeyPrefix, startRedisServer, waitFor } from '../support/redis-server.js';
import type { RedisServerHandle } from '../support/redis-server.js';
import { ChildProcesses } from '../support/replica-processes.js';
import { startStandInOwner, type StandInOwner } from '../support/stand-in-owners.js';

/** The answer timeout of the Forwarder tests: short, so that they are quick. */
const ANSWER_MS = 600;
/** What a busy 2-core machine may add to a deadline before the answer is seen. */
const SLACK_MS = 1_500;

interface ErrorBody {
  error: { code: string; message: string; details?: { owner?: string; reason?: string } };
}

/** A receiving replica in this process: every request is forwarded to `owner()`. */
async function receiver(
  forwarder: Forwarder,
  owner: () => { id: string; url: string },
  isLive: () => boolean = () => true,
): Promise<{ url: string; outcomes: ForwardOutcome[]; close: () => Promise<void> }> {
  const outcomes: ForwardOutcome[] = [];
  const server: Server = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const waitMs = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('waitMs') ?? 0);
      void forwarder
        .forward(req, res, owner(), Buffer.concat(chunks), undefined, { waitMs, isLive })
        .then((outcome) => outcomes.push(outcome));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    outcomes,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

function forwarderFor(logs = captureLogs('debug')) {
  const metrics = new Metrics();
  const forwarder = new Forwarder({
    replicaId: 'replica-receiver',
    answerTimeoutMs: ANSWER_MS,
    streamIdleMs: 800,
    probeIntervalMs: 100,
    metrics,
    logger: logs.logger,
    writeError: (res, error) => {
      const { status, body } = toErrorResponse(error, 'req-test');
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    },
  });
  return { forwarder, metrics, logs };
}

/** One request through the receiver, timed. */
async function timed(url: string, init: RequestInit = {}) {
  const began = performance.now();
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(30_000) });
  const text = await res.text();
  return {
    status: res.status,
    retryAfter: res.headers.get('retry-after'),
    owner: res.headers.get('x-coord-owner'),
    body: (text ? JSON.parse(text) : null) as ErrorBody | Record<string, unknown> | null,
    ms: performance.now() - began,
  };
}

describe('the Forwarder and an owner that stops answering (a SIGSTOPped process)', () => {
  const children = new ChildProcesses('forwarding-deadline');
  let owner: StandInOwner;
  let failed = false;

  beforeAll(async () => {
    owner = await startStandInOwner(children, 'stand-in-owner');
  }, 60_000);

  afterAll(async () => {
    owner?.resume();
    await children.cleanUp(failed);
  });

  /** Runs `body` with the owner resumed afterwards, whatever happened. */
  const whilePaused = async (body: () => Promise<void>) => {
    owner.pause();
    try {
      await body();
    } catch (error) {
      failed = true;
      throw error;
    } finally {
      owner.resume();
    }
  };

  it('answers 503 OWNER_UNAVAILABLE with Retry-After: 1 at the answer timeout, then at once while the owner is suspect, and forwards again once it answers', async () => {
    const { forwarder, metrics, logs } = forwarderFor();
    const target = { id: 'replica-owner', url: owner.url };
    const through = await receiver(forwarder, () => target);
    const heartbeat = `${through.url}/coord/v1/consumer/streams/s/groups/g/heartbeat`;
    const post = { method: 'POST', body: '{"memberId":"m-1"}' };
    try {
      expect((await timed(heartbeat, post)).status).toBe(200);
      const before = (await owner.counts())['/coord/v1/consumer/streams/s/groups/g/heartbeat'];

      await whilePaused(async () => {
        const first = await timed(heartbeat, post);
        expect(first).toMatchObject({ status: 503, retryAfter: '1', owner: 'replica-owner' });
        expect((first.body as ErrorBody).error).toMatchObject({
          code: 'OWNER_UNAVAILABLE',
          details: { owner: 'replica-owner', reason: 'no-answer' },
        });
        expect(first.ms).toBeGreaterThanOrEqual(ANSWER_MS - 50);
        expect(first.ms).toBeLessThan(ANSWER_MS + SLACK_MS);
        expect(forwarder.isSuspect('replica-owner')).toBe(true);

        // Suspect: answered at once, nothing sent to the owner (no socket piles up on it).
        const next = await Promise.all(Array.from({ length: 5 }, () => timed(heartbeat, post)));
        for (const answer of next) {
          expect(answer).toMatchObject({ status: 503, retryAfter: '1' });
          expect((answer.body as ErrorBody).error).toMatchObject({
            code: 'OWNER_UNAVAILABLE',
            details: { reason: 'suspect' },
          });
          expect(answer.ms).toBeLessThan(ANSWER_MS);
        }
      });

      // Resumed: a probe gets an answer, the suspicion ends, requests are forwarded again.
      await waitFor(() => !forwarder.isSuspect('replica-owner'), {
        timeoutMs: 10_000,
        what: 'the suspicion to end',
      });
      expect((await timed(heartbeat, post)).status).toBe(200);
      // The owner got the one request that timed out (read once it resumed) and the last one:
      // none of the five answered while it was suspect.
      const after = (await owner.counts())['/coord/v1/consumer/streams/s/groups/g/heartbeat'];
      expect((after ?? 0) - (before ?? 0)).toBeLessThanOrEqual(2);
      const counted: Record<string, number> = {};
      for (const { labels, value } of (await metrics.forwardedRequests.get()).values) {
        counted[String(labels.outcome)] = value;
      }
      expect(counted).toMatchObject({ forwarded: 2, owner_timeout: 1, owner_suspect: 5 });
      const suspicionLines = logs.lines.filter((l) => String(l.owner) === 'replica-owner');
      expect(suspicionLines.map((l) => [l.level, l.message])).toEqual([
        ['warn', expect.stringContaining('does not answer')],
        ['info', expect.stringContaining('answers again')],
      ]);
      expect(logs.lines.filter((l) => l.level === 'error')).toEqual([]);
    } finally {
      forwarder.close();
      await through.close();
    }
  });

  it('gives a held request its wait on top of the answer timeout, and no more', async () => {
    const { forwarder } = forwarderFor();
    const through = await receiver(forwarder, () => ({ id: 'replica-owner', url: owner.url }));
    try {
      // Answered after 1.5 s, past the 0.6 s answer timeout: passed through, not cut.
      const held = await timed(`${through.url}/hold?waitMs=1500`);
      expect(held.status).toBe(200);
      expect(held.ms).toBeGreaterThanOrEqual(1_500);

      await whilePaused(async () => {
        const unanswered = await timed(`${through.url}/hold?waitMs=1000`);
        expect(unanswered.status).toBe(503);
        expect((unanswered.body as ErrorBody).error.details?.reason).toBe('no-answer');
        expect(unanswered.ms).toBeGreaterThanOrEqual(1_000 + ANSWER_MS - 50);
        expect(unanswered.ms).toBeLessThan(1_000 + ANSWER_MS + SLACK_MS);
      });
    } finally {
      forwarder.close();
      await through.close();
    }
  });

  it('cuts every other request waiting on the owner once one went unanswered', async () => {
    const { forwarder } = forwarderFor();
    const through = await receiver(forwarder, () => ({ id: 'replica-owner', url: owner.url }));
    try {
      await whilePaused(async () => {
        // Held for up to 10 s: it would wait that long, but the plain request's timeout ends it.
        const held = timed(`${through.url}/hold?waitMs=10000`);
        await new Promise((resolve) => setTimeout(resolve, 100));
        const plain = await timed(`${through.url}/coord/v1/monitoring/streams/s/groups/g`);
        expect(plain.status).toBe(503);
        const cut = await held;
        expect(cut.status).toBe(503);
        expect((cut.body as ErrorBody).error.details?.reason).toBe('no-answer');
        expect(cut.ms).toBeLessThan(ANSWER_MS + SLACK_MS + 100);
      });
    } finally {
      forwarder.close();
      await through.close();
    }
  });

  it('closes an event stream whose owner stops writing its keep-alive comments', async () => {
    const { forwarder } = forwarderFor();
    const through = await receiver(forwarder, () => ({ id: 'replica-owner', url: owner.url }));
    try {
      const res = await fetch(`${through.url}/events`);
      expect(res.headers.get('content-type')).toBe('text/event-stream');
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      let text = '';
      while (!text.includes(': keep-alive')) {
        const { value } = await reader.read();
        text += new TextDecoder().decode(value);
      }
      await whilePaused(async () => {
        const pausedAt = performance.now();
        // Read until the stream ends (done, or broken off).
        for (;;) {
          const next = await reader.read().catch(() => ({ done: true }) as const);
          if (next.done) break;
        }
        expect(performance.now() - pausedAt).toBeLessThan(800 + SLACK_MS);
        expect(forwarder.isSuspect('replica-owner')).toBe(true);
      });
    } finally {
      forwarder.close();
      await through.close();
    }
  });

  it('answers 503 OWNER_UNAVAILABLE when the owner closes the connection without an answer', async () => {
    const { forwarder } = forwarderFor();
    const through = await receiver(forwarder, () => ({ id: 'replica-owner', url: owner.url }));
    try {
      const answer = await timed(`${through.url}/coord/v1/admin/streams/s/groups/g/close`, {
        method: 'POST',
        body: '{}',
      });
      expect(answer).toMatchObject({ status: 503, retryAfter: '1' });
      expect((answer.body as ErrorBody).error).toMatchObject({
        code: 'OWNER_UNAVAILABLE',
        details: { reason: 'unreachable' },
      });
      // A closed connection is no sign of a paused owner: nothing becomes suspect.
      expect(forwarder.isSuspect('replica-owner')).toBe(false);
    } finally {
      forwarder.close();
      await through.close();
    }
  });

  it('ends a suspicion once the owner leaves the live set, without its answer', async () => {
    const { forwarder, logs } = forwarderFor();
    let live = true;
    const through = await receiver(
      forwarder,
      () => ({ id: 'replica-owner', url: owner.url }),
      () => live,
    );
    try {
      await whilePaused(async () => {
        expect((await timed(`${through.url}/coord/v1/x`)).status).toBe(503);
        expect(forwarder.isSuspect('replica-owner')).toBe(true);
        live = false;
        await waitFor(() => !forwarder.isSuspect('replica-owner'), {
          timeoutMs: 5_000,
          what: 'the suspicion to end',
        });
        expect(logs.lines.at(-1)).toMatchObject({
          level: 'info',
          message: 'suspect owner replica left the live set',
          owner: 'replica-owner',
        });
      });
    } finally {
      forwarder.close();
      await through.close();
    }
  });
});

describe('a replica whose group owner is registered but paused', () => {
  const children = new ChildProcesses('forwarding-deadline-replica');
  let redis: RedisServerHandle;
  let replica: TestCoordinator;
  let stalled: StandInOwner;
  const logs = captureLogs('debug');
  /** A group the paused owner wins against the replica (rendezvous). */
  let group = '';
  const keyPrefix = randomKeyPrefix();

  beforeAll(async () => {
    redis = await startRedisServer();
    stalled = await startStandInOwner(children, 'paused-owner');
    replica = await startTestCoordinator({
      store: 'redis',
      redisUrl: redis.url,
      logger: logs.logger,
      overrides: {
        'store.key-prefix': keyPrefix,
        'replica.id': 'replica-a',
        'lease.ttl': '1500ms',
        'forwarding.answer-timeout': '500ms',
      },
    });
    // The owner: registered as a replica of the deployment, at the stand-in's URL, then paused.
    await replica.services.store.registerReplica(
      { id: 'replica-paused', url: stalled.url },
      120_000,
    );
    await waitFor(() => replica.services.replicas?.urlOf('replica-paused') === stalled.url, {
      what: 'the paused owner in the live set',
    });
    const ids = [{ id: 'replica-a' }, { id: 'replica-paused' }];
    for (let i = 0; group === ''; i++) {
      const ref = { streamPrefix: 'paused', consumerGroup: `g${i}` };
      if (rendezvousOwner(ref, ids)?.id === 'replica-paused') group = `g${i}`;
    }
    stalled.pause();
  }, 60_000);

  afterAll(async () => {
    stalled?.resume();
    await replica?.close();
    await children.cleanUp();
    await redis?.stop();
  });

  it('answers an admin request 503 OWNER_UNAVAILABLE within the answer timeout and audits it once', async () => {
    const path = `/coord/v1/admin/streams/paused/groups/${group}/scale`;
    const ids = [`late-${Date.now()}`, `suspect-${Date.now()}`];
    for (const [n, requestId] of ids.entries()) {
      const began = performance.now();
      const res = await replica.call('POST', path, {
        user: 'writer',
        body: { shardCount: 4, ...CHANGE },
        headers: { 'x-request-id': requestId },
      });
      const ms = performance.now() - began;
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('1');
      expect(res.headers.get('x-request-id')).toBe(requestId);
      const { error } = (await res.json()) as ErrorBody;
      expect(error).toMatchObject({
        code: 'OWNER_UNAVAILABLE',
        details: { owner: 'replica-paused', reason: n === 0 ? 'no-answer' : 'suspect' },
      });
      // The setting's 500 ms (the default would be 2 s), with a second of slack.
      expect(ms).toBeLessThan(500 + 1_000);
    }
    const audit = await replica.call('GET', '/coord/v1/monitoring/audit?streamPrefix=paused', {
      user: 'reader',
    });
    const { records } = (await audit.json()) as {
      records: Array<{ requestId: string; status: number }>;
    };
    for (const requestId of ids) {
      expect(records.filter((r) => r.requestId === requestId)).toEqual([
        expect.objectContaining({ requestId, status: 503 }),
      ]);
    }
  });

  it('answers a heartbeat 503 OWNER_UNAVAILABLE and logs the refusals at info, rate-limited, without a stack', async () => {
    const path = `/coord/v1/consumer/streams/paused/groups/${group}/heartbeat`;
    for (let i = 0; i < 8; i++) {
      const res = await replica.call('POST', path, {
        user: 'consumer',
        body: joinBody(`m-${i}`),
      });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('1');
      expect(((await res.json()) as ErrorBody).error.code).toBe('OWNER_UNAVAILABLE');
    }
    const refused = logs.lines.filter(
      (l) => l.message === 'request refused' && l.consumerGroup === group,
    );
    // 2 admin requests and 8 heartbeats, one code and group: 5 lines a minute.
    expect(refused).toHaveLength(5);
    for (const line of refused) {
      expect(line).toMatchObject({ level: 'info', code: 'OWNER_UNAVAILABLE', status: 503 });
    }
    expect(logs.lines.filter((l) => l.message.includes('does not answer'))).toHaveLength(1);
    expect(logs.lines.filter((l) => l.level === 'error')).toEqual([]);
    expect(logs.text()).not.toMatch(/\n\s+at |\\n\s+at /);
  });

  it('answers a group whose lease another holder has 503 GROUP_MOVED, logged at info without a stack', async () => {
    let own = '';
    const ids = [{ id: 'replica-a' }, { id: 'replica-paused' }];
    for (let i = 0; own === ''; i++) {
      const ref = { streamPrefix: 'moving', consumerGroup: `g${i}` };
      if (rendezvousOwner(ref, ids)?.id === 'replica-a') own = `g${i}`;
    }
    const created = await replica.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: 'moving', consumerGroup: own, shardCount: 2, ...CHANGE },
    });
    expect(created.status).toBe(201);
    // Another holder takes the lease: the next renewal fails, the group is dropped here.
    const lease = keyNames(keyPrefix).lease({ streamPrefix: 'moving', consumerGroup: own });
    await redis.client().set(lease, 'another-holder', 'PX', 60_000);
    await waitFor(() => !replica.host.heldGroups().some((r) => r.streamPrefix === 'moving'), {
      what: 'the group dropped',
    });
    try {
      for (let i = 0; i < 7; i++) {
        const res = await replica.call('GET', `/coord/v1/monitoring/streams/moving/groups/${own}`, {
          user: 'reader',
        });
        expect(res.status).toBe(503);
        expect(res.headers.get('retry-after')).toBe('1');
        expect(((await res.json()) as ErrorBody).error.code).toBe('GROUP_MOVED');
      }
    } finally {
      await redis.client().del(lease);
    }
    const moved = logs.lines.filter((l) => l.code === 'GROUP_MOVED');
    expect(moved).toHaveLength(5);
    for (const line of moved) {
      expect(line).toMatchObject({ level: 'info', message: 'request refused', consumerGroup: own });
    }
    expect(logs.lines.filter((l) => l.level === 'error')).toEqual([]);
    expect(logs.text()).not.toMatch(/\n\s+at |\\n\s+at /);
  });
});

describe('two replicas: held requests pass through a forwarding replica whole', () => {
  let redis: RedisServerHandle;
  const replicas: TestCoordinator[] = [];

  beforeAll(async () => {
    redis = await startRedisServer();
    const prefix = randomKeyPrefix();
    for (const id of ['r1', 'r2']) {
      replicas.push(
        await startTestCoordinator({
          store: 'redis',
          redisUrl: redis.url,
          overrides: {
            'store.key-prefix': prefix,
            'replica.id': id,
            'lease.ttl': '1500ms',
            'membership.session-timeout': '6s',
            'membership.heartbeat-interval': '3s',
            'forwarding.answer-timeout': '1s',
          },
        }),
      );
    }
    await waitUntilSeenByEach(replicas, ['r1', 'r2']);
  }, 60_000);

  afterAll(async () => {
    for (const c of replicas) await c.close();
    await redis?.stop();
  });

  it('a long poll and a held heartbeat answered after the answer timeout are not cut', async () => {
    const [r1] = replicas as [TestCoordinator];
    const created = await r1.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: 'held', consumerGroup: 'g', shardCount: 2, ...CHANGE },
    });
    expect(created.status).toBe(201);
    const ownerId = created.headers.get('x-coord-owner');
    const other = replicas.find((c) => c.services.replicaId !== ownerId) as TestCoordinator;
    const member = new SimulatedMember(other, 'held-m', 'held', 'g');
    await waitFor(
      async () => {
        const reply = await member.beat();
        return reply.outcome === 'OK' && reply.pendingShards.length === 0;
      },
      { intervalMs: 150, what: 'the member settled' },
    );
    const routing = await other.call('GET', '/coord/v1/routing/streams/held/groups/g', {
      user: 'producer',
    });
    const { metadataVersion } = (await routing.json()) as { metadataVersion: number };

    const began = performance.now();
    const [poll, held] = await Promise.all([
      other.call(
        'GET',
        `/coord/v1/routing/streams/held/groups/g?afterVersion=${metadataVersion}&waitMs=2500`,
        { user: 'producer' },
      ),
      other.call('POST', '/coord/v1/consumer/streams/held/groups/g/heartbeat', {
        user: 'consumer',
        body: { ...heartbeatOf(member), waitMs: 2_500 },
      }),
    ]);
    const ms = performance.now() - began;
    // Both waited their 2.5 s at the owner (past the 1 s answer timeout) and came back whole.
    expect(poll.status, await poll.clone().text()).toBeLessThan(500);
    expect(held.status, await held.clone().text()).toBe(200);
    expect(poll.headers.get('x-coord-owner')).toBe(ownerId);
    expect(held.headers.get('x-coord-owner')).toBe(ownerId);
    expect(((await held.json()) as { outcome: string }).outcome).toBe('OK');
    expect(ms).toBeGreaterThanOrEqual(2_000);
  });
});
