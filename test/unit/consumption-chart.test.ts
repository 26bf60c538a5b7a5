/**
 * The consumption region of the group chart (docs/operations.md#pausing-consumption): a pause
 * revokes like a rebalance and grants to nobody; a reset pauses, waits for every member to let
 * go, takes the host's moves only then, and resumes; what each state refuses, and a restart in
 * the middle of it. Every step is checked against the invariants by the harness.
 */
import { describe, expect, it } from 'vitest';
import type { CommandResult } from '../../src/machines/context.js';
import type { GroupEvent } from '../../src/machines/events.js';
import type { PositionReset } from '../../src/machines/types.js';
import { Harness } from './group-harness.js';

const consumption = (h: Harness) =>
  (h.actor.getSnapshot().value as Record<string, unknown>).consumption;

function send(h: Harness, event: Record<string, unknown>): CommandResult {
  return h.send({ now: h.clock.now(), ...event } as unknown as GroupEvent).result!;
}

function reset(h: Harness, shards: number[], resetId = 'r-1'): PositionReset {
  return {
    resetId,
    to: 'earliest',
    moves: shards.map((shard) => ({
      shard,
      from: '9-0',
      to: '0-0',
      redeliver: 9,
      skip: 0,
      exact: true,
      acknowledge: false,
    })),
    moved: [],
    requestedBy: 'ops',
    reason: 'test',
    startedAt: h.clock.now(),
  };
}

/** One member holding every shard of a 4-shard group. */
function holding(): Harness {
  const h = new Harness({ shardCount: 4, config: { assignmentDebounceMs: 0 } });
  expect(h.join('m1').assignedShards).toEqual([0, 1, 2, 3]);
  return h;
}

describe('pause and resume', () => {
  it('revokes a paused shard from its member, grants it to nobody, and gives it back on RESUME', () => {
    const h = holding();
    expect(send(h, { type: 'PAUSE_CONSUMPTION', shards: [2] })).toMatchObject({
      ok: true,
      reply: { pausedShards: [2], changed: true },
    });
    expect(consumption(h)).toBe('pausing');
    const told = h.beat('m1');
    expect(told).toMatchObject({ revokeShards: [2], pausedShards: [2] });
    expect(told.assignedShards).toEqual([0, 1, 3]);
    h.beat('m1', { done: true });
    expect(consumption(h)).toBe('paused');
    expect(h.ctx.group.shards[2]).toMatchObject({ state: 'released', owner: null, target: null });
    // A second member joining gets shards, never the paused one.
    const second = h.join('m2');
    for (let round = 0; round < 3; round++) {
      h.beat('m1', { done: true });
      h.beat('m2', { done: true });
    }
    const held = [...h.beat('m1').assignedShards, ...h.beat('m2').assignedShards];
    expect(held.sort()).toEqual([0, 1, 3]);
    expect(h.beat('m2').assignedShards.length).toBeGreaterThan(0);
    expect(second.pausedShards).toEqual([2]);

    expect(send(h, { type: 'RESUME_CONSUMPTION', shards: null })).toMatchObject({ ok: true });
    expect(consumption(h)).toBe('running');
    const after = [h.beat('m1'), h.beat('m2')].flatMap((r) => [
      ...r.assignedShards,
      ...r.pendingShards,
    ]);
    expect(after).toContain(2);
    expect(h.beat('m1').pausedShards).toEqual([]);
  });

  it('goes straight to paused when nobody holds the shards, and is idempotent', () => {
    const h = new Harness({ shardCount: 3 });
    send(h, { type: 'PAUSE_CONSUMPTION', shards: null });
    expect(consumption(h)).toBe('paused');
    const version = h.ctx.group.metadataVersion;
    expect(send(h, { type: 'PAUSE_CONSUMPTION', shards: [1] })).toMatchObject({
      ok: true,
      reply: { pausedShards: [0, 1, 2], changed: false },
    });
    expect(h.ctx.group.metadataVersion).toBe(version);
  });

  it('keeps paused shards paused across a restart', () => {
    const h = holding();
    send(h, { type: 'PAUSE_CONSUMPTION', shards: [0, 1] });
    h.restart();
    expect(consumption(h)).toBe('pausing');
    h.beat('m1');
    h.beat('m1', { done: true });
    h.restart();
    expect(consumption(h)).toBe('paused');
    expect(h.ctx.group.pausedShards).toEqual([0, 1]);
  });
});

