/**
 * Safety invariants of a group (docs/architecture.md#invariants), checked on every state change by
 * the reducer and over random event sequences by the property tests.
 */
import type { Effect, GroupContext } from './context.js';
import { compareIds } from './assignor.js';
import { allShards, isMember, memberCount, memberIds, memberOf, shardAt } from './group-state.js';
import { haltedShards, isHalted } from './halted.js';
import { keep, kept } from './kept.js';
import { PersistentMap } from '../collections/persistent-map.js';
import type { GroupState } from './types.js';

export type InvariantName =
  | 'SINGLE_OWNER'
  | 'MONOTONIC_VERSIONS'
  | 'TARGET_COVERAGE'
  | 'RELEASE_BEFORE_GRANT'
  | 'NO_RELEASED_TO_REVOKING'
  | 'SHARDS_WITHIN_COUNT'
  | 'PAUSED_NOT_GRANTED';

export interface Violation {
  readonly invariant: InvariantName;
  readonly detail: string;
}

/**
 * The invariants of one state: owners of assigned/revoking/retiring shards are members, only
 * released shards lack an owner (and retiring ones while no member is left to inherit them),
 * every shard record is filed under its own number (so no shard can be in two members'
 * assigned lists), while members exist and no recompute is pending every shard below
 * `shardCount` targets a live member, and a shard is retiring exactly when it lies at or above
 * `shardCount` (scale-in retires what it removes; a scale-out takes retiring shards back).
 */
export function checkGroupState(ctx: GroupContext): Violation[] {
  // Each state is checked as the `next` of one step and again as the `prev` of the following
  // one: the answer is kept per (immutable) group object, so a change pays one pass, not two.
  const known = kept<CheckedState>(ctx.group, CHECKED);
  if (known && known.recomputeAt === ctx.recomputeAt) return [...known.violations];
  const violations = computeGroupStateViolations(ctx);
  keep(ctx.group, CHECKED, { recomputeAt: ctx.recomputeAt, violations });
  return [...violations];
}

interface CheckedState {
  readonly recomputeAt: number | null;
  readonly violations: readonly Violation[];
}

const CHECKED = Symbol('checked state invariants');

function computeGroupStateViolations(ctx: GroupContext): Violation[] {
  const { group } = ctx;
  const violations: Violation[] = [];
  const single = (detail: string): void => {
    violations.push({ invariant: 'SINGLE_OWNER', detail });
  };
  // Only whether members exist matters here: the sorted id list would cost a sort of every
  // member on each new members object (every join), O(members log members) per event.
  const hasMembers = memberCount(group) > 0;
  for (const record of allShards(group)) {
    const removed = record.shard >= group.shardCount;
    if (removed !== (record.state === 'retiring')) {
      violations.push({
        invariant: 'SHARDS_WITHIN_COUNT',
        detail: `shard ${record.shard} is ${record.state} with shardCount ${group.shardCount}`,
      });
    }
    if (record.state === 'released') {
      if (record.owner !== null)
        single(`shard ${record.shard} is released but names owner ${record.owner}`);
      continue;
    }
    if (record.owner === null) {
      // A retiring shard waits ownerless only until a member can inherit it.
      if (record.state !== 'retiring' || hasMembers)
        single(`shard ${record.shard} is ${record.state} without an owner`);
    } else if (!isMember(group, record.owner)) {
      single(`shard ${record.shard} is ${record.state} by ${record.owner}, which is not a member`);
    }
  }
  // A record filed under another shard's key would put that shard in two members' lists.
  for (const [key, record] of Object.entries(group.shards)) {
    if (Number(key) !== record.shard)
      single(`shard record under key ${key} says shard ${record.shard}`);
  }
  const halted = haltedShards(group);
  if (ctx.recomputeAt === null) {
    for (const shard of halted) {
      const { target } = shardAt(group, shard);
      if (target !== null) {
        violations.push({
          invariant: 'TARGET_COVERAGE',
          detail: `shard ${shard} is paused but targets ${target}`,
        });
      }
    }
  }
  if (hasMembers && ctx.recomputeAt === null) {
    for (let shard = 0; shard < group.shardCount; shard++) {
      if (halted.includes(shard)) continue;
      const { target } = shardAt(group, shard);
      if (!isMember(group, target)) {
        violations.push({
          invariant: 'TARGET_COVERAGE',
          detail: `shard ${shard} targets ${target ?? 'nobody'}, not a live member`,
        });
      }
    }
  }
  return violations;
}

