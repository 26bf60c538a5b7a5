import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Cluster } from 'ioredis';
import type { Redis } from 'ioredis';
import {
  CoordinatorError,
  FenceMismatchError,
  RevisionMismatchError,
  LeaseNotHeldError,
  StoreUnavailableError,
} from '../../src/errors.js';
import { PersistentMap } from '../../src/collections/persistent-map.js';
import type { GroupRef, MemberRecord, ShardRecord } from '../../src/machines/types.js';
import type { FieldPatch, GroupFields } from '../../src/store/codec.js';
import { compareMembers } from '../../src/store/group-paging.js';
import { keyNames, registryMember } from '../../src/store/keys.js';
import { createStore } from '../../src/store/index.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { READ_REVISIONS_BATCH, RedisStore } from '../../src/store/redis-store.js';
import type { AuditRecord, Store } from '../../src/store/store.js';
import { makeGroupState, refOf } from '../support/fixtures.js';
import {
  randomKeyPrefix,
  startRedisCluster,
  startRedisServer,
  waitFor,
} from '../support/redis-server.js';
import type { RedisClusterHandle, RedisServerHandle } from '../support/redis-server.js';

/** A store under test plus what the suite needs to know about its backend. */
interface StoreUnderTest {
  readonly store: Store;
  /**
   * How far above `auditMaxLen` the audit may grow: 0 for MemoryStore (exact cap); Redis
   * `MAXLEN ~` only trims whole stream nodes, up to `stream-node-max-entries` (100) over.
   */
  readonly auditCapSlack: number;
  /** Closes the store and removes every key with its prefix. */
  cleanup(): Promise<void>;
}

type MakeStore = (options: { keyPrefix: string; auditMaxLen: number }) => Promise<StoreUnderTest>;

const AUDIT_MAX_LEN = 1_000;

function audit(overrides: Partial<AuditRecord> = {}): AuditRecord {
  return {
    timestamp: new Date(Date.UTC(2026, 0, 1)).toISOString(),
    method: 'POST',
    path: '/coord/v1/admin/groups',
    operation: 'createGroup',
    outcome: 'SUCCEEDED',
    status: 201,
    principal: 'admin',
    roles: ['WRITE'],
    requestId: 'req-0',
    bodySha256: null,
    clientAddress: '127.0.0.1',
    durationMs: 3,
    streamPrefix: 'orders',
    consumerGroup: 'billing',
    requestedBy: 'ops@example.com',
    reason: 'test',
    ...overrides,
  };
}

function applyPatch(fields: GroupFields, patch: FieldPatch, revision: number): GroupFields {
  const after: Record<string, string> = { ...fields, ...patch.set };
  for (const name of patch.del) delete after[name];
  after.storeRevision = String(revision);
  return after;
}

/** Every key of a Redis node, by SCAN (never KEYS). */
async function scanKeys(client: Redis, match = '*'): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await client.scan(cursor, 'MATCH', match, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  return keys;
}

async function deleteKeysWithPrefix(clients: readonly Redis[], prefix: string): Promise<void> {
  for (const client of clients) {
    // One key per DEL: in Cluster mode the keys of one node still span many slots.
    for (const key of await scanKeys(client, `${prefix}:*`)) await client.del(key);
  }
}

/**
 * The store contract of `src/store/store.ts`, run unchanged against every implementation.
 * Each test opens stores with its own random key prefix; they are cleaned up after it.
 */
