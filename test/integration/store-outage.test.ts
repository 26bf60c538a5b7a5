import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORE_OUTAGE_ANSWER_MS } from '../../src/http/store-outage.js';
import { coordctl } from '../support/cli.js';
import {
  CHANGE,
  PASSWORD,
  startTestCoordinator,
  type TestCoordinator,
} from '../support/coordinator.js';
import { captureLogs } from '../support/logs.js';
import {
  randomKeyPrefix,
  startRedisServer,
  waitFor,
  type RedisServerHandle,
} from '../support/redis-server.js';

/** Every request is answered within the outage bound, plus room for a busy 2-core machine. */
const ANSWER_WITHIN_MS = STORE_OUTAGE_ANSWER_MS + 1_000;
const STREAM = 'outage';
const group = (area: string, suffix = '') =>
  `/coord/v1/${area}/streams/${STREAM}/groups/g${suffix}`;

interface Answer {
  readonly label: string;
  readonly status: number;
  readonly ms: number;
  readonly body: string;
}

/** One request with no retry; how long its answer took (Infinity: none within 15 s). */
async function timed(
  c: TestCoordinator,
  label: string,
  method: string,
  path: string,
  options: { user?: string; body?: unknown } = {},
): Promise<Answer> {
  const started = performance.now();
  try {
    const res = await fetch(`${c.url}${path}`, {
      method,
      headers: {
        ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...(options.user ? { authorization: `Bearer ${c.token(options.user)}` } : {}),
      },
      ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
      signal: AbortSignal.timeout(15_000),
    });
    const body = await res.text();
    return { label, status: res.status, ms: performance.now() - started, body };
  } catch (error) {
    return { label, status: 0, ms: Infinity, body: String(error) };
  }
}

/** Every kind of request the API serves, against one replica. */
function everyRequest(c: TestCoordinator, round: number): Array<Promise<Answer>> {
  const heartbeat = {
    memberId: 'm1',
    memberEpoch: 0,
    assignmentEpoch: 0,
    metadataVersion: 0,
    currentAssignments: [],
  };
  return [
    timed(c, 'health', 'GET', '/coord/v1/monitoring/health'),
    timed(c, 'live', 'GET', '/coord/v1/monitoring/health/live'),
    timed(c, 'ready', 'GET', '/coord/v1/monitoring/health/ready'),
    timed(c, 'info', 'GET', '/coord/v1/monitoring/info', { user: 'reader' }),
    timed(c, 'groups', 'GET', '/coord/v1/monitoring/groups', { user: 'reader' }),
    timed(c, 'replicas', 'GET', '/coord/v1/monitoring/replicas', { user: 'reader' }),
    timed(c, 'audit', 'GET', '/coord/v1/monitoring/audit', { user: 'reader' }),
    timed(c, 'group', 'GET', group('monitoring'), { user: 'reader' }),
    timed(c, 'members', 'GET', group('monitoring', '/members'), { user: 'reader' }),
    timed(c, 'assignments', 'GET', group('monitoring', '/assignments'), { user: 'reader' }),
    timed(c, 'migrations', 'GET', group('monitoring', '/migrations'), { user: 'reader' }),
    timed(c, 'statechart', 'GET', group('monitoring', '/statechart'), { user: 'reader' }),
    timed(c, 'routing', 'GET', group('routing'), { user: 'producer' }),
    timed(c, 'heartbeat', 'POST', group('consumer', '/heartbeat'), {
      user: 'consumer',
      body: heartbeat,
    }),
    timed(c, 'freeze', 'POST', group('admin', '/freeze'), { user: 'writer', body: CHANGE }),
    timed(c, 'scale', 'POST', group('admin', '/scale'), {
      user: 'writer',
      body: { shardCount: 3, ...CHANGE },
    }),
    timed(c, 'create', 'POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: STREAM, consumerGroup: `new-${round}`, shardCount: 1, ...CHANGE },
    }),
    timed(c, 'login', 'POST', '/coord/v1/auth/login', {
      body: { username: 'reader', password: PASSWORD },
    }),
  ];
}

const ADMIN = new Set(['freeze', 'scale', 'create']);

