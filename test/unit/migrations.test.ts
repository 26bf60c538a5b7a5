/**
 * Online scaling (docs/architecture.md#migrations: scale, rollback) and failing closed, one
 * `describe` per rule, driven through the group statechart as the actor host drives it, with
 * honest simulated members on numeric time.
 */
import { describe, expect, it } from 'vitest';
import type { CommandResult } from '../../src/machines/context.js';
import { nextDeadline } from '../../src/machines/context.js';
import { MIGRATION_HISTORY_LIMIT, migrationConverged } from '../../src/machines/migration.js';
import type { RollbackReply, ScaleReply } from '../../src/machines/migration.js';
import {
  migrationProgress,
  migrationView,
  migrationsView,
  rollbackAllowed,
} from '../../src/machines/migration-view.js';
import type { HeartbeatReply } from '../../src/machines/protocol.js';
import type { MigrationRecord } from '../../src/machines/types.js';
import { Harness, T0 } from './group-harness.js';

const MINUTE = 60_000;
/** A heartbeat round every 250 ms: the short interval members are told while things move. */
const ROUND_MS = 250;

let nextId = 0;
const newId = () => `mig-${++nextId}`;

function scale(h: Harness, shardCount: number, migrationId = newId()): CommandResult {
  const event = {
    type: 'SCALE',
    now: h.clock.now(),
    shardCount,
    requestedBy: 'ops@example.com',
    reason: 'load test',
    migrationId,
  } as const;
  return h.send(event).result as CommandResult;
}

function rollback(h: Harness, migrationId = 'current', newMigrationId = newId()): CommandResult {
  const event = {
    type: 'ROLLBACK',
    now: h.clock.now(),
    migrationId,
    newMigrationId,
    requestedBy: 'ops@example.com',
    reason: 'too many errors',
  } as const;
  return h.send(event).result as CommandResult;
}

/** The reply of a command that must have succeeded. */
function replyOf<T>(result: CommandResult): T {
  if (!result.ok) throw new Error(`command failed: ${result.code} ${result.message}`);
  return result.reply as T;
}

/** One round: every member heartbeats honestly and finishes whatever it revokes or retires. */
function round(h: Harness, members: readonly string[]): void {
  h.clock.advance(ROUND_MS);
  for (const m of members) h.beat(m, { done: true, retired: true });
}

/** Honest rounds until the active migration is no longer IN_PROGRESS; how many it took. */
function converge(h: Harness, members: readonly string[], maxRounds = 10): number {
  for (let n = 1; n <= maxRounds; n++) {
    round(h, members);
    if (h.ctx.group.activeMigration?.state !== 'IN_PROGRESS') return n;
  }
  throw new Error(`no convergence in ${maxRounds} rounds`);
}

/** A group whose members hold their balanced share and have all reported it. */
function stableGroup(shardCount: number, members: readonly string[]): Harness {
  const h = new Harness({ shardCount });
  for (const m of members) h.join(m);
  h.settleRecompute();
  for (let n = 0; n < 6; n++) round(h, members);
  expect(h.actor.getSnapshot().value).toMatchObject({ membership: 'stable', migration: 'idle' });
  return h;
}

const owners = (h: Harness) =>
  Object.fromEntries(
    Object.values(h.ctx.group.shards).map((r) => [r.shard, `${r.state}:${r.owner ?? '-'}`]),
  );
const active = (h: Harness) => h.ctx.group.activeMigration;
const THREE = ['m-a', 'm-b', 'm-c'] as const;

describe('a scale-out adds released shards that the revoke-first flow hands out', () => {
  it('4 → 8 with 3 members: one commit changes routing and targets, then it converges', () => {
    const h = stableGroup(4, THREE);
    const before = h.ctx.group;
    const { migration } = replyOf<ScaleReply>(scale(h, 8, 'mig-out'));
    expect(migration).toEqual({
      migrationId: 'mig-out',
      kind: 'SCALE',
      fromShardCount: 4,
      toShardCount: 8,
      state: 'IN_PROGRESS',
      startedAt: h.clock.now(),
      convergedAt: null,
      completedAt: null,
      rollbackAllowedUntil: null,
      requestedBy: 'ops@example.com',
      reason: 'load test',
      rollbackOf: null,
    });
    expect(h.ctx.group).toMatchObject({
      shardCount: 8,
      metadataVersion: before.metadataVersion + 1,
      assignmentEpoch: before.assignmentEpoch + 1,
      activeMigration: migration,
    });
    for (const n of [4, 5, 6, 7]) {
      expect(h.ctx.group.shards[n]).toMatchObject({ state: 'released', owner: null });
      expect(h.ctx.group.shards[n]?.target).not.toBeNull();
    }
    expect(h.effects).toContainEqual({
      type: 'MIGRATION_STARTED',
      migrationId: 'mig-out',
      kind: 'SCALE',
    });
    expect(h.actor.getSnapshot().value).toMatchObject({ migration: 'inProgress' });

    // Round 1 grants the new shards; round 2 is the members reporting them.
    expect(converge(h, THREE)).toBe(2);
    const converged = active(h);
    expect(converged).toMatchObject({
      state: 'CONVERGED',
      convergedAt: h.clock.now(),
      rollbackAllowedUntil: h.clock.now() + h.config.rollbackWindowMs,
    });
    expect(h.effects).toContainEqual({
      type: 'MIGRATION_CONVERGED',
      migrationId: 'mig-out',
      durationMs: 2 * ROUND_MS,
    });
    const sizes = THREE.map((m) => h.replies.get(m)?.assignedShards.length ?? 0);
    expect(sizes.sort()).toEqual([2, 3, 3]);
    expect(h.actor.getSnapshot().value).toMatchObject({
      membership: 'stable',
      migration: 'converged',
    });
  });
});

