/**
 * The heartbeat protocol (docs/protocol.md), one `describe` per rule, driven through the group
 * statechart exactly as the actor host drives it: one event at a time, time on the event.
 */
import { describe, expect, it } from 'vitest';
import type { MembershipConfig } from '../../src/machines/config.js';
import { nextDeadline } from '../../src/machines/context.js';
import type { HeartbeatReply } from '../../src/machines/protocol.js';
import type { GroupState } from '../../src/machines/types.js';
import { makeGroupState } from '../support/fixtures.js';
import { Harness, T0 } from './group-harness.js';

const shard = (h: Harness, n: number) => h.ctx.group.shards[n];

/** Two members sharing 2 shards: m-a joined first and got both; m-b is waiting for shard 1. */
function twoMembersMidRebalance(config: Partial<MembershipConfig> = {}): Harness {
  const h = new Harness({ shardCount: 2, config });
  h.join('m-a');
  h.join('m-b');
  h.settleRecompute();
  return h;
}

/**
 * Runs `beat` and asserts it changed nothing the host would write or the members would notice:
 * the very same group object (so the host writes nothing and the store revision stays), the
 * same liveness, the same store revision and the same pending recompute.
 */
function expectNoChange<T>(h: Harness, beat: () => T): T {
  const before = h.ctx;
  const liveness = before.liveness.toRecord();
  const result = beat();
  const after = h.ctx;
  expect(after.group).toBe(before.group);
  expect(after.liveness.toRecord()).toEqual(liveness);
  expect(after.storeRevision).toBe(before.storeRevision);
  expect(after.recomputeAt).toBe(before.recomputeAt);
  return result;
}

describe('a joining member gets a balanced assignment', () => {
  it('the first member of an empty group is granted every shard at once, outcome OK', () => {
    const h = new Harness({ shardCount: 4 });
    const reply = h.join('m-a');
    expect(reply).toMatchObject({
      outcome: 'OK',
      memberEpoch: 1,
      assignmentEpoch: 1,
      assignedShards: [0, 1, 2, 3],
    });
    expect(reply.heartbeatIntervalMs).toBe(h.config.heartbeatIntervalMs);
    expect(h.effects).toContainEqual({ type: 'MEMBER_JOINED', memberId: 'm-a' });
    expect(h.actor.getSnapshot().value).toMatchObject({ membership: 'stable' });
  });

  it('three members over 8 shards end with 3, 3 and 2 shards', () => {
    const h = new Harness({ shardCount: 8 });
    for (const m of ['m-a', 'm-b', 'm-c']) h.join(m);
    h.settleRecompute();
    for (let round = 0; round < 3; round++)
      for (const m of ['m-a', 'm-b', 'm-c']) h.beat(m, { done: true });
    const sizes = ['m-a', 'm-b', 'm-c'].map((m) => h.beat(m, { done: true }).assignedShards.length);
    expect(sizes.sort()).toEqual([2, 3, 3]);
    expect(h.actor.getSnapshot().value).toMatchObject({ membership: 'stable' });
  });
});

