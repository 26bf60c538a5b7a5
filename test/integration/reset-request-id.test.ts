/**
 * A position reset is idempotent by its `X-Request-Id` (docs/operations.md#replay-or-skip): the
 * same request sent again answers the reset it started. The same id on another request (another
 * target or other shards) is a mistake the caller must hear about, not a 202 for a reset it did
 * not ask for.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHANGE, startStreamsCoordinator, type TestCoordinator } from '../support/coordinator.js';
import { startRedisServer, type RedisServerHandle } from '../support/redis-server.js';

let redis: RedisServerHandle;
let c: TestCoordinator;

beforeAll(async () => {
  redis = await startRedisServer();
  c = await startStreamsCoordinator(redis.url);
});
afterAll(async () => {
  await c?.close();
  await redis?.stop();
});

interface PositionsAnswer {
  reset: { resetId: string; to: unknown } | null;
  error?: { code: string; message: string; details?: Record<string, unknown> };
}

async function createGroup(): Promise<string> {
  const sp = `rid-${randomBytes(4).toString('hex')}`;
  const res = await c.call('POST', '/coord/v1/admin/groups', {
    user: 'writer',
    body: { streamPrefix: sp, consumerGroup: 'g', shardCount: 2, ...CHANGE },
  });
  expect(res.status).toBe(201);
  return sp;
}

async function reset(sp: string, body: Record<string, unknown>, requestId: string) {
  const res = await c.call('POST', `/coord/v1/admin/streams/${sp}/groups/g/positions`, {
    user: 'writer',
    body: { ...CHANGE, dryRun: false, ...body },
    headers: { 'x-request-id': requestId },
  });
  return { status: res.status, body: (await res.json()) as PositionsAnswer };
}

describe('a position reset repeated with the same X-Request-Id', () => {
  it('answers the reset it started when the request is the same', async () => {
    const sp = await createGroup();
    const first = await reset(sp, { to: 'earliest' }, `same-${sp}`);
    expect(first.status).toBe(202);
    const again = await reset(sp, { to: 'earliest' }, `same-${sp}`);
    expect(again.status).toBe(202);
    expect(again.body.reset).toMatchObject({ resetId: `same-${sp}`, to: 'earliest' });
  });

  it('is refused, 400 VALIDATION_FAILED, when it asks for another target', async () => {
    const sp = await createGroup();
    expect((await reset(sp, { to: 'earliest' }, `other-${sp}`)).status).toBe(202);
    const other = await reset(sp, { to: 'latest' }, `other-${sp}`);
    expect(other.status).toBe(400);
    expect(other.body.error).toMatchObject({
      code: 'VALIDATION_FAILED',
      details: { resetId: `other-${sp}` },
    });
    expect(other.body.error?.message).toMatch(/X-Request-Id/);
  });

  it('is refused when it names other shards', async () => {
    const sp = await createGroup();
    expect((await reset(sp, { to: 'earliest', shards: [0] }, `shards-${sp}`)).status).toBe(202);
    const other = await reset(sp, { to: 'earliest', shards: [1] }, `shards-${sp}`);
    expect(other.status).toBe(400);
    expect(other.body.error?.code).toBe('VALIDATION_FAILED');
    // Named in another order, or twice, the same shards are the same request.
    const same = await reset(sp, { to: 'earliest', shards: [0, 0] }, `shards-${sp}`);
    expect(same.status).toBe(202);
  });
});