function describeStoreContract(name: string, makeStore: MakeStore): void {
  describe(`${name} store contract`, () => {
    const opened: StoreUnderTest[] = [];
    const open = async (auditMaxLen = AUDIT_MAX_LEN) => {
      const underTest = await makeStore({ keyPrefix: randomKeyPrefix(), auditMaxLen });
      opened.push(underTest);
      return underTest;
    };
    const openStore = async () => (await open()).store;

    afterEach(async () => {
      await Promise.all(opened.splice(0).map((underTest) => underTest.cleanup()));
    });

    describe('create and load', () => {
      it('a created group loads back with every GroupState field intact', async () => {
        const store = await openStore();
        const state = makeGroupState();
        const created = await store.createGroup(state);
        expect(created).toEqual({ state, revision: 1, fence: created.fence });
        expect(Number.isSafeInteger(created.fence) && created.fence > 0).toBe(true);
        expect(await store.loadGroup(refOf(state))).toEqual(created);
      });

      it('a failed-closed, paused group without members or migrations round-trips too', async () => {
        const store = await openStore();
        const state = makeGroupState({
          streamPrefix: 'payments:eu.v2',
          consumerGroup: 'ledger_1',
          status: 'FAILED_CLOSED',
          failureReason: 'METADATA_LOST',
          producersPaused: true,
          shards: {},
          members: PersistentMap.empty(),
          activeMigration: null,
          migrations: [],
        });
        await store.createGroup(state);
        expect((await store.loadGroup(refOf(state)))?.state).toEqual(state);
      });

      it('a group at the shard limit with thousands of members round-trips and patches', async () => {
        const store = await openStore();
        const shards: Record<number, ShardRecord> = {};
        for (let shard = 0; shard < 1024; shard++) {
          shards[shard] = {
            shard,
            state: 'released',
            owner: null,
            ownerEpoch: null,
            target: null,
            since: 1,
          };
        }
        let members = PersistentMap.empty<MemberRecord>();
        for (let i = 0; i < 3000; i++) {
          const memberId = `member-${i}`;
          members = members.set(memberId, {
            memberId,
            principal: null,
            clientId: null,
            memberEpoch: i,
            previousEpoch: null,
            sessionTimeoutMs: 45_000,
            rebalanceTimeoutMs: 60_000,
            joinedAt: 1,
          });
        }
        const state = makeGroupState({ shardCount: 1024, shards, members, activeMigration: null });
        const ref = refOf(state);
        const { fence } = await store.createGroup(state);
        expect((await store.loadGroup(ref))?.state).toEqual(state);
        // Larger than one Lua unpack() can take: the scripts must write in chunks.
        const patch: FieldPatch = {
          set: Object.fromEntries(
            Object.keys(shards).map((n) => [
              `shard:${n}`,
              '{"state":"released","owner":null,"ownerEpoch":null,"target":"member-0","since":2}',
            ]),
          ),
          del: members.keys().map((memberId) => `member:${memberId}`),
        };
        expect(await store.commitGroup(ref, fence, 1, patch)).toBe(2);
        const loaded = await store.loadGroup(ref);
        expect(loaded?.state.members.size).toBe(0);
        expect(
          Object.values(loaded?.state.shards ?? {}).every((s) => s.target === 'member-0'),
        ).toBe(true);
      });

      it('loading a group that was never created gives null', async () => {
        const store = await openStore();
        expect(await store.loadGroup({ streamPrefix: 'nope', consumerGroup: 'none' })).toBeNull();
      });

      it('a second create of the same group fails with GROUP_EXISTS and changes nothing', async () => {
        const store = await openStore();
        const state = makeGroupState();
        await store.createGroup(state);
        const before = await store.exportGroup(refOf(state));
        await expect(store.createGroup(makeGroupState({ shardCount: 9 }))).rejects.toMatchObject({
          name: 'CoordinatorError',
          code: 'GROUP_EXISTS',
        });
        expect(await store.exportGroup(refOf(state))).toEqual(before);
      });

      it('returned groups are copies: mutating one does not change the store', async () => {
        const store = await openStore();
        const state = makeGroupState();
        const created = await store.createGroup(state);
        (created.state.shards as Record<number, unknown>)[99] = {};
        const exported = await store.exportGroup(refOf(state));
        (exported as Record<string, string>).shardCount = '99';
        expect((await store.loadGroup(refOf(state)))?.state).toEqual(state);
      });
    });

    describe('fenced commit', () => {
      const patch: FieldPatch = {
        set: {
          assignmentEpoch: '8',
          'shard:1': JSON.stringify({
            state: 'assigned',
            owner: 'm-2',
            ownerEpoch: 12,
            target: 'm-2',
            since: 1,
          }),
        },
        del: ['member:m-1'],
      };

      it('with the current fence and revision applies exactly the patch and returns revision + 1', async () => {
        const store = await openStore();
        const ref = refOf(makeGroupState());
        const { fence } = await store.createGroup(makeGroupState());
        const before = (await store.exportGroup(ref)) ?? {};
        expect(await store.commitGroup(ref, fence, 1, patch)).toBe(2);
        expect(await store.exportGroup(ref)).toEqual(applyPatch(before, patch, 2));
        expect(await store.commitGroup(ref, fence, 2, { set: {}, del: [] })).toBe(3);
        const loaded = await store.loadGroup(ref);
        expect(loaded?.revision).toBe(3);
        expect(loaded?.state.members.get('m-1')).toBeUndefined();
        expect(loaded?.state.shards[1]?.owner).toBe('m-2');
      });

      it('a stale fence is refused with FenceMismatchError and changes nothing', async () => {
        const store = await openStore();
        const ref = refOf(makeGroupState());
        const { fence } = await store.createGroup(makeGroupState());
        const before = await store.exportGroup(ref);
        await expect(store.commitGroup(ref, fence - 1, 1, patch)).rejects.toBeInstanceOf(
          FenceMismatchError,
        );
        expect(await store.exportGroup(ref)).toEqual(before);
        expect(await store.readRevisions([ref])).toEqual([
          { revision: 1, lifecycleId: before?.lifecycleId },
        ]);
      });

      it('a stale revision is refused with RevisionMismatchError and changes nothing', async () => {
        const store = await openStore();
        const ref = refOf(makeGroupState());
        const { fence } = await store.createGroup(makeGroupState());
        await store.commitGroup(ref, fence, 1, { set: { metadataVersion: '4' }, del: [] });
        const before = await store.exportGroup(ref);
        const refused = store.commitGroup(ref, fence, 1, patch);
        await expect(refused).rejects.toBeInstanceOf(RevisionMismatchError);
        await expect(refused).rejects.toMatchObject({ expected: 1, actual: 2 });
        expect(await store.exportGroup(ref)).toEqual(before);
        expect((await store.loadGroup(ref))?.revision).toBe(2);
      });

      it('a commit to a group whose metadata key is missing fails with GROUP_NOT_FOUND', async () => {
        const store = await openStore();
        await expect(
          store.commitGroup({ streamPrefix: 'gone', consumerGroup: 'g' }, 1, 1, patch),
        ).rejects.toMatchObject({ code: 'GROUP_NOT_FOUND' });
        expect(await store.isRegistered({ streamPrefix: 'gone', consumerGroup: 'g' })).toBe(false);
      });

      it('a patch touching store-owned fields is refused and changes nothing', async () => {
        const store = await openStore();
        const ref = refOf(makeGroupState());
        const { fence } = await store.createGroup(makeGroupState());
        const before = await store.exportGroup(ref);
        const forbidden: FieldPatch[] = [
          { set: { fence: 'mine' }, del: [] },
          { set: {}, del: ['storeRevision'] },
        ];
        for (const bad of forbidden) {
          await expect(store.commitGroup(ref, fence, 1, bad)).rejects.toBeInstanceOf(
            CoordinatorError,
          );
        }
        expect(await store.exportGroup(ref)).toEqual(before);
      });
    });

    describe('fenced delete', () => {
      it('refuses a stale fence or revision and keeps the group; deletes with the current ones', async () => {
        const store = await openStore();
        const ref = refOf(makeGroupState());
        const { fence } = await store.createGroup(makeGroupState());
        const before = await store.exportGroup(ref);

        await expect(store.deleteGroup(ref, fence - 1, 1)).rejects.toBeInstanceOf(
          FenceMismatchError,
        );
        await expect(store.deleteGroup(ref, fence, 7)).rejects.toBeInstanceOf(
          RevisionMismatchError,
        );
        expect(await store.exportGroup(ref)).toEqual(before);
        expect(await store.isRegistered(ref)).toBe(true);

        await store.deleteGroup(ref, fence, 1);
        expect(await store.loadGroup(ref)).toBeNull();
        expect(await store.isRegistered(ref)).toBe(false);
        expect((await store.listGroups({ limit: 10 })).groups).toEqual([]);
        await expect(store.deleteGroup(ref, fence, 1)).rejects.toMatchObject({
          code: 'GROUP_NOT_FOUND',
        });
      });

      it('a deleted group can be created again', async () => {
        const store = await openStore();
        const ref = refOf(makeGroupState());
        const { fence } = await store.createGroup(makeGroupState());
        await store.deleteGroup(ref, fence, 1);
        const recreated = makeGroupState();
        expect((await store.createGroup(recreated)).revision).toBe(1);
        expect((await store.loadGroup(ref))?.state.lifecycleId).toBe(recreated.lifecycleId);
      });

      it('a recreated group starts above every fence of its earlier lifecycle', async () => {
        const store = await openStore();
        const ref = refOf(makeGroupState());
        await store.createGroup(makeGroupState());
        await store.claimGroup(ref, null);
        const claimed = await store.claimGroup(ref, null);
        await store.deleteGroup(ref, claimed.fence, claimed.revision);
        const recreated = await store.createGroup(makeGroupState());
        expect(recreated.fence).toBeGreaterThan(claimed.fence);
        // The earlier lifecycle's writer is refused even at the revision the new one has.
        await expect(
          store.commitGroup(ref, claimed.fence, 1, { set: { updatedAt: '9' }, del: [] }),
        ).rejects.toBeInstanceOf(FenceMismatchError);
      });
    });

    describe('claimGroup', () => {
      it('increments the integer fence and bumps the revision; the old fence is refused afterwards', async () => {
        const store = await openStore();
        const state = makeGroupState();
        const ref = refOf(state);
        const { fence } = await store.createGroup(state);
        await store.commitGroup(ref, fence, 1, { set: { metadataVersion: '4' }, del: [] });

        const claimed = await store.claimGroup(ref, null);
        expect(claimed).toEqual({
          state: { ...state, metadataVersion: 4 },
          revision: 3,
          fence: fence + 1,
        });
        expect(await store.loadGroup(ref)).toEqual(claimed);
        expect((await store.exportGroup(ref))?.fence).toBe(String(fence + 1));

        const before = await store.exportGroup(ref);
        await expect(
          store.commitGroup(ref, fence, 3, { set: { metadataVersion: '5' }, del: [] }),
        ).rejects.toBeInstanceOf(FenceMismatchError);
        await expect(store.deleteGroup(ref, fence, 3)).rejects.toBeInstanceOf(FenceMismatchError);
        expect(await store.exportGroup(ref)).toEqual(before);
        expect(
          await store.commitGroup(ref, fence + 1, 3, { set: { metadataVersion: '5' }, del: [] }),
        ).toBe(4);
        expect((await store.claimGroup(ref, null)).fence).toBe(fence + 2);
      });

      it('of a hash restored without a fence starts a new one above every fence handed out', async () => {
        const store = await openStore();
        const state = makeGroupState();
        const ref = refOf(state);
        const { fence } = await store.createGroup(state);
        const { fence: _dropped, ...fields } = (await store.exportGroup(ref)) ?? {};
        await store.importGroup(ref, { ...fields, fence: 'legacy-uuid-token' });
        expect((await store.loadGroup(ref))?.fence).toBe(0);
        const claimed = await store.claimGroup(ref, null);
        expect(claimed.fence).toBeGreaterThan(fence);
      });

      it('of a missing group fails with GROUP_NOT_FOUND', async () => {
        const store = await openStore();
        await expect(
          store.claimGroup({ streamPrefix: 'gone', consumerGroup: 'g' }, null),
        ).rejects.toMatchObject({ code: 'GROUP_NOT_FOUND' });
      });
    });

    describe('replica registry', () => {
      it('lists registered replicas by id with their URLs; deregister removes one at once', async () => {
        const store = await openStore();
        await store.registerReplica({ id: 'r-b', url: 'http://10.0.0.2:8080' }, 5_000);
        await store.registerReplica({ id: 'r-a', url: 'http://10.0.0.1:8080' }, 5_000);
        await store.registerReplica({ id: 'r-b', url: 'http://10.0.0.3:8080' }, 5_000);
        expect(await store.listReplicas()).toEqual([
          { id: 'r-a', url: 'http://10.0.0.1:8080' },
          { id: 'r-b', url: 'http://10.0.0.3:8080' },
        ]);
        await store.deregisterReplica('r-a');
        expect(await store.listReplicas()).toEqual([{ id: 'r-b', url: 'http://10.0.0.3:8080' }]);
      });

      it('a replica that stops refreshing drops out after its TTL; a refresh keeps one alive', async () => {
        const store = await openStore();
        await store.registerReplica({ id: 'r-dead', url: 'http://dead:1' }, 300);
        await store.registerReplica({ id: 'r-live', url: 'http://live:1' }, 300);
        const refresh = setInterval(() => {
          store.registerReplica({ id: 'r-live', url: 'http://live:1' }, 300).catch(() => undefined);
        }, 50);
        try {
          await waitFor(
            async () => (await store.listReplicas()).every((replica) => replica.id !== 'r-dead'),
            { timeoutMs: 3_000, what: 'the expired replica to be pruned' },
          );
          expect(await store.listReplicas()).toEqual([{ id: 'r-live', url: 'http://live:1' }]);
        } finally {
          clearInterval(refresh);
        }
      });
    });

    describe('failure records', () => {
      it('are kept beside the metadata, read back, replaced and cleared', async () => {
        const store = await openStore();
        const ref = { streamPrefix: 'failing', consumerGroup: 'g' };
        expect(await store.readFailure(ref)).toBeNull();
        const record = {
          reason: 'METADATA_LOST' as const,
          at: 1,
          knownRevision: 7,
          storeRevision: null,
          lifecycleId: 'l-1',
          metadataVersion: 3,
          highestVersionSeen: 5,
          assignmentEpoch: 4,
          memberEpochSeq: 9,
        };
        await store.recordFailure(ref, record);
        expect(await store.readFailure(ref)).toEqual(record);
        expect(await store.loadGroup(ref)).toBeNull();
        expect(await store.isRegistered(ref)).toBe(false);
        const second = {
          ...record,
          reason: 'STORE_REVISION_REGRESSION' as const,
          storeRevision: 4,
        };
        await store.recordFailure(ref, second);
        expect(await store.readFailure(ref)).toEqual(second);
        await store.clearFailure(ref);
        expect(await store.readFailure(ref)).toBeNull();
      });
    });

    describe('registry', () => {
      it('isRegistered is true for a created group only', async () => {
        const store = await openStore();
        await store.createGroup(makeGroupState());
        expect(await store.isRegistered(refOf(makeGroupState()))).toBe(true);
        expect(await store.isRegistered({ streamPrefix: 'orders', consumerGroup: 'other' })).toBe(
          false,
        );
      });

      it('listGroups pages through every group exactly once, in a stable order', async () => {
        const store = await openStore();
        const refs: GroupRef[] = Array.from({ length: 25 }, (_, i) => ({
          streamPrefix: `stream-${i % 3}`,
          consumerGroup: `group-${String(i).padStart(2, '0')}`,
        }));
        for (const ref of refs) await store.createGroup(makeGroupState(ref));

        const listAll = async () => {
          const pages: GroupRef[][] = [];
          let cursor: string | undefined;
          do {
            const page = await store.listGroups({ cursor, limit: 10 });
            pages.push([...page.groups]);
            cursor = page.nextCursor ?? undefined;
          } while (cursor !== undefined);
          return pages;
        };
        const pages = await listAll();
        expect(pages.map((page) => page.length)).toEqual([10, 10, 5]);
        const expected = [...refs].sort((a, b) =>
          compareMembers(registryMember(a), registryMember(b)),
        );
        expect(pages.flat()).toEqual(expected);
        expect(await listAll()).toEqual(pages);
      });

      it('a page boundary survives deletes and creates between pages', async () => {
        const store = await openStore();
        const refs: GroupRef[] = Array.from({ length: 6 }, (_, i) => ({
          streamPrefix: 'orders',
          consumerGroup: `g${i}`,
        }));
        const fences: number[] = [];
        for (const ref of refs) fences.push((await store.createGroup(makeGroupState(ref))).fence);
        const first = await store.listGroups({ limit: 3 });
        expect(first.groups).toEqual(refs.slice(0, 3));
        await store.deleteGroup(refs[2] as GroupRef, fences[2] ?? 0, 1);
        await store.createGroup(makeGroupState({ streamPrefix: 'a', consumerGroup: 'first' }));
        const second = await store.listGroups({ cursor: first.nextCursor ?? '', limit: 3 });
        expect(second).toEqual({ groups: refs.slice(3), nextCursor: null });
      });

      it('an exactly full last page has no next cursor; a forged cursor is refused', async () => {
        const store = await openStore();
        for (let i = 0; i < 4; i++) {
          await store.createGroup(makeGroupState({ consumerGroup: `g${i}` }));
        }
        expect((await store.listGroups({ limit: 4 })).nextCursor).toBeNull();
        expect(await store.listGroups({ limit: 10 })).toMatchObject({ nextCursor: null });
        await expect(store.listGroups({ cursor: 'not-a-cursor', limit: 4 })).rejects.toMatchObject({
          code: 'VALIDATION_FAILED',
        });
        await expect(store.listGroups({ limit: 0 })).rejects.toMatchObject({
          code: 'VALIDATION_FAILED',
        });
      });
    });

    describe('readRevisions', () => {
      it('reads revision and lifecycle of many groups in order, null for a missing key', async () => {
        const store = await openStore();
        const a = makeGroupState({ consumerGroup: 'a' });
        const b = makeGroupState({ consumerGroup: 'b' });
        await store.createGroup(a);
        const { fence } = await store.createGroup(b);
        await store.commitGroup(refOf(b), fence, 1, { set: { updatedAt: '1' }, del: [] });
        expect(
          await store.readRevisions([
            refOf(a),
            { streamPrefix: 'orders', consumerGroup: 'missing' },
            refOf(b),
          ]),
        ).toEqual([
          { revision: 1, lifecycleId: a.lifecycleId },
          null,
          { revision: 2, lifecycleId: b.lifecycleId },
        ]);
        expect(await store.readRevisions([])).toEqual([]);
      });
    });

    describe('backup and restore', () => {
      it('an exported group imports back with its fields, revision and fence, registered', async () => {
        const store = await openStore();
        const state = makeGroupState();
        const ref = refOf(state);
        const { fence } = await store.createGroup(state);
        await store.commitGroup(ref, fence, 1, { set: { metadataVersion: '4' }, del: [] });
        const exported = await store.exportGroup(ref);
        expect(exported).toMatchObject({
          storeRevision: '2',
          fence: String(fence),
          streamPrefix: 'orders',
        });

        await store.deleteGroup(ref, fence, 2);
        expect(await store.exportGroup(ref)).toBeNull();
        await store.importGroup(ref, exported ?? {});
        expect(await store.exportGroup(ref)).toEqual(exported);
        expect(await store.isRegistered(ref)).toBe(true);
        expect(await store.loadGroup(ref)).toEqual({
          state: { ...state, metadataVersion: 4 },
          revision: 2,
          fence: fence,
        });
      });

      it('import replaces every field of an existing hash, dropping fields the backup lacks', async () => {
        const store = await openStore();
        const state = makeGroupState();
        const ref = refOf(state);
        const { fence } = await store.createGroup(state);
        const exported = (await store.exportGroup(ref)) ?? {};
        await store.commitGroup(ref, fence, 1, { set: { 'member:m-3': '{}' }, del: [] });
        await store.importGroup(ref, exported);
        expect(await store.exportGroup(ref)).toEqual(exported);
      });

      it("import refuses fields that are not the group's metadata", async () => {
        const store = await openStore();
        const state = makeGroupState();
        await store.createGroup(state);
        const exported = (await store.exportGroup(refOf(state))) ?? {};
        const other = { streamPrefix: 'orders', consumerGroup: 'other' };
        await expect(store.importGroup(other, exported)).rejects.toMatchObject({
          code: 'VALIDATION_FAILED',
        });
        expect(await store.exportGroup(other)).toBeNull();
        expect(await store.isRegistered(other)).toBe(false);
      });
    });

    describe('audit', () => {
      it('queries newest first, filtered by stream prefix and consumer group, up to the limit', async () => {
        const store = await openStore();
        const records = [
          audit({ requestId: 'r0' }),
          audit({ requestId: 'r1', consumerGroup: 'shipping' }),
          audit({ requestId: 'r2', streamPrefix: 'payments', consumerGroup: 'ledger' }),
          audit({ requestId: 'r3', streamPrefix: null, consumerGroup: null, outcome: 'DENIED' }),
          audit({ requestId: 'r4' }),
        ];
        for (const record of records) await store.appendAudit(record);

        const ids = async (query: Parameters<Store['queryAudit']>[0]) =>
          (await store.queryAudit(query)).map((record) => record.requestId);
        expect(await store.queryAudit({ limit: 10 })).toEqual([...records].reverse());
        expect(await ids({ limit: 2 })).toEqual(['r4', 'r3']);
        expect(await ids({ streamPrefix: 'orders', limit: 10 })).toEqual(['r4', 'r1', 'r0']);
        expect(await ids({ streamPrefix: 'orders', consumerGroup: 'billing', limit: 10 })).toEqual([
          'r4',
          'r0',
        ]);
        expect(await ids({ consumerGroup: 'ledger', limit: 10 })).toEqual(['r2']);
        expect(await ids({ streamPrefix: 'nothing', limit: 10 })).toEqual([]);
      });

      it('keeps at least the newest max-len records and at most the backend slack more', async () => {
        const auditMaxLen = 10;
        const { store, auditCapSlack } = await open(auditMaxLen);
        const total = 250;
        for (let i = 0; i < total; i++) await store.appendAudit(audit({ requestId: `r${i}` }));
        const kept = await store.queryAudit({ limit: 1_000 });
        expect(kept.length).toBeGreaterThanOrEqual(auditMaxLen);
        expect(kept.length).toBeLessThanOrEqual(auditMaxLen + auditCapSlack);
        expect(kept.map((record) => record.requestId)).toEqual(
          Array.from({ length: kept.length }, (_, i) => `r${total - 1 - i}`),
        );
      });
    });

    describe('prefix layouts: one shard count per stream prefix', () => {
      const at = (consumerGroup: string): GroupRef => ({ streamPrefix: 'orders', consumerGroup });
      const ask = (shardCount: number, mode: 'adopt' | 'exact' | 'reset', now = 1_000) => ({
        shardCount,
        mode,
        now,
        newId: `layout-${shardCount}-${now}`,
      });
      /** A group as created through the host: on the layout, then registered. */
      async function created(store: Store, consumerGroup: string, shardCount: number) {
        const layout = await store.adoptLayout(at(consumerGroup), ask(shardCount, 'exact'));
        await store.createGroup(
          makeGroupState({ streamPrefix: 'orders', consumerGroup, shardCount: layout.shardCount }),
        );
        return layout;
      }

      it('the first group makes the layout; the next adopts it; an exact other count is refused', async () => {
        const store = await openStore();
        const first = await created(store, 'billing', 5);
        expect(first).toMatchObject({ id: 'layout-5-1000', version: 1, shardCount: 5 });
        const adopted = await store.adoptLayout(at('emails'), ask(9, 'adopt'));
        expect(adopted).toMatchObject({ id: first.id, version: 1, shardCount: 5 });
        expect(Object.keys(adopted.groups).sort()).toEqual(['billing', 'emails']);
        await expect(store.adoptLayout(at('audit'), ask(4, 'exact'))).rejects.toMatchObject({
          code: 'SHARD_COUNT_MISMATCH',
          details: { shardCount: 5, requestedShardCount: 4 },
        });
        const [stored] = await store.readLayouts(['orders']);
        expect(Object.keys(stored!.groups).sort()).toEqual(['billing', 'emails']);
      });

      it('changes only from the version read; release of the last group frees the prefix', async () => {
        const store = await openStore();
        const layout = await created(store, 'billing', 5);
        await created(store, 'emails', 5);
        const moved = await store.changeLayout('orders', layout.version, 8, 2_000);
        expect(moved).toMatchObject({ id: layout.id, version: 2, shardCount: 8 });
        await expect(store.changeLayout('orders', layout.version, 3, 3_000)).rejects.toBeInstanceOf(
          RevisionMismatchError,
        );
        await store.releaseLayout(at('billing'));
        expect((await store.readLayouts(['orders']))[0]).toMatchObject({ shardCount: 8 });
        await store.releaseLayout(at('emails'));
        expect(await store.readLayouts(['orders', 'other'])).toEqual([null, null]);
        await expect(store.changeLayout('orders', 2, 3, 4_000)).rejects.toMatchObject({
          code: 'GROUP_NOT_FOUND',
        });
      });

      it('a group alone on its prefix sets the count again on reset, and an existing group create changes nothing', async () => {
        const store = await openStore();
        const layout = await created(store, 'billing', 5);
        // billing exists: a create of it with another count leaves the layout (the store then
        // refuses the create as GROUP_EXISTS).
        expect(await store.adoptLayout(at('billing'), ask(7, 'exact'))).toMatchObject({
          shardCount: 5,
          version: 1,
        });
        const reset = await store.adoptLayout(at('billing'), ask(7, 'reset'));
        expect(reset).toMatchObject({ id: layout.id, version: 2, shardCount: 7 });
      });

      it('a name left by a create that never registered counts only for a while', async () => {
        const store = await openStore();
        await store.adoptLayout(at('ghost'), ask(5, 'exact', 1_000));
        await expect(store.adoptLayout(at('real'), ask(4, 'exact', 2_000))).rejects.toMatchObject({
          code: 'SHARD_COUNT_MISMATCH',
        });
        const later = await store.adoptLayout(at('real'), ask(4, 'exact', 1_000 + 61_000));
        expect(later).toMatchObject({ shardCount: 4, version: 2 });
        expect(Object.keys(later.groups)).toEqual(['real']);
      });
    });
  });
}