describe('a scale-in retires removed shards for their owners; they leave the group when DONE', () => {
  it('8 → 3 with 3 members: owned shards >= 3 become retiring for their owner, with no target', () => {
    const h = stableGroup(8, THREE);
    expect(owners(h)).toMatchObject({ 3: 'assigned:m-b', 6: 'assigned:m-c' });
    replyOf<ScaleReply>(scale(h, 3));
    expect(h.ctx.group.shardCount).toBe(3);
    for (const [n, owner] of [
      [3, 'm-b'],
      [4, 'm-b'],
      [5, 'm-b'],
      [6, 'm-c'],
      [7, 'm-c'],
    ] as const) {
      expect(h.ctx.group.shards[n]).toMatchObject({ state: 'retiring', owner, target: null });
    }

    // Retiring shards are only ever in retireShards, and keep the interval short.
    const reply = h.beat('m-b');
    expect(reply).toMatchObject({ assignedShards: [], retireShards: [3, 4, 5] });
    expect(reply.heartbeatIntervalMs).toBe(h.config.rebalanceHeartbeatIntervalMs);

    // Reported DONE: the shards leave the group.
    h.beat('m-b', { retired: true });
    for (const n of [3, 4, 5]) expect(h.ctx.group.shards[n]).toBeUndefined();
    expect(h.replies.get('m-b')?.retireShards).toEqual([]);

    // No longer listed in currentAssignments: counts as DONE too.
    h.beat('m-c');
    h.beat('m-c', { currentAssignments: [], revokeProgress: [] });
    expect(Object.keys(h.ctx.group.shards).map(Number)).toEqual([0, 1, 2]);

    converge(h, THREE);
    expect(active(h)?.state).toBe('CONVERGED');
    expect(THREE.map((m) => h.replies.get(m)?.assignedShards)).toEqual([[0], [1], [2]]);
  });

  it('a shard removed while its owner revokes it retires only once the owner was told to', () => {
    const h = new Harness({ shardCount: 4, config: { assignmentDebounceMs: 0 } });
    h.join('m-a');
    h.join('m-b');
    expect(h.beat('m-a')).toMatchObject({ assignedShards: [0, 1], revokeShards: [2, 3] });
    scale(h, 2);
    expect(h.ctx.group.shards[2]).toMatchObject({ state: 'retiring', owner: 'm-a' });
    // The DONE of the revoke (its drain ended, the shard was not read to its seal) arrives
    // after the scale: the shards stay, and the reply tells m-a to retire them.
    const told = h.beat('m-a', { done: true });
    expect(Object.keys(h.ctx.group.shards).map(Number)).toEqual([0, 1, 2, 3]);
    expect(told).toMatchObject({ retireShards: [2, 3] });
    h.beat('m-a');
    expect(h.ctx.group.shards[3]).toMatchObject({ state: 'retiring', owner: 'm-a' });
    // Read to their ends now: they leave the group.
    h.beat('m-a', { retired: true });
    expect(Object.keys(h.ctx.group.shards).map(Number)).toEqual([0, 1]);
  });

  it('rolled back before its owner was told, a shard it was revoking stays with it', () => {
    const h = new Harness({ shardCount: 4, config: { assignmentDebounceMs: 0 } });
    h.join('m-a');
    h.join('m-b');
    expect(h.beat('m-a')).toMatchObject({ revokeShards: [2, 3] });
    scale(h, 2);
    rollback(h);
    // m-a may still be draining them: nobody else is granted them before it lets them go.
    for (const n of [2, 3]) expect(h.ctx.group.shards[n]).toMatchObject({ owner: 'm-a' });
    expect(h.beat('m-b')).toMatchObject({ assignedShards: [], pendingShards: [2, 3] });
    expect(h.ctx.group.shards[2]).toMatchObject({ owner: 'm-a' });
  });

  it('retiring does not block handoff: the outcome is OK once nothing is revoked or pending', () => {
    const h = stableGroup(8, THREE);
    scale(h, 3);
    h.beat('m-a');
    h.beat('m-a', { done: true }); // releases 1 and 2 for m-b and m-c
    const reply = h.beat('m-b'); // still consuming 3, 4, 5
    expect(reply).toMatchObject({ outcome: 'OK', assignedShards: [1], retireShards: [3, 4, 5] });
    expect(reply.heartbeatIntervalMs).toBe(h.config.rebalanceHeartbeatIntervalMs);
  });

  it('retiring shards never take part in target assignment, also when members join', () => {
    const h = stableGroup(8, THREE);
    scale(h, 3);
    h.join('m-d');
    h.settleRecompute();
    expect(h.ctx.group.shards[6]).toMatchObject({ state: 'retiring', owner: 'm-c', target: null });
    const targets = [0, 1, 2].map((n) => h.ctx.group.shards[n]?.target);
    expect(new Set(targets).size).toBe(3);
    expect(h.beat('m-d')).toMatchObject({ assignedShards: [], pendingShards: [] });
  });
});

