import { randomUUID } from 'node:crypto';
import { PersistentMap } from '../../src/collections/persistent-map.js';
import type {
  GroupRef,
  GroupState,
  MemberRecord,
  MigrationRecord,
} from '../../src/machines/types.js';

/** A fixed instant (2026-01-01T00:00:00Z) so fixtures compare equal across runs. */
export const FIXTURE_TIME = Date.UTC(2026, 0, 1);

/** A completed scale migration, for fixtures that need history. */
export function makeMigration(overrides: Partial<MigrationRecord> = {}): MigrationRecord {
  return {
    migrationId: randomUUID(),
    kind: 'SCALE',
    fromShardCount: 2,
    toShardCount: 4,
    state: 'COMPLETED',
    startedAt: FIXTURE_TIME - 60_000,
    convergedAt: FIXTURE_TIME - 30_000,
    completedAt: FIXTURE_TIME - 10_000,
    rollbackAllowedUntil: FIXTURE_TIME - 10_000,
    requestedBy: 'ops@example.com',
    reason: 'more throughput',
    rollbackOf: null,
    ...overrides,
  };
}

/**
 * A populated, internally consistent group: 4 shards over two members (shard 1 revoking from
 * m-1 to m-2, shard 3 released and waiting for m-2), the 2 → 4 scale still in progress and an
 * earlier 1 → 2 scale finished, so a round trip exercises every field of `GroupState`.
 * Overrides replace whole fields.
 */
export function makeGroupState(overrides: Partial<GroupState> = {}): GroupState {
  const since = FIXTURE_TIME - 5_000;
  return {
    streamPrefix: 'orders',
    consumerGroup: 'billing',
    lifecycleId: randomUUID(),
    shardCount: 4,
    metadataVersion: 3,
    assignmentEpoch: 7,
    memberEpochSeq: 12,
    status: 'ACTIVE',
    failureReason: null,
    producersPaused: false,
    createdAt: FIXTURE_TIME - 3_600_000,
    updatedAt: FIXTURE_TIME,
    shards: {
      0: { shard: 0, state: 'assigned', owner: 'm-1', ownerEpoch: 11, target: 'm-1', since },
      1: { shard: 1, state: 'revoking', owner: 'm-1', ownerEpoch: 11, target: 'm-2', since },
      2: { shard: 2, state: 'assigned', owner: 'm-2', ownerEpoch: 12, target: 'm-2', since },
      3: { shard: 3, state: 'released', owner: null, ownerEpoch: null, target: 'm-2', since },
    },
    members: PersistentMap.from<MemberRecord>({
      'm-1': {
        memberId: 'm-1',
        principal: 'billing-service',
        clientId: 'billing-worker-a',
        memberEpoch: 11,
        previousEpoch: 9,
        sessionTimeoutMs: 45_000,
        rebalanceTimeoutMs: 60_000,
        joinedAt: FIXTURE_TIME - 600_000,
      },
      'm-2': {
        memberId: 'm-2',
        principal: null,
        clientId: null,
        memberEpoch: 12,
        previousEpoch: null,
        sessionTimeoutMs: 30_000,
        rebalanceTimeoutMs: 60_000,
        joinedAt: FIXTURE_TIME - 60_000,
      },
    }),
    activeMigration: makeMigration({
      state: 'IN_PROGRESS',
      convergedAt: null,
      completedAt: null,
      rollbackAllowedUntil: null,
    }),
    migrations: [
      makeMigration({
        fromShardCount: 1,
        toShardCount: 2,
        startedAt: FIXTURE_TIME - 7_200_000,
        convergedAt: FIXTURE_TIME - 7_100_000,
        completedAt: FIXTURE_TIME - 7_000_000,
        rollbackAllowedUntil: FIXTURE_TIME - 7_000_000,
      }),
    ],
    layout: { id: 'layout-1', version: 2 },
    startAt: 'latest',
    initialShardCount: 2,
    startFrom: FIXTURE_TIME - 3_600_000,
    ...overrides,
  };
}

/** The identity of a group state. */
export function refOf(state: Pick<GroupState, 'streamPrefix' | 'consumerGroup'>): GroupRef {
  return { streamPrefix: state.streamPrefix, consumerGroup: state.consumerGroup };
}