describe('a shard is granted to a new owner only after the previous owner reported it DONE', () => {
  it('both members are REVOKE_PENDING meanwhile, and the grant follows the release', () => {
    const h = twoMembersMidRebalance();
    expect(shard(h, 1)).toMatchObject({ state: 'assigned', owner: 'm-a', target: 'm-b' });
    expect(h.actor.getSnapshot().value).toMatchObject({ membership: { rebalancing: 'granting' } });

    const waiting = h.beat('m-b');
    expect(waiting).toMatchObject({
      outcome: 'REVOKE_PENDING',
      assignedShards: [],
      pendingShards: [1],
    });
    expect(waiting.heartbeatIntervalMs).toBe(h.config.rebalanceHeartbeatIntervalMs);

    const revoking = h.beat('m-a');
    expect(revoking).toMatchObject({
      outcome: 'REVOKE_PENDING',
      assignedShards: [0],
      revokeShards: [1],
    });
    expect(shard(h, 1)).toMatchObject({ state: 'revoking', owner: 'm-a', target: 'm-b' });
    expect(h.actor.getSnapshot().value).toMatchObject({ membership: { rebalancing: 'revoking' } });

    // Still draining: nothing moves, however often the new owner asks.
    expect(h.beat('m-a')).toMatchObject({ outcome: 'REVOKE_PENDING', revokeShards: [1] });
    expect(h.beat('m-b')).toMatchObject({
      outcome: 'REVOKE_PENDING',
      assignedShards: [],
      pendingShards: [1],
    });
    expect(shard(h, 1)?.owner).toBe('m-a');

    expect(h.beat('m-a', { done: true })).toMatchObject({
      outcome: 'OK',
      assignedShards: [0],
      revokeShards: [],
    });
    expect(shard(h, 1)).toMatchObject({ state: 'released', owner: null, target: 'm-b' });

    expect(h.beat('m-b')).toMatchObject({ outcome: 'OK', assignedShards: [1], pendingShards: [] });
    expect(shard(h, 1)).toMatchObject({ state: 'assigned', owner: 'm-b', target: 'm-b' });
    expect(h.actor.getSnapshot().value).toMatchObject({ membership: 'stable' });
    expect(h.effects).toContainEqual({
      type: 'REBALANCE_COMPLETED',
      durationMs: expect.any(Number) as number,
    });
  });

  it('each change to what a member owns gives it a new epoch, and only one per heartbeat', () => {
    const h = twoMembersMidRebalance();
    const before = h.replies.get('m-a')?.memberEpoch ?? 0;
    const revoking = h.beat('m-a');
    expect(revoking.memberEpoch).toBe(h.ctx.group.memberEpochSeq);
    expect(revoking.memberEpoch).toBeGreaterThan(before);
    expect(h.ctx.group.members.get('m-a')).toMatchObject({
      memberEpoch: revoking.memberEpoch,
      previousEpoch: before,
    });
    expect(h.beat('m-a').memberEpoch).toBe(revoking.memberEpoch);
  });
});

describe('a shard the member stops listing in currentAssignments counts as DONE', () => {
  it('releases the shard without any revokeProgress', () => {
    const h = twoMembersMidRebalance();
    h.beat('m-a');
    expect(h.beat('m-a', { currentAssignments: [0], revokeProgress: [] })).toMatchObject({
      outcome: 'OK',
      assignedShards: [0],
    });
    expect(shard(h, 1)).toMatchObject({ state: 'released', owner: null });
    expect(h.beat('m-b').assignedShards).toEqual([1]);
  });
});

describe('a member still revoking when rebalanceTimeoutMs passes is fenced and its shards released', () => {
  it('fences the stuck member on the sweep and moves all its shards', () => {
    const h = new Harness({ shardCount: 2 });
    h.join('m-a', { rebalanceTimeoutMs: 5_000 });
    h.join('m-b');
    h.settleRecompute();
    h.beat('m-a');
    expect(h.ctx.liveness.get('m-a')?.revokeDeadline).toBe(h.clock.now() + 5_000);
    expect(nextDeadline(h.ctx)).toBe(h.clock.now() + 5_000);

    for (let i = 0; i < 4; i++) {
      h.clock.advance(1_000);
      h.beat('m-a'); // alive, but never DONE
      h.tick();
    }
    expect(h.ctx.group.members.get('m-a')).toBeDefined();
    h.clock.advance(1_000);
    h.tick();
    expect(h.effects).toContainEqual({
      type: 'MEMBER_FENCED',
      memberId: 'm-a',
      reason: 'REBALANCE_TIMEOUT',
    });
    expect(h.ctx.group.members.get('m-a')).toBeUndefined();
    expect(shard(h, 1)).toMatchObject({ state: 'released', owner: null, target: 'm-b' });

    expect(h.beat('m-b')).toMatchObject({ outcome: 'OK', assignedShards: [0, 1] });
    expect(h.beat('m-a').outcome).toBe('FENCED_MEMBER_EPOCH');
  });
});