describe('a migration converges exactly when live members report their assignment and no removed shard', () => {
  /**
   * 4 → 2 over m-a {0, 1} and m-b {2, 3}: m-b retires 2 and 3 and takes over shard 1, which
   * m-a revokes. Returns once m-a has released 1 and reported {0}.
   */
  function scaleInTwoMembers(): Harness {
    const h = stableGroup(4, ['m-a', 'm-b']);
    expect(h.replies.get('m-b')?.assignedShards).toEqual([2, 3]);
    scale(h, 2);
    expect(h.ctx.group.shards[1]).toMatchObject({ owner: 'm-a', target: 'm-b' });
    expect(h.beat('m-b')).toMatchObject({ retireShards: [2, 3], pendingShards: [1] });
    h.beat('m-a');
    h.beat('m-a', { done: true });
    h.beat('m-a');
    expect(h.ctx.liveness.get('m-a')?.currentAssignments).toEqual([0]);
    expect(migrationConverged(h.ctx)).toBe(false);
    return h;
  }

  it('is NOT converged while a member still lists a removed shard in currentAssignments', () => {
    const h = scaleInTwoMembers();
    h.beat('m-b', { retired: true }); // DONE for 2 and 3, but still listing them
    expect(h.ctx.group.shards[2]).toBeUndefined();
    expect(h.ctx.group.shards[1]).toMatchObject({ state: 'assigned', owner: 'm-b' });
    expect(migrationProgress(h.ctx)).toMatchObject({
      removedShardsRemaining: [],
      removedShardsReported: [2, 3],
    });
    expect(active(h)?.state).toBe('IN_PROGRESS');
    h.beat('m-b');
    expect(active(h)?.state).toBe('CONVERGED');
  });

  it('is NOT converged while a member still reports a removed shard in revokeProgress', () => {
    const h = scaleInTwoMembers();
    h.beat('m-b', { retired: true });
    h.beat('m-b', {
      currentAssignments: [1],
      revokeProgress: [
        { shard: 2, state: 'DONE' },
        { shard: 3, state: 'DONE' },
      ],
    });
    expect(migrationProgress(h.ctx)).toMatchObject({
      removedShardsReported: [2, 3],
      membersReporting: 1,
      membersTotal: 2,
    });
    expect(active(h)?.state).toBe('IN_PROGRESS');
    h.beat('m-b', { currentAssignments: [1], revokeProgress: [] });
    expect(active(h)?.state).toBe('CONVERGED');
  });

  it('is NOT converged while a member has not yet reported its new assignment', () => {
    const h = scaleInTwoMembers();
    h.beat('m-b', { currentAssignments: [], revokeProgress: [] }); // retires 2, 3; granted 1
    expect(migrationProgress(h.ctx)).toMatchObject({
      shardsConverged: 2,
      shardsTotal: 2,
      removedShardsRemaining: [],
      removedShardsReported: [],
      membersReporting: 1,
    });
    expect(active(h)?.state).toBe('IN_PROGRESS');
    h.beat('m-b');
    expect(active(h)?.state).toBe('CONVERGED');
  });

  it('is NOT converged while a removed shard remains, and with no members as soon as none does', () => {
    const h = new Harness({ shardCount: 2 });
    h.join('m-a');
    scale(h, 1);
    h.beat('m-a');
    h.beat('m-a', { memberEpoch: -1 });
    expect(h.ctx.group.shards[1]).toMatchObject({ state: 'retiring', owner: null });
    h.tick();
    expect(active(h)?.state).toBe('IN_PROGRESS');

    // With no members, a scale-in converges once the host found its removed shards drained.
    const empty = new Harness({ shardCount: 2 });
    const { migration } = replyOf<ScaleReply>(scale(empty, 1));
    expect(migration.state).toBe('IN_PROGRESS');
    empty.send({ type: 'RETIRED_SHARDS_DRAINED', now: empty.clock.now(), shards: [1] });
    expect(empty.ctx.group.shards[1]).toBeUndefined();
    expect(active(empty)?.state).toBe('CONVERGED');
  });
});

