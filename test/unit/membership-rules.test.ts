/**
 * The heartbeat protocol of DESIGN.md §5, one `describe` per rule, driven through the group
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
    expect(h.ctx.group.members['m-a']).toMatchObject({
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
    expect(h.ctx.liveness['m-a']?.revokeDeadline).toBe(h.clock.now() + 5_000);
    expect(nextDeadline(h.ctx)).toBe(h.clock.now() + 5_000);

    for (let i = 0; i < 4; i++) {
      h.clock.advance(1_000);
      h.beat('m-a'); // alive, but never DONE
      h.tick();
    }
    expect(h.ctx.group.members['m-a']).toBeDefined();
    h.clock.advance(1_000);
    h.tick();
    expect(h.effects).toContainEqual({
      type: 'MEMBER_FENCED',
      memberId: 'm-a',
      reason: 'REBALANCE_TIMEOUT',
    });
    expect(h.ctx.group.members['m-a']).toBeUndefined();
    expect(shard(h, 1)).toMatchObject({ state: 'released', owner: null, target: 'm-b' });

    expect(h.beat('m-b')).toMatchObject({ outcome: 'OK', assignedShards: [0, 1] });
    expect(h.beat('m-a').outcome).toBe('FENCED_MEMBER_EPOCH');
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

    const expiresAt = h.ctx.liveness['m-b']?.sessionExpiresAt ?? 0;
    expect(expiresAt).toBe(h.clock.now() + h.config.sessionTimeoutMs);
    while (h.clock.now() + 3_000 < expiresAt) {
      h.clock.advance(3_000);
      h.beat('m-a');
      h.tick();
    }
    expect(h.ctx.group.members['m-b']).toBeDefined();
    h.clock.set(expiresAt);
    h.tick();
    expect(h.effects).toContainEqual({ type: 'MEMBER_EXPIRED', memberId: 'm-b' });
    expect(h.ctx.group.members['m-b']).toBeUndefined();
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
    expect(h.ctx.group.members['m-b']).toBeUndefined();
    expect(h.ctx.liveness['m-b']).toBeUndefined();
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

  it('fences a previous-epoch heartbeat that lists a shard the member does not own', () => {
    const h = twoMembersMidRebalance();
    const lost = h.replies.get('m-a') as HeartbeatReply;
    h.beat('m-a', { done: true });
    h.beat('m-a', { done: true }); // shard 1 released: m-a owns only 0 now
    const reply = h.beat('m-a', {
      memberEpoch: h.ctx.group.members['m-a']?.previousEpoch ?? 0,
      currentAssignments: lost.assignedShards,
    });
    expect(reply.outcome).toBe('FENCED_MEMBER_EPOCH');
  });
});

describe('an epoch other than the current one is fenced with FENCED_MEMBER_EPOCH', () => {
  it('fences a stale epoch, removes the member and releases its shards', () => {
    const h = twoMembersMidRebalance();
    h.beat('m-a');
    h.beat('m-a', { done: true });
    const reply = h.beat('m-a', { memberEpoch: 1 });
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
    expect(h.ctx.group.members['m-a']).toBeUndefined();
    expect(shard(h, 0)).toMatchObject({ state: 'released', owner: null, target: 'm-b' });
    expect(h.ctx.recomputeAt).toBeNull();
  });

  it('fences an unknown member without touching the group', () => {
    const h = new Harness();
    h.join('m-a');
    const group = h.ctx.group;
    expect(h.beat('m-x', { memberEpoch: 3 }).outcome).toBe('FENCED_MEMBER_EPOCH');
    expect(h.effects).toContainEqual({
      type: 'MEMBER_FENCED',
      memberId: 'm-x',
      reason: 'UNKNOWN_MEMBER',
    });
    expect(h.ctx.group).toBe(group);
  });

  it('fences a member reporting another lifecycleId', () => {
    const h = new Harness();
    h.join('m-a');
    expect(h.beat('m-a', { lifecycleId: 'life-0' }).outcome).toBe('FENCED_MEMBER_EPOCH');
    expect(h.effects).toContainEqual({
      type: 'MEMBER_FENCED',
      memberId: 'm-a',
      reason: 'LIFECYCLE_MISMATCH',
    });
  });

  it('a reported epoch above the stored one is fenced and counted as a rollback signal', () => {
    const h = new Harness();
    h.join('m-a');
    expect(h.beat('m-a', { memberEpoch: 7 }).outcome).toBe('FENCED_MEMBER_EPOCH');
    expect(h.effects).toContainEqual({
      type: 'ROLLBACK_SIGNAL',
      source: 'heartbeat',
      field: 'memberEpoch',
      reported: 7,
      stored: 1,
    });
    expect(h.ctx.signals?.count).toBe(1);
  });
});

describe('a join with memberEpoch 0 is always accepted, also for a member id that was just fenced', () => {
  it('accepts the fenced member back with a new epoch', () => {
    const h = new Harness({ shardCount: 2 });
    h.join('m-a');
    h.beat('m-a', { memberEpoch: 99 });
    expect(h.ctx.group.members['m-a']).toBeUndefined();
    const back = h.join('m-a');
    expect(back).toMatchObject({ outcome: 'OK', assignedShards: [0, 1] });
    expect(back.memberEpoch).toBe(h.ctx.group.memberEpochSeq);
  });

  it('a known member joining again loses its shards and is granted them again under a new epoch', () => {
    const h = new Harness({ shardCount: 2 });
    const first = h.join('m-a');
    const again = h.join('m-a');
    expect(again.memberEpoch).toBeGreaterThan(first.memberEpoch);
    expect(again.assignedShards).toEqual([0, 1]);
    expect(shard(h, 0)?.ownerEpoch).toBe(again.memberEpoch);
    expect(h.ctx.group.members['m-a']?.previousEpoch).toBeNull();
  });

  it('clamps the requested timeouts to the configured bounds', () => {
    const h = new Harness();
    h.join('m-a', { sessionTimeoutMs: 1, rebalanceTimeoutMs: 10 * 60 * 60_000 });
    expect(h.ctx.group.members['m-a']).toMatchObject({
      sessionTimeoutMs: h.config.minSessionTimeoutMs,
      rebalanceTimeoutMs: h.config.maxRebalanceTimeoutMs,
    });
  });
});

describe('a reported metadataVersion or assignmentEpoch above the stored one is answered SYNC_METADATA', () => {
  it('returns the stored values and changes nothing about the member, not even its liveness', () => {
    const h = new Harness({ shardCount: 2 });
    h.join('m-a');
    const before = h.ctx;
    const reply = h.beat('m-a', { metadataVersion: 9 });
    expect(reply).toMatchObject({
      outcome: 'SYNC_METADATA',
      memberEpoch: 1,
      metadataVersion: before.group.metadataVersion,
      assignmentEpoch: before.group.assignmentEpoch,
      assignedShards: [0, 1],
    });
    expect(h.ctx.group).toBe(before.group);
    expect(h.ctx.liveness).toBe(before.liveness);
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
    expect(h.ctx.recomputeAt).toBe(T0 + 15 + h.config.assignmentDebounceMs);
    expect(nextDeadline(h.ctx)).toBe(h.ctx.recomputeAt);
    h.settleRecompute();
    expect(h.ctx.group.assignmentEpoch).toBe(epoch + 1);
    expect(h.effects).toContainEqual({ type: 'ASSIGNMENT_RECOMPUTED', assignmentEpoch: epoch + 1 });
    expect(h.ctx.recomputeAt).toBeNull();
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
    expect(h.ctx.liveness['m-a']?.lastHeartbeatAt).toBe(h.clock.now());
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
    expect(h.ctx.group.members).toEqual({});
  });
});

describe('a restored context gives every member a full session timeout of grace', () => {
  it('expires nobody just after a restore, however old the persisted state', () => {
    const h = new Harness({ group: makeGroupState({ activeMigration: null, migrations: [] }) });
    h.clock.advance(24 * 60 * 60_000);
    h.restart();
    const now = h.clock.now();
    expect(h.ctx.liveness['m-1']).toMatchObject({
      lastHeartbeatAt: now,
      sessionExpiresAt: now + 45_000,
      revokeDeadline: now + 60_000,
    });
    expect(h.ctx.liveness['m-2']).toMatchObject({
      sessionExpiresAt: now + 30_000,
      revokeDeadline: null,
    });
    h.clock.advance(29_999);
    h.tick();
    expect(Object.keys(h.ctx.group.members).sort()).toEqual(['m-1', 'm-2']);
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
