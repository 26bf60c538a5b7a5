/**
 * A slow or broken network between replicas (docs/operations.md#a-paused-owner): the owner of
 * a group advertises a TCP proxy as its URL, so every request another replica forwards to it
 * crosses the proxy, which adds latency, stalls and resets connections. Each forwarded request
 * gets the owner's answer or 503 within the answer timeout (plus the added latency), never a
 * hang or a closed socket, and the group is served again once the link is healthy.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHANGE, startReplicaOn, type TestCoordinator } from '../support/coordinator.js';
import {
  freePort,
  randomKeyPrefix,
  startRedisServer,
  waitFor,
  type RedisServerHandle,
} from '../support/redis-server.js';
import { TcpProxy } from '../support/tcp-proxy.js';

const ANSWER_TIMEOUT_MS = 2_000;
/** Room for a busy machine on top of the bound the feature promises. */
const SLACK_MS = 1_500;

let redis: RedisServerHandle;
let proxy: TcpProxy;
let owner: TestCoordinator;
let other: TestCoordinator;

beforeAll(async () => {
  redis = await startRedisServer();
  const keyPrefix = randomKeyPrefix();
  const start = (id: string, overrides: Record<string, unknown> = {}) =>
    startReplicaOn(redis.url, keyPrefix, id, {
      'lease.ttl': '3s',
      'forwarding.answer-timeout': `${ANSWER_TIMEOUT_MS}ms`,
      ...overrides,
    });
  const port = await freePort();
  proxy = await TcpProxy.start(`http://127.0.0.1:${port}`);
  owner = await start('link-a', { 'http.port': port, 'http.advertised-url': proxy.url });
  other = await start('link-b');
  await waitFor(
    () => ['link-a', 'link-b'].every((id) => other.services.replicas?.urlOf(id) !== null),
    { what: 'both replicas seen by the forwarding one' },
  );
}, 60_000);
afterAll(async () => {
  await other?.close();
  await owner?.close();
  await proxy?.close();
  await redis?.stop();
});

/** A group that `owner` owns, reached through `other`. */
async function groupOfOwner(): Promise<string> {
  for (let i = 0; i < 50; i++) {
    const sp = `link-${i}`;
    const res = await other.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: sp, consumerGroup: 'g', shardCount: 1, ...CHANGE },
    });
    if (res.headers.get('x-coord-owner') === 'link-a') return sp;
  }
  throw new Error('no group owned by link-a');
}

/** A routing read through the forwarding replica: its status and how long it took. */
async function viaOther(sp: string): Promise<{ status: number; ms: number; code?: string }> {
  const started = Date.now();
  const res = await other.call('GET', `/coord/v1/routing/streams/${sp}/groups/g`, {
    user: 'producer',
  });
  const body = (await res.json()) as { error?: { code: string } };
  return {
    status: res.status,
    ms: Date.now() - started,
    ...(body.error ? { code: body.error.code } : {}),
  };
}

describe('forwarding across a slow or broken link to the owner', () => {
  it('answers every forwarded request in time, through latency, a stall and resets', async () => {
    const sp = await groupOfOwner();
    expect((await viaOther(sp)).status).toBe(200);

    // Latency: slower, but answered by the owner.
    proxy.setMode('latency', 200);
    for (let i = 0; i < 3; i++) {
      const answer = await viaOther(sp);
      expect(answer.status).toBe(200);
      expect(answer.ms).toBeLessThan(ANSWER_TIMEOUT_MS + SLACK_MS);
    }

    // A stall: 503 OWNER_UNAVAILABLE within the answer timeout, never a hang.
    proxy.setMode('stall');
    const stalled = await Promise.all([viaOther(sp), viaOther(sp), viaOther(sp)]);
    for (const answer of stalled) {
      expect(answer).toMatchObject({ status: 503, code: 'OWNER_UNAVAILABLE' });
      expect(answer.ms).toBeLessThan(ANSWER_TIMEOUT_MS + SLACK_MS);
    }
    proxy.setMode('pass');
    await waitFor(async () => (await viaOther(sp)).status === 200, {
      what: 'served again after the stall',
      timeoutMs: 15_000,
      intervalMs: 200,
    });

    // Resets while requests are in flight: each is answered (200 or 503), none hangs.
    proxy.setMode('latency', 300);
    const inFlight = [viaOther(sp), viaOther(sp), viaOther(sp)];
    await new Promise((resolve) => setTimeout(resolve, 100));
    const reset = proxy.reset();
    const answers = await Promise.all(inFlight);
    for (const answer of answers) {
      expect([200, 503]).toContain(answer.status);
      expect(answer.ms).toBeLessThan(ANSWER_TIMEOUT_MS + SLACK_MS);
    }
    proxy.setMode('pass');
    await waitFor(async () => (await viaOther(sp)).status === 200, {
      what: 'served again after the resets',
      timeoutMs: 15_000,
      intervalMs: 200,
    });
    console.log(
      `[replica-link] stall answers ${stalled.map((a) => `${a.status}@${a.ms}ms`).join(', ')}; ` +
        `reset ${reset} connections, answers ${answers.map((a) => `${a.status}@${a.ms}ms`).join(', ')}`,
    );
  });
});