describe('reset', () => {
  it('pauses its shards, takes the moves only once nobody holds them, then resumes', () => {
    const h = holding();
    send(h, { type: 'RESET_POSITIONS', reset: reset(h, [1, 3]) });
    expect(consumption(h)).toEqual({ resetting: 'pausing' });
    expect(h.beat('m1')).toMatchObject({ revokeShards: [1, 3], pausedShards: [1, 3] });
    // A report of moves while a member still reads the shards is not taken.
    send(h, { type: 'SHARD_POSITIONS_MOVED', resetId: 'r-1', shards: [1, 3] });
    expect(h.ctx.group.positionReset?.moved).toEqual([]);

    h.beat('m1', { done: true });
    expect(consumption(h)).toEqual({ resetting: 'moving' });
    h.restart();
    expect(consumption(h)).toEqual({ resetting: 'moving' });
    send(h, { type: 'SHARD_POSITIONS_MOVED', resetId: 'r-1', shards: [1] });
    expect(consumption(h)).toEqual({ resetting: 'moving' });
    expect(h.ctx.group.positionReset?.moved).toEqual([1]);
    // A report for another reset changes nothing.
    send(h, { type: 'SHARD_POSITIONS_MOVED', resetId: 'other', shards: [3] });
    expect(h.ctx.group.positionReset?.moved).toEqual([1]);

    send(h, { type: 'SHARD_POSITIONS_MOVED', resetId: 'r-1', shards: [3] });
    expect(consumption(h)).toBe('running');
    expect(h.ctx.group.positionReset).toBeNull();
    expect(h.ctx.group.lastPositionReset).toMatchObject({ resetId: 'r-1', moved: [1, 3] });
    expect(h.beat('m1').pendingShards.length + h.beat('m1').assignedShards.length).toBe(4);
  });
});

describe('cancelling a reset', () => {
  it('ends it where it got to and gives its shards back; without one it is refused', () => {
    const h = holding();
    expect(send(h, { type: 'CANCEL_RESET' })).toMatchObject({
      ok: false,
      code: 'NO_RESET_IN_PROGRESS',
    });
    send(h, { type: 'RESET_POSITIONS', reset: reset(h, [1, 3]) });
    h.beat('m1');
    h.beat('m1', { done: true });
    send(h, { type: 'SHARD_POSITIONS_MOVED', resetId: 'r-1', shards: [1] });
    expect(send(h, { type: 'CANCEL_RESET' })).toMatchObject({ ok: true });
    expect(consumption(h)).toBe('running');
    expect(h.ctx.group.positionReset).toBeNull();
    expect(h.ctx.group.lastPositionReset).toMatchObject({
      resetId: 'r-1',
      moved: [1],
      cancelled: true,
    });
    // A late report of the move in flight changes nothing now.
    send(h, { type: 'SHARD_POSITIONS_MOVED', resetId: 'r-1', shards: [3] });
    expect(h.ctx.group.lastPositionReset?.moved).toEqual([1]);
    const back = h.beat('m1');
    expect(back.pausedShards).toEqual([]);
    expect([...back.assignedShards, ...back.pendingShards].sort()).toEqual([0, 1, 2, 3]);
  });
});