describe('a store that is down is answered at once', () => {
  let redis: RedisServerHandle;
  const logs = [captureLogs('debug'), captureLogs('debug')];
  let replicas: TestCoordinator[] = [];

  beforeAll(async () => {
    redis = await startRedisServer({ extraArgs: ['--appendonly', 'yes'] });
    const keyPrefix = randomKeyPrefix();
    replicas = await Promise.all(
      ['outage-a', 'outage-b'].map((id, i) =>
        startTestCoordinator({
          store: 'redis',
          redisUrl: redis.url,
          logger: logs[i]!.logger,
          overrides: {
            'store.key-prefix': keyPrefix,
            'replica.id': id,
            'lease.ttl': '2s',
          },
        }),
      ),
    );
    const [a] = replicas;
    const created = await a!.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: STREAM, consumerGroup: 'g', shardCount: 2, ...CHANGE },
    });
    expect(created.status).toBe(201);
    for (const c of replicas) {
      await waitFor(
        async () => (await c.call('GET', '/coord/v1/monitoring/health/ready')).status === 200,
        { what: 'both replicas ready' },
      );
    }
  });
  afterAll(async () => {
    await Promise.all(replicas.map((c) => c.close()));
    await redis?.stop();
  });

  it('while Redis is down: every request answered within the bound, the store named as the cause', async () => {
    await redis.kill();
    const answers: Answer[] = [];
    // Three rounds over more than a lease TTL: before and after the replicas lose their leases.
    for (let round = 0; round < 3; round++) {
      const started = performance.now();
      answers.push(...(await Promise.all(replicas.flatMap((c) => everyRequest(c, round)))));
      // Rounds start about 1.5 s apart (each takes at most the bound).
      const left = 1_500 - (performance.now() - started);
      if (left > 0) await new Promise((resolve) => setTimeout(resolve, left));
    }
    const slow = answers.filter((a) => a.ms > ANSWER_WITHIN_MS);
    expect(slow.map((a) => `${a.label} ${a.status} ${Math.round(a.ms)} ms`)).toEqual([]);
    for (const answer of answers) {
      expect(answer.status, `${answer.label}: ${answer.body}`).toBeLessThan(500 + 4);
      expect(answer.body).not.toMatch(/max retries|maxRetriesPerRequest/i);
      if (ADMIN.has(answer.label) || answer.label === 'login') {
        expect(answer.status, answer.label).toBe(503);
        const { error } = JSON.parse(answer.body) as {
          error: { code: string; details?: { store?: string } };
        };
        expect(error.code, answer.label).toBe('STORE_UNAVAILABLE');
        expect(error.details?.store, answer.label).toBe(`127.0.0.1:${redis.port}`);
      }
      if (answer.label === 'live') expect(answer.status).toBe(200);
      if (answer.label === 'ready') {
        expect(answer.status).toBe(503);
        expect(JSON.parse(answer.body)).toMatchObject({ status: 'NOT_READY', store: 'DOWN' });
      }
      if (answer.label === 'health') {
        expect(answer.status).toBe(200);
        expect(JSON.parse(answer.body)).toMatchObject({ status: 'DEGRADED', store: 'DOWN' });
      }
    }
    for (const log of logs) expect(log.text()).not.toMatch(/max retries|maxRetriesPerRequest/i);
  });

  it('coordctl says the store is down, not that the coordinator cannot be reached', async () => {
    const [a] = replicas;
    const { code, stderr } = await coordctl([
      'describe',
      `${STREAM}:g`,
      '--coordinator',
      a!.url,
      '--token',
      a!.token('reader'),
    ]);
    expect(code).toBe(1);
    expect(stderr).toMatch(/503 STORE_UNAVAILABLE/);
    expect(stderr).toContain(`its store (Redis at 127.0.0.1:${redis.port}`);
    expect(stderr).not.toMatch(/cannot reach the coordinator/);
  });

  it('once Redis is back: ready again, and admin changes go through', async () => {
    await redis.restart();
    for (const c of replicas) {
      await waitFor(
        async () => (await c.call('GET', '/coord/v1/monitoring/health/ready')).status === 200,
        { timeoutMs: 15_000, what: 'ready again' },
      );
    }
    await waitFor(
      async () =>
        (
          await replicas[1]!.call('POST', group('admin', '/freeze'), {
            user: 'writer',
            body: CHANGE,
          })
        ).status === 200,
      { timeoutMs: 15_000, intervalMs: 200, what: 'a freeze to go through' },
    );
  });
});

describe('readiness of a replica that has not joined the registry', () => {
  let redis: RedisServerHandle;
  let c: TestCoordinator;
  beforeAll(async () => {
    redis = await startRedisServer();
    await redis.kill();
    // Started while its store is down: it cannot register.
    c = await startTestCoordinator({
      store: 'redis',
      redisUrl: redis.url,
      overrides: { 'replica.id': 'late-joiner', 'lease.ttl': '2s' },
    });
  });
  afterAll(async () => {
    await c?.close();
    await redis?.stop();
  });

  it('is 503 with registered false until the store answers and it has joined; live all along', async () => {
    const ready = await c.call('GET', '/coord/v1/monitoring/health/ready');
    expect(ready.status).toBe(503);
    expect(await ready.json()).toMatchObject({ status: 'NOT_READY', registered: false });
    expect((await c.call('GET', '/coord/v1/monitoring/health/live')).status).toBe(200);
    await redis.restart();
    await waitFor(
      async () => (await c.call('GET', '/coord/v1/monitoring/health/ready')).status === 200,
      { timeoutMs: 15_000, what: 'ready once joined' },
    );
    expect(await (await c.call('GET', '/coord/v1/monitoring/health/ready')).json()).toMatchObject({
      status: 'READY',
      store: 'UP',
      registered: true,
      replicaId: 'late-joiner',
    });
  });

  it('the probes need no token', async () => {
    for (const path of ['/coord/v1/monitoring/health/live', '/coord/v1/monitoring/health/ready']) {
      expect((await c.call('GET', path)).status, path).toBe(200);
    }
  });
});
