import { describe, expect, it, vi } from 'vitest';
import { groupOf } from '../../../src/actors/group-entry.js';
import { partsRig, REF } from './actor-harness.js';

async function rigWithGroup() {
  const rig = partsRig({ storeKind: 'redis' });
  const entry = await rig.owned.create(REF, 4);
  return { ...rig, entry };
}

describe('verify loop: lost or rolled-back metadata is noticed without any write', () => {
  it('a metadata key deleted behind the coordinator fails the group closed (METADATA_LOST)', async () => {
    const rig = await rigWithGroup();
    await rig.faulty.inner.deleteGroup(REF, rig.entry.fence, rig.entry.revision);
    await rig.verifier.verify();
    expect(groupOf(rig.entry).failureReason).toBe('METADATA_LOST');
    expect((await rig.faulty.inner.readFailure(REF))?.reason).toBe('METADATA_LOST');
  });

  it('metadata restored from an older revision fails the group closed (STORE_REVISION_REGRESSION)', async () => {
    const rig = await rigWithGroup();
    const old = await rig.faulty.inner.exportGroup(REF);
    // The revision moves on (an empty write), then an older backup comes back.
    await rig.faulty.inner.commitGroup(REF, rig.entry.fence, rig.entry.revision, {
      set: {},
      del: [],
    });
    rig.entry.revision = (await rig.faulty.inner.loadGroup(REF))!.revision;
    await rig.faulty.inner.importGroup(REF, old!); // the backup: an older revision
    await rig.verifier.verify();
    expect(groupOf(rig.entry).failureReason).toBe('STORE_REVISION_REGRESSION');
  });

  it('a store outage is not taken for lost metadata: the group keeps serving', async () => {
    const rig = await rigWithGroup();
    rig.faulty.fail('readRevisions');
    await expect(rig.verifier.verify()).rejects.toMatchObject({ message: /injected/ });
    expect(groupOf(rig.entry).status).not.toBe('FAILED_CLOSED');
  });

  it('a failure record the store refused is written by a later round once the store is back', async () => {
    const rig = await rigWithGroup();
    await rig.faulty.inner.deleteGroup(REF, rig.entry.fence, rig.entry.revision);
    rig.faulty.fail('recordFailure');
    await rig.verifier.verify();
    expect(groupOf(rig.entry).status).toBe('FAILED_CLOSED');
    expect(await rig.faulty.inner.readFailure(REF)).toBeNull();
    rig.faulty.heal('recordFailure');
    await rig.verifier.verify();
    expect((await rig.faulty.inner.readFailure(REF))?.reason).toBe('METADATA_LOST');
    expect(rig.entry.unrecorded).toBeNull();
  });

  it('a group we deleted (reply lost) is dropped, not failed closed', async () => {
    const rig = await rigWithGroup();
    rig.entry.deleting = true;
    await rig.faulty.inner.deleteGroup(REF, rig.entry.fence, rig.entry.revision);
    await rig.verifier.verify();
    expect(rig.entry.phase).toBe('dropped');
    expect(await rig.faulty.inner.readFailure(REF)).toBeNull();
  });

  it('a group whose reading agrees with what it holds is not queued in its mailbox', async () => {
    const rig = partsRig({ storeKind: 'redis' });
    const entries = [];
    for (const consumerGroup of ['a', 'b', 'c']) {
      entries.push(await rig.owned.create({ ...REF, consumerGroup }, 4));
    }
    const queued = entries.map((entry) => vi.spyOn(entry.mailbox, 'run'));
    await rig.verifier.verify();
    for (const run of queued) expect(run).not.toHaveBeenCalled();
    // One whose metadata is gone is still checked in its mailbox (and failed closed).
    const [gone] = entries as [(typeof entries)[number]];
    await rig.faulty.inner.deleteGroup(gone.ref, gone.fence, gone.revision);
    await rig.verifier.verify();
    expect(queued[0]).toHaveBeenCalledTimes(1);
    expect(queued[1]).not.toHaveBeenCalled();
    expect(groupOf(gone).failureReason).toBe('METADATA_LOST');
  });

  it('started, it runs on the clock every verify interval', async () => {
    const rig = await rigWithGroup();
    const stop = rig.verifier.start();
    await rig.faulty.inner.deleteGroup(REF, rig.entry.fence, rig.entry.revision);
    rig.clock.advance(60_000);
    await vi.waitFor(() => expect(groupOf(rig.entry).status).toBe('FAILED_CLOSED'));
    stop();
  });
});
