import { PersistentMap } from '../collections/persistent-map.js';
import type { GroupRef, GroupState, LayoutRef, ShardRecord, StartAt } from './types.js';

/** The layout of a group that has not followed one yet. */
export const NO_LAYOUT: LayoutRef = Object.freeze({ id: '', version: 0 });

/**
 * The state of a freshly created (or recreated) group: every shard released with no target,
 * no members, metadata version 1. `metadataVersion` and `assignmentEpoch` may start higher
 * (a recreate keeps them going up).
 */
export function newGroupState(
  ref: GroupRef,
  options: {
    shardCount: number;
    lifecycleId: string;
    now: number;
    metadataVersion?: number;
    assignmentEpoch?: number;
    memberEpochSeq?: number;
    /** The stream prefix's layout it adopts; none by default. */
    layout?: LayoutRef;
    /** @default 'latest' */
    startAt?: StartAt;
    /** Where `latest` starts (stream id time). @default `now` */
    startFrom?: number;
  },
): GroupState {
  const shards: Record<number, ShardRecord> = {};
  for (let shard = 0; shard < options.shardCount; shard++) {
    shards[shard] = {
      shard,
      state: 'released',
      owner: null,
      ownerEpoch: null,
      target: null,
      since: options.now,
    };
  }
  return {
    streamPrefix: ref.streamPrefix,
    consumerGroup: ref.consumerGroup,
    lifecycleId: options.lifecycleId,
    shardCount: options.shardCount,
    metadataVersion: options.metadataVersion ?? 1,
    assignmentEpoch: options.assignmentEpoch ?? 0,
    memberEpochSeq: options.memberEpochSeq ?? 0,
    status: 'ACTIVE',
    failureReason: null,
    producersPaused: false,
    createdAt: options.now,
    updatedAt: options.now,
    shards,
    members: PersistentMap.empty(),
    activeMigration: null,
    migrations: [],
    layout: options.layout ?? NO_LAYOUT,
    startAt: options.startAt ?? 'latest',
    initialShardCount: options.shardCount,
    startFrom: options.startFrom ?? options.now,
  };
}