/**
 * What only a Redis backend can show: the key layout (docs/architecture.md#store-layout)
 * and lost metadata (a key deleted behind the store's back, docs/operations.md#lost-metadata).
 */
function describeRedisLayout(
  name: string,
  makeStore: MakeStore,
  nodes: () => Redis[],
  /** A client that routes each key to its node (the Cluster client in cluster mode). */
  router: () => Redis | Cluster,
): void {
  describe(`${name} key layout`, () => {
    const opened: StoreUnderTest[] = [];
    afterEach(async () => {
      await Promise.all(opened.splice(0).map((underTest) => underTest.cleanup()));
    });
    const open = async (keyPrefix: string) => {
      const underTest = await makeStore({ keyPrefix, auditMaxLen: AUDIT_MAX_LEN });
      opened.push(underTest);
      return underTest.store;
    };

    it('every key the store writes starts with the key prefix', async () => {
      const keyPrefix = randomKeyPrefix();
      const store = await open(keyPrefix);
      const state = makeGroupState();
      const { fence } = await store.createGroup(state);
      await store.commitGroup(refOf(state), fence, 1, { set: { updatedAt: '2' }, del: [] });
      await store.appendAudit(audit());
      const keys = (await Promise.all(nodes().map((node) => scanKeys(node)))).flat().sort();
      const names = keyNames(keyPrefix);
      expect(keys).toEqual([names.audit(), names.groups(), names.metadata(refOf(state))].sort());
      for (const key of keys) expect(key.startsWith(`${keyPrefix}:`)).toBe(true);
    });

    describe('claimGroup checks the lease holder', () => {
      const setup = async () => {
        const keyPrefix = randomKeyPrefix();
        const store = await open(keyPrefix);
        const state = makeGroupState();
        const ref = refOf(state);
        const created = await store.createGroup(state);
        const leaseKey = keyNames(keyPrefix).lease(ref);
        return { store, ref, created, leaseKey };
      };

      it("the lease key shares the metadata key's hash slot", () => {
        const names = keyNames(randomKeyPrefix());
        const ref = refOf(makeGroupState());
        const tag = names.groupTag(ref);
        expect(names.lease(ref)).toBe(`${names.prefix}:${tag}:lease`);
        expect(names.metadata(ref)).toBe(`${names.prefix}:${tag}:metadata`);
      });

      it("claims while the lease key holds the caller's value", async () => {
        const { store, ref, created, leaseKey } = await setup();
        await router().set(leaseKey, 'lock-value-a', 'PX', 10_000);
        const claimed = await store.claimGroup(ref, 'lock-value-a');
        expect(claimed.fence).toBe(created.fence + 1);
        expect(claimed.revision).toBe(2);
      });

      it('refuses with LeaseNotHeldError, writing nothing, when another value or none is there', async () => {
        const { store, ref, leaseKey } = await setup();
        const before = await store.exportGroup(ref);
        await expect(store.claimGroup(ref, 'lock-value-a')).rejects.toBeInstanceOf(
          LeaseNotHeldError,
        );
        await router().set(leaseKey, 'lock-value-b', 'PX', 10_000);
        await expect(store.claimGroup(ref, 'lock-value-a')).rejects.toMatchObject({
          code: 'LEASE_NOT_HELD',
        });
        // An unleased claim (one replica, no ownership layer) never takes a leased group.
        await expect(store.claimGroup(ref, null)).rejects.toBeInstanceOf(LeaseNotHeldError);
        expect(await store.exportGroup(ref)).toEqual(before);
      });

      it('an expired lease cannot be claimed with its old value', async () => {
        const { store, ref, leaseKey } = await setup();
        await router().set(leaseKey, 'lock-value-a', 'PX', 50);
        await waitFor(async () => (await router().exists(leaseKey)) === 0, {
          what: 'the lease to expire',
        });
        await expect(store.claimGroup(ref, 'lock-value-a')).rejects.toBeInstanceOf(
          LeaseNotHeldError,
        );
      });
    });

    it('a registered group whose metadata key vanished: load null, create GROUP_EXISTS, commit GROUP_NOT_FOUND', async () => {
      const keyPrefix = randomKeyPrefix();
      const store = await open(keyPrefix);
      const state = makeGroupState();
      const ref = refOf(state);
      const { fence } = await store.createGroup(state);
      await deleteKeysWithPrefix(nodes(), `${keyPrefix}:${keyNames(keyPrefix).groupTag(ref)}`);
      expect(await store.isRegistered(ref)).toBe(true);
      expect(await store.loadGroup(ref)).toBeNull();
      expect(await store.readRevisions([ref])).toEqual([null]);
      await expect(store.createGroup(state)).rejects.toMatchObject({
        code: 'GROUP_EXISTS',
      });
      await expect(
        store.commitGroup(ref, fence, 1, { set: { updatedAt: '2' }, del: [] }),
      ).rejects.toMatchObject({ code: 'GROUP_NOT_FOUND' });
      expect(await store.loadGroup(ref)).toBeNull();
    });
  });
}

