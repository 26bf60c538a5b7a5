/**
 * Lost metadata in the actor layer (docs/operations.md#lost-metadata): a group whose metadata
 * key is gone while a replica or a client remembers it fails closed (METADATA_LOST) and is
 * never read as unknown, also when its lease went with the store; a normal move, a delete and
 * a caller that knew nothing stay as they were.
 */
import { describe, expect, it } from 'vitest';
import { GroupHost } from '../../../src/actors/group-host.js';
import type { HeartbeatReply, HeartbeatRequest } from '../../../src/machines/protocol.js';
import { groupId, type GroupRef } from '../../../src/machines/types.js';
import { Metrics } from '../../../src/observability/metrics.js';
import type { FaultyStore } from '../../support/faulty-store.js';
import {
  actorRig,
  joinRequest,
  nextRequest,
  REF,
  silentLogger,
  TestOwnership,
  type ActorRig,
} from './actor-harness.js';

const ID = groupId(REF);
const CHANGE = { requestedBy: 'unit-test', reason: 'lost metadata' };

/** A host whose ownership the test drives (a lease lost on demand). */
function leasedRig(): ActorRig & { ownership: TestOwnership } {
  let ownership!: TestOwnership;
  const rig = actorRig({
    storeKind: 'redis',
    ownership: (faulty) => (ownership = new TestOwnership(faulty)),
  });
  return { ...rig, ownership };
}

/** Two members settled on a 4-shard group; returns the last reply of each. */
async function liveGroup(rig: ActorRig): Promise<Map<string, HeartbeatReply>> {
  await rig.host.createGroup(REF, 4);
  const last = new Map<string, HeartbeatReply>();
  for (const id of ['m1', 'm2']) last.set(id, await rig.host.heartbeat(REF, joinRequest(id)));
  for (let i = 0; i < 4; i++) {
    rig.clock.advance(200); // past the assignment debounce
    await rig.host.sweep();
    for (const [id, reply] of last) {
      last.set(id, await rig.host.heartbeat(REF, withLifecycle(nextRequest(id, reply), reply)));
    }
  }
  return last;
}

/** A member's next heartbeat carrying the lifecycle it was told, as the SDK sends it. */
function withLifecycle(request: HeartbeatRequest, reply: HeartbeatReply): HeartbeatRequest {
  return { ...request, lifecycleId: reply.lifecycleId };
}

/** Every key of the group gone, as after FLUSHALL or Redis restarted empty. */
async function wipe(faulty: FaultyStore, ref: GroupRef = REF): Promise<void> {
  const stored = await faulty.inner.loadGroup(ref);
  if (stored) await faulty.inner.deleteGroup(ref, stored.fence, stored.revision);
  await faulty.inner.clearFailure(ref);
}

async function lostCount(metrics: Metrics, source: string): Promise<number> {
  const { values } = await metrics.metadataLost.get();
  return values.find((v) => v.labels.source === source)?.value ?? 0;
}

/** Another replica's host on the same store (it remembers nothing of its own). */
function otherReplica(rig: ActorRig): GroupHost {
  return new GroupHost({
    store: rig.faulty.store,
    settings: rig.settings,
    clock: rig.clock,
    metrics: new Metrics(),
    logger: silentLogger(),
    replicaId: 'replica-b',
  });
}