/**
 * Every invariant of the step `prev` → `next`: those of {@link checkGroupState} on `next`, plus
 * versions and surviving members' epochs never decreasing, no shard changing owner from one
 * member to another without passing through released (except a retiring shard whose owner is
 * gone after the step: it is inherited, still retiring, since its data must still be consumed),
 * and no shard going released → revoking without a new assignment epoch.
 */
export function checkInvariants(prev: GroupContext, next: GroupContext): Violation[] {
  const violations = checkGroupState(next);
  const before = prev.group;
  const after = next.group;
  const monotonic = monotonicCheck(violations);
  versionsNeverDecrease(before, after, monotonic);
  for (const memberId of memberIds(after)) {
    const was = memberOf(before, memberId);
    const is = memberOf(after, memberId);
    if (was && is) monotonic(`memberEpoch of ${memberId}`, was.memberEpoch, is.memberEpoch);
  }
  if (before === after) return violations;
  // Every shard either group counts or files a record under (a record filed under another
  // shard's number is a SINGLE_OWNER violation of its own).
  const shards = new Set<number>();
  for (let shard = 0; shard < Math.max(before.shardCount, after.shardCount); shard++) {
    shards.add(shard);
  }
  for (const key of [...Object.keys(before.shards), ...Object.keys(after.shards)]) {
    shards.add(Number(key));
  }
  for (const shard of [...shards].sort((a, b) => a - b)) {
    violations.push(...shardStepViolations(before, after, shard));
  }
  return violations;
}

/**
 * The violations of the step `prev` → `next` that `prev` did not already have: those of
 * {@link checkInvariants} less those of {@link checkGroupState} on `prev`, in the same order,
 * at the cost of what the step changed (a join costs no pass over every member and shard,
 * docs/architecture.md#performance-rules):
 * - the state invariants are not checked again when the step cannot break any: the same shards
 *   object and shard count, no member removed, members before and after (so the rules that
 *   apply only while members exist applied before too), and no pending recompute ended (so
 *   target coverage was already required). Then every owner and target that is not a member
 *   after the step was not one before either: each violation of `next` is one of `prev`;
 * - the step invariants look only at members and shards whose records changed: a record kept
 *   as it was keeps its owner, state and epoch.
 */
export function freshViolations(prev: GroupContext, next: GroupContext): Violation[] {
  const steps = stepViolations(prev.group, next.group);
  if (keepsStateInvariants(prev, next)) return steps;
  const inherited = new Set(checkGroupState(prev).map(key));
  return [...checkGroupState(next).filter((v) => !inherited.has(key(v))), ...steps];
}

function keepsStateInvariants(prev: GroupContext, next: GroupContext): boolean {
  const before = prev.group;
  const after = next.group;
  if (before.shards !== after.shards || before.shardCount !== after.shardCount) return false;
  if (before.createdAt !== after.createdAt || memberCount(before) === 0) return false;
  if (prev.recomputeAt !== null && next.recomputeAt === null) return false;
  if (before.members === after.members) return true;
  let removed = false;
  PersistentMap.diff(before.members, after.members, (_memberId, _was, is) => {
    if (is === undefined) removed = true;
  });
  return !removed;
}

/** A check that reports, into `violations`, a number that went down (MONOTONIC_VERSIONS). */
function monotonicCheck(violations: Violation[]): (name: string, was: number, is: number) => void {
  return (name, was, is) => {
    if (is < was) {
      violations.push({
        invariant: 'MONOTONIC_VERSIONS',
        detail: `${name} went from ${was} to ${is}`,
      });
    }
  };
}