describe('each revoke has the whole rebalance timeout, also one asked while another runs', () => {
  it('a revoke asked 7 s into a 10 s one is fenced 10 s after it was asked, not at 10 s', () => {
    const h = new Harness({ shardCount: 6, config: { assignmentDebounceMs: 0 } });
    h.join('m-a', { rebalanceTimeoutMs: 10_000 });
    h.join('m-b', { rebalanceTimeoutMs: 10_000 });
    const first = h.beat('m-a').revokeShards;
    expect(first).toEqual([3, 4, 5]);
    h.clock.advance(7_000);
    h.beat('m-b');
    h.join('m-c', { rebalanceTimeoutMs: 10_000 });
    // Still draining the first three, m-a is asked to give up one more.
    const asked = h.beat('m-a');
    expect(asked.revokeShards).toEqual([2, 3, 4, 5]);
    h.clock.advance(1_000);
    // The first three done in time; shard 2 still draining.
    const progress = asked.revokeShards.map(
      (n) => ({ shard: n, state: first.includes(n) ? 'DONE' : 'DRAINING' }) as const,
    );
    h.beat('m-a', {
      currentAssignments: [...asked.assignedShards, ...asked.revokeShards],
      revokeProgress: progress,
    });
    expect(h.ctx.liveness.get('m-a')?.revokeDeadline).toBe(T0 + 17_000);
    h.clock.set(T0 + 10_000);
    h.tick();
    expect(h.ctx.group.members.get('m-a')).toBeDefined();
    // Shard 2 never finished: fenced once its own timeout passed.
    h.clock.set(T0 + 17_000);
    h.tick();
    expect(h.effects).toContainEqual({
      type: 'MEMBER_FENCED',
      memberId: 'm-a',
      reason: 'REBALANCE_TIMEOUT',
    });
  });
});

describe('a member silent for sessionTimeoutMs expires', () => {
  it('expires at the session timeout, not before, and its shards go to the others', () => {
    const h = new Harness({ shardCount: 4 });
    h.join('m-a');
    h.join('m-b');
    h.settleRecompute();
    for (let i = 0; i < 3; i++) for (const m of ['m-a', 'm-b']) h.beat(m, { done: true });
    expect(h.beat('m-b').assignedShards).toHaveLength(2);

    const expiresAt = h.ctx.liveness.get('m-b')?.sessionExpiresAt ?? 0;
    expect(expiresAt).toBe(h.clock.now() + h.config.sessionTimeoutMs);
    while (h.clock.now() + 3_000 < expiresAt) {
      h.clock.advance(3_000);
      h.beat('m-a');
      h.tick();
    }
    expect(h.ctx.group.members.get('m-b')).toBeDefined();
    h.clock.set(expiresAt);
    h.tick();
    expect(h.effects).toContainEqual({ type: 'MEMBER_EXPIRED', memberId: 'm-b' });
    expect(h.ctx.group.members.get('m-b')).toBeUndefined();
    expect(h.beat('m-a')).toMatchObject({ outcome: 'OK', assignedShards: [0, 1, 2, 3] });
  });
});

describe('a member leaving with memberEpoch -1 is removed and its shards released at once', () => {
  it('answers OK with epoch -1, recomputes immediately and the rest take over', () => {
    const h = new Harness({ shardCount: 2 });
    h.join('m-a');
    h.join('m-b');
    h.settleRecompute();
    h.beat('m-a', { done: true });
    h.beat('m-a', { done: true });
    h.beat('m-b');
    const epoch = h.ctx.group.assignmentEpoch;

    const reply = h.beat('m-b', { memberEpoch: -1 });
    expect(reply).toMatchObject({
      outcome: 'OK',
      memberEpoch: -1,
      assignedShards: [],
      pendingShards: [],
    });
    expect(h.effects).toContainEqual({ type: 'MEMBER_LEFT', memberId: 'm-b' });
    expect(h.ctx.group.members.get('m-b')).toBeUndefined();
    expect(h.ctx.liveness.get('m-b')).toBeUndefined();
    expect(h.ctx.recomputeAt).toBeNull();
    expect(h.ctx.group.assignmentEpoch).toBe(epoch + 1);
    expect(shard(h, 1)).toMatchObject({ state: 'released', owner: null, target: 'm-a' });
    expect(h.beat('m-a').assignedShards).toEqual([0, 1]);
  });

  it('a leave from an unknown member changes nothing', () => {
    const h = new Harness();
    h.join('m-a');
    const group = h.ctx.group;
    expect(h.beat('m-x', { memberEpoch: -1 }).outcome).toBe('OK');
    expect(h.ctx.group).toBe(group);
  });
});

describe('the immediately previous epoch is accepted when the last response was lost', () => {
  it('answers the retry as current when currentAssignments are a subset of what the member owns', () => {
    const h = twoMembersMidRebalance();
    const lost = h.replies.get('m-a');
    const answered = h.beat('m-a'); // this response is "lost"
    h.replies.set('m-a', lost as HeartbeatReply);
    const retry = h.beat('m-a');
    expect(retry.outcome).toBe('REVOKE_PENDING');
    expect(retry.memberEpoch).toBe(answered.memberEpoch);
    expect(retry.revokeShards).toEqual([1]);
  });
});

