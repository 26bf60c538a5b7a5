import { describe, expect, it } from 'vitest';
import { newGroupState } from '../../../src/machines/new-group.js';
import type { HeartbeatReply } from '../../../src/machines/protocol.js';
import { groupId, type GroupRef } from '../../../src/machines/types.js';
import {
  actorRig,
  joinRequest,
  nextRequest,
  partsRig,
  REF,
  T0,
  TestOwnership,
} from './actor-harness.js';

const ID = groupId(REF);

/** A host whose ownership the test drives, with the group already in the store. */
async function ownedRig() {
  let ownership!: TestOwnership;
  const rig = actorRig({ ownership: (faulty) => (ownership = new TestOwnership(faulty)) });
  const created = await rig.faulty.inner.createGroup(
    newGroupState(REF, { shardCount: 4, lifecycleId: 'life-1', now: T0 }),
  );
  return { ...rig, ownership, createdFence: created.fence };
}

describe('ownership: reading a group never takes it', () => {
  it('a group another replica owns is not loaded or claimed here: GROUP_MOVED names the owner', async () => {
    const rig = await ownedRig();
    rig.ownership.owners.set(ID, 'replica-b');
    await expect(rig.host.getGroup(REF)).rejects.toMatchObject({
      code: 'GROUP_MOVED',
      details: { owner: 'replica-b' },
    });
    await expect(rig.host.heartbeat(REF, joinRequest('m1'))).rejects.toMatchObject({
      code: 'GROUP_MOVED',
    });
    expect(rig.faulty.count('loadGroup')).toBe(0);
    expect(rig.faulty.count('claimGroup')).toBe(0);
    expect(rig.ownership.log).toEqual([]);
    expect((await rig.faulty.inner.loadGroup(REF))?.fence).toBe(rig.createdFence);
  });

  it('a group this replica owns is acquired, then claimed, once', async () => {
    const rig = await ownedRig();
    await rig.host.getGroup(REF);
    await rig.host.getGroup(REF);
    expect(rig.ownership.log).toEqual([`acquire ${ID}`, `claim ${ID}`]);
    expect((await rig.faulty.inner.loadGroup(REF))?.fence).toBe(rig.createdFence + 1);
  });

  it('past the lease deadline nothing is answered from memory, steady heartbeats included', async () => {
    const rig = await ownedRig();
    const reply = await rig.host.heartbeat(REF, joinRequest('m1'));
    rig.ownership.unservable.add(ID);
    const calls = rig.faulty.calls.length;
    await expect(rig.host.heartbeat(REF, nextRequest('m1', reply))).rejects.toMatchObject({
      code: 'GROUP_MOVED',
      details: { owner: null },
    });
    await expect(rig.host.getGroup(REF)).rejects.toMatchObject({ code: 'GROUP_MOVED' });
    expect(rig.faulty.calls.length).toBe(calls);
    rig.ownership.unservable.delete(ID); // renewed: served again, from the same entry
    expect((await rig.host.heartbeat(REF, nextRequest('m1', reply))).outcome).toBe('OK');
  });
});

describe('ownership: a scale past the lease deadline', () => {
  it('does not move the stream prefix layout: GROUP_MOVED, nothing written', async () => {
    const rig = await ownedRig();
    await rig.host.getGroup(REF);
    // The layout read is under way when the replica stops being allowed to serve the group (a
    // pause past its lease): the layout write has no fence of the group to refuse it.
    rig.faulty.hang('readLayouts', { times: 1 });
    const scale = rig.host.putGroup(REF, 8, { requestedBy: 'ops', reason: 'test' });
    await expect.poll(() => rig.faulty.pending).toBe(1);
    rig.ownership.unservable.add(ID);
    rig.faulty.release();
    await expect(scale).rejects.toMatchObject({ code: 'GROUP_MOVED' });
    expect(rig.faulty.count('changeLayout')).toBe(0);
    expect((await rig.faulty.inner.readLayouts([REF.streamPrefix]))[0]?.shardCount).toBe(4);
  });
});

