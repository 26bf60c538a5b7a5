import { describe, expect, it } from 'vitest';
import { unwrap } from '../../../src/actors/commands.js';
import { groupOf, type GroupEntry } from '../../../src/actors/group-entry.js';
import type { HeartbeatReply } from '../../../src/machines/protocol.js';
import { joinRequest, partsRig, REF } from './actor-harness.js';

async function rigWithGroup() {
  const rig = partsRig();
  const entry = await rig.owned.create(REF, 4);
  return { ...rig, entry };
}

const join = (
  rig: Awaited<ReturnType<typeof rigWithGroup>>,
  memberId: string,
  entry?: GroupEntry,
) =>
  rig.committer.dispatch(entry ?? rig.entry, {
    type: 'HEARTBEAT',
    now: rig.clock.now(),
    request: joinRequest(memberId),
  });

const publishedMembers = (entry: GroupEntry) => entry.published?.context.group.members.size ?? 0;

describe('committer: one fenced write per change, before anyone is answered', () => {
  it('a join is written once and the caller gets the reply after the write', async () => {
    const rig = await rigWithGroup();
    const before = rig.faulty.count('commitGroup');
    const context = await join(rig, 'm1');
    expect((unwrap(context) as HeartbeatReply).memberEpoch).toBeGreaterThan(0);
    expect(rig.faulty.count('commitGroup')).toBe(before + 1);
    const stored = await rig.faulty.inner.loadGroup(REF);
    expect(stored?.revision).toBe(rig.entry.revision);
    expect(stored?.state.members.keys()).toEqual(['m1']);
  });

  it('while the write hangs, readers still see the last committed state', async () => {
    const rig = await rigWithGroup();
    rig.faulty.hang('commitGroup', { times: 1 });
    const pending = join(rig, 'm1');
    await expect.poll(() => rig.faulty.pending).toBe(1);
    expect(publishedMembers(rig.entry)).toBe(0);
    rig.faulty.release();
    await pending;
    expect(publishedMembers(rig.entry)).toBe(1);
  });

  it('a write lost to a store outage forgets the event: STORE_UNAVAILABLE, nothing changed', async () => {
    const rig = await rigWithGroup();
    const revision = rig.entry.revision;
    rig.faulty.fail('commitGroup', { times: 1 });
    await expect(join(rig, 'm1')).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    expect(groupOf(rig.entry).members.keys()).toEqual([]);
    expect(groupOf(rig.entry).status).not.toBe('FAILED_CLOSED');
    expect(rig.entry.revision).toBe(revision);
    expect((await rig.faulty.inner.loadGroup(REF))?.revision).toBe(revision);
    // The store is back: the same join is accepted, from the state as persisted.
    await join(rig, 'm1');
    expect(groupOf(rig.entry).members.keys()).toEqual(['m1']);
  });
});

describe('fail-closed: metadata lost under the committer', () => {
  it('fails the group closed, tells the member 503 GROUP_FAILED_CLOSED and records the failure', async () => {
    const rig = await rigWithGroup();
    await rig.faulty.inner.deleteGroup(REF, rig.entry.fence, rig.entry.revision);
    await expect(join(rig, 'm1')).rejects.toMatchObject({ code: 'GROUP_FAILED_CLOSED' });
    expect(groupOf(rig.entry).status).toBe('FAILED_CLOSED');
    expect(groupOf(rig.entry).failureReason).toBe('METADATA_LOST');
    expect((await rig.faulty.inner.readFailure(REF))?.reason).toBe('METADATA_LOST');
    // Never recreated: the metadata key stays gone.
    expect(await rig.faulty.inner.loadGroup(REF)).toBeNull();
  });

  it('a failure record the store refused stays to do, the group failed closed all the same', async () => {
    const rig = await rigWithGroup();
    await rig.faulty.inner.deleteGroup(REF, rig.entry.fence, rig.entry.revision);
    rig.faulty.fail('recordFailure');
    await expect(join(rig, 'm1')).rejects.toMatchObject({ code: 'GROUP_FAILED_CLOSED' });
    expect(rig.entry.unrecorded).toMatchObject({ reason: 'METADATA_LOST' });
    expect(await rig.faulty.inner.readFailure(REF)).toBeNull();
  });

  it('a write refused because another owner wrote drops the entry instead of failing closed', async () => {
    const rig = await rigWithGroup();
    await rig.faulty.inner.claimGroup(REF, null);
    await expect(join(rig, 'm1')).rejects.toMatchObject({ code: 'FENCED_WRITE' });
    expect(rig.entry.phase).toBe('dropped');
    expect(rig.table.get(REF)).toBeUndefined();
    expect(await rig.faulty.inner.readFailure(REF)).toBeNull();
  });
});

describe('committer: a batch lets other work run between its steps and before its write', () => {
  it('after a step that used its slice up, the event loop turns before the write is sent', async () => {
    // A slice of 0 ms is used up by any step: the write then starts a turn of its own.
    const rig = partsRig({ sliceMs: 0 });
    const entry = await rig.owned.create(REF, 4);
    const before = rig.faulty.count('commitGroup');
    let seen: { stepRan: boolean; writes: number; published: number } | null = null;
    // Queued before the join: runs at the first turn the batch gives up.
    setImmediate(() => {
      seen = {
        stepRan: entry.actor.getSnapshot().context.group.members.has('m1'),
        writes: rig.faulty.count('commitGroup') - before,
        published: publishedMembers(entry),
      };
    });
    await rig.committer.dispatch(entry, {
      type: 'HEARTBEAT',
      now: rig.clock.now(),
      request: joinRequest('m1'),
    });
    // The step had run, its write was not sent yet, and readers saw the published state.
    expect(seen).toEqual({ stepRan: true, writes: 0, published: 0 });
    expect(rig.faulty.count('commitGroup')).toBe(before + 1);
    expect(publishedMembers(entry)).toBe(1);
  });
});
