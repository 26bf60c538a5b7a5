import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { applyEffects } from '../../src/actors/effects.js';
import {
  createGroupContext,
  type CommandResult,
  type GroupContext,
} from '../../src/machines/context.js';
import { defaultMembershipConfig } from '../../src/machines/config.js';
import type { GroupEvent } from '../../src/machines/events.js';
import { groupMachine, restoreGroupSnapshot } from '../../src/machines/group-machine.js';
import { memberMachine, memberState } from '../../src/machines/member-machine.js';
import { newGroupState } from '../../src/machines/new-group.js';
import { expectedStateValue } from '../../src/machines/phases.js';
import type { GroupState } from '../../src/machines/types.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { joinBody } from '../support/members.js';
import { Harness, T0 } from './group-harness.js';

const REF = { streamPrefix: 'orders', consumerGroup: 'billing' };
const CHANGE = { requestedBy: 'ops', reason: 'chart test' };

/** A group actor restored from `group`, recording every event the chart processes. */
function chart(
  group: GroupState = newGroupState(REF, { shardCount: 4, lifecycleId: 'l-1', now: T0 }),
) {
  const context = createGroupContext({
    group,
    config: { ...defaultMembershipConfig, assignmentDebounceMs: 0, rollbackWindowMs: 60_000 },
    now: T0,
    storeRevision: 1,
  });
  const events: string[] = [];
  const actor = createActor(groupMachine, {
    snapshot: restoreGroupSnapshot(context),
    input: context,
    inspect: (e) => {
      // One microstep per event the chart takes: the one sent, then the ones it raised.
      if (e.type === '@xstate.microstep' && e.actorRef === actor) events.push(e.event.type);
    },
  });
  actor.start();
  const send = (event: GroupEvent) => {
    events.length = 0;
    actor.send(event);
    return actor.getSnapshot();
  };
  return { actor, events, send };
}

const result = (ctx: GroupContext) => ctx.result as CommandResult;
const value = (actor: ReturnType<typeof chart>['actor']) =>
  actor.getSnapshot().value as Record<string, unknown>;
const heartbeat = (memberId: string, extra: Record<string, unknown> = {}) =>
  ({
    type: 'HEARTBEAT',
    now: T0,
    request: joinBody(memberId, { revokeProgress: [], principal: 'p', ...extra }),
  }) as GroupEvent;

describe('lifecycle region: moves on FREEZE, UNFREEZE, FAIL_CLOSED, RECOVER and refuses the rest', () => {
  it('active accepts FREEZE (→ frozen) and refuses UNFREEZE and RECOVER', () => {
    const { actor, send } = chart();
    expect(result(send({ type: 'UNFREEZE', now: T0 }).context)).toMatchObject({
      ok: false,
      code: 'GROUP_NOT_FROZEN',
    });
    expect(value(actor).lifecycle).toBe('active');
    const recover = {
      type: 'RECOVER',
      now: T0,
      group: actor.getSnapshot().context.group,
      storeRevision: 2,
    } as const;
    expect(result(send(recover).context)).toMatchObject({
      ok: false,
      code: 'GROUP_NOT_FAILED_CLOSED',
    });
    expect(result(send({ type: 'FREEZE', now: T0 }).context)).toMatchObject({ ok: true });
    expect(value(actor).lifecycle).toBe('frozen');
  });

  it('frozen refuses FREEZE, producers and SCALE, and accepts UNFREEZE (→ active)', () => {
    const { actor, send } = chart();
    send({ type: 'FREEZE', now: T0 });
    const group = actor.getSnapshot().context.group;
    expect(result(send({ type: 'FREEZE', now: T0 }).context)).toMatchObject({
      code: 'GROUP_FROZEN',
    });
    expect(result(send({ type: 'PAUSE_PRODUCERS', now: T0 }).context)).toMatchObject({
      code: 'GROUP_FROZEN',
    });
    const scale = { type: 'SCALE', now: T0, shardCount: 8, migrationId: 'm-1', ...CHANGE } as const;
    expect(result(send(scale).context)).toMatchObject({ code: 'GROUP_FROZEN' });
    expect(actor.getSnapshot().context.group).toBe(group); // refusals change nothing
    expect(value(actor)).toMatchObject({ lifecycle: 'frozen', migration: 'idle' });
    send({ type: 'UNFREEZE', now: T0 });
    expect(value(actor).lifecycle).toBe('active');
  });

  it('FAIL_CLOSED from active or frozen; failedClosed refuses every admin change but RECOVER', () => {
    const { actor, send } = chart();
    send({ type: 'FAIL_CLOSED', now: T0, reason: 'METADATA_LOST' });
    expect(value(actor).lifecycle).toBe('failedClosed');
    for (const type of ['FREEZE', 'UNFREEZE', 'PAUSE_PRODUCERS', 'RESUME_PRODUCERS'] as const) {
      expect(result(send({ type, now: T0 }).context)).toMatchObject({
        code: 'GROUP_FAILED_CLOSED_ADMIN',
      });
    }
    const scale = { type: 'SCALE', now: T0, shardCount: 8, migrationId: 'm-1', ...CHANGE } as const;
    expect(result(send(scale).context)).toMatchObject({ code: 'GROUP_FAILED_CLOSED_ADMIN' });
    // Idempotent: the first reason is kept.
    send({ type: 'FAIL_CLOSED', now: T0, reason: 'STORE_REVISION_REGRESSION' });
    expect(actor.getSnapshot().context.group.failureReason).toBe('METADATA_LOST');
    const restored = newGroupState(REF, { shardCount: 6, lifecycleId: 'l-2', now: T0 });
    send({ type: 'RECOVER', now: T0, group: restored, storeRevision: 7 });
    expect(value(actor)).toEqual({
      lifecycle: 'active',
      membership: 'empty',
      consumption: 'running',
      migration: 'idle',
    });
    expect(actor.getSnapshot().context).toMatchObject({
      storeRevision: 7,
      group: { lifecycleId: 'l-2' },
    });
  });
});

