import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHANGE, startTestCoordinator, type TestCoordinator } from '../support/coordinator.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';

describe('degraded store: Redis goes away under a running coordinator', () => {
  let redis: RedisServerHandle;
  let c: TestCoordinator;

  beforeAll(async () => {
    redis = await startRedisServer();
    c = await startTestCoordinator({ store: 'redis', redisUrl: redis.url });
  });
  afterAll(async () => {
    await c?.close();
    await redis?.stop();
  });

  const health = async () =>
    (await (await c.call('GET', '/coord/v1/monitoring/health')).json()) as {
      status: string;
      store: string;
    };

  it('turns DEGRADED/DOWN, answers admin mutations 503 with no partial write, and comes back UP', async () => {
    const create = await c.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: 'deg', consumerGroup: 'g', shardCount: 2, ...CHANGE },
    });
    expect(create.status).toBe(201);
    const before = await redis.client().hgetall(`${c.keyPrefix}:{deg:g}:metadata`);
    expect(before.storeRevision).toBeDefined();

    await redis.kill();
    await waitFor(async () => (await health()).status === 'DEGRADED', { what: 'health DEGRADED' });
    expect(await health()).toMatchObject({ status: 'DEGRADED', store: 'DOWN' });

    const mutations: Array<[string, string, unknown]> = [
      [
        'POST',
        '/coord/v1/admin/groups',
        { streamPrefix: 'deg', consumerGroup: 'other', shardCount: 1, ...CHANGE },
      ],
      ['POST', '/coord/v1/admin/streams/deg/groups/g/freeze', CHANGE],
      ['POST', '/coord/v1/admin/streams/deg/groups/g/producers/pause', CHANGE],
      ['DELETE', '/coord/v1/admin/streams/deg/groups/g', CHANGE],
    ];
    for (const [method, path, body] of mutations) {
      const res = await c.call(method, path, { user: 'writer', body });
      expect(res.status, `${method} ${path}`).toBe(503);
      const err = (await res.json()) as { error: { code: string } };
      expect(['STORE_UNAVAILABLE', 'AUDIT_UNAVAILABLE']).toContain(err.error.code);
    }

    await redis.restart();
    await waitFor(async () => (await health()).status === 'UP', { what: 'health UP again' });
    expect(await health()).toMatchObject({ status: 'UP', store: 'UP' });
    // Writable again: the mutation refused during the outage now goes through.
    const again = await c.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: 'deg', consumerGroup: 'other', shardCount: 1, ...CHANGE },
    });
    expect(again.status).toBe(201);
  });
});

describe('degraded store: no partial write when Redis stops mid-flight (persistent server)', () => {
  let redis: RedisServerHandle;
  let c: TestCoordinator;

  beforeAll(async () => {
    redis = await startRedisServer({
      extraArgs: ['--appendonly', 'yes', '--appendfsync', 'always'],
    });
    c = await startTestCoordinator({ store: 'redis', redisUrl: redis.url });
  });
  afterAll(async () => {
    await c?.close();
    await redis?.stop();
  });

  it('keeps the stored group exactly as it was after refused mutations', async () => {
    await c.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: 'deg2', consumerGroup: 'g', shardCount: 3, ...CHANGE },
    });
    const key = `${c.keyPrefix}:{deg2:g}:metadata`;
    const before = await redis.client().hgetall(key);
    await redis.kill();
    const res = await c.call('POST', '/coord/v1/admin/streams/deg2/groups/g/freeze', {
      user: 'writer',
      body: CHANGE,
    });
    expect(res.status).toBe(503);
    await redis.restart();
    await waitFor(async () => {
      const h = (await (await c.call('GET', '/coord/v1/monitoring/health')).json()) as {
        status: string;
      };
      return h.status === 'UP';
    });
    expect(await redis.client().hgetall(key)).toEqual(before);
    const frozen = await c.call('POST', '/coord/v1/admin/streams/deg2/groups/g/freeze', {
      user: 'writer',
      body: CHANGE,
    });
    expect(frozen.status).toBe(200);
    expect((await redis.client().hgetall(key)).status).toBe('FROZEN');
  });
});
