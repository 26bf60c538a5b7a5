/**
 * A replica that kept serving a group past the moment it was deposed (a process paused between
 * its serving check and its write, docs/operations.md#a-paused-owner) has its write refused by
 * the fence. What it does next must not harm the group as it is now: while it was away the
 * group was claimed, deleted on purpose (or deleted and created again: a new lifecycle, a fence
 * far above its own), and the stale replica must step aside, neither failing the new group
 * closed nor bringing the deleted one back as lost. A lifecycle that no delete ended, replaced
 * by another, is still a loss.
 *
 * The deposition is made behind the replica's back on the real redis-server, with the store
 * verbs another owner uses (lease taken, claim, delete and its mark, create): the replica's lease deadline
 * (a 30 s TTL) has not passed, which is how a paused replica's stale work finds it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyNames, registryMember } from '../../src/store/keys.js';
import { RedisStore } from '../../src/store/redis-store.js';
import { CHANGE, startReplicaOn, type TestCoordinator } from '../support/coordinator.js';
import { makeGroupState } from '../support/fixtures.js';
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

  it('steps aside: the group created again meanwhile is not failed closed', async () => {
    const created = await replica.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { ...ref, shardCount: 2, ...CHANGE },
    });
    expect(created.status).toBe(201);
    const keys = keyNames(prefix);

    // Meanwhile another owner: takes the lease, claims, deletes, and creates the group again.
    await redis.client().set(keys.lease(ref), 'another-owner', 'PX', 30_000);
    const claimed = await other.claimGroup(ref, 'another-owner');
    await other.deleteGroup(ref, claimed.fence, claimed.revision);
    await other.recordDeletion(ref, claimed.state.lifecycleId, Date.now());
    const again = await other.createGroup(makeGroupState({ ...ref, shardCount: 2 }));

    // The stale owner's write (a join) is refused by the fence.
    const join = await replica.call(
      'POST',
      '/coord/v1/consumer/streams/deposed/groups/g/heartbeat',
      {
        user: 'consumer',
        body: joinBody('m1'),
      },
    );
    expect(join.status).toBe(503);
    const body = (await join.json()) as { error: { code: string } };
    expect(body.error.code).toBe('FENCED_WRITE');

    // The new group is as its owner created it: no failure record, its lifecycle intact.
    expect(await redis.client().exists(keys.failure(ref))).toBe(0);
    const stored = await other.loadGroup(ref);
    expect(stored?.state.lifecycleId).toBe(again.state.lifecycleId);
    expect(stored?.state.status).toBe('ACTIVE');
    expect(stored?.fence).toBe(again.fence);
  });

  it('still fails closed a group created again over a lifecycle nobody deleted', async () => {
    const lost = { streamPrefix: 'deposed', consumerGroup: 'lost' };
    const created = await replica.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { ...lost, shardCount: 2, ...CHANGE },
    });
    expect(created.status).toBe(201);
    const keys = keyNames(prefix);

    // The store lost the group (no delete marked its lifecycle), and it was created anew.
    await redis.client().del(keys.metadata(lost), keys.lease(lost));
    await redis.client().zrem(keys.groups(), registryMember(lost));
    await redis.client().set(keys.lease(lost), 'another-owner', 'PX', 30_000);
    await other.createGroup(makeGroupState({ ...lost, shardCount: 2 }));

    const join = await replica.call(
      'POST',
      '/coord/v1/consumer/streams/deposed/groups/lost/heartbeat',
      { user: 'consumer', body: joinBody('m1') },
    );
    expect(join.status).toBe(503);
    expect(((await join.json()) as { error: { code: string } }).error.code).toBe(
      'GROUP_FAILED_CLOSED',
    );
    expect(await redis.client().exists(keys.failure(lost))).toBe(1);
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