describe('lost metadata: the owner loses its lease with the store', () => {
  it('the lease lost and the key gone: remembered, recorded and registered, answered 503 METADATA_LOST', async () => {
    const rig = leasedRig();
    const last = await liveGroup(rig);
    const m1 = last.get('m1')!;
    await wipe(rig.faulty);
    rig.ownership.lose(REF, 'replica-b');
    await expect
      .poll(async () => (await rig.faulty.inner.readFailure(REF))?.reason)
      .toBe('METADATA_LOST');
    const record = (await rig.faulty.inner.readFailure(REF))!;
    expect(record).toMatchObject({
      lifecycleId: m1.lifecycleId,
      metadataVersion: m1.metadataVersion,
      assignmentEpoch: m1.assignmentEpoch,
    });
    expect(record.memberEpochSeq).toBeGreaterThanOrEqual(m1.memberEpoch);
    expect(await rig.faulty.inner.isRegistered(REF)).toBe(true);
    expect(await rig.faulty.inner.loadGroup(REF)).toBeNull(); // nothing re-created
    expect(await lostCount(rig.metrics, 'replica')).toBe(1);

    // This replica owns the group again: it is failed closed, never unknown.
    rig.ownership.owners.delete(ID);
    const beat = withLifecycle(nextRequest('m1', m1), m1);
    await expect(rig.host.heartbeat(REF, beat)).rejects.toMatchObject({
      code: 'GROUP_FAILED_CLOSED',
      details: { failureReason: 'METADATA_LOST' },
    });
    expect(await rig.host.getGroup(REF)).toMatchObject({
      status: 'FAILED_CLOSED',
      failureReason: 'METADATA_LOST',
      lifecycleId: m1.lifecycleId,
      metadataVersion: m1.metadataVersion,
    });
    expect(await rig.faulty.inner.loadGroup(REF)).toBeNull();

    // Another replica, which never held the group, lists and refuses it the same way.
    const other = otherReplica(rig);
    const { groups } = await other.listGroups({ limit: 10 });
    expect(groups).toEqual([
      expect.objectContaining({
        ...REF,
        status: 'FAILED_CLOSED',
        failureReason: 'METADATA_LOST',
      }),
    ]);
    await expect(other.getRouting(REF, { afterVersion: 0, waitMs: 0 })).rejects.toMatchObject({
      code: 'GROUP_FAILED_CLOSED',
      details: { failureReason: 'METADATA_LOST' },
    });
    await other.close();
  });

  it('the lease lost while the key is still stored (a move): dropped, nothing recorded', async () => {
    const rig = leasedRig();
    const last = await liveGroup(rig);
    rig.ownership.lose(REF, 'replica-b');
    await expect.poll(() => rig.faulty.count('readRevisions')).toBeGreaterThan(0);
    await rig.host.idle();
    expect(await rig.faulty.inner.readFailure(REF)).toBeNull();
    expect(await lostCount(rig.metrics, 'replica')).toBe(0);
    rig.ownership.owners.delete(ID);
    const m1 = last.get('m1')!;
    const reply = await rig.host.heartbeat(REF, withLifecycle(nextRequest('m1', m1), m1));
    expect(reply.outcome).toBe('OK');
  });

  it('the key gone and the group created anew by another replica before the check: failed closed, not moved', async () => {
    const rig = leasedRig();
    const last = await liveGroup(rig);
    const m1 = last.get('m1')!;
    await wipe(rig.faulty);
    // Another replica, which never held the group, takes the flushed lease and creates it
    // before this one notices its lease is gone.
    const other = otherReplica(rig);
    const created = await other.createGroup(REF, 4);
    expect(created.lifecycleId).not.toBe(m1.lifecycleId);
    await other.close();
    rig.ownership.lose(REF, 'replica-b');
    await expect
      .poll(async () => (await rig.faulty.inner.readFailure(REF))?.reason)
      .toBe('METADATA_LOST');
    expect(await rig.faulty.inner.readFailure(REF)).toMatchObject({
      lifecycleId: m1.lifecycleId,
      metadataVersion: m1.metadataVersion,
      assignmentEpoch: m1.assignmentEpoch,
    });
    expect(await lostCount(rig.metrics, 'replica')).toBe(1);

    // Whoever loads the group next (this replica again, or any other) refuses it.
    rig.ownership.owners.delete(ID);
    expect(await rig.host.getGroup(REF)).toMatchObject({
      status: 'FAILED_CLOSED',
      failureReason: 'METADATA_LOST',
    });
    const third = otherReplica(rig);
    await expect(third.getRouting(REF, { afterVersion: 0, waitMs: 0 })).rejects.toMatchObject({
      code: 'GROUP_FAILED_CLOSED',
      details: { failureReason: 'METADATA_LOST' },
    });
    await third.close();
  });

  it('deleted and created anew through another replica before the check: moved, nothing recorded', async () => {
    const rig = leasedRig();
    await liveGroup(rig);
    const other = otherReplica(rig);
    await other.deleteGroup(REF, { force: true });
    const created = await other.createGroup(REF, 4);
    await other.close();
    rig.ownership.lose(REF, 'replica-b');
    await expect.poll(() => rig.faulty.count('readRevisions')).toBeGreaterThan(0);
    await rig.host.idle();
    expect(await rig.faulty.inner.readFailure(REF)).toBeNull();
    expect(await lostCount(rig.metrics, 'replica')).toBe(0);
    rig.ownership.owners.delete(ID);
    expect(await rig.host.getGroup(REF)).toMatchObject({
      status: 'ACTIVE',
      lifecycleId: created.lifecycleId,
    });
  });

  it('a store that does not answer yet is asked again until it does; then the loss is recorded', async () => {
    const rig = leasedRig();
    await liveGroup(rig);
    await wipe(rig.faulty);
    rig.faulty.fail('readRevisions');
    rig.ownership.lose(REF, 'replica-b');
    await expect.poll(() => rig.faulty.count('readRevisions')).toBe(1);
    expect(await rig.faulty.inner.readFailure(REF)).toBeNull();
    rig.faulty.heal('readRevisions');
    rig.clock.advance(1_000);
    await expect
      .poll(async () => (await rig.faulty.inner.readFailure(REF))?.reason)
      .toBe('METADATA_LOST');
  });

  it('a group remembered as lost is not created anew', async () => {
    const rig = leasedRig();
    await liveGroup(rig);
    await wipe(rig.faulty);
    rig.faulty.fail('recordLostGroup', { times: 1 }); // its record not written yet
    rig.ownership.lose(REF, 'replica-b');
    await expect.poll(() => rig.faulty.count('recordLostGroup')).toBe(1);
    rig.ownership.owners.delete(ID);
    await expect(rig.host.createGroup(REF, 4)).rejects.toMatchObject({
      code: 'GROUP_FAILED_CLOSED_ADMIN',
      details: { failureReason: 'METADATA_LOST' },
    });
    expect(await rig.faulty.inner.loadGroup(REF)).toBeNull();
  });

  it('RECREATE brings the group back as a new lifecycle, versions above what was remembered', async () => {
    const rig = leasedRig();
    const last = await liveGroup(rig);
    const m1 = last.get('m1')!;
    await wipe(rig.faulty);
    rig.ownership.lose(REF, 'replica-b');
    await expect.poll(async () => rig.faulty.inner.readFailure(REF)).not.toBeNull();
    rig.ownership.owners.delete(ID);
    await expect(rig.host.recover(REF, { action: 'RESUME', ...CHANGE })).rejects.toMatchObject({
      code: 'RESUME_REFUSED',
    });
    const view = await rig.host.recover(REF, { action: 'RECREATE', shardCount: 4, ...CHANGE });
    expect(view.status).toBe('ACTIVE');
    expect(view.lifecycleId).not.toBe(m1.lifecycleId);
    expect(view.metadataVersion).toBeGreaterThan(m1.metadataVersion);
    expect(await rig.faulty.inner.readFailure(REF)).toBeNull();
    const fenced = await rig.host.heartbeat(REF, withLifecycle(nextRequest('m1', m1), m1));
    expect(fenced.outcome).toBe('FENCED_MEMBER_EPOCH');
  });
});

