/**
 * Held heartbeats (docs/protocol.md "Held heartbeats") in the actor layer, on a manual clock: a
 * steady reply is held until its wait is up or something changes for its member; replies with
 * news are never held; a held reply is never answered from a group this replica may no longer
 * serve; the member's session counts from the arrival of the request.
 */
import { describe, expect, it } from 'vitest';
import { HeldHeartbeats } from '../../../src/actors/held-heartbeats.js';
import type { GroupEntry } from '../../../src/actors/group-entry.js';
import { ManualClock } from '../../../src/machines/clock.js';
import type { HeartbeatReply, HeartbeatRequest } from '../../../src/machines/protocol.js';
import { groupId } from '../../../src/machines/types.js';
import { newGroupState } from '../../../src/machines/new-group.js';
import {
  actorRig,
  joinRequest,
  nextRequest,
  REF,
  T0,
  TestOwnership,
  type ActorRig,
} from './actor-harness.js';

const SESSION_MS = 10_000; // testSettings()
const WAIT_MS = 3_000;

/** Lets every queued mailbox step and promise callback run (the clock does not move). */
const flush = () => new Promise((resolve) => setImmediate(resolve));

/** A promise's state without waiting for it. */
function track<T>(promise: Promise<T>) {
  const state: { done: boolean; value?: T; error?: unknown } = { done: false };
  promise.then(
    (value) => Object.assign(state, { done: true, value }),
    (error: unknown) => Object.assign(state, { done: true, error }),
  );
  return state;
}

async function heldCount(rig: ActorRig): Promise<number> {
  return (await rig.metrics.heldHeartbeats.get()).values[0]?.value ?? 0;
}

/** The member's liveness as monitoring shows it. */
async function liveness(rig: ActorRig, memberId: string) {
  const { members } = await rig.host.getMembers(REF);
  return members.find((m) => m.memberId === memberId);
}

const iso = (ms: number) => new Date(ms).toISOString();

/**
 * A started host (timers on) whose group has `shards` shards and members `ids` at steady state;
 * returns each member's next request.
 */
async function settled(rig: ActorRig, shards: number, ids: string[]) {
  await rig.host.createGroup(REF, shards);
  rig.host.start();
  const last = new Map<string, HeartbeatReply>();
  for (const id of ids) last.set(id, await rig.host.heartbeat(REF, joinRequest(id)));
  rig.clock.advance(100); // the debounce: the recompute runs on its timer
  await flush();
  for (let round = 0; round < 6; round++) {
    for (const id of ids)
      last.set(id, await rig.host.heartbeat(REF, nextRequest(id, last.get(id)!)));
  }
  for (const id of ids) expect(last.get(id)).toMatchObject({ outcome: 'OK', revokeShards: [] });
  return (id: string): HeartbeatRequest => nextRequest(id, last.get(id)!);
}

/** A rig whose ownership the test drives, with the group in the store already. */
async function ownedRig() {
  let ownership!: TestOwnership;
  const rig = actorRig({ ownership: (faulty) => (ownership = new TestOwnership(faulty)) });
  await rig.faulty.inner.createGroup(
    newGroupState(REF, { shardCount: 4, lifecycleId: 'life-1', now: T0 }),
  );
  rig.host.start();
  const joined = await rig.host.heartbeat(REF, joinRequest('m-a'));
  const steady = await rig.host.heartbeat(REF, nextRequest('m-a', joined));
  return { rig, ownership, request: nextRequest('m-a', steady) };
}

