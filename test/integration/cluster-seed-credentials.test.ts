import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { coordctl } from '../support/cli.js';
import { CHANGE, startTestCoordinator } from '../support/coordinator.js';
import { captureLogs } from '../support/logs.js';
import { hashSlot } from '../../src/store/hash-slot.js';
import {
  randomKeyPrefix,
  slotOwner,
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

/**
 * The credentials of the seeds are the cluster's: every master a client finds through the seed
 * (CLUSTER SLOTS) is a node of the same cluster, behind the same password. A deployment names
 * one seed, or names its nodes by DNS names that CLUSTER SLOTS answers as addresses.
 */
describe('a password-protected Redis Cluster given by one seed with credentials', () => {
  const password = 'cluster-password';
  let cluster: RedisClusterHandle;
  beforeAll(async () => {
    cluster = await startRedisCluster();
    for (const client of cluster.clients()) {
      await client.config('SET', 'masterauth', password);
      await client.config('SET', 'requirepass', password);
      await client.auth(password);
    }
  }, 60_000);
  afterAll(async () => cluster?.stop());

  it('serves groups as the ACL user docs/operations.md gives the coordinator', async () => {
    const keyPrefix = randomKeyPrefix();
    const userPassword = 'coordinator-password';
    // Every `ACL SETUSER coordinator` line of the durability controls, on every node.
    const doc = readFileSync('docs/operations.md', 'utf8').replace(/\\\n\s*/g, ' ');
    const lines = doc.split('\n').filter((line) => /^ACL SETUSER (coordinator|backup) /.test(line));
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) {
      const words = line
        .replaceAll('redis-stream:coord', keyPrefix)
        .replace('COORDINATOR_PASSWORD', userPassword)
        .replace('BACKUP_PASSWORD', userPassword)
        .split(/\s+/)
        .filter(Boolean)
        .slice(1);
      for (const client of cluster.clients()) await client.call('ACL', ...words);
    }
    const c = await startTestCoordinator({
      store: 'redis',
      overrides: {
        'store.type': 'redis-cluster',
        'store.cluster-nodes': cluster.nodes.map(
          (node) => `redis://coordinator:${userPassword}@${node}`,
        ),
        'store.key-prefix': keyPrefix,
      },
    });
    try {
      const created = await c.call('POST', '/coord/v1/admin/groups', {
        user: 'writer',
        body: { streamPrefix: 'orders', consumerGroup: 'g', shardCount: 2, ...CHANGE },
      });
      expect(created.status, await created.clone().text()).toBe(201);
      const frozen = await c.call('POST', '/coord/v1/admin/streams/orders/groups/g/freeze', {
        user: 'writer',
        body: CHANGE,
      });
      expect(frozen.status, await frozen.clone().text()).toBe(200);
      const lag = await c.call('GET', '/coord/v1/monitoring/streams/orders/groups/g/lag', {
        user: 'reader',
      });
      expect(lag.status, await lag.clone().text()).toBe(200);
      const backup = await coordctl(['backup', '--group', 'orders:g'], {
        env: {
          COORDINATOR_STORE_CLUSTER_NODES: cluster.nodes
            .map((node) => `redis://backup:${userPassword}@${node}`)
            .join(','),
          COORDINATOR_STORE_KEY_PREFIX: keyPrefix,
        },
      });
      expect(backup.code, backup.stderr).toBe(0);
      expect(JSON.parse(backup.stdout)).toMatchObject({ groups: [{ consumerGroup: 'g' }] });
    } finally {
      await c.close();
    }
  });

  it('serves the groups whose keys are on the other masters', async () => {
    const keyPrefix = randomKeyPrefix();
    // A group whose keys hash to a master that is not the seed.
    let sp = '';
    for (let i = 0; sp === ''; i++) {
      const slot = hashSlot(`{auth-${i}:g}`);
      if ((await slotOwner(cluster, slot)) !== 0) sp = `auth-${i}`;
    }
    const c = await startTestCoordinator({
      store: 'redis',
      overrides: {
        'store.type': 'redis-cluster',
        'store.cluster-nodes': [`redis://:${password}@${cluster.nodes[0]}`],
        'store.key-prefix': keyPrefix,
      },
    });
    try {
      const created = await c.call('POST', '/coord/v1/admin/groups', {
        user: 'writer',
        body: { streamPrefix: sp, consumerGroup: 'g', shardCount: 3, ...CHANGE },
      });
      expect(created.status, await created.clone().text()).toBe(201);
      const lag = await c.call('GET', `/coord/v1/monitoring/streams/${sp}/groups/g/lag`, {
        user: 'reader',
      });
      expect(lag.status, await lag.clone().text()).toBe(200);
      const owner = cluster.clients()[await slotOwner(cluster, hashSlot(`{${sp}:g}`))]!;
      expect(await owner.hget(`${keyPrefix}:{${sp}:g}:metadata`, 'shardCount')).toBe('3');
    } finally {
      await c.close();
    }
  });
});
