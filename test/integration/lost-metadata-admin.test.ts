/**
 * An admin request that reports what it knows of a group (X-Observed-Metadata-Version,
 * X-Observed-Lifecycle-Id) is a witness like a client's report: a group whose metadata is gone
 * and that no replica remembers fails closed instead of reading as unknown
 * (docs/operations.md#lost-metadata).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHANGE, startTestCoordinator, type TestCoordinator } from '../support/coordinator.js';
import {
  randomKeyPrefix,
  startRedisServer,
  type RedisServerHandle,
} from '../support/redis-server.js';

let redis: RedisServerHandle;
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis.stop();
});

describe('an admin request reporting a version of a lost group', () => {
  it('fails the group closed (409, listed FAILED_CLOSED METADATA_LOST); without the report it stays unknown (404)', async () => {
    const keyPrefix = randomKeyPrefix();
    const overrides = { 'store.key-prefix': keyPrefix };
    const first = await startTestCoordinator({ store: 'redis', redisUrl: redis.url, overrides });
    const created = await first.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: 'gone', consumerGroup: 'g', shardCount: 2, ...CHANGE },
    });
    const { lifecycleId, metadataVersion } = (await created.json()) as {
      lifecycleId: string;
      metadataVersion: number;
    };
    await first.close();
    // The store is emptied while no coordinator runs: nobody remembers the group.
    await redis.client().flushall();
    let second: TestCoordinator | null = null;
    try {
      second = await startTestCoordinator({ store: 'redis', redisUrl: redis.url, overrides });
      const freeze = (headers: Record<string, string> = {}) =>
        second!.call('POST', '/coord/v1/admin/streams/gone/groups/g/freeze', {
          user: 'writer',
          body: CHANGE,
          headers,
        });
      expect((await freeze()).status).toBe(404);
      const refused = await freeze({
        'x-observed-metadata-version': String(metadataVersion),
        'x-observed-lifecycle-id': lifecycleId,
      });
      expect(refused.status).toBe(409);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe(
        'GROUP_FAILED_CLOSED_ADMIN',
      );
      const view = (await (
        await second.call('GET', '/coord/v1/monitoring/streams/gone/groups/g', { user: 'reader' })
      ).json()) as { status: string; failureReason: string };
      expect(view).toMatchObject({ status: 'FAILED_CLOSED', failureReason: 'METADATA_LOST' });
    } finally {
      await second?.close();
    }
  });
});