describe('a steady heartbeat with waitMs is held', () => {
  it('until its wait is up, then answered from the group as it is; its session counts from its arrival', async () => {
    const rig = actorRig();
    const next = await settled(rig, 4, ['m-a']);
    const arrival = rig.clock.now();
    const steady = await rig.host.heartbeat(REF, next('m-a'));
    const held = track(rig.host.heartbeat(REF, next('m-a'), { waitMs: WAIT_MS }));
    await flush();
    expect(held.done).toBe(false);
    expect(await heldCount(rig)).toBe(1);
    rig.clock.advance(WAIT_MS - 1);
    await flush();
    expect(held.done).toBe(false);
    rig.clock.advance(1);
    await flush();
    expect(held).toMatchObject({ done: true, value: steady });
    expect(await heldCount(rig)).toBe(0);
    expect(await liveness(rig, 'm-a')).toMatchObject({
      lastHeartbeatAt: iso(arrival),
      sessionExpiresAt: iso(arrival + SESSION_MS),
    });
  });

  it('no longer than half the session timeout, whatever it asks', async () => {
    const rig = actorRig();
    const next = await settled(rig, 4, ['m-a']);
    const held = track(rig.host.heartbeat(REF, next('m-a'), { waitMs: 60_000 }));
    await flush();
    rig.clock.advance(SESSION_MS / 2 - 1);
    await flush();
    expect(held.done).toBe(false);
    rig.clock.advance(1);
    await flush();
    expect(held.done).toBe(true);
  });

  it('and answered at once with revokeShards when a member joins and the targets move', async () => {
    const rig = actorRig();
    const next = await settled(rig, 4, ['m-a']);
    const held = track(rig.host.heartbeat(REF, next('m-a'), { waitMs: WAIT_MS }));
    await rig.host.heartbeat(REF, joinRequest('m-b'));
    await flush();
    // The join alone changes nothing for m-a: the recompute waits for its debounce.
    expect(held.done).toBe(false);
    rig.clock.advance(100);
    await flush();
    expect(held.done).toBe(true);
    expect(held.value).toMatchObject({ outcome: 'REVOKE_PENDING' });
    expect(held.value?.revokeShards).toHaveLength(2);
  });

  it('a member waiting only for pending shards is held too, and granted them the moment they are released', async () => {
    const rig = actorRig();
    const next = await settled(rig, 4, ['m-a']);
    const joined = await rig.host.heartbeat(REF, joinRequest('m-b'));
    rig.clock.advance(100);
    await flush();
    const told = await rig.host.heartbeat(REF, next('m-a'));
    expect(told.revokeShards).toHaveLength(2);
    const waiting = await rig.host.heartbeat(REF, nextRequest('m-b', joined));
    expect(waiting).toMatchObject({ outcome: 'REVOKE_PENDING', assignedShards: [] });
    expect(waiting.pendingShards).toEqual(told.revokeShards);
    const held = track(
      rig.host.heartbeat(REF, nextRequest('m-b', waiting), {
        waitMs: waiting.heartbeatIntervalMs,
      }),
    );
    await flush();
    expect(held.done).toBe(false);
    // m-a reports the revoked shards done: m-b's grant is ready, its held heartbeat is answered.
    await rig.host.heartbeat(REF, {
      ...nextRequest('m-a', told),
      revokeProgress: told.revokeShards.map((shard) => ({ shard, state: 'DONE' as const })),
    });
    await flush();
    expect(held.done).toBe(true);
    expect(held.value).toMatchObject({ outcome: 'OK', assignedShards: told.revokeShards });
  });
});

describe('replies with news are never held', () => {
  it('a join, a revoke, a grant, a new assignment epoch and a fence are answered at once', async () => {
    const rig = actorRig();
    const next = await settled(rig, 4, ['m-a']);
    const hold = { waitMs: WAIT_MS };
    const join = await rig.host.heartbeat(REF, joinRequest('m-b'), hold);
    expect(join.memberEpoch).toBeGreaterThan(0);
    rig.clock.advance(100);
    await flush();
    const revoke = await rig.host.heartbeat(REF, next('m-a'), hold);
    expect(revoke.revokeShards).toHaveLength(2);
    // m-b learns its new assignment epoch (pending shards) at once.
    const pending = await rig.host.heartbeat(REF, nextRequest('m-b', join), hold);
    expect(pending.assignmentEpoch).toBeGreaterThan(join.assignmentEpoch);
    // The revoke reported done releases the shards: the release reply has a new epoch.
    const released = await rig.host.heartbeat(
      REF,
      {
        ...nextRequest('m-a', revoke),
        revokeProgress: revoke.revokeShards.map((shard) => ({ shard, state: 'DONE' as const })),
      },
      hold,
    );
    expect(released.memberEpoch).toBeGreaterThan(revoke.memberEpoch);
    const grant = await rig.host.heartbeat(REF, nextRequest('m-b', pending), hold);
    expect(grant.assignedShards).toEqual(revoke.revokeShards);
    const fenced = await rig.host.heartbeat(REF, { ...next('m-a'), memberEpoch: 999 }, hold);
    expect(fenced.outcome).toBe('FENCED_MEMBER_EPOCH');
    expect(await heldCount(rig)).toBe(0);
  });

  it('a member that reports progress or a different assignment is answered at once', async () => {
    const rig = actorRig();
    const next = await settled(rig, 4, ['m-a']);
    const hold = { waitMs: WAIT_MS };
    const fewer = { ...next('m-a'), currentAssignments: next('m-a').currentAssignments.slice(1) };
    expect((await rig.host.heartbeat(REF, fewer, hold)).outcome).toBe('OK');
    expect(await heldCount(rig)).toBe(0);
  });

  it('without waitMs (or with 0) nothing is held', async () => {
    const rig = actorRig();
    const next = await settled(rig, 4, ['m-a']);
    await rig.host.heartbeat(REF, next('m-a'));
    await rig.host.heartbeat(REF, next('m-a'), { waitMs: 0 });
    expect(await heldCount(rig)).toBe(0);
  });
});