describe('a retiring shard whose owner leaves or expires is re-given, still retiring, to a live member', () => {
  /** 8 → 3 over three members; m-c retires 6 and 7, m-a owns 0-2, m-b retires 3-5. */
  function scaledIn(): Harness {
    const h = stableGroup(8, THREE);
    scale(h, 3);
    for (const m of THREE) h.beat(m);
    expect(owners(h)).toMatchObject({ 6: 'retiring:m-c', 7: 'retiring:m-c' });
    return h;
  }

  const deaths = {
    leaves: (h: Harness) => h.beat('m-c', { memberEpoch: -1 }),
    expires: (h: Harness) => {
      const expiresAt = h.ctx.liveness.get('m-c')?.sessionExpiresAt ?? 0;
      while (h.clock.now() + 3_000 < expiresAt) {
        h.clock.advance(3_000);
        h.beat('m-a');
        h.beat('m-b');
      }
      h.clock.set(expiresAt);
      h.tick();
      expect(h.effects).toContainEqual({ type: 'MEMBER_EXPIRED', memberId: 'm-c' });
    },
  };

  for (const [how, die] of Object.entries(deaths)) {
    it(`owner ${how}: each shard goes to the member with the fewest owned shards, ties by id`, () => {
      const h = scaledIn();
      die(h);
      // m-a owns 0, 1, 2 and m-b 3, 4, 5: a tie, so m-a takes 6, then m-b (now fewer) takes 7.
      expect(h.ctx.group.shards[6]).toMatchObject({
        state: 'retiring',
        owner: 'm-a',
        ownerEpoch: null,
        target: null,
      });
      expect(h.ctx.group.shards[7]).toMatchObject({ state: 'retiring', owner: 'm-b' });
    });
  }

  it('a fenced heartbeat of the owner (a stale duplicate) leaves it its retiring shards', () => {
    const h = scaledIn();
    const before = owners(h);
    const live = h.replies.get('m-c');
    expect(h.beat('m-c', { memberEpoch: 1 }).outcome).toBe('FENCED_MEMBER_EPOCH');
    expect(owners(h)).toEqual(before);
    if (live) h.replies.set('m-c', live); // the live process never saw the duplicate's answer
    expect(h.beat('m-c').retireShards).toEqual([6, 7]);
  });

  it('the heir gets a new epoch and the shard in retireShards; its silence about it is not DONE', () => {
    const h = scaledIn();
    deaths.leaves(h);
    const epoch = h.replies.get('m-a')?.memberEpoch ?? 0;
    const told = h.beat('m-a'); // does not list 6: it did not know
    expect(told.memberEpoch).toBeGreaterThan(epoch);
    expect(told.retireShards).toEqual([6]);
    expect(h.ctx.group.shards[6]).toMatchObject({ owner: 'm-a', ownerEpoch: told.memberEpoch });
    expect(h.beat('m-a').retireShards).toEqual([6]);
  });

  it('convergence waits until the heir has retired it', () => {
    const h = scaledIn();
    deaths.leaves(h);
    const members = ['m-a', 'm-b'];
    for (let n = 0; n < 3; n++) {
      h.clock.advance(ROUND_MS);
      h.beat('m-a', { done: true }); // never finishes shard 6
      h.beat('m-b', { done: true, retired: true });
    }
    expect(h.ctx.group.shards[6]).toMatchObject({ state: 'retiring', owner: 'm-a' });
    expect(migrationProgress(h.ctx).removedShardsRemaining).toEqual([6]);
    expect(active(h)?.state).toBe('IN_PROGRESS');
    converge(h, members);
    expect(active(h)?.state).toBe('CONVERGED');
    expect(Object.keys(h.ctx.group.shards).map(Number)).toEqual([0, 1, 2]);
  });

  it('with no member left the shard waits ownerless and goes to the next member that joins', () => {
    const h = new Harness({ shardCount: 2 });
    h.join('m-a');
    scale(h, 1);
    h.beat('m-a', { memberEpoch: -1 });
    expect(h.ctx.group.shards[1]).toMatchObject({ state: 'retiring', owner: null });
    expect(h.actor.getSnapshot().value).toMatchObject({ membership: 'empty' });
    const joined = h.join('m-z');
    expect(joined).toMatchObject({ assignedShards: [0], retireShards: [1] });
    expect(h.ctx.group.shards[1]).toMatchObject({ owner: 'm-z', ownerEpoch: joined.memberEpoch });
    converge(h, ['m-z']);
    expect(active(h)?.state).toBe('CONVERGED');
  });
});

describe('one migration at a time: a scale while one is IN_PROGRESS is refused with MIGRATION_IN_PROGRESS', () => {
  it('refuses and changes nothing', () => {
    const h = stableGroup(4, THREE);
    scale(h, 8, 'mig-first');
    const group = h.ctx.group;
    expect(scale(h, 6)).toMatchObject({
      ok: false,
      code: 'MIGRATION_IN_PROGRESS',
      details: { migrationId: 'mig-first' },
    });
    expect(h.ctx.group).toBe(group);
  });
});

describe('a scale to the current shard count is refused with SHARD_COUNT_UNCHANGED', () => {
  it('refuses and changes nothing', () => {
    const h = stableGroup(4, THREE);
    const group = h.ctx.group;
    expect(scale(h, 4)).toMatchObject({ ok: false, code: 'SHARD_COUNT_UNCHANGED' });
    expect(h.ctx.group).toBe(group);
  });

  it('refuses a shard count that is not a positive integer', () => {
    const h = new Harness();
    for (const count of [0, -1, 2.5, Number.NaN]) {
      expect(scale(h, count)).toMatchObject({ ok: false, code: 'VALIDATION_FAILED' });
    }
  });
});

