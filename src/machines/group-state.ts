/**
 * Small, pure helpers over `GroupState` (a new group comes from `new-group.ts`): reading shard
 * records, a member's view of the shards, and applying shard changes without copying the group
 * when nothing changed (a steady-state heartbeat must leave the very same object, so the host
 * writes nothing).
 */
import { compareIds } from './assignor.js';
import type { GroupState, MemberRecord, ShardRecord } from './types.js';

function releasedShard(shard: number, since: number): ShardRecord {
  return { shard, state: 'released', owner: null, ownerEpoch: null, target: null, since };
}

/** The record of `shard`; a missing record below `shardCount` reads as released, no target. */
export function shardAt(group: GroupState, shard: number): ShardRecord {
  return group.shards[shard] ?? releasedShard(shard, group.createdAt);
}

/** Every shard record, in shard order: `0..shardCount-1` plus any (retiring) shard above. */
export function allShards(group: GroupState): readonly ShardRecord[] {
  // Groups are immutable values, so the list can be kept per group object: the hot path (a
  // steady-state heartbeat and the statechart's guards) asks for it several times per event.
  let shards = shardLists.get(group);
  if (!shards) {
    const numbers = new Set<number>();
    for (let shard = 0; shard < group.shardCount; shard++) numbers.add(shard);
    for (const record of Object.values(group.shards)) numbers.add(record.shard);
    shards = [...numbers].sort((a, b) => a - b).map((shard) => shardAt(group, shard));
    shardLists.set(group, shards);
  }
  return shards;
}

const shardLists = new WeakMap<GroupState, readonly ShardRecord[]>();
const retiringLists = new WeakMap<GroupState, readonly ShardRecord[]>();

/**
 * The retiring shard records, in shard order, kept per group object like {@link allShards}:
 * a heartbeat looks at these (usually none) instead of scanning every shard.
 */
export function retiringRecords(group: GroupState): readonly ShardRecord[] {
  let records = retiringLists.get(group);
  if (!records) {
    records = allShards(group).filter((record) => record.state === 'retiring');
    retiringLists.set(group, records);
  }
  return records;
}
const memberLists = new WeakMap<GroupState['members'], readonly string[]>();

/** Member ids in a stable order (kept per members map: O(members) once per membership change). */
export function memberIds(group: GroupState): readonly string[] {
  let ids = memberLists.get(group.members);
  if (!ids) {
    ids = group.members.keys().sort(compareIds);
    memberLists.set(group.members, ids);
  }
  return ids;
}

/** How many members the group has, in O(1). */
export function memberCount(group: GroupState): number {
  return group.members.size;
}

/** Whether `memberId` names a current member (false for null). */
export function isMember(group: GroupState, memberId: string | null): boolean {
  return memberId !== null && group.members.has(memberId);
}

export function memberOf(group: GroupState, memberId: string): MemberRecord | undefined {
  return group.members.get(memberId);
}

/** What one member is told about the shards; the four lists are sorted and disjoint. */
export interface MemberShards {
  readonly assigned: number[];
  readonly revoking: number[];
  readonly retiring: number[];
  /** Target is this member but someone else owns it or it is not granted yet. */
  readonly pending: number[];
}

export const NO_SHARDS: MemberShards = Object.freeze({
  assigned: [],
  revoking: [],
  retiring: [],
  pending: [],
});

/** A member's view of the shards (DESIGN.md §5 response lists). */
export function memberShards(group: GroupState, memberId: string): MemberShards {
  const index = shardIndex(group).get(memberId);
  if (!index) return { assigned: [], revoking: [], retiring: [], pending: [] };
  const numbers = (records: readonly ShardRecord[]) => records.map((r) => r.shard);
  return {
    assigned: numbers(index.assigned),
    revoking: numbers(index.revoking),
    retiring: numbers(index.retiring),
    pending: [...index.pending],
  };
}

/** Shards `memberId` owns in `state`, as the group's index keeps them (no copy: read only). */
export function ownedShardsView(
  group: GroupState,
  memberId: string,
  state: Exclude<ShardRecord['state'], 'released'>,
): readonly ShardRecord[] {
  return shardIndex(group).get(memberId)?.[state] ?? NO_RECORDS;
}

/** The shards targeting `memberId` that it does not own (yet), from the index (no copy). */
export function pendingShardsView(group: GroupState, memberId: string): readonly number[] {
  return shardIndex(group).get(memberId)?.pending ?? NO_NUMBERS;
}

const NO_RECORDS: readonly ShardRecord[] = Object.freeze([]);
const NO_NUMBERS: readonly number[] = Object.freeze([]);

/** Shards `memberId` owns in `state`. */
export function ownedShards(
  group: GroupState,
  memberId: string,
  state: ShardRecord['state'],
): ShardRecord[] {
  const index = shardIndex(group).get(memberId);
  if (!index || state === 'released') return [];
  return [...index[state]];
}

interface MemberIndex {
  readonly assigned: ShardRecord[];
  readonly revoking: ShardRecord[];
  readonly retiring: ShardRecord[];
  readonly pending: number[];
}

const shardIndexes = new WeakMap<GroupState, Map<string, MemberIndex>>();

/** Every member's shards in one pass over the group, kept per (immutable) group object. */
function shardIndex(group: GroupState): Map<string, MemberIndex> {
  let index = shardIndexes.get(group);
  if (index) return index;
  const built = new Map<string, MemberIndex>();
  const of = (memberId: string) => {
    let entry = built.get(memberId);
    if (!entry) {
      entry = { assigned: [], revoking: [], retiring: [], pending: [] };
      built.set(memberId, entry);
    }
    return entry;
  };
  for (const record of allShards(group)) {
    if (record.owner !== null && record.state !== 'released')
      of(record.owner)[record.state].push(record);
    if (
      record.target !== null &&
      record.target !== record.owner &&
      record.shard < group.shardCount
    ) {
      of(record.target).pending.push(record.shard);
    }
  }
  index = built;
  shardIndexes.set(group, index);
  return index;
}

/** Applies changed shard records; returns `group` itself when `changes` is empty. */
export function withShards(
  group: GroupState,
  changes: ReadonlyMap<number, ShardRecord>,
): GroupState {
  if (changes.size === 0) return group;
  const shards: Record<number, ShardRecord> = { ...group.shards };
  for (const [shard, record] of changes) shards[shard] = record;
  return { ...group, shards };
}

/** Removes shard records (retired shards leave the group); returns `group` itself when none exists. */
export function withoutShards(group: GroupState, shards: Iterable<number>): GroupState {
  const present = [...shards].filter((shard) => Object.hasOwn(group.shards, shard));
  if (present.length === 0) return group;
  const kept: Record<number, ShardRecord> = { ...group.shards };
  for (const shard of present) delete kept[shard];
  return { ...group, shards: kept };
}

/**
 * Releases every shard `memberId` owns as assigned or revoking: owner gone, target kept (the
 * caller recomputes targets when membership changed). Retiring shards belong to scale-in and
 * are left alone here.
 */
export function releaseShardsOf(group: GroupState, memberId: string, now: number): GroupState {
  const changes = new Map<number, ShardRecord>();
  for (const record of allShards(group)) {
    if (record.owner !== memberId) continue;
    if (record.state !== 'assigned' && record.state !== 'revoking') continue;
    changes.set(record.shard, released(record, now));
  }
  return withShards(group, changes);
}

/** The shard given up by its owner: free, keeping its target. */
export function released(record: ShardRecord, now: number): ShardRecord {
  return { ...record, state: 'released', owner: null, ownerEpoch: null, since: now };
}
