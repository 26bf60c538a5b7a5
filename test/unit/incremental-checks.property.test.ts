import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { defaultMembershipConfig } from '../../src/machines/config.js';
import { createGroupContext, type GroupContext } from '../../src/machines/context.js';
import {
  checkGroupState,
  checkInvariants,
  freshViolations,
  guardInvariants,
} from '../../src/machines/invariants.js';
import {
  allShards,
  memberIds,
  memberShards,
  ownedShards,
  retiringRecords,
  revokePendingCount,
} from '../../src/machines/group-state.js';
import { newGroupState } from '../../src/machines/new-group.js';
import { membershipPhase } from '../../src/machines/phases.js';
import { PersistentMap } from '../../src/collections/persistent-map.js';
import type { GroupState, MemberRecord, ShardRecord } from '../../src/machines/types.js';

/*
 * What a join no longer pays for (docs/architecture.md#performance-rules), checked against the full
 * computation:
 * - the invariant guard checks only what a step changed. It must find exactly what the full
 *   check finds: checkInvariants(prev, next) less the state violations prev already had, in the
 *   same order, for random states, many of them broken, and random steps, most of which keep
 *   the shards object as it was (as a join does);
 * - what is derived from the shards (membership phase, shard lists, each member's shards) is
 *   kept per shards object, so a group that shares it with an earlier one must get the same
 *   answers as from a fresh copy of its shards.
 */

const T0 = Date.UTC(2026, 0, 1);
const IDS = ['m-0', 'm-1', 'm-2', 'm-3', 'm-4', 'ghost'];

const memberArb = (memberId: string): fc.Arbitrary<MemberRecord> =>
  fc.record({
    memberId: fc.constant(memberId),
    principal: fc.constant(null),
    clientId: fc.constant(null),
    memberEpoch: fc.integer({ min: 0, max: 6 }),
    previousEpoch: fc.constant(null),
    sessionTimeoutMs: fc.constant(45_000),
    rebalanceTimeoutMs: fc.constant(60_000),
    joinedAt: fc.constant(T0),
  });

const shardArb = (shard: number): fc.Arbitrary<ShardRecord> =>
  fc.record({
    shard: fc.oneof(fc.constant(shard), fc.integer({ min: 0, max: 9 })),
    state: fc.constantFrom('assigned', 'revoking', 'released', 'retiring'),
    owner: fc.constantFrom(null, ...IDS),
    ownerEpoch: fc.constant(1),
    target: fc.constantFrom(null, ...IDS),
    since: fc.constant(T0),
  });

/** A group with some members and shard records, often broken in some way. */
const groupArb: fc.Arbitrary<GroupState> = fc
  .record({
    shardCount: fc.integer({ min: 1, max: 8 }),
    members: fc.subarray(IDS.slice(0, 5)),
    shardNumbers: fc.subarray([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]),
    versions: fc.tuple(fc.nat(5), fc.nat(5), fc.nat(5)),
  })
  .chain(({ shardCount, members, shardNumbers, versions }) =>
    fc
      .record({
        members: fc.tuple(...members.map(memberArb)),
        shards: fc.tuple(...shardNumbers.map(shardArb)),
      })
      .map((parts) => {
        const base = newGroupState(
          { streamPrefix: 'orders', consumerGroup: 'billing' },
          { shardCount, lifecycleId: 'life-1', now: T0 },
        );
        const shards: Record<number, ShardRecord> = {};
        parts.shards.forEach((record, i) => (shards[shardNumbers[i]!] = record));
        return {
          ...base,
          metadataVersion: versions[0],
          assignmentEpoch: versions[1],
          memberEpochSeq: versions[2],
          shards,
          members: PersistentMap.from(
            parts.members.map((m): [string, MemberRecord] => [m.memberId, m]),
          ),
        };
      }),
  );

type Change =
  | { kind: 'addMember'; record: MemberRecord }
  | { kind: 'removeMember'; memberId: string }
  | { kind: 'memberEpoch'; memberId: string; epoch: number }
  | { kind: 'setShard'; shard: number; record: ShardRecord }
  | { kind: 'dropShard'; shard: number }
  | { kind: 'shardCount'; shardCount: number }
  | { kind: 'versions'; delta: number }
  | { kind: 'recompute'; at: number | null };

