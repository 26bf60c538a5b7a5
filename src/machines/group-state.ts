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
export function allShards(group: GroupState): ShardRecord[] {
  const numbers = new Set<number>();
  for (let shard = 0; shard < group.shardCount; shard++) numbers.add(shard);
  for (const record of Object.values(group.shards)) numbers.add(record.shard);
  return [...numbers].sort((a, b) => a - b).map((shard) => shardAt(group, shard));
}

/** Member ids in a stable order. */
export function memberIds(group: GroupState): string[] {
  return Object.keys(group.members).sort(compareIds);
}

/** Whether `memberId` names a current member (false for null). */
export function isMember(group: GroupState, memberId: string | null): boolean {
  return memberId !== null && Object.hasOwn(group.members, memberId);
}

export function memberOf(group: GroupState, memberId: string): MemberRecord | undefined {
  return Object.hasOwn(group.members, memberId) ? group.members[memberId] : undefined;
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
  const view: MemberShards = { assigned: [], revoking: [], retiring: [], pending: [] };
  for (const record of allShards(group)) {
    if (record.owner === memberId) {
      if (record.state === 'assigned') view.assigned.push(record.shard);
      else if (record.state === 'revoking') view.revoking.push(record.shard);
      else if (record.state === 'retiring') view.retiring.push(record.shard);
    } else if (record.target === memberId && record.shard < group.shardCount) {
      view.pending.push(record.shard);
    }
  }
  return view;
}

/** Shards `memberId` owns in `state`. */
export function ownedShards(
  group: GroupState,
  memberId: string,
  state: ShardRecord['state'],
): ShardRecord[] {
  return allShards(group).filter((r) => r.owner === memberId && r.state === state);
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
    changes.set(record.shard, {
      ...record,
      state: 'released',
      owner: null,
      ownerEpoch: null,
      since: now,
    });
  }
  return withShards(group, changes);
}