describe('a heartbeat answered FENCED_MEMBER_EPOCH changes nothing in the group', () => {
  it('a stale epoch (a delayed duplicate) is fenced; the live member keeps its shards', () => {
    const h = twoMembersMidRebalance();
    h.beat('m-a');
    h.beat('m-a', { done: true });
    const live = h.replies.get('m-a') as HeartbeatReply;
    const reply = expectNoChange(h, () => h.beat('m-a', { memberEpoch: 1 }));
    expect(reply).toMatchObject({
      outcome: 'FENCED_MEMBER_EPOCH',
      memberEpoch: 1,
      assignedShards: [],
      revokeShards: [],
    });
    expect(h.effects).toContainEqual({
      type: 'MEMBER_FENCED',
      memberId: 'm-a',
      reason: 'STALE_EPOCH',
    });
    h.replies.set('m-a', live);
    expect(h.beat('m-a')).toMatchObject({ outcome: 'OK', assignedShards: live.assignedShards });
  });

  it('an epoch above the current one is fenced, changes nothing and is counted as a rollback signal', () => {
    const h = twoMembersMidRebalance();
    const reply = expectNoChange(h, () => h.beat('m-a', { memberEpoch: 7 }));
    expect(reply.outcome).toBe('FENCED_MEMBER_EPOCH');
    expect(h.effects).toContainEqual({
      type: 'ROLLBACK_SIGNAL',
      source: 'heartbeat',
      field: 'memberEpoch',
      reported: 7,
      stored: h.ctx.group.members.get('m-a')?.memberEpoch,
    });
    expect(h.ctx.signals?.count).toBe(1);
  });

  it('the previous epoch listing a shard the member does not own is fenced and changes nothing', () => {
    const h = twoMembersMidRebalance();
    h.beat('m-a', { done: true });
    h.beat('m-a', { done: true }); // shard 1 released: m-a owns only 0 now
    const reply = expectNoChange(h, () =>
      h.beat('m-a', {
        memberEpoch: h.ctx.group.members.get('m-a')?.previousEpoch ?? 0,
        currentAssignments: [0, 1],
      }),
    );
    expect(reply.outcome).toBe('FENCED_MEMBER_EPOCH');
    expect(shard(h, 0)).toMatchObject({ state: 'assigned', owner: 'm-a' });
  });

  it('an unknown member is fenced without touching the group', () => {
    const h = new Harness();
    h.join('m-a');
    expect(expectNoChange(h, () => h.beat('m-x', { memberEpoch: 3 })).outcome).toBe(
      'FENCED_MEMBER_EPOCH',
    );
    expect(h.effects).toContainEqual({
      type: 'MEMBER_FENCED',
      memberId: 'm-x',
      reason: 'UNKNOWN_MEMBER',
    });
  });
});

describe('a heartbeat of another lifecycle is fenced before versions are compared', () => {
  it('is fenced, not told to SYNC_METADATA, counts no rollback signal and changes nothing', () => {
    const h = twoMembersMidRebalance();
    // Versions of the old lifecycle may be above this one's: they are not comparable.
    const reply = expectNoChange(h, () =>
      h.beat('m-a', { lifecycleId: 'life-0', metadataVersion: 50, assignmentEpoch: 50 }),
    );
    expect(reply).toMatchObject({ outcome: 'FENCED_MEMBER_EPOCH', lifecycleId: 'life-1' });
    expect(h.effects).toEqual([
      { type: 'MEMBER_FENCED', memberId: 'm-a', reason: 'LIFECYCLE_MISMATCH' },
    ]);
    expect(h.ctx.signals).toBeNull();
  });

  it('a leave or a join carrying another lifecycleId changes nothing either', () => {
    const h = twoMembersMidRebalance();
    for (const memberEpoch of [-1, 0]) {
      const reply = expectNoChange(h, () => h.beat('m-a', { lifecycleId: 'life-0', memberEpoch }));
      expect(reply.outcome).toBe('FENCED_MEMBER_EPOCH');
    }
    expect(h.join('m-a', { lifecycleId: 'life-1' }).outcome).not.toBe('FENCED_MEMBER_EPOCH');
  });
});

