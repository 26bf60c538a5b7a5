/**
 * The hot path (docs/architecture.md#performance-rules) in the actor layer: a steady-state
 * heartbeat is answered from memory, before the chart is asked, with the very bytes the chart's
 * road answers; anything that may change the group takes the chart's road; liveness changes of a
 * refused write are undone with it.
 */
import { describe, expect, it } from 'vitest';
import { unwrap } from '../../../src/actors/commands.js';
import type { GroupEntry } from '../../../src/actors/group-entry.js';
import { LivenessTable } from '../../../src/machines/liveness.js';
import { groupId } from '../../../src/machines/types.js';
import { steadyHeartbeat } from '../../../src/machines/heartbeat.js';
import type { HeartbeatReply, HeartbeatRequest } from '../../../src/machines/protocol.js';
import {
  actorRig,
  joinRequest,
  nextRequest,
  partsRig,
  REF,
  TestOwnership,
  steadyReply,
} from './actor-harness.js';

type Rig = ReturnType<typeof partsRig> & { entry: GroupEntry };

/** A group of `shards` shards whose `members` joined and settled (every reply OK, unchanged). */
async function settledGroup(shards: number, members: string[]): Promise<Rig> {
  const parts = partsRig();
  const rig = { ...parts, entry: await parts.owned.create(REF, shards) };
  const last = new Map<string, HeartbeatReply>();
  for (const id of members) last.set(id, await fullRoad(rig, joinRequest(id)));
  rig.clock.advance(rig.entry.actor.getSnapshot().context.config.assignmentDebounceMs);
  for (let round = 0; round < 10; round++) {
    for (const id of members) last.set(id, await fullRoad(rig, nextRequest(id, last.get(id)!)));
  }
  for (const id of members) expect(last.get(id)?.outcome).toBe('OK');
  lastReplies.set(rig, last);
  return rig;
}

const lastReplies = new WeakMap<Rig, Map<string, HeartbeatReply>>();
const requestOf = (rig: Rig, id: string) => nextRequest(id, lastReplies.get(rig)!.get(id)!);

/** The heartbeat through the chart, as every heartbeat went before the hot path. */
async function fullRoad(rig: Rig, request: HeartbeatRequest): Promise<HeartbeatReply> {
  const event = { type: 'HEARTBEAT' as const, now: rig.clock.now(), request };
  return unwrap(await rig.committer.dispatch(rig.entry, event)) as HeartbeatReply;
}

const contextOf = (rig: Rig) => rig.entry.actor.getSnapshot().context;

/**
 * m-a settled alone, then m-b joined: m-a is told to revoke shards, and `draining` is its next
 * heartbeat still draining them.
 */
async function drainingMember() {
  const rig = await settledGroup(4, ['m-a']);
  const joined = await fullRoad(rig, joinRequest('m-b'));
  rig.clock.advance(contextOf(rig).config.assignmentDebounceMs);
  const told = await fullRoad(rig, requestOf(rig, 'm-a'));
  expect(told.revokeShards.length).toBeGreaterThan(0);
  const draining: HeartbeatRequest = {
    ...nextRequest('m-a', told),
    currentAssignments: [...told.assignedShards, ...told.revokeShards].sort((a, b) => a - b),
    revokeProgress: told.revokeShards.map((shard) => ({ shard, state: 'DRAINING' as const })),
  };
  return { rig, joined, draining };
}