describeStoreContract('MemoryStore', ({ keyPrefix, auditMaxLen }) => {
  const store = new MemoryStore({ keyPrefix, auditMaxLen });
  return Promise.resolve({ store, auditCapSlack: 0, cleanup: () => store.close() });
});

describe('MemoryStore health', () => {
  it('reports NOT_CONFIGURED: embedded mode has no store connection', async () => {
    const store = new MemoryStore({ keyPrefix: randomKeyPrefix(), auditMaxLen: 10 });
    await store.ping();
    expect(store.health()).toBe('NOT_CONFIGURED');
    expect(store.kind).toBe('memory');
  });
});

describe('RedisStore on a standalone redis-server', () => {
  let server: RedisServerHandle;
  beforeAll(async () => {
    server = await startRedisServer();
  }, 20_000);
  afterAll(async () => {
    await server.stop();
  });

  const makeStore: MakeStore = async ({ keyPrefix, auditMaxLen }) => {
    const store = new RedisStore({ url: server.url, keyPrefix, auditMaxLen });
    await store.ping();
    return {
      store,
      auditCapSlack: 100,
      cleanup: async () => {
        await store.close();
        await deleteKeysWithPrefix([server.client()], keyPrefix);
      },
    };
  };
  describeStoreContract('RedisStore', makeStore);
  describeRedisLayout(
    'RedisStore',
    makeStore,
    () => [server.client()],
    () => server.client(),
  );

  it(`readRevisions reads ${READ_REVISIONS_BATCH} groups per script call, not one HMGET each`, async () => {
    const made = await makeStore({ keyPrefix: randomKeyPrefix(), auditMaxLen: 10 });
    const { store } = made;
    try {
      const state = makeGroupState();
      await store.createGroup(state);
      const refs: GroupRef[] = Array.from({ length: 2 * READ_REVISIONS_BATCH + 1 }, (_, i) =>
        i === READ_REVISIONS_BATCH + 7
          ? refOf(state)
          : { streamPrefix: 'orders', consumerGroup: `g${i}` },
      );
      await server.client().config('RESETSTAT');
      const revisions = await store.readRevisions(refs);
      expect(revisions.filter((r) => r !== null)).toEqual([
        { revision: 1, lifecycleId: state.lifecycleId },
      ]);
      expect(revisions[READ_REVISIONS_BATCH + 7]).not.toBeNull();
      const info = await server.client().info('commandstats');
      const calls = (command: string) =>
        Number(new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info)?.[1] ?? 0);
      // Three script calls (and as many NOSCRIPT retries the first time); the HMGETs the
      // scripts run count in commandstats too.
      expect(calls('evalsha') + calls('eval')).toBeGreaterThanOrEqual(3);
      expect(calls('evalsha') + calls('eval')).toBeLessThanOrEqual(6);
      expect(calls('hmget')).toBe(refs.length);
    } finally {
      await made.cleanup();
    }
  });
});

