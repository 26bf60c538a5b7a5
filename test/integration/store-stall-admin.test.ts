import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORE_OUTAGE_ANSWER_MS } from '../../src/http/store-outage.js';
import { CHANGE, startTestCoordinator, type TestCoordinator } from '../support/coordinator.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';

/*
 * docs/operations.md#when-the-store-is-down: a Redis that stalls (SIGSTOP: connections open,
 * nothing answered) is the harder outage. An admin change is refused within the outage bound,
 * not the bound plus the audit write's own timeout, and its audit record is not lost: it is
 * written once Redis answers again.
 */

/** The bound, plus room for a busy 2-core machine (the audit write's timeout is 2 s more). */
const ANSWER_WITHIN_MS = STORE_OUTAGE_ANSWER_MS + 1_000;

describe('admin changes while the store stalls', () => {
  let redis: RedisServerHandle;
  let c: TestCoordinator;

  beforeAll(async () => {
    redis = await startRedisServer();
    c = await startTestCoordinator({ store: 'redis', redisUrl: redis.url });
    const created = await c.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: 'stall', consumerGroup: 'g', shardCount: 2, ...CHANGE },
    });
    expect(created.status).toBe(201);
  });
  afterAll(async () => {
    redis?.resume();
    await c?.close();
    await redis?.stop();
  });

  it('are refused within the bound, and their audit record is written once Redis answers', async () => {
    redis.pause();
    let requestId: string;
    try {
      await waitFor(
        async () => {
          const res = await c.call('GET', '/coord/v1/monitoring/health');
          return ((await res.json()) as { store: string }).store === 'DOWN';
        },
        { timeoutMs: 10_000, what: 'the stalled store seen as DOWN' },
      );
      const started = performance.now();
      const res = await c.call('POST', '/coord/v1/admin/streams/stall/groups/g/producers/pause', {
        user: 'writer',
        body: CHANGE,
      });
      const ms = performance.now() - started;
      const body = (await res.json()) as { error: { code: string; requestId: string } };
      expect(res.status).toBe(503);
      expect(body.error.code).toBe('STORE_UNAVAILABLE');
      expect(ms, `answered after ${Math.round(ms)} ms`).toBeLessThan(ANSWER_WITHIN_MS);
      requestId = body.error.requestId;
      expect(requestId).toBeTruthy();
    } finally {
      redis.resume();
    }
    await waitFor(
      async () => {
        const res = await c.call('GET', '/coord/v1/monitoring/audit?limit=50', { user: 'reader' });
        if (res.status !== 200) return false;
        const { records } = (await res.json()) as {
          records: Array<{ requestId: string; status: number; outcome: string }>;
        };
        const record = records.find((r) => r.requestId === requestId);
        if (!record) return false;
        expect(record).toMatchObject({ status: 503, outcome: 'FAILED' });
        return true;
      },
      { timeoutMs: 10_000, what: "the refused change's audit record" },
    );
  });
});
