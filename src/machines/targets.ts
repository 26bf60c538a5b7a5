/**
 * Target assignment of a group: which member each shard should end up with. Recomputed only
 * when membership or the shard count changes (docs/protocol.md#assignment), never per heartbeat.
 */
import { assignTargets } from './assignor.js';
import { haltedShards } from './halted.js';
import { isMember, memberIds, shardAt, withShards } from './group-state.js';
import type { GroupState, ShardRecord } from './types.js';

/**
 * Sticky preference of every shard below `shardCount`: its owner while assigned or revoking
 * (the member that really has it), else its target if that is still a member. Second
 * preference (`decided`): the target of a shard whose owner is another member, a move under way.
 */
export function stickyPreferences(group: GroupState): {
  current: Map<number, string | null>;
  decided: Map<number, string | null>;
} {
  const current = new Map<number, string | null>();
  const decided = new Map<number, string | null>();
  for (let shard = 0; shard < group.shardCount; shard++) {
    const record = shardAt(group, shard);
    const holder =
      record.state === 'assigned' || record.state === 'revoking' ? record.owner : record.target;
    current.set(shard, holder !== null && isMember(group, holder) ? holder : null);
    if (record.target !== null && record.target !== holder && isMember(group, record.target))
      decided.set(shard, record.target);
  }
  return { current, decided };
}

/**
 * Sets every shard's target from the assignor (null for all when there are no members, and for
 * paused shards, see `consumption.ts`) and
 * bumps `assignmentEpoch` when any target changed. Returns `group` itself when nothing did.
 * Retiring shards are not below `shardCount` and so never take part.
 */
export function recomputeTargets(group: GroupState): GroupState {
  const members = memberIds(group);
  const halted = haltedShards(group);
  const targets = assignTargets({
    shardCount: group.shardCount,
    members,
    ...stickyPreferences(group),
    ...(halted.length > 0 ? { excluded: new Set(halted) } : {}),
  });
  const changes = new Map<number, ShardRecord>();
  for (let shard = 0; shard < group.shardCount; shard++) {
    const record = shardAt(group, shard);
    const target = targets.get(shard) ?? null;
    if (record.target !== target) changes.set(shard, { ...record, target });
  }
  if (changes.size === 0) return group;
  return { ...withShards(group, changes), assignmentEpoch: group.assignmentEpoch + 1 };
}

/**
 * Whether the persisted targets cannot be the assignor's answer for the current members: a
 * paused shard with a target, another shard without a live target, targets when nobody is left, or per-member target counts outside
 * ±1 of each other (a member joined and the debounced recompute never ran before a restart).
 */
export function targetsAreStale(group: GroupState): boolean {
  const members = memberIds(group);
  const counts = new Map<string, number>(members.map((id) => [id, 0]));
  const halted = haltedShards(group);
  for (let shard = 0; shard < group.shardCount; shard++) {
    const { target } = shardAt(group, shard);
    if (halted.includes(shard)) {
      if (target !== null) return true;
      continue;
    }
    if (members.length === 0) {
      if (target !== null) return true;
      continue;
    }
    if (target === null || !isMember(group, target)) return true;
    counts.set(target, (counts.get(target) ?? 0) + 1);
  }
  if (members.length === 0) return false;
  const values = [...counts.values()];
  return Math.max(...values) - Math.min(...values) > 1;
}