describe('a frozen group refuses scale and rollback with GROUP_FROZEN', () => {
  it('refuses both and changes nothing', () => {
    const h = new Harness();
    scale(h, 6);
    h.send({ type: 'FREEZE', now: h.clock.now() });
    const group = h.ctx.group;
    expect(scale(h, 8)).toMatchObject({ ok: false, code: 'GROUP_FROZEN' });
    expect(rollback(h)).toMatchObject({ ok: false, code: 'GROUP_FROZEN' });
    expect(h.ctx.group).toBe(group);
  });
});

describe('a scale while the previous migration is CONVERGED completes that one first', () => {
  it('files the converged one as COMPLETED and starts the new one in the same commit', () => {
    const h = stableGroup(4, THREE);
    scale(h, 8, 'mig-old');
    converge(h, THREE);
    h.clock.advance(MINUTE);
    const { migration } = replyOf<ScaleReply>(scale(h, 6, 'mig-new'));
    expect(migration).toMatchObject({ migrationId: 'mig-new', fromShardCount: 8, toShardCount: 6 });
    expect(h.ctx.group.migrations[0]).toMatchObject({
      migrationId: 'mig-old',
      state: 'COMPLETED',
      completedAt: h.clock.now(),
    });
    expect(h.effects.map((e) => e.type)).toEqual(
      expect.arrayContaining(['MIGRATION_COMPLETED', 'MIGRATION_STARTED']),
    );
    const types = h.effects.map((e) => e.type);
    expect(types.indexOf('MIGRATION_COMPLETED')).toBeLessThan(types.indexOf('MIGRATION_STARTED'));
  });
});

describe('a CONVERGED migration stays rollback-able for the rollback window, then becomes COMPLETED', () => {
  it('the end of the window is a deadline; the sweep then completes the migration', () => {
    const h = stableGroup(4, THREE);
    scale(h, 8);
    converge(h, THREE);
    const until = active(h)?.rollbackAllowedUntil ?? 0;
    expect(nextDeadline(h.ctx)).toBeLessThanOrEqual(until);
    // Members keep heartbeating; only the window's end is left once they are calm.
    h.clock.set(until - 1);
    for (const m of THREE) h.beat(m);
    expect(nextDeadline(h.ctx)).toBe(until);
    h.tick();
    expect(active(h)?.state).toBe('CONVERGED');
    h.clock.set(until);
    h.tick();
    expect(active(h)).toBeNull();
    expect(h.ctx.group.migrations[0]).toMatchObject({ state: 'COMPLETED', completedAt: until });
    expect(h.effects).toContainEqual({
      type: 'MIGRATION_COMPLETED',
      migrationId: h.ctx.group.migrations[0]?.migrationId,
    });
    expect(h.actor.getSnapshot().value).toMatchObject({ migration: 'idle' });
  });

  it('a zero window completes the migration in the step that converges it', () => {
    const h = new Harness({ shardCount: 2, config: { rollbackWindowMs: 0 } });
    const { migration } = replyOf<ScaleReply>(scale(h, 3));
    expect(migration.state).toBe('COMPLETED');
    expect(active(h)).toBeNull();
  });
});

describe('rollback: a new ROLLBACK migration back to the old count, while rollback is allowed', () => {
  it('while IN_PROGRESS: the old one ends ROLLED_BACK and the rollback starts in one commit', () => {
    const h = stableGroup(8, THREE);
    scale(h, 3, 'mig-in');
    h.beat('m-b', { retired: true }); // consumes 3, 4, 5 to their end…
    h.beat('m-b', { retired: true });
    h.beat('m-c'); // …while m-c is still on 6 and 7
    expect(owners(h)).toMatchObject({ 6: 'retiring:m-c' });
    const before = h.ctx.group;
    const reply = replyOf<RollbackReply>(rollback(h, 'current', 'mig-back'));
    expect(reply).toMatchObject({
      rolledBack: 'mig-in',
      migration: {
        migrationId: 'mig-back',
        kind: 'ROLLBACK',
        fromShardCount: 3,
        toShardCount: 8,
        state: 'IN_PROGRESS',
        rollbackOf: 'mig-in',
      },
    });
    expect(h.ctx.group.migrations[0]).toMatchObject({
      migrationId: 'mig-in',
      state: 'ROLLED_BACK',
      completedAt: h.clock.now(),
    });
    expect(h.ctx.group).toMatchObject({
      shardCount: 8,
      metadataVersion: before.metadataVersion + 1,
      assignmentEpoch: before.assignmentEpoch + 1,
    });
    expect(h.effects).toContainEqual({ type: 'MIGRATION_ROLLED_BACK', migrationId: 'mig-in' });
    expect(h.effects).toContainEqual({
      type: 'MIGRATION_STARTED',
      migrationId: 'mig-back',
      kind: 'ROLLBACK',
    });
    // Shards still being retired stay with the member consuming them; retired ones come back
    // released and go through the normal flow.
    expect(owners(h)).toMatchObject({
      3: 'released:-',
      6: 'assigned:m-c',
      7: 'assigned:m-c',
    });
    converge(h, THREE);
    expect(active(h)?.state).toBe('CONVERGED');
    expect(h.ctx.group.shardCount).toBe(8);
  });

  it('inside the window of a CONVERGED migration, named by its id', () => {
    const h = stableGroup(4, THREE);
    scale(h, 8, 'mig-conv');
    converge(h, THREE);
    h.clock.advance(5 * MINUTE);
    expect(rollbackAllowed(active(h) as MigrationRecord, h.clock.now())).toBe(true);
    const reply = replyOf<RollbackReply>(rollback(h, 'mig-conv'));
    expect(reply.rolledBack).toBe('mig-conv');
    expect(h.ctx.group.migrations[0]).toMatchObject({
      migrationId: 'mig-conv',
      state: 'ROLLED_BACK',
    });
  });

  it('a rollback of a scale-out retires the shards it removes', () => {
    const h = stableGroup(4, THREE);
    scale(h, 8);
    converge(h, THREE);
    const ownersAt8 = THREE.map((m) => h.replies.get(m)?.assignedShards);
    rollback(h);
    for (const n of [4, 5, 6, 7]) {
      expect(h.ctx.group.shards[n]).toMatchObject({ state: 'retiring', target: null });
    }
    const retiring = THREE.map((m) => h.beat(m).retireShards);
    expect(retiring).toEqual(ownersAt8.map((shards) => shards?.filter((n) => n >= 4)));
    converge(h, THREE);
    expect(active(h)).toMatchObject({ kind: 'ROLLBACK', state: 'CONVERGED', toShardCount: 4 });
    expect(Object.keys(h.ctx.group.shards).map(Number)).toEqual([0, 1, 2, 3]);
  });
});