describe('a held heartbeat ends when its caller or its group goes', () => {
  it('a caller that goes away ends the hold; nothing more is decided for it', async () => {
    const rig = actorRig();
    const next = await settled(rig, 4, ['m-a']);
    const arrival = rig.clock.now();
    const controller = new AbortController();
    const held = track(
      rig.host.heartbeat(REF, next('m-a'), { waitMs: WAIT_MS, signal: controller.signal }),
    );
    await flush();
    const writes = rig.faulty.count('commitGroup');
    rig.clock.advance(1_000);
    controller.abort();
    await flush();
    expect(held.done).toBe(true);
    expect(await heldCount(rig)).toBe(0);
    expect((await liveness(rig, 'm-a'))?.lastHeartbeatAt).toBe(iso(arrival));
    expect(rig.faulty.count('commitGroup')).toBe(writes);
  });

  it('a newer heartbeat of the member answers the held one first, from the group as it is', async () => {
    const rig = actorRig();
    const next = await settled(rig, 4, ['m-a']);
    const held = track(rig.host.heartbeat(REF, next('m-a'), { waitMs: WAIT_MS }));
    await flush();
    const newer = await rig.host.heartbeat(REF, next('m-a'));
    await flush();
    expect(held).toMatchObject({ done: true, value: newer });
    expect(await heldCount(rig)).toBe(0);
  });

  it('a lost lease answers GROUP_MOVED, never from memory', async () => {
    const { rig, ownership, request } = await ownedRig();
    const held = track(rig.host.heartbeat(REF, request, { waitMs: WAIT_MS }));
    await flush();
    expect(held.done).toBe(false);
    ownership.lose(REF, 'replica-b');
    await flush();
    expect(held.error).toMatchObject({ code: 'GROUP_MOVED', details: { owner: 'replica-b' } });
  });

  it('a steady reply decided in a write the lease was lost under is not held', async () => {
    const { rig, ownership, request } = await ownedRig();
    // A join's write hangs; meanwhile m-b joins and m-a's steady heartbeat queue in one batch.
    rig.faulty.hang('commitGroup', { times: 2 });
    const first = track(rig.host.heartbeat(REF, joinRequest('m-c')));
    await expect.poll(() => rig.faulty.pending).toBe(1);
    const joined = track(rig.host.heartbeat(REF, joinRequest('m-b')));
    const held = track(rig.host.heartbeat(REF, request, { waitMs: WAIT_MS }));
    await flush();
    rig.faulty.release();
    // The batch of m-b and m-a writes once; the lease is lost while that write is in flight.
    await expect.poll(() => rig.faulty.pending).toBe(1);
    expect(first.done).toBe(true);
    ownership.lose(REF, 'replica-b');
    rig.faulty.release();
    await flush();
    await flush();
    expect(joined.done).toBe(true);
    // Its group left this replica before the reply was decided: it is not held here (where
    // nothing would wake it) but answered, or sent on, at once.
    expect(held.done).toBe(true);
    expect(await heldCount(rig)).toBe(0);
  });

  it('a group handed over answers GROUP_MOVED', async () => {
    const { rig, request } = await ownedRig();
    const held = track(rig.host.heartbeat(REF, request, { waitMs: WAIT_MS }));
    await flush();
    await rig.host.release(REF);
    await flush();
    expect(held.error).toMatchObject({ code: 'GROUP_MOVED' });
  });

  it('past the lease deadline the hold ends at its time with GROUP_MOVED, not from memory', async () => {
    const { rig, ownership, request } = await ownedRig();
    const held = track(rig.host.heartbeat(REF, request, { waitMs: WAIT_MS }));
    await flush();
    ownership.unservable.add(groupId(REF));
    rig.clock.advance(WAIT_MS - 1);
    await flush();
    expect(held.done).toBe(false);
    rig.clock.advance(1);
    await flush();
    expect(held.error).toMatchObject({ code: 'GROUP_MOVED' });
  });

  it('a deleted group answers GROUP_NOT_FOUND', async () => {
    const rig = actorRig();
    const next = await settled(rig, 4, ['m-a']);
    const held = track(rig.host.heartbeat(REF, next('m-a'), { waitMs: WAIT_MS }));
    await flush();
    await rig.host.deleteGroup(REF, { force: true });
    await flush();
    expect(held.error).toMatchObject({ code: 'GROUP_NOT_FOUND' });
  });

  it('a group that fails closed answers GROUP_FAILED_CLOSED', async () => {
    const rig = actorRig({ storeKind: 'redis' });
    const next = await settled(rig, 4, ['m-a']);
    const held = track(rig.host.heartbeat(REF, next('m-a'), { waitMs: WAIT_MS }));
    await flush();
    // The metadata key lost behind the coordinator: the verify loop fails the group closed.
    const stored = (await rig.faulty.inner.loadGroup(REF))!;
    await rig.faulty.inner.deleteGroup(REF, stored.fence, stored.revision);
    await rig.host.verify();
    await flush();
    expect(held.error).toMatchObject({ code: 'GROUP_FAILED_CLOSED' });
  });

  it('a replica that stops answers every held heartbeat first, and holds no new one', async () => {
    const rig = actorRig();
    const next = await settled(rig, 4, ['m-a', 'm-b']);
    const held = [
      track(rig.host.heartbeat(REF, next('m-a'), { waitMs: WAIT_MS })),
      track(rig.host.heartbeat(REF, next('m-b'), { waitMs: WAIT_MS })),
    ];
    await flush();
    expect(await heldCount(rig)).toBe(2);
    await rig.host.releaseHeld();
    for (const one of held) expect(one).toMatchObject({ done: true, value: { outcome: 'OK' } });
    expect((await rig.host.heartbeat(REF, next('m-a'), { waitMs: WAIT_MS })).outcome).toBe('OK');
    expect(await heldCount(rig)).toBe(0);
    await rig.host.close();
  });
});