const memberChangeArb: fc.Arbitrary<Change> = fc.oneof(
  fc
    .constantFrom(...IDS)
    .chain((id) => memberArb(id).map((record) => ({ kind: 'addMember' as const, record }))),
  fc.record({ kind: fc.constant('removeMember' as const), memberId: fc.constantFrom(...IDS) }),
  fc.record({
    kind: fc.constant('memberEpoch' as const),
    memberId: fc.constantFrom(...IDS),
    epoch: fc.integer({ min: 0, max: 8 }),
  }),
  fc.record({ kind: fc.constant('versions' as const), delta: fc.integer({ min: -1, max: 1 }) }),
  fc.record({ kind: fc.constant('recompute' as const), at: fc.constantFrom(null, T0 + 100) }),
);

const shardChangeArb: fc.Arbitrary<Change> = fc.oneof(
  fc
    .integer({ min: 0, max: 9 })
    .chain((shard) =>
      shardArb(shard).map((record) => ({ kind: 'setShard' as const, shard, record })),
    ),
  fc.record({ kind: fc.constant('dropShard' as const), shard: fc.integer({ min: 0, max: 9 }) }),
  fc.record({
    kind: fc.constant('shardCount' as const),
    shardCount: fc.integer({ min: 1, max: 8 }),
  }),
);

/** Mostly steps that leave the shards alone (the guard's short road), some that do not. */
const changesArb = fc.oneof(
  { arbitrary: fc.array(memberChangeArb, { minLength: 1, maxLength: 4 }), weight: 3 },
  {
    arbitrary: fc.array(fc.oneof(memberChangeArb, shardChangeArb), { minLength: 1, maxLength: 4 }),
    weight: 1,
  },
);

function applyChange(ctx: GroupContext, change: Change): GroupContext {
  const group = ctx.group;
  switch (change.kind) {
    case 'addMember':
      return {
        ...ctx,
        group: { ...group, members: group.members.set(change.record.memberId, change.record) },
      };
    case 'removeMember':
      return { ...ctx, group: { ...group, members: group.members.delete(change.memberId) } };
    case 'memberEpoch': {
      const member = group.members.get(change.memberId);
      if (!member) return ctx;
      const members = group.members.set(change.memberId, { ...member, memberEpoch: change.epoch });
      return { ...ctx, group: { ...group, members } };
    }
    case 'setShard':
      return {
        ...ctx,
        group: { ...group, shards: { ...group.shards, [change.shard]: change.record } },
      };
    case 'dropShard': {
      const shards = { ...group.shards };
      delete shards[change.shard];
      return { ...ctx, group: { ...group, shards } };
    }
    case 'shardCount':
      return { ...ctx, group: { ...group, shardCount: change.shardCount } };
    case 'versions':
      return {
        ...ctx,
        group: {
          ...group,
          metadataVersion: group.metadataVersion + change.delta,
          assignmentEpoch: group.assignmentEpoch + change.delta,
        },
      };
    case 'recompute':
      return { ...ctx, recomputeAt: change.at };
  }
}

const key = (v: { invariant: string; detail: string }) => `${v.invariant}:${v.detail}`;

/** What the guard must find: the full check less what `prev` already had. */
function reference(prev: GroupContext, next: GroupContext) {
  const inherited = new Set(checkGroupState(prev).map(key));
  return checkInvariants(prev, next).filter((v) => !inherited.has(key(v)));
}

describe('the invariant guard checks what a step changed, and finds what the full check finds', () => {
  it('for random states and steps, broken ones included', () => {
    let shortRoad = 0;
    let found = 0;
    fc.assert(
      fc.property(
        groupArb,
        fc.constantFrom(null, T0 + 100),
        changesArb,
        (group, recomputeAt, changes) => {
          const prev: GroupContext = {
            ...createGroupContext({
              group,
              config: defaultMembershipConfig,
              now: T0,
              storeRevision: 1,
            }),
            recomputeAt,
          };
          const next = changes.reduce(applyChange, prev);
          const expected = reference(prev, next);
          expect(freshViolations(prev, next)).toEqual(expected);
          const guarded = guardInvariants(prev, next);
          expect(guarded === next).toBe(
            expected.length === 0 ||
              (next.group === prev.group && next.recomputeAt === prev.recomputeAt),
          );
          if (next.group.shards === prev.group.shards) shortRoad++;
          if (expected.length > 0) found++;
        },
      ),
      { numRuns: 1_000 },
    );
    // The runs covered both roads, and steps the guard must reject.
    expect(shortRoad).toBeGreaterThan(250);
    expect(found).toBeGreaterThan(50);
  });
});