describe('rollback is refused once not allowed: ROLLBACK_NOT_ALLOWED, or MIGRATION_NOT_FOUND', () => {
  function convergedScaleOut(): Harness {
    const h = stableGroup(4, THREE);
    scale(h, 8, 'mig-done');
    converge(h, THREE);
    return h;
  }

  it('after COMPLETED: ROLLBACK_NOT_ALLOWED by id, and no current migration for `current`', () => {
    const h = convergedScaleOut();
    h.clock.set(active(h)?.rollbackAllowedUntil ?? 0);
    h.tick();
    const group = h.ctx.group;
    expect(rollback(h, 'mig-done')).toMatchObject({
      ok: false,
      code: 'ROLLBACK_NOT_ALLOWED',
      details: { migrationId: 'mig-done', state: 'COMPLETED' },
    });
    expect(rollback(h, 'current')).toMatchObject({
      ok: false,
      code: 'ROLLBACK_NOT_ALLOWED',
      details: { migrationId: 'mig-done', state: 'COMPLETED' },
    });
    expect(h.ctx.group).toBe(group);
  });

  it('past the window before the sweep: ROLLBACK_NOT_ALLOWED, and the migration completes', () => {
    const h = convergedScaleOut();
    h.clock.set(active(h)?.rollbackAllowedUntil ?? 0);
    expect(rollback(h)).toMatchObject({
      ok: false,
      code: 'ROLLBACK_NOT_ALLOWED',
      details: { migrationId: 'mig-done', state: 'CONVERGED' },
    });
    expect(active(h)).toBeNull();
    expect(h.ctx.group.shardCount).toBe(8);
  });

  it('a migration already ROLLED_BACK cannot be rolled back again', () => {
    const h = convergedScaleOut();
    rollback(h, 'mig-done');
    expect(rollback(h, 'mig-done')).toMatchObject({
      ok: false,
      code: 'ROLLBACK_NOT_ALLOWED',
      details: { migrationId: 'mig-done', state: 'ROLLED_BACK' },
    });
  });

  it('an unknown id is MIGRATION_NOT_FOUND, also with a migration active', () => {
    const h = convergedScaleOut();
    expect(rollback(h, 'no-such-migration')).toMatchObject({
      ok: false,
      code: 'MIGRATION_NOT_FOUND',
      details: { migrationId: 'no-such-migration' },
    });
    expect(rollback(new Harness())).toMatchObject({ ok: false, code: 'MIGRATION_NOT_FOUND' });
  });
});

describe('versions and epochs only ever go up through scales and rollbacks', () => {
  it('metadataVersion strictly increases at every scale/rollback step; assignmentEpoch never decreases', () => {
    for (const members of [THREE, [] as const]) {
      const h = members.length > 0 ? stableGroup(4, members) : new Harness({ shardCount: 4 });
      const steps: Array<() => CommandResult> = [
        () => scale(h, 8),
        () => rollback(h),
        () => rollback(h),
        () => scale(h, 2), // completes the converged rollback first when members settled
        () => rollback(h),
      ];
      // Every single step in between is checked for MONOTONIC_VERSIONS by the harness.
      for (const step of steps) {
        const before = h.ctx.group;
        expect(step().ok).toBe(true);
        expect(h.ctx.group.metadataVersion).toBe(before.metadataVersion + 1);
        expect(h.ctx.group.assignmentEpoch).toBeGreaterThan(before.assignmentEpoch);
        const started = h.ctx.group;
        if (members.length > 0) converge(h, members);
        expect(h.ctx.group.assignmentEpoch).toBeGreaterThanOrEqual(started.assignmentEpoch);
      }
    }
  });
});