describe('held heartbeats per replica', () => {
  /** The next heartbeat of a member told epoch 1 and no shards. */
  const steadyRequest = (memberId: string) =>
    nextRequest(memberId, {
      memberEpoch: 1,
      assignmentEpoch: 1,
      metadataVersion: 1,
      assignedShards: [],
    } as unknown as HeartbeatReply);

  it('one per member: a second hold of the member ends the first, and is itself woken on leave', async () => {
    const holds = new HeldHeartbeats({ clock: new ManualClock(T0) });
    const entry = { phase: 'owned' } as GroupEntry;
    const request = steadyRequest('m-a');
    const first = holds.hold(entry, request, WAIT_MS);
    const second = holds.hold(entry, request, WAIT_MS);
    expect(await first).toEqual({ kind: 'decide' });
    expect(holds.size).toBe(1);
    holds.wakeAll(entry);
    expect(await second).toEqual({ kind: 'decide' });
    expect(holds.size).toBe(0);
  });

  it('beyond the maximum a heartbeat is not held', () => {
    const holds = new HeldHeartbeats({ clock: new ManualClock(T0), max: 1 });
    const entry = { phase: 'owned' } as GroupEntry;
    const request = steadyRequest('m-a');
    expect(holds.hold(entry, request, WAIT_MS)).not.toBeNull();
    expect(holds.hold(entry, { ...request, memberId: 'm-b' }, WAIT_MS)).toBeNull();
    expect(holds.size).toBe(1);
  });

  it('a group leaving this replica holds nothing new: its leaving woke the holds already', () => {
    const holds = new HeldHeartbeats({ clock: new ManualClock(T0) });
    const request = steadyRequest('m-a');
    for (const phase of ['releasing', 'dropped', 'loading'] as const) {
      expect(holds.hold({ phase } as GroupEntry, request, WAIT_MS)).toBeNull();
    }
    expect(holds.size).toBe(0);
  });
});
