/**
 * Small, pure helpers over `GroupState` (a new group comes from `new-group.ts`): reading shard
 * records, a member's view of the shards, and applying shard changes without copying the group
 * when nothing changed (a steady-state heartbeat must leave the very same object, so the host
 * writes nothing).
 */
import { compareIds } from './assignor.js';
import { PersistentMap } from '../collections/persistent-map.js';
import { keep, kept } from './kept.js';
import type { GroupState, MemberRecord, ShardRecord } from './types.js';

function releasedShard(shard: number, since: number): ShardRecord {
  return { shard, state: 'released', owner: null, ownerEpoch: null, target: null, since };
}

/** The record of `shard`; a missing record below `shardCount` reads as released, no target. */
export function shardAt(group: GroupState, shard: number): ShardRecord {
  return group.shards[shard] ?? releasedShard(shard, group.createdAt);
}

/**
 * What is derived from a group's shards alone, kept per shards object: groups are immutable
 * values, and a change that leaves the shards alone (a join, a leave of a member owning
 * nothing, an epoch bump) keeps the very shards object, so these are not rebuilt for it. The
 * shard count and creation time (what a missing record reads as) are part of the key.
 */
interface ShardsDerived {
  readonly shardCount: number;
  readonly createdAt: number;
  all?: readonly ShardRecord[];
  retiring?: readonly ShardRecord[];
  index?: Map<string, MemberShards>;
  /** The membership phase as the shards alone say it (`phases.ts`). */
  phase?: ShardPhase;
  /** Shards revoking or retiring (the `revoke_pending` gauge). */
  revokePending?: number;
}

/** What the shards alone say of a group with members (`phases.ts` adds a pending recompute). */
export type ShardPhase = 'revoking' | 'granting' | 'stable';

const DERIVED = Symbol('derived from the shards');

/** The derived values of `group.shards` for this shard count (created empty when missing). */
export function shardsDerived(group: GroupState): ShardsDerived {
  const derived = kept<ShardsDerived>(group.shards, DERIVED);
  if (
    derived !== undefined &&
    derived.shardCount === group.shardCount &&
    derived.createdAt === group.createdAt
  ) {
    return derived;
  }
  return keep(group.shards, DERIVED, { shardCount: group.shardCount, createdAt: group.createdAt });
}

/** Every shard record, in shard order: `0..shardCount-1` plus any (retiring) shard above. */
export function allShards(group: GroupState): readonly ShardRecord[] {
  // The hot path (a steady-state heartbeat and the statechart's guards) asks for it several
  // times per event: it is kept per shards object.
  const derived = shardsDerived(group);
  if (!derived.all) {
    const numbers = new Set<number>();
    for (let shard = 0; shard < group.shardCount; shard++) numbers.add(shard);
    for (const record of Object.values(group.shards)) numbers.add(record.shard);
    derived.all = [...numbers].sort((a, b) => a - b).map((shard) => shardAt(group, shard));
  }
  return derived.all;
}

/** How many shards are revoking or retiring (kept per shards object). */
export function revokePendingCount(group: GroupState): number {
  const derived = shardsDerived(group);
  if (derived.revokePending === undefined) {
    let count = 0;
    for (const record of Object.values(group.shards)) {
      if (record.state === 'revoking' || record.state === 'retiring') count++;
    }
    derived.revokePending = count;
  }
  return derived.revokePending;
}

/**
 * The retiring shard records, in shard order, kept per shards object like {@link allShards}:
 * a heartbeat looks at these (usually none) instead of scanning every shard.
 */
export function retiringRecords(group: GroupState): readonly ShardRecord[] {
  const derived = shardsDerived(group);
  derived.retiring ??= allShards(group).filter((record) => record.state === 'retiring');
  return derived.retiring;
}
const MEMBER_IDS = Symbol('member ids');

/** Groups (by lifecycle id) whose last ordered members are kept for {@link memberIds}. */
const ORDERED_GROUPS = 16;
/** Members a map has at least for its order to be kept: fewer sort in well under 0.1 ms. */
const ORDERED_MIN_MEMBERS = 256;
/**
 * The members map each of the last {@link ORDERED_GROUPS} large groups put in order, and those
 * ids, oldest first (see {@link memberIds}).
 */
const lastOrdered = new Map<
  string,
  { readonly members: GroupState['members']; readonly ids: readonly string[] }
>();

/**
 * Member ids in {@link compareIds} order, kept per members map. A members map with none kept
 * gets them from the last map of the same group put in order (in this process) when at most
 * half the keys differ between the two, as after a burst of joins: the keys added are sorted and
 * merged in, those removed left out, O(members + k log k). Sorting every id took about 3 ms at
 * 5,000 members (1 ms merged, 1,000 of them new), in one step of the group that no turn of the
 * event loop can cut (docs/architecture.md#fairness-between-groups). Otherwise the ids are
 * sorted.
 */