describe('the statechart migration region follows the active migration', () => {
  it('idle → inProgress → converged → idle, and a restored actor lands in the same state', () => {
    const h = stableGroup(4, THREE);
    expect(h.actor.getSnapshot().value).toMatchObject({ migration: 'idle' });
    scale(h, 8);
    expect(h.actor.getSnapshot().value).toMatchObject({ migration: 'inProgress' });
    h.restart();
    expect(h.actor.getSnapshot().value).toMatchObject({ migration: 'inProgress' });
    converge(h, THREE);
    expect(h.actor.getSnapshot().value).toMatchObject({ migration: 'converged' });
    h.restart();
    expect(h.actor.getSnapshot().value).toMatchObject({ migration: 'converged' });
    h.clock.set(active(h)?.rollbackAllowedUntil ?? 0);
    h.tick();
    expect(h.actor.getSnapshot().value).toMatchObject({ migration: 'idle' });
  });
});

describe('FAIL_CLOSED stops the group: heartbeats get GROUP_FAILED_CLOSED, admin GROUP_FAILED_CLOSED_ADMIN', () => {
  function failed(): Harness {
    const h = stableGroup(4, THREE);
    scale(h, 8);
    h.send({ type: 'FAIL_CLOSED', now: h.clock.now(), reason: 'STORE_REVISION_REGRESSION' });
    return h;
  }

  it('sets the status and reason and nothing else; repeating it changes nothing', () => {
    const h = stableGroup(4, THREE);
    const before = h.ctx.group;
    h.send({ type: 'FAIL_CLOSED', now: h.clock.now(), reason: 'METADATA_LOST' });
    expect(h.ctx.group).toEqual({
      ...before,
      status: 'FAILED_CLOSED',
      failureReason: 'METADATA_LOST',
      updatedAt: h.clock.now(),
    });
    expect(h.effects).toEqual([{ type: 'FAILED_CLOSED', reason: 'METADATA_LOST' }]);
    expect(h.actor.getSnapshot().value).toMatchObject({ lifecycle: 'failedClosed' });
    const group = h.ctx.group;
    h.send({ type: 'FAIL_CLOSED', now: h.clock.now(), reason: 'STORE_REVISION_REGRESSION' });
    expect(h.ctx.group).toBe(group);
    expect(h.ctx.result).toMatchObject({ ok: true, reply: { changed: false } });
    expect(h.effects).toEqual([]);
  });

  it('refuses heartbeats and scale/rollback, and the migration neither converges nor completes', () => {
    const h = failed();
    const group = h.ctx.group;
    const beat = h.heartbeat({
      memberId: 'm-a',
      memberEpoch: h.ctx.group.members.get('m-a')?.memberEpoch ?? 0,
      assignmentEpoch: group.assignmentEpoch,
      metadataVersion: group.metadataVersion,
      currentAssignments: [],
      revokeProgress: [],
    });
    expect(beat).toMatchObject({ ok: false, code: 'GROUP_FAILED_CLOSED' });
    expect(scale(h, 2)).toMatchObject({ ok: false, code: 'GROUP_FAILED_CLOSED_ADMIN' });
    expect(rollback(h)).toMatchObject({ ok: false, code: 'GROUP_FAILED_CLOSED_ADMIN' });
    h.clock.advance(60 * MINUTE);
    h.tick();
    expect(h.ctx.group).toBe(group);
    expect(nextDeadline(h.ctx)).toBeNull();
    expect(h.actor.getSnapshot().value).toMatchObject({
      lifecycle: 'failedClosed',
      migration: 'inProgress',
    });
  });
});

describe('migration history is newest first and capped at 50', () => {
  it('keeps the 50 newest finished migrations', () => {
    const h = new Harness({ shardCount: 2 });
    // Without members each scale-out converges at once, and the next one completes it.
    for (let n = 0; n < MIGRATION_HISTORY_LIMIT + 5; n++) scale(h, n + 3, `m-${n}`);
    const history = h.ctx.group.migrations;
    expect(history).toHaveLength(MIGRATION_HISTORY_LIMIT);
    expect(history[0]?.migrationId).toBe(`m-${MIGRATION_HISTORY_LIMIT + 3}`);
    expect(history.every((m) => m.state === 'COMPLETED')).toBe(true);
    expect(active(h)?.migrationId).toBe(`m-${MIGRATION_HISTORY_LIMIT + 4}`);
  });
});