describe('a steady heartbeat is answered from memory with the bytes of the full path', () => {
  it('the steady reply is byte-identical to the reply the chart gives the same heartbeat', async () => {
    const rig = await settledGroup(8, ['m-a', 'm-b', 'm-c']);
    for (const id of ['m-a', 'm-b', 'm-c']) {
      const request = requestOf(rig, id);
      const steady = steadyHeartbeat(contextOf(rig), request, rig.clock.now());
      expect(steady).not.toBeNull();
      const group = contextOf(rig).group;
      const full = await fullRoad(rig, request);
      expect(contextOf(rig).group).toBe(group);
      expect(Buffer.from(JSON.stringify(steady))).toEqual(Buffer.from(JSON.stringify(full)));
    }
  });

  it('runs no macrostep, writes nothing and refreshes the member liveness', async () => {
    const rig = await settledGroup(8, ['m-a', 'm-b']);
    const snapshot = rig.entry.actor.getSnapshot();
    const writes = rig.faulty.count('commitGroup');
    rig.clock.advance(1_000);
    const reply = await rig.committer.heartbeat(rig.entry, rig.clock.now(), requestOf(rig, 'm-a'));
    expect(reply.outcome).toBe('OK');
    expect(rig.entry.actor.getSnapshot()).toBe(snapshot);
    expect(rig.faulty.count('commitGroup')).toBe(writes);
    expect(contextOf(rig).liveness.get('m-a')).toMatchObject({
      lastHeartbeatAt: rig.clock.now(),
      sessionExpiresAt: rig.clock.now() + contextOf(rig).group.members.get('m-a')!.sessionTimeoutMs,
    });
  });

  it('a revoking member still draining is steady too, and told REVOKE_PENDING as by the chart', async () => {
    const { rig, joined, draining } = await drainingMember();
    const steady = steadyHeartbeat(contextOf(rig), draining, rig.clock.now());
    expect(steady?.outcome).toBe('REVOKE_PENDING');
    expect(JSON.stringify(steady)).toBe(JSON.stringify(await fullRoad(rig, draining)));
    expect(joined.outcome).toBeDefined();
  });
});

describe('a kept steady decision outlives chart events that change nothing it read', () => {
  it("another member's heartbeat through the chart keeps it; a join ends it", async () => {
    const rig = await settledGroup(8, ['m-a', 'm-b']);
    const decision = rig.committer.decideSteady(rig.entry, rig.clock.now(), requestOf(rig, 'm-a'));
    expect(decision).not.toBeNull();
    const before = contextOf(rig);
    await fullRoad(rig, requestOf(rig, 'm-b'));
    // A new context object, the same group state: the decision still holds, and answers what
    // deciding anew answers.
    expect(contextOf(rig)).not.toBe(before);
    expect(contextOf(rig).group).toBe(before.group);
    rig.clock.advance(1_000);
    expect(rig.committer.repeatSteady(rig.entry, rig.clock.now(), decision!)).toBe(true);
    const fresh = steadyHeartbeat(contextOf(rig), requestOf(rig, 'm-a'), rig.clock.now());
    expect(JSON.stringify(fresh)).toBe(JSON.stringify(decision!.reply));
    await fullRoad(rig, joinRequest('m-c'));
    expect(rig.committer.repeatSteady(rig.entry, rig.clock.now(), decision!)).toBe(false);
  });

  it("a revoking member's decision is repeated in place and keeps the revoke deadline", async () => {
    const { rig, draining } = await drainingMember();
    const decision = rig.committer.decideSteady(rig.entry, rig.clock.now(), draining);
    expect(decision?.reply.outcome).toBe('REVOKE_PENDING');
    const record = contextOf(rig).liveness.get('m-a');
    const deadline = record?.revokeDeadline;
    expect(deadline).toEqual(expect.any(Number));
    rig.clock.advance(1_000);
    // What deciding anew writes, on a copy of the liveness as it is now.
    const copy = LivenessTable.of(Object.entries(contextOf(rig).liveness.toRecord()));
    steadyHeartbeat({ ...contextOf(rig), liveness: copy }, draining, rig.clock.now());
    expect(rig.committer.repeatSteady(rig.entry, rig.clock.now(), decision!)).toBe(true);
    expect(contextOf(rig).liveness.get('m-a')).toBe(record);
    expect(record).toMatchObject({ lastHeartbeatAt: rig.clock.now(), revokeDeadline: deadline });
    expect({ ...record }).toEqual({ ...copy.get('m-a') });
  });
});

