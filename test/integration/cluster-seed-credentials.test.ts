import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHANGE, startTestCoordinator } from '../support/coordinator.js';
import { captureLogs } from '../support/logs.js';
import {
  randomKeyPrefix,
  startRedisCluster,
  waitFor,
  type RedisClusterHandle,
} from '../support/redis-server.js';

/**
 * Redis Cluster seeds may be URLs with credentials (`redis://user:password@host:port`), which
 * ioredis uses as given: what the coordinator writes about the store names each seed by
 * `host:port` only (docs/operations.md#logs: Redis credentials never appear), in the
 * emptied-store error line (docs/operations.md#lost-metadata) and in the state file alike.
 */
describe('a Redis Cluster given by seeds with credentials', () => {
  const password = 'cluster-password-that-must-not-be-printed';
  let cluster: RedisClusterHandle;
  beforeAll(async () => {
    cluster = await startRedisCluster();
  }, 60_000);
  afterAll(async () => cluster?.stop());

  it('is named by host:port when the store comes back empty', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'cluster-seed-state-'));
    const overrides = {
      'store.type': 'redis-cluster',
      'store.cluster-nodes': cluster.nodes.map((node) => `redis://:${password}@${node}`),
      'store.key-prefix': randomKeyPrefix(),
      'replica.state-dir': stateDir,
      'store.verify-interval': '100ms',
    };
    try {
      const first = await startTestCoordinator({ store: 'redis', overrides });
      try {
        const created = await first.call('PUT', '/coord/v1/admin/streams/seeds/groups/g', {
          user: 'writer',
          body: { shardCount: 1, ...CHANGE },
        });
        expect(created.status).toBe(201);
        await waitFor(() => readdirSync(stateDir).some((name) => name.endsWith('.json')), {
          what: 'the state file to record that groups were seen',
        });
      } finally {
        await first.close();
      }
      for (const client of cluster.clients()) await client.flushall();

      const logs = captureLogs('warn');
      const second = await startTestCoordinator({ store: 'redis', overrides, logger: logs.logger });
      try {
        const emptied = () =>
          logs.lines.filter(
            (line) => line.level === 'error' && /holds no group/.test(line.message),
          );
        await waitFor(() => emptied().length > 0, { what: 'the emptied-store error line' });
        expect(emptied()[0]?.message).toContain(cluster.nodes[0]);
        expect(logs.text()).not.toContain(password);
        for (const name of readdirSync(stateDir)) {
          expect(readFileSync(join(stateDir, name), 'utf8')).not.toContain(password);
        }
      } finally {
        await second.close();
      }
    } finally {
      rmSync(stateDir, { recursive: true, force: true });
    }
  });
});