export function memberIds(group: GroupState): readonly string[] {
  const members = group.members;
  const known = kept<readonly string[]>(members, MEMBER_IDS);
  if (known !== undefined) return known;
  const last = lastOrdered.get(group.lifecycleId);
  const ids =
    (last === undefined ? null : mergedIds(last.members, last.ids, members)) ??
    members.keys().sort(compareIds);
  if (members.size >= ORDERED_MIN_MEMBERS) {
    // Newest last: the oldest group leaves first.
    lastOrdered.delete(group.lifecycleId);
    lastOrdered.set(group.lifecycleId, { members, ids });
    if (lastOrdered.size > ORDERED_GROUPS) lastOrdered.delete(lastOrdered.keys().next().value!);
  }
  return keep(members, MEMBER_IDS, ids);
}

/**
 * The ids of `after` in order, from `sorted` (the ids of `before`, in order) and the keys added
 * and removed since; null when more than half of them changed (sorting is then as quick).
 */
function mergedIds(
  before: GroupState['members'],
  sorted: readonly string[],
  after: GroupState['members'],
): string[] | null {
  const limit = Math.max(after.size, before.size) / 2;
  const added: string[] = [];
  const removed = new Set<string>();
  PersistentMap.diff(before, after, (id, was, is) => {
    if (was === undefined) added.push(id);
    else if (is === undefined) removed.add(id);
  });
  if (added.length + removed.size > limit) return null;
  added.sort(compareIds);
  const ids: string[] = [];
  let next = 0;
  for (const id of sorted) {
    if (removed.has(id)) continue;
    while (next < added.length && compareIds(added[next]!, id) < 0) ids.push(added[next++]!);
    ids.push(id);
  }
  while (next < added.length) ids.push(added[next++]!);
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

/**
 * What one member is told about the shards; the four lists are sorted and disjoint. The lists
 * are shared and frozen (kept per shards object): a steady heartbeat answers with them as they
 * are, allocating nothing.
 */
export interface MemberShards {
  readonly assigned: readonly number[];
  readonly revoking: readonly number[];
  readonly retiring: readonly number[];
  /** Target is this member but someone else owns it or it is not granted yet. */
  readonly pending: readonly number[];
}

const EMPTY_LIST: readonly never[] = Object.freeze([]);

export const NO_SHARDS: MemberShards = Object.freeze({
  assigned: EMPTY_LIST,
  revoking: EMPTY_LIST,
  retiring: EMPTY_LIST,
  pending: EMPTY_LIST,
});

/** A member's view of the shards (the reply's lists, docs/protocol.md#reply-200), in O(1). */
export function memberShards(group: GroupState, memberId: string): MemberShards {
  return shardIndex(group).get(memberId) ?? NO_SHARDS;
}

/** The shard numbers `memberId` owns in `state`, in shard order (shared: do not change). */
export function ownedShardNumbers(
  group: GroupState,
  memberId: string,
  state: Exclude<ShardRecord['state'], 'released'>,
): readonly number[] {
  const index = shardIndex(group).get(memberId);
  return index === undefined ? EMPTY_LIST : index[state];
}

/**
 * Shards `memberId` owns in `state`. (A record filed under another shard's number, which the
 * invariant guard refuses as SINGLE_OWNER, is looked up under the number it names.)
 */
export function ownedShards(
  group: GroupState,
  memberId: string,
  state: ShardRecord['state'],
): ShardRecord[] {
  if (state === 'released') return [];
  return ownedShardNumbers(group, memberId, state).map((shard) => shardAt(group, shard));
}

/** Every member's shards in one pass over the shards, kept per shards object. */
function shardIndex(group: GroupState): Map<string, MemberShards> {
  const derived = shardsDerived(group);
  if (derived.index) return derived.index;
  const built = new Map<string, Mutable<MemberShards>>();
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
      (of(record.owner)[record.state] as number[]).push(record.shard);
    if (
      record.target !== null &&
      record.target !== record.owner &&
      record.shard < group.shardCount
    ) {
      (of(record.target).pending as number[]).push(record.shard);
    }
  }
  // Kept for the life of the shards object (of the group, at steady state) and handed out as
  // they are: frozen lists of their exact size, one shared empty list for the empty ones.
  for (const entry of built.values()) {
    entry.assigned = compact(entry.assigned);
    entry.revoking = compact(entry.revoking);
    entry.retiring = compact(entry.retiring);
    entry.pending = compact(entry.pending);
    Object.freeze(entry);
  }
  derived.index = built;
  return built;
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

function compact(list: readonly number[]): readonly number[] {
  return list.length === 0 ? EMPTY_LIST : Object.freeze(list.slice());
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

/** The shard given up by its owner: free, keeping its target. */
export function released(record: ShardRecord, now: number): ShardRecord {
  return { ...record, state: 'released', owner: null, ownerEpoch: null, since: now };
}