describe('ownership: a dropped entry goes back to the caller', () => {
  it('work queued when the lease is lost is not run on a reloaded group: GROUP_MOVED to forward', async () => {
    const rig = await ownedRig();
    const first = await rig.host.heartbeat(REF, joinRequest('m1'));
    rig.faulty.hang('commitGroup', { times: 1 });
    const running = rig.host.heartbeat(REF, joinRequest('m2')); // holds the mailbox
    await expect.poll(() => rig.faulty.pending).toBe(1);
    const queued = rig.host.heartbeat(REF, nextRequest('m1', first));
    const loads = rig.faulty.count('loadGroup');
    rig.ownership.lose(REF, 'replica-b');
    rig.faulty.release();
    await running.catch(() => undefined);
    await expect(queued).rejects.toMatchObject({
      code: 'GROUP_MOVED',
      details: { owner: 'replica-b' },
    });
    expect(rig.faulty.count('loadGroup')).toBe(loads);
    expect(rig.faulty.count('claimGroup')).toBe(1);
  });

  it('one replica: work queued behind a delete runs again on the group as it is (GROUP_NOT_FOUND)', async () => {
    const rig = actorRig();
    await rig.host.createGroup(REF, 4);
    rig.faulty.hang('deleteGroup', { times: 1 });
    const deleting = rig.host.deleteGroup(REF, { force: true });
    await expect.poll(() => rig.faulty.pending).toBe(1);
    const queued = rig.host.heartbeat(REF, joinRequest('m1'));
    rig.faulty.release();
    await deleting;
    await expect(queued).rejects.toMatchObject({ code: 'GROUP_NOT_FOUND' });
  });
});

describe('ownership: explicit entry lifecycle', () => {
  it('loading, owned, releasing, dropped', async () => {
    const rig = partsRig();
    await rig.faulty.inner.createGroup(
      newGroupState(REF, { shardCount: 2, lifecycleId: 'life-1', now: T0 }),
    );
    expect(rig.table.phase(REF)).toBeNull();
    rig.faulty.hang('loadGroup', { times: 1 });
    const loading = rig.owned.lookup(REF);
    await expect.poll(() => rig.faulty.pending).toBe(1);
    expect(rig.table.phase(REF)).toBe('loading');
    rig.faulty.release();
    const found = await loading;
    if (found.kind !== 'owned') throw new Error('expected the group to be owned here');
    expect(found.entry.phase).toBe('owned');

    // A release drains the mailbox first: queued work still runs, new work is refused.
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const queued = rig.table.run(found.entry, () => gate.then(() => 'done'));
    const releasing = rig.owned.release(REF);
    expect(found.entry.phase).toBe('releasing');
    await expect(rig.owned.entry(REF)).rejects.toMatchObject({ code: 'GROUP_MOVED' });
    release();
    expect(await queued).toBe('done');
    await releasing;
    expect(found.entry.phase).toBe('dropped');
    expect(rig.table.phase(REF)).toBeNull();
  });

  it('a handed-over group is released after its mailbox drained and then forwarded', async () => {
    const rig = await ownedRig();
    const reply: HeartbeatReply = await rig.host.heartbeat(REF, joinRequest('m1'));
    rig.ownership.owners.set(ID, 'replica-b');
    expect((await rig.host.heartbeat(REF, nextRequest('m1', reply))).outcome).toBe('OK');
    await rig.host.release(REF);
    expect(rig.ownership.log.at(-1)).toBe(`release ${ID}`);
    await expect(rig.host.getGroup(REF)).rejects.toMatchObject({
      code: 'GROUP_MOVED',
      details: { owner: 'replica-b' },
    });
  });
});

/** A {@link TestOwnership} that holds a lease per group: served only while one is held. */
class LeasedOwnership extends TestOwnership {
  readonly held = new Set<string>();

  override acquire(ref: GroupRef): Promise<void> {
    this.held.add(groupId(ref));
    return super.acquire(ref);
  }