describe('lost metadata: RESUME of a backup', () => {
  it('taken before the members moved on: the group comes back active and serves again', async () => {
    const rig = actorRig({ storeKind: 'redis' });
    await rig.host.createGroup(REF, 2);
    let a = await rig.host.heartbeat(REF, joinRequest('a'));
    const backup = await rig.faulty.inner.exportGroup(REF); // a owns both shards
    const b = await rig.host.heartbeat(REF, joinRequest('b'));
    rig.clock.advance(200); // past the assignment debounce
    await rig.host.sweep();
    a = await rig.host.heartbeat(REF, withLifecycle(nextRequest('a', a), a));
    await rig.host.heartbeat(REF, withLifecycle(nextRequest('a', a), a)); // done revoking
    await rig.host.heartbeat(REF, withLifecycle(nextRequest('b', b), b)); // b granted one
    await wipe(rig.faulty);
    await rig.host.verify();
    expect((await rig.host.getGroup(REF)).status).toBe('FAILED_CLOSED');
    await rig.faulty.inner.importGroup(REF, backup!);
    const view = await rig.host.recover(REF, { action: 'RESUME', ...CHANGE });
    // The backup names a as the owner of b's shard, and a at its first epoch: it is taken as
    // it is, not refused as a step of the failed group.
    expect(view.status).toBe('ACTIVE');
    expect((await rig.host.getStatechart(REF)).value).toMatchObject({ lifecycle: 'active' });
    expect(await rig.faulty.inner.readFailure(REF)).toBeNull();
    expect((await rig.host.heartbeat(REF, joinRequest('b'))).memberEpoch).toBeGreaterThan(0);
  });
});