/** The group's versions and its highest member epoch never go down. */
function versionsNeverDecrease(
  before: GroupState,
  after: GroupState,
  monotonic: (name: string, was: number, is: number) => void,
): void {
  monotonic('metadataVersion', before.metadataVersion, after.metadataVersion);
  monotonic('assignmentEpoch', before.assignmentEpoch, after.assignmentEpoch);
  monotonic('memberEpochSeq', before.memberEpochSeq, after.memberEpochSeq);
}

/** The step part of {@link checkInvariants}, from the changed records only. */
function stepViolations(before: GroupState, after: GroupState): Violation[] {
  const violations: Violation[] = [];
  const monotonic = monotonicCheck(violations);
  versionsNeverDecrease(before, after, monotonic);
  const lowered: string[] = [];
  PersistentMap.diff(before.members, after.members, (memberId, was, is) => {
    if (was && is && is.memberEpoch < was.memberEpoch) lowered.push(memberId);
  });
  for (const memberId of lowered.sort(compareIds)) {
    const was = memberOf(before, memberId)!;
    const is = memberOf(after, memberId)!;
    monotonic(`memberEpoch of ${memberId}`, was.memberEpoch, is.memberEpoch);
  }
  if (before === after || before.shards === after.shards) return violations;
  const changed = new Set<number>();
  for (const key of Object.keys(after.shards)) {
    const shard = Number(key);
    if (before.shards[shard] !== after.shards[shard]) changed.add(shard);
  }
  for (const key of Object.keys(before.shards)) {
    const shard = Number(key);
    if (before.shards[shard] !== after.shards[shard]) changed.add(shard);
  }
  // A shard without a record on either side reads as released, no owner: nothing to check.
  for (const shard of [...changed].sort((a, b) => a - b)) {
    violations.push(...shardStepViolations(before, after, shard));
  }
  return violations;
}

/** RELEASE_BEFORE_GRANT, NO_RELEASED_TO_REVOKING and PAUSED_NOT_GRANTED of one shard over a step. */
function shardStepViolations(before: GroupState, after: GroupState, shard: number): Violation[] {
  const violations: Violation[] = [];
  const was = shardAt(before, shard);
  const is = shardAt(after, shard);
  const inherited =
    was.state === 'retiring' && is.state === 'retiring' && !isMember(after, was.owner);
  if (was.owner !== null && is.owner !== null && was.owner !== is.owner && !inherited) {
    violations.push({
      invariant: 'RELEASE_BEFORE_GRANT',
      detail: `shard ${shard} moved from ${was.owner} to ${is.owner} without being released`,
    });
  }
  if (
    was.state === 'released' &&
    is.state === 'revoking' &&
    after.assignmentEpoch === before.assignmentEpoch
  ) {
    violations.push({
      invariant: 'NO_RELEASED_TO_REVOKING',
      detail: `shard ${shard} went released → revoking within assignment epoch ${after.assignmentEpoch}`,
    });
  }
  if (is.state === 'assigned' && was.state !== 'assigned' && isHalted(after, shard)) {
    violations.push({
      invariant: 'PAUSED_NOT_GRANTED',
      detail: `shard ${shard} is paused but was granted to ${is.owner}`,
    });
  }
  return violations;
}

/**
 * Accepts `next` unless the step introduces a violation `prev` did not already have
 * ({@link freshViolations}); then the step is rejected: `prev` is kept, the command fails with
 * INTERNAL and each new violation is an effect (the host counts them in
 * `coord_invariant_violations_total`). Violations inherited from a state loaded that way are
 * not held against every later event.
 */
export function guardInvariants(prev: GroupContext, next: GroupContext): GroupContext {
  if (next.group === prev.group && next.recomputeAt === prev.recomputeAt) return next;
  const fresh = freshViolations(prev, next);
  if (fresh.length === 0) return next;
  const effects: Effect[] = fresh.map((v) => ({ type: 'INVARIANT_VIOLATION', ...v }));
  return {
    ...prev,
    lastEventAt: next.lastEventAt,
    effects,
    result: {
      ok: false,
      code: 'INTERNAL',
      message: 'the change would break a group invariant and was rejected',
      details: { violations: fresh },
    },
  };
}

function key(violation: Violation): string {
  return `${violation.invariant}:${violation.detail}`;
}