  override mayServe(ref: GroupRef): boolean {
    return this.held.has(groupId(ref)) && super.mayServe(ref);
  }

  override release(ref: GroupRef): Promise<void> {
    this.held.delete(groupId(ref));
    return super.release(ref);
  }

  override lose(ref: GroupRef, newOwner: string): void {
    this.held.delete(groupId(ref));
    super.lose(ref, newOwner);
  }
}

describe('ownership: a hand-over whose entry was dropped while it drained', () => {
  it('does not give up the lease of the group taken again meanwhile', async () => {
    let ownership!: LeasedOwnership;
    const rig = actorRig({ ownership: (faulty) => (ownership = new LeasedOwnership(faulty)) });
    await rig.faulty.inner.createGroup(
      newGroupState(REF, { shardCount: 4, lifecycleId: 'life-1', now: T0 }),
    );
    await rig.host.heartbeat(REF, joinRequest('m1'));
    // The live set changed: the group is handed over while a commit holds its mailbox.
    rig.faulty.hang('commitGroup', { times: 1 });
    const running = rig.host.heartbeat(REF, joinRequest('m2'));
    await expect.poll(() => rig.faulty.pending).toBe(1);
    ownership.owners.set(ID, 'replica-b');
    const releasing = rig.host.release(REF);
    // Its lease is lost while it drains (the entry dropped), and the live set changes back:
    // the group is taken again here, under a new lease, by the next request.
    ownership.lose(REF, 'replica-b');
    ownership.owners.delete(ID);
    await rig.host.getGroup(REF);
    expect(ownership.held.has(ID)).toBe(true);
    rig.faulty.release();
    await running.catch(() => undefined);
    await releasing;
    // The hand-over of the dropped entry gave nothing up: the group is still served here
    // (docs/architecture.md#replicas-leases-and-fences).
    expect(ownership.held.has(ID)).toBe(true);
    await expect(rig.host.getGroup(REF)).resolves.toMatchObject({ consumerGroup: 'billing' });
  });
});

describe('ownership: a hand-over during a load', () => {
  it('waits for the load, so no entry is left behind that nobody renews or serves', async () => {
    const rig = await ownedRig();
    rig.faulty.hang('claimGroup');
    const loading = rig.host.getGroup(REF);
    await waitForCall(() => rig.faulty.count('claimGroup') === 1);
    // The live set changed meanwhile: the group is handed over while its claim is in flight.
    rig.ownership.owners.set(ID, 'replica-b');
    const releasing = rig.host.release(REF);
    rig.faulty.release();
    await loading.catch(() => undefined);
    await releasing;
    expect(rig.ownership.log.at(-1)).toBe(`release ${ID}`);
    // Nothing of the group stayed here: it is forwarded to its owner, named.
    await expect(rig.host.getGroup(REF)).rejects.toMatchObject({
      code: 'GROUP_MOVED',
      details: { owner: 'replica-b' },
    });
  });

  it('an entry whose lease was given up while it loaded is not kept: GROUP_MOVED to forward', async () => {
    const rig = await ownedRig();
    rig.faulty.hang('claimGroup');
    const loading = rig.host.getGroup(REF);
    await waitForCall(() => rig.faulty.count('claimGroup') === 1);
    rig.ownership.unservable.add(ID); // the lease went while the claim was in flight
    rig.faulty.release();
    await expect(loading).rejects.toMatchObject({ code: 'GROUP_MOVED' });
    rig.ownership.unservable.delete(ID);
    rig.ownership.owners.set(ID, 'replica-b');
    await expect(rig.host.getGroup(REF)).rejects.toMatchObject({
      code: 'GROUP_MOVED',
      details: { owner: 'replica-b' },
    });
  });
});

/** Lets queued promise work run until `done` holds (no timers: the store calls are in memory). */
async function waitForCall(done: () => boolean): Promise<void> {
  for (let i = 0; i < 1_000 && !done(); i++) await Promise.resolve();
  expect(done()).toBe(true);
}