describe('a heartbeat that may change the group takes the chart road', () => {
  it('joins, leaves, revoke DONE, stale epochs, versions ahead and due recomputes are not steady', async () => {
    const rig = await settledGroup(4, ['m-a', 'm-b']);
    const ctx = contextOf(rig);
    const now = rig.clock.now();
    const current = requestOf(rig, 'm-a');
    expect(steadyHeartbeat(ctx, current, now)).not.toBeNull();
    const notSteady: HeartbeatRequest[] = [
      joinRequest('m-a'),
      joinRequest('m-new'),
      { ...current, memberEpoch: -1 },
      { ...current, memberEpoch: current.memberEpoch + 5 },
      { ...current, metadataVersion: current.metadataVersion + 1 },
      { ...current, assignmentEpoch: current.assignmentEpoch + 1 },
      { ...current, lifecycleId: 'another-lifecycle' },
      { ...current, coordinationVersion: 99 },
      { ...current, memberId: 'm-unknown' },
    ];
    for (const request of notSteady) expect(steadyHeartbeat(ctx, request, now)).toBeNull();
    // A recompute that fell due is the chart's; one still waiting is not.
    expect(steadyHeartbeat({ ...ctx, recomputeAt: now }, current, now)).toBeNull();
    expect(steadyHeartbeat({ ...ctx, recomputeAt: now + 1 }, current, now)).not.toBeNull();
  });

  it('a heartbeat that would release, revoke or grant a shard is not steady', async () => {
    const rig = await settledGroup(4, ['m-a']);
    await fullRoad(rig, joinRequest('m-b'));
    rig.clock.advance(contextOf(rig).config.assignmentDebounceMs);
    // m-a's shards now target m-b in part: its next heartbeat must be told to revoke.
    const tick = { type: 'TICK' as const, now: rig.clock.now() };
    await rig.committer.dispatch(rig.entry, tick);
    expect(steadyHeartbeat(contextOf(rig), requestOf(rig, 'm-a'), rig.clock.now())).toBeNull();
  });
});

describe('liveness lives outside the context and is undone with a refused write', () => {
  it('a join whose write fails leaves no liveness behind', async () => {
    const rig = await settledGroup(4, ['m-a']);
    const before = contextOf(rig).liveness.toRecord();
    rig.faulty.fail('commitGroup', { times: 1 });
    await expect(fullRoad(rig, joinRequest('m-b'))).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
    });
    expect(contextOf(rig).liveness.get('m-b')).toBeUndefined();
    expect(contextOf(rig).liveness.toRecord()).toEqual(before);
  });

  it('a leave whose write fails keeps the member live, so it still expires in time', async () => {
    const rig = await settledGroup(4, ['m-a', 'm-b']);
    const live = contextOf(rig).liveness.get('m-b');
    rig.faulty.fail('commitGroup', { times: 1 });
    await expect(fullRoad(rig, { ...requestOf(rig, 'm-b'), memberEpoch: -1 })).rejects.toThrow();
    expect(contextOf(rig).group.members.get('m-b')).toBeDefined();
    expect(contextOf(rig).liveness.get('m-b')).toBe(live);
  });
});

describe('a steady heartbeat is answered at once, without a turn of the mailbox, only when that turn would come first', () => {
  it('answers as the mailbox road does while nothing is queued; queued work, a leave or a dropped entry send it down that road', async () => {
    const rig = await settledGroup(8, ['m-a', 'm-b']);
    const request = requestOf(rig, 'm-a');
    const atOnce = (r: HeartbeatRequest = request) =>
      rig.owned.withEntryNow(REF, (entry) => rig.committer.steady(entry, rig.clock.now(), r));
    const answered = atOnce();
    expect(answered?.outcome).toBe('OK');
    const viaMailbox = await rig.owned.withEntry(REF, (entry) =>
      rig.committer.heartbeat(entry, rig.clock.now(), request),
    );
    expect(JSON.stringify(answered)).toBe(JSON.stringify(viaMailbox));

    let open!: () => void;
    const opened = new Promise<void>((resolve) => (open = resolve));
    const queued = rig.table.run(rig.entry, () => opened);
    expect(atOnce()).toBeNull();
    open();
    await queued;
    await rig.entry.mailbox.idle();
    expect(atOnce()).not.toBeNull();

    expect(atOnce({ ...request, memberEpoch: -1 })).toBeNull();
    rig.table.remove(rig.entry);
    expect(atOnce()).toBeNull();
  });

  it('the host answers at once only what it may serve from memory', async () => {
    let ownership!: TestOwnership;
    const { host, clock } = actorRig({
      ownership: (faulty) => (ownership = new TestOwnership(faulty)),
    });
    await host.createGroup(REF, 4);
    let reply = await host.heartbeat(REF, { ...joinRequest('m-a'), principal: 'p' });
    clock.advance(60_000);
    for (let i = 0; i < 5; i++)
      reply = await host.heartbeat(REF, { ...nextRequest('m-a', reply), principal: 'p' });
    const request = { ...nextRequest('m-a', reply), principal: 'p' };
    expect(steadyReply(host, REF, request)).toEqual(reply);
    expect(steadyReply(host, { ...REF, consumerGroup: 'unknown' }, request)).toBeNull();
    ownership.unservable.add(groupId(REF));
    expect(steadyReply(host, REF, request)).toBeNull();
  });
});
