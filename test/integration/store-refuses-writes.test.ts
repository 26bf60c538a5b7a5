/**
 * A store that answers but refuses writes (docs/operations.md#when-the-store-is-down): Redis
 * turned read-only (`REPLICAOF` a master that does not exist), so PING and reads answer and
 * every write gets `READONLY`. A group that has to be taken (its lease written) is answered 503
 * `STORE_UNAVAILABLE` naming the refusal, not `GROUP_MOVED`, and the store's health stays DOWN
 * whatever the last command was, until writes are accepted again.
 *
 * One real redis-server, replicas in this process with real HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHANGE, startReplicaOn, type TestCoordinator } from '../support/coordinator.js';
import {
  randomKeyPrefix,
  startRedisServer,
  waitFor,
  type RedisServerHandle,
} from '../support/redis-server.js';

const REF = { streamPrefix: 'ro', consumerGroup: 'g' };
const GROUP = `/coord/v1/monitoring/streams/${REF.streamPrefix}/groups/${REF.consumerGroup}`;

interface ErrorBody {
  readonly error: { readonly code: string; readonly message: string };
}

describe('a store that refuses writes', () => {
  let redis: RedisServerHandle;
  const prefix = randomKeyPrefix();
  let replica: TestCoordinator | null = null;

  beforeAll(async () => {
    redis = await startRedisServer();
    // The group is created by one replica and stored; the replica asked later never loaded it.
    const creator = await startReplicaOn(redis.url, prefix, 'r1', { 'lease.ttl': '10s' });
    const created = await creator.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { ...REF, shardCount: 2, ...CHANGE },
    });
    expect(created.status).toBe(201);
    await creator.close();
    // Lease TTL 10 s: the replica's registry entry lives 5 s, so while it lasts the replica
    // owns the group and a request takes the lease.
    replica = await startReplicaOn(redis.url, prefix, 'r2', { 'lease.ttl': '10s' });
    const self = replica;
    await waitFor(() => Boolean(self.services.replicas?.urlOf('r2')), { what: 'r2 registered' });
  }, 60_000);

  afterAll(async () => {
    await redis?.client().call('REPLICAOF', 'NO', 'ONE');
    await replica?.close();
    await redis?.stop();
  });

  const health = async (c: TestCoordinator) =>
    (await (await c.call('GET', '/coord/v1/monitoring/health')).json()) as { store: string };

  it('answers STORE_UNAVAILABLE naming the refusal, and stays DOWN until writes are accepted', async () => {
    const c = replica!;
    // Nothing listens on port 1: the data stays as it is, and every write is refused.
    await redis.client().call('REPLICAOF', '127.0.0.1', '1');

    const res = await c.call('GET', GROUP, { user: 'reader' });
    const body = (await res.json()) as ErrorBody;
    expect({ status: res.status, code: body.error.code }).toEqual({
      status: 503,
      code: 'STORE_UNAVAILABLE',
    });
    expect(body.error.message).toContain('READONLY');

    // The next refresh of the replica's registry entry is refused: the store is DOWN, and a
    // read that succeeds does not make it healthy again.
    await waitFor(() => c.services.store.health() === 'DOWN', {
      timeoutMs: 15_000,
      what: 'a write of the store refused',
    });
    await c.services.store.readRevisions([REF]);
    expect(c.services.store.health()).toBe('DOWN');
    expect(await health(c)).toMatchObject({ store: 'DOWN' });
    await c.services.store.readFailure(REF);
    expect(c.services.store.health()).toBe('DOWN');
    expect(c.services.store.outage()?.cause).toContain('READONLY');

    // Once its registry entry expired nobody owns the group: still the store, not a move.
    await waitFor(async () => (await redis.client().exists(`${prefix}:replica:r2`)) === 0, {
      timeoutMs: 15_000,
      what: 'the entry of r2 expired in Redis',
    });
    const later = await c.call('GET', GROUP, { user: 'reader' });
    expect(((await later.json()) as ErrorBody).error.code).toBe('STORE_UNAVAILABLE');

    await redis.client().call('REPLICAOF', 'NO', 'ONE');
    await waitFor(async () => (await health(c)).store === 'UP', {
      timeoutMs: 15_000,
      what: 'the store UP again',
    });
    await waitFor(async () => (await c.call('GET', GROUP, { user: 'reader' })).status === 200, {
      timeoutMs: 15_000,
      what: 'the group served again',
    });
  });
});
