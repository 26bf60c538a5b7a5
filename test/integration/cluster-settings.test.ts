/**
 * Which Redis the coordinator uses follows `coordinator.store.type`
 * (README.md#settings): `coordinator.store.cluster-nodes` left set beside `type: redis` (an
 * environment kept from a Redis Cluster deployment) is not used, by the store nor by the leases.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHANGE, startTestCoordinator } from '../support/coordinator.js';
import {
  randomKeyPrefix,
  startRedisCluster,
  startRedisServer,
  type RedisClusterHandle,
  type RedisServerHandle,
} from '../support/redis-server.js';

let cluster: RedisClusterHandle;
let redis: RedisServerHandle;

beforeAll(async () => {
  redis = await startRedisServer();
  cluster = await startRedisCluster();
}, 90_000);
afterAll(async () => {
  await cluster?.stop();
  await redis?.stop();
});

describe('store type redis with cluster nodes also set', () => {
  it('takes its leases on the store Redis and serves its groups', async () => {
    const keyPrefix = randomKeyPrefix();
    const start = () =>
      startTestCoordinator({
        store: 'redis',
        redisUrl: redis.url,
        overrides: { 'store.cluster-nodes': cluster.nodes, 'store.key-prefix': keyPrefix },
      });
    const first = await start();
    try {
      const created = await first.call('POST', '/coord/v1/admin/groups', {
        user: 'writer',
        body: { streamPrefix: 'settings', consumerGroup: 'g', shardCount: 2, ...CHANGE },
      });
      expect(created.status, await created.clone().text()).toBe(201);
    } finally {
      await first.close();
    }
    // A restarted replica loads the group: its claim checks the lease it took.
    const second = await start();
    try {
      const frozen = await second.call('POST', '/coord/v1/admin/streams/settings/groups/g/freeze', {
        user: 'writer',
        body: CHANGE,
      });
      expect(frozen.status, await frozen.clone().text()).toBe(200);
      expect(await redis.client().exists(`${keyPrefix}:{settings:g}:lease`)).toBe(1);
    } finally {
      await second.close();
    }
  });
});