describe('createStore', () => {
  it('builds the store of each runtime mode and refuses a cluster without nodes', async () => {
    const memory = createStore({ type: 'memory', keyPrefix: randomKeyPrefix(), auditMaxLen: 10 });
    expect(memory).toBeInstanceOf(MemoryStore);
    expect(memory.kind).toBe('memory');
    const server = await startRedisServer();
    const redis = createStore({
      type: 'redis',
      url: server.url,
      keyPrefix: randomKeyPrefix(),
      auditMaxLen: 10,
    });
    try {
      await redis.ping();
      expect(redis.kind).toBe('redis');
      expect(redis.health()).toBe('UP');
    } finally {
      await redis.close();
      await server.stop();
    }
    expect(() =>
      createStore({ type: 'redis-cluster', keyPrefix: randomKeyPrefix(), auditMaxLen: 10 }),
    ).toThrow(CoordinatorError);
  }, 20_000);
});

describe('RedisStore on a 3-master Redis Cluster', () => {
  let cluster: RedisClusterHandle;
  let router: Cluster;
  beforeAll(async () => {
    cluster = await startRedisCluster();
    router = new Cluster(cluster.nodes);
  }, 30_000);
  afterAll(async () => {
    await router.quit();
    await cluster.stop();
  });

  const makeStore: MakeStore = async ({ keyPrefix, auditMaxLen }) => {
    const store = new RedisStore({ clusterNodes: cluster.nodes, keyPrefix, auditMaxLen });
    expect(store.kind).toBe('redis-cluster');
    await store.ping();
    return {
      store,
      auditCapSlack: 100,
      cleanup: async () => {
        await store.close();
        await deleteKeysWithPrefix(cluster.clients(), keyPrefix);
      },
    };
  };
  describeStoreContract('RedisStore (cluster)', makeStore);
  describeRedisLayout(
    'RedisStore (cluster)',
    makeStore,
    () => cluster.clients(),
    () => router,
  );
});

