/**
 * Heartbeats that queue up on a busy group run as one batch: in arrival order,
 * one write for what they changed, each answered after it; a refused write answers every
 * heartbeat that depended on it with the error and changes nothing.
 */
import { describe, expect, it } from 'vitest';
import type { HeartbeatReply } from '../../../src/machines/protocol.js';
import { actorRig, joinRequest, nextRequest, REF, steadyReply } from './actor-harness.js';

async function rigWithGroup() {
  const rig = actorRig();
  await rig.host.createGroup(REF, 8);
  return rig;
}

const members = async (rig: Awaited<ReturnType<typeof rigWithGroup>>) =>
  (await rig.host.getMembers(REF)).members.map((m) => m.memberId);

describe('heartbeats that queue up on a busy group', () => {
  it('a burst of joins behind a write in flight is written once, each join answered', async () => {
    const rig = await rigWithGroup();
    rig.faulty.hang('commitGroup', { times: 1 });
    const first = rig.host.heartbeat(REF, joinRequest('m-0'));
    await expect.poll(() => rig.faulty.pending).toBe(1);
    const before = rig.faulty.count('commitGroup');
    const burst = ['m-1', 'm-2', 'm-3', 'm-4', 'm-5'].map((id) =>
      rig.host.heartbeat(REF, joinRequest(id)),
    );
    rig.faulty.release();
    const replies = await Promise.all([first, ...burst]);
    // One write for the five joins that waited together.
    expect(rig.faulty.count('commitGroup')).toBe(before + 1);
    expect(replies.map((r) => r.memberId)).toEqual(['m-0', 'm-1', 'm-2', 'm-3', 'm-4', 'm-5']);
    const epochs = replies.map((r) => r.memberEpoch);
    expect(new Set(epochs).size).toBe(6);
    expect([...epochs].sort((a, b) => a - b)).toEqual(epochs);
    // What was answered is what is stored.
    const stored = await rig.faulty.inner.loadGroup(REF);
    expect(stored?.state.members.keys().sort()).toEqual(['m-0', 'm-1', 'm-2', 'm-3', 'm-4', 'm-5']);
    for (const reply of replies) {
      expect(stored?.state.members.get(reply.memberId)?.memberEpoch).toBe(reply.memberEpoch);
    }
    expect(await members(rig)).toEqual(['m-0', 'm-1', 'm-2', 'm-3', 'm-4', 'm-5']);
  });

  it('a refused batch write fails what depended on it and changes nothing; steady ones before it are answered', async () => {
    const rig = await rigWithGroup();
    const joined = await rig.host.heartbeat(REF, joinRequest('m-a'));
    const steadyA = await rig.host.heartbeat(REF, nextRequest('m-a', joined));
    expect(steadyA.outcome).toBe('OK');
    rig.faulty.hang('commitGroup', { times: 1 });
    const pending = rig.host.heartbeat(REF, joinRequest('m-x'));
    await expect.poll(() => rig.faulty.pending).toBe(1);
    rig.faulty.fail('commitGroup', { times: 1 });
    // Queued together: a steady heartbeat, two joins, and m-a again: a member's second
    // heartbeat is decided after the first one's write, on the group as it then is.
    const leading = rig.host.heartbeat(REF, nextRequest('m-a', steadyA));
    const joinB = rig.host.heartbeat(REF, joinRequest('m-b'));
    const joinC = rig.host.heartbeat(REF, joinRequest('m-c'));
    const again = rig.host.heartbeat(REF, nextRequest('m-a', steadyA));
    rig.faulty.release();
    expect((await pending).memberId).toBe('m-x');
    const led: HeartbeatReply = await leading;
    expect(led.outcome).toBe('OK');
    await expect(joinB).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    await expect(joinC).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    expect((await again).outcome).toBe('OK');
    expect((await rig.faulty.inner.loadGroup(REF))?.state.members.keys().sort()).toEqual([
      'm-a',
      'm-x',
    ]);
    expect(await members(rig)).toEqual(['m-a', 'm-x']);
    // The store is back: the join that failed is accepted from the state as persisted.
    const retried = await rig.host.heartbeat(REF, joinRequest('m-b'));
    expect(retried.memberEpoch).toBeGreaterThan(0);
    expect(await members(rig)).toEqual(['m-a', 'm-b', 'm-x']);
  });

  it('heartbeats queued behind an admin command are handled after it, not batched before it', async () => {
    const rig = await rigWithGroup();
    await rig.host.heartbeat(REF, joinRequest('m-a'));
    rig.faulty.hang('commitGroup', { times: 1 });
    const pending = rig.host.heartbeat(REF, joinRequest('m-x'));
    await expect.poll(() => rig.faulty.pending).toBe(1);
    const before = rig.host.heartbeat(REF, joinRequest('m-b'));
    const scale = rig.host.putGroup(REF, 16, { requestedBy: 'ops', reason: 'test' });
    const after = rig.host.heartbeat(REF, joinRequest('m-c'));
    rig.faulty.release();
    await pending;
    expect((await before).shardCount).toBe(8);
    expect((await scale).outcome).toBe('MIGRATION_STARTED');
    expect((await after).shardCount).toBe(16);
  });

  it('a routing long poll decides on the published version, not on a write still in flight', async () => {
    const rig = await rigWithGroup();
    await rig.host.heartbeat(REF, joinRequest('m-a'));
    const published = (await rig.host.getRouting(REF)).metadataVersion;
    rig.faulty.hang('commitGroup', { times: 1 });
    const scale = rig.host.putGroup(REF, 16, { requestedBy: 'ops', reason: 'test' });
    await expect.poll(() => rig.faulty.pending).toBe(1);
    // The actor holds the scale's new version already; what readers are served does not.
    let answered = false;
    const poll = rig.host.getRouting(REF, { afterVersion: published, waitMs: 60_000 });
    void poll.then(() => (answered = true));
    // A poll that would not wait answers within a few turns of the loop.
    for (let turn = 0; turn < 3; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(answered).toBe(false);
    rig.faulty.release();
    expect((await scale).outcome).toBe('MIGRATION_STARTED');
    const routing = await poll;
    expect(routing.metadataVersion).toBeGreaterThan(published);
    expect(routing.shardCount).toBe(16);
  });

  it('an events subscriber that joins while a write is in flight is told the committed change', async () => {
    const rig = await rigWithGroup();
    rig.faulty.hang('commitGroup', { times: 1 });
    // The first member: the group goes from stable to rebalancing once this write commits.
    const pending = rig.host.heartbeat(REF, joinRequest('m-a'));
    await expect.poll(() => rig.faulty.pending).toBe(1);
    const seen: Array<{ stateChanged: boolean }> = [];
    const unsubscribe = await rig.host.subscribe(REF, (transition) => seen.push(transition));
    rig.faulty.release();
    await pending;
    unsubscribe();
    expect(seen.length).toBeGreaterThan(0);
    expect(seen[0]?.stateChanged).toBe(true);
  });

  it('a steady heartbeat is answered at once on an idle group, and waits its turn on a busy one', async () => {
    const rig = await rigWithGroup();
    const joined = await rig.host.heartbeat(REF, joinRequest('m-a'));
    const steady = await rig.host.heartbeat(REF, nextRequest('m-a', joined));
    await new Promise((resolve) => setImmediate(resolve)); // the mailbox has wound down
    expect(steadyReply(rig.host, REF, nextRequest('m-a', steady))?.outcome).toBe('OK');
    // Busy: a join's write hangs. The steady heartbeat is not answered at once, and waits
    // behind it (answering it from the state the join left would show state not yet written).
    rig.faulty.hang('commitGroup', { times: 1 });
    const join = rig.host.heartbeat(REF, joinRequest('m-b'));
    await expect.poll(() => rig.faulty.pending).toBe(1);
    expect(steadyReply(rig.host, REF, nextRequest('m-a', steady))).toBeNull();
    let answered = false;
    const waiting = rig.host.heartbeat(REF, nextRequest('m-a', steady)).then((reply) => {
      answered = true;
      return reply;
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(answered).toBe(false);
    rig.faulty.release();
    await join;
    expect((await waiting).outcome).toBe('OK');
  });
});
