/**
 * The shards no member may hold now: those an operator paused and those of the position reset
 * under way (docs/operations.md#pausing-consumption). Heartbeat replies list them as
 * `pausedShards`; targets skip them.
 */
import type { GroupState } from './types.js';

const NONE: readonly number[] = Object.freeze([]);
const HALTED = new WeakMap<GroupState, readonly number[]>();

/**
 * Every shard no member may hold now, ascending: those paused and those of the reset under way.
 * What heartbeat replies list as `pausedShards`.
 */
export function haltedShards(group: GroupState): readonly number[] {
  const paused = group.pausedShards ?? NONE;
  const reset = group.positionReset;
  if (!reset) return paused;
  let halted = HALTED.get(group);
  if (!halted) {
    halted = sortedUnion(
      paused,
      reset.moves.map((m) => m.shard),
    );
    HALTED.set(group, halted);
  }
  return halted;
}

/** Whether `shard` is paused or being reset. */
export function isHalted(group: GroupState, shard: number): boolean {
  return haltedShards(group).includes(shard);
}

/** Sorted union of two shard lists (one shared empty list when both are empty). */
export function sortedUnion(a: readonly number[], b: readonly number[]): readonly number[] {
  const all = [...new Set([...a, ...b])].sort((x, y) => x - y);
  return all.length === 0 ? NONE : all;
}