describe('lost metadata: what clients report', () => {
  it('a heartbeat naming a lifecycle of a group the store does not hold: 503 METADATA_LOST, recorded', async () => {
    const rig = actorRig({ storeKind: 'redis' });
    const beat: HeartbeatRequest = {
      ...joinRequest('m1'),
      memberEpoch: 7,
      assignmentEpoch: 3,
      metadataVersion: 5,
      lifecycleId: 'life-remembered',
    };
    await expect(rig.host.heartbeat(REF, beat)).rejects.toMatchObject({
      code: 'GROUP_FAILED_CLOSED',
      details: { failureReason: 'METADATA_LOST' },
    });
    expect(await rig.faulty.inner.readFailure(REF)).toMatchObject({
      reason: 'METADATA_LOST',
      lifecycleId: 'life-remembered',
      highestVersionSeen: 5,
      assignmentEpoch: 3,
      memberEpochSeq: 7,
    });
    expect(await rig.faulty.inner.loadGroup(REF)).toBeNull();
    expect(await lostCount(rig.metrics, 'heartbeat')).toBe(1);
    expect(await rig.host.getGroup(REF)).toMatchObject({
      status: 'FAILED_CLOSED',
      failureReason: 'METADATA_LOST',
      highestVersionSeen: 5,
    });
  });

  it('a routing read with a known version, or an observed version: 503 METADATA_LOST', async () => {
    const rig = actorRig({ storeKind: 'redis' });
    const other: GroupRef = { ...REF, consumerGroup: 'observed' };
    await expect(rig.host.getRouting(REF, { afterVersion: 4, waitMs: 0 })).rejects.toMatchObject({
      code: 'GROUP_FAILED_CLOSED',
      details: { failureReason: 'METADATA_LOST' },
    });
    await rig.host.observeVersion(other, 9, 'routing');
    await expect(rig.host.getRouting(other)).rejects.toMatchObject({
      code: 'GROUP_FAILED_CLOSED',
    });
    expect(await rig.faulty.inner.readFailure(other)).toMatchObject({ highestVersionSeen: 9 });
    expect(await lostCount(rig.metrics, 'routing')).toBe(2);
  });

  it('a caller that knew nothing of the group: 404, nothing recorded', async () => {
    const rig = actorRig({ storeKind: 'redis' });
    await expect(rig.host.heartbeat(REF, joinRequest('m1'))).rejects.toMatchObject({
      code: 'GROUP_NOT_FOUND',
    });
    await expect(rig.host.getRouting(REF, { afterVersion: 0, waitMs: 0 })).rejects.toMatchObject({
      code: 'GROUP_NOT_FOUND',
    });
    await expect(rig.host.getGroup(REF)).rejects.toMatchObject({ code: 'GROUP_NOT_FOUND' });
    expect(await rig.faulty.inner.readFailure(REF)).toBeNull();
    expect(await rig.faulty.inner.isRegistered(REF)).toBe(false);
  });

  it('embedded mode (its store is its own memory, empty after a restart by design): 404', async () => {
    const rig = actorRig({ storeKind: 'memory' });
    const beat = { ...joinRequest('m1'), memberEpoch: 3, metadataVersion: 2, lifecycleId: 'l' };
    await expect(rig.host.heartbeat(REF, beat)).rejects.toMatchObject({
      code: 'GROUP_NOT_FOUND',
    });
    expect(await rig.faulty.inner.readFailure(REF)).toBeNull();
  });

  it('members of a deleted group are told 404, on this replica and on any other', async () => {
    const rig = actorRig({ storeKind: 'redis' });
    const last = await liveGroup(rig);
    await rig.host.deleteGroup(REF, { force: true });
    const m1 = last.get('m1')!;
    const beat = withLifecycle(nextRequest('m1', m1), m1);
    await expect(rig.host.heartbeat(REF, beat)).rejects.toMatchObject({
      code: 'GROUP_NOT_FOUND',
    });
    const other = otherReplica(rig);
    await expect(other.heartbeat(REF, beat)).rejects.toMatchObject({ code: 'GROUP_NOT_FOUND' });
    const { lifecycleId: _known, ...versionsOnly } = beat;
    await expect(other.heartbeat(REF, versionsOnly)).rejects.toMatchObject({
      code: 'GROUP_NOT_FOUND',
    });
    await other.close();
    expect(await rig.faulty.inner.readFailure(REF)).toBeNull();
    // The name may be used again: a new lifecycle, whose loss is a loss again.
    await rig.host.createGroup(REF, 2);
    expect((await rig.host.getGroup(REF)).status).toBe('ACTIVE');
  });
});