describe('a join with memberEpoch 0 is always accepted, also for a member id that was just fenced', () => {
  it('accepts the fenced member back with a new epoch', () => {
    const h = new Harness({ shardCount: 2 });
    const first = h.join('m-a');
    expect(h.beat('m-a', { memberEpoch: 99 }).outcome).toBe('FENCED_MEMBER_EPOCH');
    const back = h.join('m-a');
    expect(back).toMatchObject({ outcome: 'OK', assignedShards: [0, 1] });
    expect(back.memberEpoch).toBeGreaterThan(first.memberEpoch);
    expect(back.memberEpoch).toBe(h.ctx.group.memberEpochSeq);
  });

  it('a known member joining again loses its shards and is granted them again under a new epoch', () => {
    const h = new Harness({ shardCount: 2 });
    const first = h.join('m-a');
    const again = h.join('m-a');
    expect(again.memberEpoch).toBeGreaterThan(first.memberEpoch);
    expect(again.assignedShards).toEqual([0, 1]);
    expect(shard(h, 0)?.ownerEpoch).toBe(again.memberEpoch);
    expect(h.ctx.group.members.get('m-a')?.previousEpoch).toBeNull();
  });

  it('clamps the requested timeouts to the configured bounds', () => {
    const h = new Harness();
    h.join('m-a', { sessionTimeoutMs: 1, rebalanceTimeoutMs: 10 * 60 * 60_000 });
    expect(h.ctx.group.members.get('m-a')).toMatchObject({
      sessionTimeoutMs: h.config.minSessionTimeoutMs,
      rebalanceTimeoutMs: h.config.maxRebalanceTimeoutMs,
    });
  });
});

describe('a member belongs to the principal that joined it', () => {
  const OWNER = { principal: 'svc-billing' };
  const INTRUDER = { principal: 'svc-intruder' };

  it('a heartbeat, join or leave for a live member from another principal gets MEMBER_ID_IN_USE and changes nothing', () => {
    const h = twoMembersMidRebalance();
    h.join('m-c', OWNER);
    expect(h.ctx.group.members.get('m-c')?.principal).toBe('svc-billing');
    h.settleRecompute();
    const held = h.beat('m-c', OWNER);
    for (const memberEpoch of [held.memberEpoch, 0, -1]) {
      const result = expectNoChange(h, () => h.attempt('m-c', { ...INTRUDER, memberEpoch }));
      expect(result).toMatchObject({ ok: false, code: 'MEMBER_ID_IN_USE' });
    }
    expect(h.beat('m-c', OWNER)).toMatchObject({
      outcome: held.outcome,
      memberEpoch: held.memberEpoch,
    });
  });

  it('a request that names no principal cannot speak for a bound member', () => {
    const h = new Harness();
    h.join('m-a', OWNER);
    const result = expectNoChange(h, () => h.attempt('m-a', { principal: undefined }));
    expect(result).toMatchObject({ ok: false, code: 'MEMBER_ID_IN_USE' });
  });

  it('once the member left or expired, another principal may join with its id', () => {
    const h = new Harness({ shardCount: 2 });
    h.join('m-a', OWNER);
    h.beat('m-a', { ...OWNER, memberEpoch: -1 });
    expect(h.join('m-a', INTRUDER).outcome).toBe('OK');
    expect(h.ctx.group.members.get('m-a')?.principal).toBe('svc-intruder');

    h.clock.advance(h.config.sessionTimeoutMs);
    h.tick();
    expect(h.ctx.group.members.get('m-a')).toBeUndefined();
    expect(h.join('m-a', OWNER).outcome).toBe('OK');
  });

  it('a member stored before members were bound answers any principal, and its next join binds it', () => {
    const h = new Harness();
    h.join('m-a'); // no principal: as a record written before the binding existed
    expect(h.ctx.group.members.get('m-a')?.principal).toBeNull();
    expect(h.beat('m-a', OWNER).outcome).toBe('OK');
    h.join('m-a', OWNER);
    expect(h.ctx.group.members.get('m-a')?.principal).toBe('svc-billing');
    expect(h.attempt('m-a', INTRUDER)).toMatchObject({ ok: false, code: 'MEMBER_ID_IN_USE' });
  });
});

describe('a join beyond max-members-per-group gets GROUP_FULL', () => {
  it('refuses a new member at the cap without changing anything, but never a rejoin', () => {
    const h = new Harness({ shardCount: 4, config: { maxMembersPerGroup: 2 } });
    h.join('m-a');
    h.join('m-b');
    const result = expectNoChange(h, () => h.attempt('m-c', { memberEpoch: 0 }));
    expect(result).toMatchObject({
      ok: false,
      code: 'GROUP_FULL',
      details: { maxMembersPerGroup: 2 },
    });
    expect(h.join('m-a').outcome).not.toBe('FENCED_MEMBER_EPOCH');
    h.beat('m-b', { memberEpoch: -1 });
    expect(h.join('m-c').outcome).toBeDefined();
    expect(h.ctx.group.members.keys().sort()).toEqual(['m-a', 'm-c']);
  });
});