/** The membership phase from a scan of every shard (what `phases.ts` computed per event). */
function phaseByScan(ctx: GroupContext): string {
  const { group } = ctx;
  if (group.members.size === 0) return 'empty';
  let granting = ctx.recomputeAt !== null;
  const numbers = new Set([
    ...Array(group.shardCount).keys(),
    ...Object.values(group.shards).map((r) => r.shard),
  ]);
  for (const shard of numbers) {
    const record = group.shards[shard] ?? { shard, state: 'released', owner: null, target: null };
    if (record.state === 'revoking') return 'revoking';
    if (record.state === 'retiring' || record.shard >= group.shardCount) continue;
    if (record.target !== record.owner) granting = true;
  }
  return granting ? 'granting' : 'stable';
}

describe('what is kept per shards object is what a fresh computation gives', () => {
  it('for groups that share a shards object but differ in members, shard count or recompute', () => {
    fc.assert(
      fc.property(groupArb, changesArb, fc.constantFrom(null, T0 + 100), (group, changes, at) => {
        const first = createGroupContext({
          group,
          config: defaultMembershipConfig,
          now: T0,
          storeRevision: 1,
        });
        // Ask everything of the first group, so that the shards object carries its answers.
        const derived = (ctx: GroupContext) => ({
          phase: membershipPhase(ctx),
          all: allShards(ctx.group),
          retiring: retiringRecords(ctx.group),
          pending: revokePendingCount(ctx.group),
          members: IDS.map((id) => [
            memberShards(ctx.group, id),
            ownedShards(ctx.group, id, 'revoking'),
          ]),
        });
        derived(first);
        // A later group: changed members, recompute or shard count, often the same shards object.
        const later = { ...changes.reduce(applyChange, first), recomputeAt: at };
        const fresh = { ...later, group: { ...later.group, shards: { ...later.group.shards } } };
        expect(derived(later)).toEqual(derived(fresh));
        expect(membershipPhase(later)).toBe(phaseByScan(later));
      }),
      { numRuns: 1_000 },
    );
  });
});

describe('member ids in order, from the last members map of the group put in order', () => {
  /** Ids from a universe wide enough that a step of a few changes stays under the merge limit. */
  const ID_UNIVERSE = Array.from({ length: 400 }, (_, i) => `member-${(i * 37) % 400}`);
  const record = (memberId: string, memberEpoch: number) => ({ memberId, memberEpoch }) as never;
  type Step =
    | { readonly op: 'join' | 'leave' | 'renew'; readonly id: string }
    | { readonly op: 'ask' }
    | { readonly op: 'other' | 'rebuilt'; readonly ids: readonly string[] };
  const stepArb: fc.Arbitrary<Step> = fc.oneof(
    {
      weight: 6,
      arbitrary: fc.record({
        op: fc.constantFrom('join', 'leave', 'renew'),
        id: fc.constantFrom(...ID_UNIVERSE),
      }),
    },
    { weight: 3, arbitrary: fc.record({ op: fc.constant('ask' as const) }) },
    {
      weight: 1,
      arbitrary: fc.record({
        op: fc.constantFrom('other' as const, 'rebuilt' as const),
        ids: fc.uniqueArray(fc.constantFrom(...ID_UNIVERSE), { minLength: 250, maxLength: 400 }),
      }),
    },
  );
  const groupOf = (lifecycleId: string, members: PersistentMap<never>) =>
    ({ lifecycleId, members }) as unknown as GroupState;

  it('are every id of the map, sorted in code-unit order, whatever maps were put in order before', () => {
    fc.assert(
      fc.property(fc.array(stepArb, { minLength: 1, maxLength: 100 }), (steps) => {
        let members = PersistentMap.from(
          ID_UNIVERSE.slice(0, 300).map((id) => [id, record(id, 1)] as const),
        );
        memberIds(groupOf('this', members));
        for (const step of steps) {
          if (step.op === 'join') members = members.set(step.id, record(step.id, 1));
          else if (step.op === 'leave') members = members.delete(step.id);
          else if (step.op === 'renew') {
            if (members.get(step.id)) members = members.set(step.id, record(step.id, 2));
          } else if (step.op === 'other') {
            // Another group's members put in order in between.
            const other = PersistentMap.from(step.ids.map((id) => [id, record(id, 1)] as const));
            expect(memberIds(groupOf('other', other))).toEqual([...step.ids].sort());
          } else if (step.op === 'rebuilt') {
            // The same group's members rebuilt from scratch (a reload), sharing nothing.
            members = PersistentMap.from(step.ids.map((id) => [id, record(id, 3)] as const));
          } else {
            expect(memberIds(groupOf('this', members))).toEqual(members.keys().sort());
          }
        }
        expect(memberIds(groupOf('this', members))).toEqual(members.keys().sort());
      }),
      { numRuns: 300 },
    );
  });
});
