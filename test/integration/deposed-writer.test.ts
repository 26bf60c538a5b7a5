/**
 * A replica that kept serving a group past the moment it was deposed (a process paused between
 * its serving check and its write, docs/operations.md#a-paused-owner) has its write refused.
 * What it does next must not harm the group as it is now: while it was away another owner
 * deleted the group on purpose, and the stale replica must step aside, not bring the group
 * back as lost.
 *
 * The deposition is made behind the replica's back on the real redis-server, with the store
 * verbs another owner uses (lease taken, claim, delete, deletion mark): the replica's lease
 * deadline (a 30 s TTL) has not passed, which is how a paused replica's stale work finds it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyNames } from '../../src/store/keys.js';
import { RedisStore } from '../../src/store/redis-store.js';
import { CHANGE, startReplicaOn, type TestCoordinator } from '../support/coordinator.js';
import { joinBody } from '../support/members.js';
import {
  randomKeyPrefix,
  startRedisServer,
  waitFor,
  type RedisServerHandle,
} from '../support/redis-server.js';

describe('a deposed owner whose write is refused by the fence', () => {
  let redis: RedisServerHandle;
  let replica: TestCoordinator;
  let other: RedisStore;
  const prefix = randomKeyPrefix();
  const ref = { streamPrefix: 'deposed', consumerGroup: 'g' };

  beforeAll(async () => {
    redis = await startRedisServer();
    replica = await startReplicaOn(redis.url, prefix, 'r1', { 'lease.ttl': '30s' });
    await waitFor(() => replica.services.replicas?.urlOf('r1') != null, { what: 'registered' });
    other = new RedisStore({ url: redis.url, keyPrefix: prefix, auditMaxLen: 10 });
  }, 60_000);

  afterAll(async () => {
    await other?.close();
    await replica?.close();
    await redis?.stop();
  });

  it('steps aside: a group deleted on purpose meanwhile is not recorded as lost', async () => {
    const gone = { streamPrefix: 'deposed', consumerGroup: 'deleted' };
    const created = await replica.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { ...gone, shardCount: 2, ...CHANGE },
    });
    expect(created.status).toBe(201);
    const keys = keyNames(prefix);

    // Meanwhile another owner: takes the lease, claims and deletes the group, marked deleted.
    await redis.client().set(keys.lease(gone), 'another-owner', 'PX', 30_000);
    const claimed = await other.claimGroup(gone, 'another-owner');
    await other.deleteGroup(gone, claimed.fence, claimed.revision);
    await other.recordDeletion(gone, claimed.state.lifecycleId, Date.now());

    const join = await replica.call(
      'POST',
      '/coord/v1/consumer/streams/deposed/groups/deleted/heartbeat',
      { user: 'consumer', body: joinBody('m1') },
    );
    expect(join.status).toBe(404);
    expect(((await join.json()) as { error: { code: string } }).error.code).toBe('GROUP_NOT_FOUND');
    // Not brought back as lost: no failure record, not registered, nothing stored.
    expect(await redis.client().exists(keys.failure(gone))).toBe(0);
    expect(await other.isRegistered(gone)).toBe(false);
    expect(await other.loadGroup(gone)).toBeNull();
  });
});