describe('a reported metadataVersion or assignmentEpoch above the stored one is answered SYNC_METADATA', () => {
  it('returns the stored values and changes nothing about the member, not even its liveness', () => {
    const h = new Harness({ shardCount: 2 });
    h.join('m-a');
    const before = h.ctx;
    const liveness = before.liveness.toRecord();
    const reply = h.beat('m-a', { metadataVersion: 9 });
    expect(reply).toMatchObject({
      outcome: 'SYNC_METADATA',
      memberEpoch: 1,
      metadataVersion: before.group.metadataVersion,
      assignmentEpoch: before.group.assignmentEpoch,
      assignedShards: [0, 1],
    });
    expect(h.ctx.group).toBe(before.group);
    expect(h.ctx.liveness.toRecord()).toEqual(liveness);
    expect(h.effects).toEqual([
      {
        type: 'ROLLBACK_SIGNAL',
        source: 'heartbeat',
        field: 'metadataVersion',
        reported: 9,
        stored: 1,
      },
    ]);
    expect(h.ctx.signals).toMatchObject({
      count: 1,
      highestVersionSeen: 9,
      lastSource: 'heartbeat',
    });
  });

  it('does the same for a higher assignmentEpoch, and counts each signal', () => {
    const h = new Harness();
    h.join('m-a');
    const group = h.ctx.group;
    h.clock.advance(10);
    expect(h.beat('m-a', { assignmentEpoch: 50 }).outcome).toBe('SYNC_METADATA');
    h.clock.advance(10);
    expect(h.beat('m-x', { memberEpoch: 4, assignmentEpoch: 51 })).toMatchObject({
      outcome: 'SYNC_METADATA',
      memberEpoch: 4,
      assignedShards: [],
    });
    expect(h.ctx.group).toBe(group);
    expect(h.ctx.signals).toMatchObject({ count: 2, firstAt: T0 + 10, lastAt: T0 + 20 });
  });
});

describe('a burst of joins costs one assignmentEpoch (debounced recompute)', () => {
  it('five joins within the debounce window bump assignmentEpoch once', () => {
    const h = new Harness({ shardCount: 10 });
    h.join('m-0');
    const epoch = h.ctx.group.assignmentEpoch;
    for (const m of ['m-1', 'm-2', 'm-3', 'm-4', 'm-5']) {
      h.clock.advance(15);
      const reply = h.join(m);
      expect(reply.heartbeatIntervalMs).toBe(h.config.rebalanceHeartbeatIntervalMs);
    }
    expect(h.ctx.group.assignmentEpoch).toBe(epoch);
    // The window slides: it ends a debounce after the latest join.
    expect(h.ctx.recomputeAt).toBe(T0 + 5 * 15 + h.config.assignmentDebounceMs);
    expect(nextDeadline(h.ctx)).toBe(h.ctx.recomputeAt);
    h.settleRecompute();
    expect(h.ctx.group.assignmentEpoch).toBe(epoch + 1);
    expect(h.effects).toContainEqual({ type: 'ASSIGNMENT_RECOMPUTED', assignmentEpoch: epoch + 1 });
    expect(h.ctx.recomputeAt).toBeNull();
  });

  it('a single join recomputes one debounce after it, as before', () => {
    const h = new Harness({ shardCount: 4 });
    h.join('m-0');
    h.clock.advance(1_000);
    h.join('m-1');
    expect(h.ctx.recomputeAt).toBe(T0 + 1_000 + h.config.assignmentDebounceMs);
    h.clock.advance(h.config.assignmentDebounceMs - 1);
    h.tick();
    expect(h.ctx.recomputeAt).not.toBeNull();
    h.clock.advance(1);
    h.tick();
    expect(h.ctx.recomputeAt).toBeNull();
    expect(h.beat('m-1').pendingShards).toHaveLength(2);
  });

  it('joins that keep coming recompute once per assignmentDebounceMaxMs, counted from the first', () => {
    const h = new Harness({
      shardCount: 64,
      config: { assignmentDebounceMs: 100, assignmentDebounceMaxMs: 1_000 },
    });
    h.join('m-000');
    const epoch = h.ctx.group.assignmentEpoch;
    // A join every 50 ms for 2.5 s: the window never closes by itself.
    const recomputedAt: number[] = [];
    for (let i = 1; i <= 50; i++) {
      h.clock.advance(50);
      const before = h.ctx.group.assignmentEpoch;
      h.tick();
      h.join(`m-${String(i).padStart(3, '0')}`);
      if (h.ctx.group.assignmentEpoch !== before) recomputedAt.push(h.clock.now() - T0);
      expect(h.ctx.recomputeAt).not.toBeNull();
      expect(h.ctx.recomputeAt!).toBeLessThanOrEqual(h.ctx.recomputeBy!);
    }
    // Due 1 s after the join that opened the window (at 50 ms), then 1 s after the join that
    // opened the next one (right after that recompute).
    expect(recomputedAt).toEqual([1_050, 2_050]);
    expect(h.ctx.group.assignmentEpoch).toBe(epoch + 2);
    h.settleRecompute();
    expect(h.ctx.group.assignmentEpoch).toBe(epoch + 3);
    expect(h.ctx.recomputeBy).toBeNull();
  });

  it('recomputes at once when assignmentDebounceMs is 0', () => {
    const h = new Harness({ shardCount: 2, config: { assignmentDebounceMs: 0 } });
    h.join('m-a');
    h.join('m-b');
    expect(h.ctx.recomputeAt).toBeNull();
    expect(h.beat('m-b').pendingShards).toEqual([1]);
  });
});