describe('migration views for monitoring', () => {
  it('rollbackAllowed: while IN_PROGRESS, and while CONVERGED strictly before the window ends', () => {
    const base: MigrationRecord = {
      migrationId: 'x',
      kind: 'SCALE',
      fromShardCount: 2,
      toShardCount: 4,
      state: 'IN_PROGRESS',
      startedAt: T0,
      convergedAt: null,
      completedAt: null,
      rollbackAllowedUntil: null,
      requestedBy: 'ops',
      reason: 'r',
      rollbackOf: null,
    };
    expect(rollbackAllowed(base, T0 + 10 * MINUTE)).toBe(true);
    const converged = { ...base, state: 'CONVERGED' as const, rollbackAllowedUntil: T0 + 1_000 };
    expect(rollbackAllowed(converged, T0 + 999)).toBe(true);
    expect(rollbackAllowed(converged, T0 + 1_000)).toBe(false);
    expect(rollbackAllowed({ ...converged, state: 'COMPLETED' }, T0)).toBe(false);
    expect(rollbackAllowed({ ...base, state: 'ROLLED_BACK' }, T0)).toBe(false);
  });

  it('migrationView: ISO times, and progress only for the active migration', () => {
    const h = stableGroup(8, THREE);
    scale(h, 3, 'mig-view');
    const now = h.clock.now();
    const view = migrationView(active(h) as MigrationRecord, h.ctx, now);
    expect(view).toEqual({
      migrationId: 'mig-view',
      kind: 'SCALE',
      fromShardCount: 8,
      toShardCount: 3,
      state: 'IN_PROGRESS',
      rollbackAllowed: true,
      rollbackAllowedUntil: null,
      startedAt: new Date(now).toISOString(),
      convergedAt: null,
      completedAt: null,
      requestedBy: 'ops@example.com',
      reason: 'load test',
      rollbackOf: null,
      progress: {
        shardsConverged: 1,
        shardsTotal: 3,
        removedShardsRemaining: [3, 4, 5, 6, 7],
        removedShardsReported: [3, 4, 5, 6, 7],
        // m-a reports 0, 1, 2 and still owns them (1 and 2 are yet to be revoked).
        membersReporting: 1,
        membersTotal: 3,
      },
    });
    rollback(h, 'mig-view');
    const { active: current, migrations } = migrationsView(h.ctx, now);
    expect(current?.rollbackOf).toBe('mig-view');
    expect(current?.progress).not.toBeNull();
    expect(migrations[0]).toMatchObject({
      migrationId: 'mig-view',
      state: 'ROLLED_BACK',
      rollbackAllowed: false,
      completedAt: new Date(now).toISOString(),
      progress: null,
    });
  });
});

describe('restored state: convergence is judged on reports made after the restore', () => {
  it('members must report again after a restart before the migration converges', () => {
    const h = stableGroup(4, THREE);
    scale(h, 8);
    round(h, THREE); // grants
    h.restart();
    // Liveness is not persisted, so nobody has reported anything since the restore.
    expect(migrationProgress(h.ctx).membersReporting).toBe(0);
    const replies: HeartbeatReply[] = [];
    for (const m of THREE) replies.push(h.beat(m));
    expect(active(h)?.state).toBe('CONVERGED');
    expect(replies.every((r) => r.outcome === 'OK')).toBe(true);
  });
});

describe('a removed shard is consumed to its end, never dropped with messages in it', () => {
  it('a scale-out rolled back before its new shards were granted retires them to members', () => {
    const h = stableGroup(6, THREE);
    replyOf<ScaleReply>(scale(h, 10));
    // Producers see 10 shards at once and may write to 6-9; nobody has been granted them yet.
    const added = Object.values(h.ctx.group.shards).filter((r) => r.shard >= 6);
    expect(added.map((r) => r.state)).toEqual(['released', 'released', 'released', 'released']);
    replyOf(rollback(h));
    const removed = Object.values(h.ctx.group.shards).filter((r) => r.shard >= 6);
    expect(removed.map((r) => r.shard)).toEqual([6, 7, 8, 9]);
    for (const record of removed) {
      expect(record.state).toBe('retiring');
      expect(THREE).toContain(record.owner);
    }
    // Each is told to a member, read to its end, reported DONE, and only then leaves.
    converge(h, THREE);
    expect(Object.keys(h.ctx.group.shards).map(Number)).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('with no member a scale-in keeps the removed shards, ownerless, never dropped unread', () => {
    const h = new Harness({ shardCount: 4 });
    const { migration } = replyOf<ScaleReply>(scale(h, 2));
    expect(migration.state).toBe('IN_PROGRESS');
    expect(owners(h)).toMatchObject({ 2: 'retiring:-', 3: 'retiring:-' });
    // The next member to join takes them, still retiring, and reads them to their end.
    h.join('m-a');
    expect(owners(h)).toMatchObject({ 2: 'retiring:m-a', 3: 'retiring:m-a' });
  });

  it('ownerless retiring shards the host found drained leave the group; one a member took stays', () => {
    const h = new Harness({ shardCount: 4 });
    scale(h, 2);
    h.send({ type: 'RETIRED_SHARDS_DRAINED', now: h.clock.now(), shards: [2] });
    expect(Object.keys(h.ctx.group.shards).map(Number)).toEqual([0, 1, 3]);
    h.join('m-a');
    h.send({ type: 'RETIRED_SHARDS_DRAINED', now: h.clock.now(), shards: [3] });
    expect(owners(h)).toMatchObject({ 3: 'retiring:m-a' });
  });
});