describe('migration region: SCALE, ROLLBACK, MIGRATION_CONVERGED, ROLLBACK_WINDOW_ELAPSED', () => {
  it('idle accepts SCALE; inProgress refuses another; convergence and the window end move it on', () => {
    const { actor, send, events } = chart();
    // No members: nothing to wait for, so the chart raises MIGRATION_CONVERGED at once.
    send({ type: 'SCALE', now: T0, shardCount: 8, migrationId: 'm-1', ...CHANGE });
    expect(events).toEqual(['SCALE', 'TARGETS_RECOMPUTED', 'MIGRATION_CONVERGED']);
    expect(value(actor).migration).toBe('converged');
    send({ type: 'TICK', now: T0 + 60_000 });
    expect(events).toContain('ROLLBACK_WINDOW_ELAPSED');
    expect(value(actor).migration).toBe('idle');
    expect(actor.getSnapshot().context.group.migrations[0]?.state).toBe('COMPLETED');
  });

  it('inProgress refuses SCALE with MIGRATION_IN_PROGRESS and accepts ROLLBACK', () => {
    const { actor, send } = chart();
    send(heartbeat('m-a'));
    send({ type: 'SCALE', now: T0, shardCount: 8, migrationId: 'm-1', ...CHANGE });
    expect(value(actor).migration).toBe('inProgress');
    const again = { type: 'SCALE', now: T0, shardCount: 6, migrationId: 'm-2', ...CHANGE } as const;
    expect(result(send(again).context)).toMatchObject({ code: 'MIGRATION_IN_PROGRESS' });
    send({ type: 'ROLLBACK', now: T0, migrationId: 'current', newMigrationId: 'm-3', ...CHANGE });
    expect(actor.getSnapshot().context.group.activeMigration).toMatchObject({
      kind: 'ROLLBACK',
      toShardCount: 4,
    });
  });

  it('idle refuses ROLLBACK: MIGRATION_NOT_FOUND', () => {
    const { send } = chart();
    const rollback = {
      type: 'ROLLBACK',
      now: T0,
      migrationId: 'current',
      newMigrationId: 'x',
      ...CHANGE,
    } as const;
    expect(result(send(rollback).context)).toMatchObject({ code: 'MIGRATION_NOT_FOUND' });
  });
});

describe('membership region: transitions are caused by named events', () => {
  it('a join raises MEMBER_JOINED and TARGETS_RECOMPUTED; its grants raise SHARDS_GRANTED', () => {
    const { actor, send, events } = chart();
    expect(value(actor).membership).toBe('empty');
    send(heartbeat('m-a'));
    expect(events).toEqual(['HEARTBEAT', 'MEMBER_JOINED', 'TARGETS_RECOMPUTED', 'SHARDS_GRANTED']);
    expect(value(actor).membership).toBe('stable');
  });

  it('a second member: revoke requested, shards released, shards granted', () => {
    const h = new Harness({ shardCount: 4, config: { assignmentDebounceMs: 0 } });
    h.join('m-a');
    h.beat('m-a');
    h.join('m-b');
    expect(h.actor.getSnapshot().value).toMatchObject({ membership: { rebalancing: 'granting' } });
    h.beat('m-a'); // told to revoke
    expect(h.ctx.raised).toContain('REVOKE_REQUESTED');
    expect(h.actor.getSnapshot().value).toMatchObject({ membership: { rebalancing: 'revoking' } });
    h.beat('m-a', { done: true });
    expect(h.ctx.raised).toContain('SHARDS_RELEASED');
    expect(h.actor.getSnapshot().value).toMatchObject({ membership: { rebalancing: 'granting' } });
    h.beat('m-b');
    expect(h.ctx.raised).toContain('SHARDS_GRANTED');
    expect(h.actor.getSnapshot().value).toMatchObject({ membership: 'stable' });
  });

  it('a leave raises MEMBER_LEFT; the last one empties the group', () => {
    const { actor, send, events } = chart();
    send(heartbeat('m-a'));
    send(heartbeat('m-a', { memberEpoch: -1 }));
    expect(events).toContain('MEMBER_LEFT');
    expect(value(actor).membership).toBe('empty');
  });
});