describe('a steady-state heartbeat writes nothing', () => {
  it('leaves context.group the very same object', () => {
    const h = new Harness({ shardCount: 3 });
    h.join('m-a');
    h.beat('m-a');
    const group = h.ctx.group;
    const value = h.actor.getSnapshot().value;
    for (let i = 0; i < 3; i++) {
      h.clock.advance(3_000);
      expect(h.beat('m-a').outcome).toBe('OK');
    }
    expect(h.ctx.group).toBe(group);
    expect(h.actor.getSnapshot().value).toEqual(value);
    expect(h.ctx.liveness.get('m-a')?.lastHeartbeatAt).toBe(h.clock.now());
    expect(h.effects).toEqual([]);
  });
});

describe('a coordinationVersion outside the supported range is refused', () => {
  it('fails with UNSUPPORTED_COORDINATION_VERSION and the range', () => {
    const h = new Harness();
    const result = h.heartbeat({
      memberId: 'm-a',
      memberEpoch: 0,
      assignmentEpoch: 0,
      metadataVersion: 0,
      currentAssignments: [],
      revokeProgress: [],
      coordinationVersion: 2,
    });
    expect(result).toMatchObject({
      ok: false,
      code: 'UNSUPPORTED_COORDINATION_VERSION',
      details: { min: 1, max: 1 },
    });
    expect(h.ctx.group.members.size).toBe(0);
  });
});

describe('a restored context gives every member a full session timeout of grace', () => {
  it('expires nobody just after a restore, however old the persisted state', () => {
    const h = new Harness({ group: makeGroupState({ activeMigration: null, migrations: [] }) });
    h.clock.advance(24 * 60 * 60_000);
    h.restart();
    const now = h.clock.now();
    expect(h.ctx.liveness.get('m-1')).toMatchObject({
      lastHeartbeatAt: now,
      sessionExpiresAt: now + 45_000,
      revokeDeadline: now + 60_000,
    });
    expect(h.ctx.liveness.get('m-2')).toMatchObject({
      sessionExpiresAt: now + 30_000,
      revokeDeadline: null,
    });
    h.clock.advance(29_999);
    h.tick();
    expect(h.ctx.group.members.keys().sort()).toEqual(['m-1', 'm-2']);
    expect(h.actor.getSnapshot().value).toMatchObject({ membership: { rebalancing: 'revoking' } });
  });

  it('runs a recompute a restart interrupted (a member joined inside the debounce window)', () => {
    const h = new Harness({ shardCount: 4 });
    h.join('m-a');
    h.join('m-b');
    expect(h.ctx.recomputeAt).not.toBeNull();
    h.restart();
    expect(h.ctx.recomputeAt).toBe(h.clock.now());
    h.tick();
    expect(h.beat('m-b').pendingShards).toHaveLength(2);
  });
});

