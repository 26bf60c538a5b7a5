/**
 * A forwarded request is bounded in time on the owner too (docs/operations.md#a-paused-owner):
 * one that reaches the owner after its deadline (the owner was paused while the forwarder
 * answered the caller 503) is refused and runs nothing; and a request target in absolute form
 * never chooses where a request is forwarded. Two replicas in this process, real HTTP, Redis.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  FORWARD_DEADLINE_HEADER,
  FORWARD_SIGNATURE_HEADER,
  FORWARDED_BY_HEADER,
  signatureOf,
} from '../../src/actors/ownership/forwarder.js';
import {
  CHANGE,
  startTestReplica,
  TEST_SECRET,
  type TestCoordinator,
  waitUntilSeenByEach,
} from '../support/coordinator.js';
import {
  randomKeyPrefix,
  startRedisServer,
  type RedisServerHandle,
} from '../support/redis-server.js';

let redis: RedisServerHandle;
const replicas = new Map<string, TestCoordinator>();

beforeAll(async () => {
  redis = await startRedisServer();
  const prefix = randomKeyPrefix();
  for (const id of ['l1', 'l2']) {
    replicas.set(id, await startTestReplica(redis.url, prefix, id, '30s'));
  }
  await waitUntilSeenByEach(replicas.values(), ['l1', 'l2']);
}, 60_000);
afterAll(async () => {
  for (const c of replicas.values()) await c.close();
  await redis?.stop();
});

/** A group and the replica that owns it. */
async function ownedGroup(sp: string): Promise<TestCoordinator> {
  const res = await replicas.get('l1')!.call('POST', '/coord/v1/admin/groups', {
    user: 'writer',
    body: { streamPrefix: sp, consumerGroup: 'g', shardCount: 1, ...CHANGE },
  });
  expect(res.status).toBe(201);
  return replicas.get(res.headers.get('x-coord-owner')!)!;
}

describe('a forwarded request after its deadline', () => {
  it('is refused 503 OWNER_UNAVAILABLE (late) and runs nothing; one in time runs', async () => {
    const owner = await ownedGroup('late');
    const other = [...replicas.values()].find((c) => c !== owner)!;
    const path = '/coord/v1/admin/streams/late/groups/g/freeze';
    const send = (deadline: number, requestId: string) =>
      owner.call('POST', path, {
        user: 'writer',
        body: CHANGE,
        headers: {
          'x-request-id': requestId,
          [FORWARDED_BY_HEADER]: other.services.replicaId,
          [FORWARD_DEADLINE_HEADER]: String(deadline),
          [FORWARD_SIGNATURE_HEADER]: signatureOf(
            TEST_SECRET,
            other.services.replicaId,
            'POST',
            path,
            requestId,
            String(deadline),
          ),
        },
      });
    const late = await send(Date.now() - 5_000, 'late-1');
    expect(late.status).toBe(503);
    expect(await late.json()).toMatchObject({
      error: { code: 'OWNER_UNAVAILABLE', details: { reason: 'late' } },
    });
    const view = async () =>
      (
        (await (
          await owner.call('GET', '/coord/v1/monitoring/streams/late/groups/g', { user: 'reader' })
        ).json()) as { status: string }
      ).status;
    expect(await view()).toBe('ACTIVE');
    const inTime = await send(Date.now() + 2_000, 'late-2');
    expect(inTime.status).toBe(200);
    expect(await view()).toBe('FROZEN');
  });
});

/** `coord_forwarded_requests_total` of `c` by outcome, read from `/metrics` over HTTP. */
async function forwardOutcomes(c: TestCoordinator): Promise<Record<string, number>> {
  const text = await (await fetch(`${c.url}/metrics`)).text();
  const counted: Record<string, number> = {};
  for (const [, outcome, value] of text.matchAll(
    /^coord_forwarded_requests_total\{outcome="([^"]+)"\} (\S+)$/gm,
  )) {
    counted[outcome!] = Number(value);
  }
  return counted;
}

describe('an absolute-form request target', () => {
  it('is not forwarded to the host it names', async () => {
    const owner = await ownedGroup('absolute');
    const other = [...replicas.values()].find((c) => c !== owner)!;
    const before = await forwardOutcomes(other);
    const { port } = new URL(other.url);
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), '127.0.0.1', () => {
        socket.write(
          `GET http://127.0.0.1:1/coord/v1/routing/streams/absolute/groups/g HTTP/1.1\r\n` +
            `Host: x\r\nAuthorization: Bearer ${other.token('producer')}\r\nConnection: close\r\n\r\n`,
        );
      });
      let text = '';
      socket.on('data', (chunk) => (text += chunk.toString()));
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 400/);
    expect(answer).toContain('VALIDATION_FAILED');
    // A client's malformed target is not a forward, least of all `loop_refused`: the outcome
    // that says the replicas disagree on the owner (docs/operations.md#replicas-handover-failover-and-a-paused-owner).
    expect(await forwardOutcomes(other)).toEqual(before);
  });
});
