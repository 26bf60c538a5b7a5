/**
 * The store verbs of lost metadata (docs/operations.md#lost-metadata), the same on MemoryStore
 * and on RedisStore (standalone and Cluster, real redis-servers): the failure record of a group
 * whose metadata key is gone, written and merged only while the key is missing and registered
 * with it; and the marks of deliberate deletes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../src/store/memory-store.js';
import { RedisStore } from '../../src/store/redis-store.js';
import type { FailureRecord, Store } from '../../src/store/store.js';
import { makeGroupState, refOf } from '../support/fixtures.js';
import {
  randomKeyPrefix,
  startRedisCluster,
  startRedisServer,
  type RedisClusterHandle,
  type RedisServerHandle,
} from '../support/redis-server.js';

const REF = { streamPrefix: 'orders', consumerGroup: 'lost' };

function lostRecord(overrides: Partial<FailureRecord> = {}): FailureRecord {
  return {
    reason: 'METADATA_LOST',
    at: 1_767_225_600_000,
    knownRevision: 9,
    storeRevision: null,
    lifecycleId: 'life-1',
    metadataVersion: 4,
    highestVersionSeen: 4,
    assignmentEpoch: 6,
    memberEpochSeq: 11,
    ...overrides,
  };
}

function describeLostMetadata(name: string, make: () => Store) {
  describe(`${name}: lost metadata`, () => {
    let store: Store;
    beforeAll(() => {
      store = make();
    });
    afterAll(async () => {
      await store.close();
    });

    it('records the failure of a group whose key is missing and registers it; nothing else', async () => {
      const ref = { ...REF, consumerGroup: 'record' };
      expect(await store.recordLostGroup(ref, lostRecord())).toBe('recorded');
      expect(await store.readFailure(ref)).toEqual(lostRecord());
      expect(await store.isRegistered(ref)).toBe(true);
      expect(await store.loadGroup(ref)).toBeNull();
      const { groups } = await store.listGroups({ limit: 100 });
      expect(groups).toContainEqual(ref);
    });

    it('merges into an earlier record: its reason, time and lifecycle kept, the highest numbers', async () => {
      const ref = { ...REF, consumerGroup: 'merge' };
      await store.recordFailure(ref, lostRecord({ reason: 'STORE_REVISION_REGRESSION' }));
      const later = lostRecord({
        at: 1_767_225_700_000,
        lifecycleId: 'life-2',
        knownRevision: 3,
        metadataVersion: 8,
        highestVersionSeen: 12,
        assignmentEpoch: 2,
        memberEpochSeq: 40,
      });
      expect(await store.recordLostGroup(ref, later)).toBe('recorded');
      expect(await store.readFailure(ref)).toEqual(
        lostRecord({
          reason: 'STORE_REVISION_REGRESSION',
          knownRevision: 9,
          metadataVersion: 8,
          highestVersionSeen: 12,
          assignmentEpoch: 6,
          memberEpochSeq: 40,
        }),
      );
    });

    it('an earlier record that did not know the lifecycle takes the one given', async () => {
      const ref = { ...REF, consumerGroup: 'unknown' };
      await store.recordLostGroup(ref, lostRecord({ lifecycleId: 'unknown' }));
      await store.recordLostGroup(ref, lostRecord({ lifecycleId: 'life-9' }));
      expect((await store.readFailure(ref))?.lifecycleId).toBe('life-9');
    });

    it('writes nothing while the metadata key exists', async () => {
      const state = makeGroupState({ ...REF, consumerGroup: 'present' });
      const ref = refOf(state);
      await store.createGroup(state);
      expect(await store.recordLostGroup(ref, lostRecord())).toBe('exists');
      expect(await store.readFailure(ref)).toBeNull();
      expect(await store.loadGroup(ref)).not.toBeNull();
    });

    it('marks deleted lifecycles, oldest first', async () => {
      const ref = { ...REF, consumerGroup: 'deleted' };
      expect(await store.readDeletions(ref)).toEqual([]);
      await store.recordDeletion(ref, 'life-b', 2_000);
      await store.recordDeletion(ref, 'life-a', 1_000);
      expect(await store.readDeletions(ref)).toEqual([
        { lifecycleId: 'life-a', at: 1_000 },
        { lifecycleId: 'life-b', at: 2_000 },
      ]);
      expect(await store.readDeletions({ ...ref, consumerGroup: 'other' })).toEqual([]);
    });
  });
}

describeLostMetadata(
  'MemoryStore',
  () => new MemoryStore({ keyPrefix: randomKeyPrefix(), auditMaxLen: 100 }),
);

describe('on a standalone redis-server', () => {
  let redis: RedisServerHandle;
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => {
    await redis?.stop();
  });
  describeLostMetadata(
    'RedisStore',
    () => new RedisStore({ url: redis.url, keyPrefix: randomKeyPrefix(), auditMaxLen: 100 }),
  );
});

describe('on a 3-master Redis Cluster', () => {
  let cluster: RedisClusterHandle;
  beforeAll(async () => {
    cluster = await startRedisCluster();
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });
  describeLostMetadata(
    'RedisStore (cluster)',
    () =>
      new RedisStore({
        clusterNodes: cluster.nodes,
        keyPrefix: randomKeyPrefix(),
        auditMaxLen: 100,
      }),
  );
});