describe('a FAILED_CLOSED group refuses heartbeats and changes nothing', () => {
  function failedClosed(): Harness {
    const h = new Harness({ shardCount: 2 });
    h.join('m-a');
    const group: GroupState = {
      ...h.ctx.group,
      status: 'FAILED_CLOSED',
      failureReason: 'METADATA_LOST',
    };
    return new Harness({ group });
  }

  it('answers GROUP_FAILED_CLOSED, keeps every member and sweeps nothing', () => {
    const h = failedClosed();
    expect(h.actor.getSnapshot().value).toMatchObject({ lifecycle: 'failedClosed' });
    const group = h.ctx.group;
    const result = h.heartbeat({
      memberId: 'm-a',
      memberEpoch: 1,
      assignmentEpoch: 1,
      metadataVersion: 1,
      currentAssignments: [0, 1],
      revokeProgress: [],
    });
    expect(result).toMatchObject({ ok: false, code: 'GROUP_FAILED_CLOSED' });
    expect(h.ctx.group).toBe(group);
    expect(nextDeadline(h.ctx)).toBeNull();
    h.clock.advance(10 * 60_000);
    h.tick();
    expect(h.ctx.group).toBe(group);
  });

  it('still records a higher reported version as a rollback signal', () => {
    const h = failedClosed();
    const result = h.heartbeat({
      memberId: 'm-a',
      memberEpoch: 1,
      assignmentEpoch: 1,
      metadataVersion: 5,
      currentAssignments: [],
      revokeProgress: [],
    });
    expect(result.ok).toBe(false);
    expect(h.ctx.signals).toMatchObject({ count: 1, highestVersionSeen: 5 });
    expect(h.effects).toContainEqual({
      type: 'ROLLBACK_SIGNAL',
      source: 'heartbeat',
      field: 'metadataVersion',
      reported: 5,
      stored: 1,
    });
  });
});

describe('admin commands through the actor: freeze, unfreeze, pause and resume producers', () => {
  it('FREEZE moves an active group to frozen, and refuses a frozen one', () => {
    const h = new Harness();
    h.send({ type: 'FREEZE', now: h.clock.now() });
    expect(h.ctx.result).toMatchObject({ ok: true, reply: { status: 'FROZEN', changed: true } });
    expect(h.actor.getSnapshot().value).toMatchObject({ lifecycle: 'frozen' });
    h.send({ type: 'FREEZE', now: h.clock.now() });
    expect(h.ctx.result).toMatchObject({ ok: false, code: 'GROUP_FROZEN' });
    h.send({ type: 'UNFREEZE', now: h.clock.now() });
    expect(h.actor.getSnapshot().value).toMatchObject({ lifecycle: 'active' });
    h.send({ type: 'UNFREEZE', now: h.clock.now() });
    expect(h.ctx.result).toMatchObject({ ok: false, code: 'GROUP_NOT_FROZEN' });
  });

  it('PAUSE_PRODUCERS bumps metadataVersion once; repeating it is a no-op', () => {
    const h = new Harness();
    const version = h.ctx.group.metadataVersion;
    h.send({ type: 'PAUSE_PRODUCERS', now: h.clock.now() });
    expect(h.ctx.group).toMatchObject({ producersPaused: true, metadataVersion: version + 1 });
    const group = h.ctx.group;
    h.send({ type: 'PAUSE_PRODUCERS', now: h.clock.now() });
    expect(h.ctx.result).toMatchObject({ ok: true, reply: { changed: false } });
    expect(h.ctx.group).toBe(group);
    h.send({ type: 'RESUME_PRODUCERS', now: h.clock.now() });
    expect(h.ctx.group).toMatchObject({ producersPaused: false, metadataVersion: version + 2 });
  });

  it('a FAILED_CLOSED group refuses every admin command with GROUP_FAILED_CLOSED_ADMIN', () => {
    const base = new Harness();
    const h = new Harness({ group: { ...base.ctx.group, status: 'FAILED_CLOSED' } });
    for (const type of ['FREEZE', 'UNFREEZE', 'PAUSE_PRODUCERS', 'RESUME_PRODUCERS'] as const) {
      h.send({ type, now: h.clock.now() });
      expect(h.ctx.result).toMatchObject({ ok: false, code: 'GROUP_FAILED_CLOSED_ADMIN' });
    }
  });

  it('PERSISTED records the revision and keeps the result for the reply', () => {
    const h = new Harness();
    h.join('m-a');
    const result = h.ctx.result;
    h.send({ type: 'PERSISTED', revision: 7, updatedAt: h.clock.now() });
    expect(h.ctx.storeRevision).toBe(7);
    expect(h.ctx.result).toBe(result);
  });
});