describe('what each state refuses', () => {
  it('while paused: a scale or rollback, and a reset of the paused shards', () => {
    const h = new Harness({ shardCount: 4 });
    send(h, { type: 'PAUSE_CONSUMPTION', shards: [0] });
    expect(
      send(h, {
        type: 'SCALE',
        shardCount: 8,
        migrationId: 'm',
        requestedBy: 'ops',
        reason: 'x',
      }),
    ).toMatchObject({ ok: false, code: 'CONSUMPTION_PAUSED' });
    expect(send(h, { type: 'RESET_POSITIONS', reset: reset(h, [0]) })).toMatchObject({
      ok: false,
      code: 'CONSUMPTION_PAUSED',
    });
    // Other shards may be reset meanwhile.
    expect(send(h, { type: 'RESET_POSITIONS', reset: reset(h, [1]) })).toMatchObject({ ok: true });
  });

  it('while resetting: every other consumption command, and a scale', () => {
    const h = new Harness({ shardCount: 4 });
    send(h, { type: 'RESET_POSITIONS', reset: reset(h, [0]) });
    for (const event of [
      { type: 'PAUSE_CONSUMPTION', shards: null },
      { type: 'RESUME_CONSUMPTION', shards: null },
      { type: 'RESET_POSITIONS', reset: reset(h, [1], 'r-2') },
      { type: 'SCALE', shardCount: 8, migrationId: 'm', requestedBy: 'ops', reason: 'x' },
    ]) {
      expect(send(h, event)).toMatchObject({ ok: false, code: 'RESET_IN_PROGRESS' });
    }
  });

  it('during a migration, frozen, and for shards the group does not have', () => {
    const h = holding();
    send(h, { type: 'SCALE', shardCount: 6, migrationId: 'm', requestedBy: 'ops', reason: 'x' });
    expect(send(h, { type: 'PAUSE_CONSUMPTION', shards: [0] })).toMatchObject({
      ok: false,
      code: 'MIGRATION_IN_PROGRESS',
    });
    expect(send(h, { type: 'RESET_POSITIONS', reset: reset(h, [0]) })).toMatchObject({
      ok: false,
      code: 'MIGRATION_IN_PROGRESS',
    });
    // Resuming is never blocked: nothing is paused, so it changes nothing.
    expect(send(h, { type: 'RESUME_CONSUMPTION', shards: null })).toMatchObject({ ok: true });

    const frozen = new Harness({ shardCount: 2 });
    send(frozen, { type: 'FREEZE' });
    expect(send(frozen, { type: 'PAUSE_CONSUMPTION', shards: null })).toMatchObject({
      ok: false,
      code: 'GROUP_FROZEN',
    });
    const small = new Harness({ shardCount: 2 });
    expect(send(small, { type: 'PAUSE_CONSUMPTION', shards: [2] })).toMatchObject({
      ok: false,
      code: 'SHARD_OUT_OF_RANGE',
      details: { shards: [2], shardCount: 2 },
    });
    expect(consumption(small)).toBe('running');
  });
});

describe('a frozen or failed-closed group', () => {
  it.each([
    ['frozen', { type: 'FREEZE' }, 'GROUP_FROZEN'],
    [
      'failed closed',
      { type: 'FAIL_CLOSED', reason: 'METADATA_LOST' },
      'GROUP_FAILED_CLOSED_ADMIN',
    ],
  ])('%s refuses every consumption command and changes nothing', (_, lock, code) => {
    const running = holding();
    send(running, lock);
    const group = running.ctx.group;
    for (const event of [
      { type: 'PAUSE_CONSUMPTION', shards: [0] },
      { type: 'PAUSE_CONSUMPTION', shards: null },
      { type: 'RESUME_CONSUMPTION', shards: null },
      { type: 'RESET_POSITIONS', reset: reset(running, [1]) },
      { type: 'CANCEL_RESET' },
    ]) {
      expect(send(running, event), event.type).toMatchObject({ ok: false, code });
      expect(running.ctx.group).toBe(group);
    }
    expect(consumption(running)).toBe('running');

    // A reset under way when the group was locked cannot be cancelled meanwhile either.
    const resetting = holding();
    send(resetting, { type: 'RESET_POSITIONS', reset: reset(resetting, [1]) });
    send(resetting, lock);
    const held = resetting.ctx.group;
    for (const event of [
      { type: 'CANCEL_RESET' },
      { type: 'PAUSE_CONSUMPTION', shards: [2] },
      { type: 'RESET_POSITIONS', reset: reset(resetting, [2], 'r-2') },
    ]) {
      expect(send(resetting, event), event.type).toMatchObject({ ok: false, code });
      expect(resetting.ctx.group).toBe(held);
    }
    expect(held.positionReset).toMatchObject({ resetId: 'r-1' });
  });
});