describe('each member has a state of its own chart', () => {
  it('joining, waiting, revoking, stable; then left, expired or fenced', () => {
    const h = new Harness({ shardCount: 4, config: { assignmentDebounceMs: 100 } });
    h.join('m-a');
    h.settleRecompute();
    h.beat('m-a');
    expect(memberState(h.ctx, 'm-a')).toBe('stable');
    h.join('m-b');
    expect(memberState(h.ctx, 'm-b')).toBe('joining'); // debounced: no target yet
    h.settleRecompute();
    expect(memberState(h.ctx, 'm-b')).toBe('waiting');
    h.beat('m-a');
    expect(memberState(h.ctx, 'm-a')).toBe('revoking');
    h.beat('m-a', { done: true });
    h.beat('m-b');
    expect([memberState(h.ctx, 'm-a'), memberState(h.ctx, 'm-b')]).toEqual(['stable', 'stable']);
    h.beat('m-b', { memberEpoch: -1 });
    expect(h.ctx.departures[0]).toMatchObject({ memberId: 'm-b', state: 'left' });
  });

  it('every state memberState names is a state of the member chart', () => {
    const states = Object.keys(memberMachine.root.states);
    expect(states).toEqual([
      'joining',
      'stable',
      'revoking',
      'waiting',
      'left',
      'expired',
      'fenced',
    ]);
    expect(memberMachine.root.states.fenced?.type).toBe('final');
  });
});

describe('restore: resolveState from persisted fields lands in every state', () => {
  it('each lifecycle, membership and migration state restores to itself', () => {
    const seen = new Set<string>();
    const h = new Harness({ shardCount: 4, config: { assignmentDebounceMs: 0 } });
    const check = () => {
      const before = h.actor.getSnapshot().value;
      h.restart();
      expect(h.actor.getSnapshot().value).toEqual(before);
      expect(h.actor.getSnapshot().value).toEqual(expectedStateValue(h.ctx));
      seen.add(JSON.stringify(before));
    };
    check(); // empty
    h.join('m-a');
    h.beat('m-a');
    check(); // stable
    h.join('m-b');
    check(); // rebalancing.granting
    h.beat('m-a');
    check(); // rebalancing.revoking
    h.beat('m-a', { done: true });
    h.beat('m-b');
    h.send({ type: 'SCALE', now: h.clock.now(), shardCount: 6, migrationId: 'x', ...CHANGE });
    check(); // migration inProgress
    for (let i = 0; i < 6; i++) {
      h.beat('m-a', { done: true });
      h.beat('m-b', { done: true });
    }
    check(); // migration converged
    h.send({ type: 'FREEZE', now: h.clock.now() });
    check(); // frozen
    h.send({ type: 'FAIL_CLOSED', now: h.clock.now(), reason: 'METADATA_LOST' });
    check(); // failedClosed
    const all = [...seen].join(' ');
    for (const state of [
      '"empty"',
      '"stable"',
      '"granting"',
      '"revoking"',
      '"inProgress"',
      '"converged"',
      '"frozen"',
      '"failedClosed"',
    ]) {
      expect(all).toContain(state);
    }
  });
});

describe('the rebalance-duration histogram', () => {
  it('observes the time from the start of a rebalance to its end', async () => {
    const h = new Harness({ shardCount: 4, config: { assignmentDebounceMs: 0 } });
    h.join('m-a');
    h.beat('m-a');
    h.join('m-b'); // rebalance starts
    h.clock.advance(1_500);
    h.beat('m-a');
    h.beat('m-a', { done: true });
    h.clock.advance(500);
    h.beat('m-b'); // the last grant: rebalance completes
    const completed = h.effects.find((e) => e.type === 'REBALANCE_COMPLETED');
    expect(completed).toEqual({ type: 'REBALANCE_COMPLETED', durationMs: 2_000 });
    const metrics = new Metrics();
    applyEffects(
      h.effects,
      metrics,
      createLogger({ level: 'error', format: 'text', silent: true }),
      REF,
    );
    const histogram = await metrics.rebalanceDuration.get();
    expect(histogram.values.find((v) => v.metricName?.endsWith('_sum'))?.value).toBe(2);
  });

  it('keeps a start across a restore mid-rebalance (counted from the restore)', () => {
    const h = new Harness({ shardCount: 4, config: { assignmentDebounceMs: 0 } });
    h.join('m-a');
    h.beat('m-a');
    h.join('m-b');
    h.clock.advance(1_000);
    h.restart(); // the host rebuilt the actor from the store mid-rebalance
    h.clock.advance(700);
    h.beat('m-a');
    h.beat('m-a', { done: true });
    h.beat('m-b');
    expect(h.effects).toContainEqual({ type: 'REBALANCE_COMPLETED', durationMs: 700 });
  });
});
