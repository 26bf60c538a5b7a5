/**
 * Retiring shards (docs/architecture.md#migrations): shards a scale-in removed. Their owner
 * consumes them to the end and reports DONE (or stops listing them), then they leave the group.
 * They never have a target and never count for the assignor; they only ever change hands when their
 * owner is gone, and then stay `retiring` for the member that inherits them.
 *
 * `ownerEpoch` null on a retiring shard means "its owner has not been told yet": it was handed
 * over outside the owner's own heartbeat, or its owner was revoking it when a scale-in removed
 * it. Such a member cannot list the shard as retiring yet, so neither its silence about it nor a
 * DONE (which, for a shard it was revoking, says its drain ended, not that it read the shard to
 * its end) counts; its next heartbeat tells it (with a new epoch).
 */
import { compareIds } from './assignor.js';
import { allShards, memberIds, retiringRecords, withShards } from './group-state.js';
import type { HeartbeatRequest } from './protocol.js';
import type { GroupState, ShardRecord } from './types.js';

/** What one member's heartbeat does to retiring shards (see {@link retiringStep}). */
export interface RetiringStep {
  /** Shards the member finished: they leave the group. */
  readonly finished: readonly number[];
  /**
   * Retiring shards this heartbeat tells the member about, owner set to it: those handed to it
   * while it was not looking, and ownerless ones waiting for any member. The caller stamps
   * them with the member's new epoch.
   */
  readonly told: readonly ShardRecord[];
}

/** A heartbeat's step when the group has no retiring shard (most of the time). */
const NO_RETIRING_STEP: RetiringStep = Object.freeze({
  finished: Object.freeze([]),
  told: Object.freeze([]),
});

/**
 * The retiring shards of `memberId`'s heartbeat. A shard it owns and was told about (its
 * reported epoch is at least the shard's `ownerEpoch`) is finished when reported DONE or not
 * listed in `currentAssignments`; a shard it owns but was not told about, and every ownerless
 * retiring shard, is told now.
 */
export function retiringStep(
  group: GroupState,
  memberId: string,
  request: HeartbeatRequest,
  now: number,
): RetiringStep {
  const retiring = retiringRecords(group);
  if (retiring.length === 0) return NO_RETIRING_STEP;
  const finished: number[] = [];
  const told: ShardRecord[] = [];
  const done = new Set(
    request.revokeProgress.filter((p) => p.state === 'DONE').map((p) => p.shard),
  );
  const listed = new Set(request.currentAssignments);
  for (const record of retiring) {
    if (record.owner === null) {
      told.push({ ...record, owner: memberId, since: now });
    } else if (record.owner !== memberId) {
      continue;
    } else if (record.ownerEpoch === null) {
      told.push(record);
    } else if (request.memberEpoch >= record.ownerEpoch) {
      // Below its epoch the member has not seen the reply naming the shard (a lost response
      // or a rejoin): it cannot have finished it.
      if (done.has(record.shard) || !listed.has(record.shard)) finished.push(record.shard);
    }
  }
  return { finished, told };
}

/**
 * Hands the retiring shards of `formerOwner` (no longer a member of `group`) to the live
 * member with the fewest owned shards (ties by member id), one shard at a time, so several
 * orphans spread out. With no member left they wait ownerless for the next member served.
 * Retiring data must still be consumed to its end, which is why it is handed over rather than
 * dropped like a released shard.
 */
export function handOverRetiring(group: GroupState, formerOwner: string, now: number): GroupState {
  const orphans = allShards(group).filter((r) => r.state === 'retiring' && r.owner === formerOwner);
  if (orphans.length === 0) return group;
  const load = ownedCounts(group);
  const changes = new Map<number, ShardRecord>();
  for (const record of orphans) {
    const heir = leastLoaded(load);
    if (heir !== null) load.set(heir, (load.get(heir) ?? 0) + 1);
    changes.set(record.shard, { ...record, owner: heir, ownerEpoch: null, since: now });
  }
  return withShards(group, changes);
}

/**
 * Heirs for `count` shards, least loaded first, each pick counted before the next, so several
 * shards spread out; empty without members.
 */
export function leastLoadedMembers(group: GroupState, count: number): string[] {
  const load = ownedCounts(group);
  const heirs: string[] = [];
  for (let i = 0; i < count; i++) {
    const heir = leastLoaded(load);
    if (heir === null) break;
    load.set(heir, (load.get(heir) ?? 0) + 1);
    heirs.push(heir);
  }
  return heirs;
}

/** Shards each member owns in any state (assigned, revoking or retiring). */
function ownedCounts(group: GroupState): Map<string, number> {
  const load = new Map<string, number>(memberIds(group).map((id) => [id, 0]));
  for (const record of allShards(group)) {
    if (record.owner === null || record.state === 'released') continue;
    const count = load.get(record.owner);
    if (count !== undefined) load.set(record.owner, count + 1);
  }
  return load;
}

function leastLoaded(load: ReadonlyMap<string, number>): string | null {
  let best: string | null = null;
  let bestCount = Infinity;
  for (const [id, count] of load) {
    if (count < bestCount || (count === bestCount && best !== null && compareIds(id, best) < 0)) {
      best = id;
      bestCount = count;
    }
  }
  return best;
}