describe('RedisStore when Redis goes away', () => {
  let server: RedisServerHandle;
  let store: RedisStore;
  beforeAll(async () => {
    server = await startRedisServer();
    store = new RedisStore({ url: server.url, keyPrefix: randomKeyPrefix(), auditMaxLen: 10 });
  }, 20_000);
  afterAll(async () => {
    await store.close();
    await server.stop();
  });

  it('fails writes fast with StoreUnavailableError and reports DOWN, then recovers after a restart', async () => {
    const state = makeGroupState();
    const { fence } = await store.createGroup(state);
    expect(store.health()).toBe('UP');

    await server.kill();
    const started = Date.now();
    await expect(
      store.commitGroup(refOf(state), fence, 1, { set: { updatedAt: '2' }, del: [] }),
    ).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(store.health()).toBe('DOWN');
    await expect(store.ping()).rejects.toBeInstanceOf(StoreUnavailableError);

    await server.restart();
    await waitFor(
      async () => {
        await store.ping();
        return true;
      },
      { timeoutMs: 10_000, what: 'the store to reconnect' },
    );
    expect(store.health()).toBe('UP');
    // Without persistence the restarted Redis is empty: the group is gone, and the store says so.
    await expect(
      store.commitGroup(refOf(state), fence, 1, { set: { updatedAt: '2' }, del: [] }),
    ).rejects.toMatchObject({ code: 'GROUP_NOT_FOUND' });
  }, 30_000);
});
