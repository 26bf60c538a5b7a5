import { describe, expect, it } from 'vitest';
import { unwrap } from '../../../src/actors/commands.js';
import { TurnBudget } from '../../../src/actors/turn-budget.js';
import { EntryDroppedError } from '../../../src/errors.js';
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
  it("after a step that used the turn's budget up, the event loop turns before the write is sent", async () => {
    // A budget of 0 ms is used up by any step: the write then starts a turn of its own.
    const rig = partsRig({ budgetMs: 0 });
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

describe('committer: a batch of several steps', () => {
  it('lets the loop turn between its steps and before its write, and writes once', async () => {
    const rig = partsRig({ budgetMs: 0 });
    const entry = await rig.owned.create(REF, 4);
    const before = rig.faulty.count('commitGroup');
    // At each turn the batch gives up: how many members its steps have added, written or not.
    const seen: Array<[members: number, writes: number]> = [];
    const watch = () => {
      seen.push([
        entry.actor.getSnapshot().context.group.members.size,
        rig.faulty.count('commitGroup') - before,
      ]);
      if (seen.length < 3) setImmediate(watch);
    };
    setImmediate(watch);
    const answers = await rig.committer.heartbeats(entry, [
      joinRequest('a'),
      joinRequest('b'),
      joinRequest('c'),
    ]);
    expect(answers.every((a) => a.ok)).toBe(true);
    expect(seen).toEqual([
      [1, 0],
      [2, 0],
      [3, 0],
    ]);
    expect(rig.faulty.count('commitGroup')).toBe(before + 1);
    expect(publishedMembers(entry)).toBe(3);
  });
});

describe('committer: a batch rests between its steps while steady heartbeats are answered', () => {
  /** A budget of 0 ms whose clock moves on at every read, and whose rests wait for `timers`. */
  function restingRig() {
    let now = 0;
    const timers: Array<() => void> = [];
    const turnBudget = new TurnBudget(0, () => (now += 0.1), {
      wait: (fn) => timers.push(fn),
    });
    return { rig: partsRig({ turnBudget }), turnBudget, timers };
  }

  const turn = () => new Promise((resolve) => setImmediate(resolve));

  it('waits out the rest its own steps earned, then goes on: all joined, written once', async () => {
    const { rig, turnBudget, timers } = restingRig();
    const entry = await rig.owned.create(REF, 4);
    const before = rig.faulty.count('commitGroup');
    turnBudget.servedAtOnce();
    let done = false;
    const batch = rig.committer
      .heartbeats(entry, [joinRequest('a'), joinRequest('b'), joinRequest('c')])
      .finally(() => (done = true));
    for (let i = 0; i < 5; i++) await turn();
    // One step ran, then the batch rests on a timer: turns of the loop pass without it.
    expect(timers).toHaveLength(1);
    expect(done).toBe(false);
    expect(entry.actor.getSnapshot().context.group.members.size).toBe(1);
    for (let i = 0; i < 50 && !done; i++) {
      timers.shift()?.();
      await turn();
    }
    const answers = await batch;
    expect(answers.every((a) => a.ok)).toBe(true);
    expect(entry.actor.getSnapshot().context.group.members.size).toBe(3);
    expect(rig.faulty.count('commitGroup')).toBe(before + 1);
  });

  it('does not rest when no steady heartbeat was answered', async () => {
    const { rig, timers } = restingRig();
    const entry = await rig.owned.create(REF, 4);
    const answers = await rig.committer.heartbeats(entry, [joinRequest('a'), joinRequest('b')]);
    expect(answers.every((a) => a.ok)).toBe(true);
    expect(timers).toEqual([]);
  });
});

describe('committer: a group dropped while its batch yields', () => {
  const joinEvent = (rig: ReturnType<typeof partsRig>, memberId: string) => ({
    type: 'HEARTBEAT' as const,
    now: rig.clock.now(),
    request: joinRequest(memberId),
  });
  const gauge = async (rig: ReturnType<typeof partsRig>) =>
    (await rig.metrics.members.get()).values[0]?.value ?? 0;
  /** A group whose entry is dropped (its lease lost) at the first turn its batch gives up. */
  const droppedAtFirstTurn = async () => {
    const rig = partsRig({ budgetMs: 0 });
    rig.sweeper.start();
    const entry = await rig.owned.create(REF, 4);
    const before = rig.faulty.count('commitGroup');
    setImmediate(() => rig.owned.drop(REF));
    return { rig, entry, before };
  };

  it('writes and answers nothing: the caller is told the group left (its work goes back to be looked up)', async () => {
    const { rig, entry, before } = await droppedAtFirstTurn();
    await expect(rig.committer.dispatch(entry, joinEvent(rig, 'm1'))).rejects.toBeInstanceOf(
      EntryDroppedError,
    );
    expect(entry.phase).toBe('dropped');
    expect(rig.faulty.count('commitGroup')).toBe(before);
    expect((await rig.faulty.inner.loadGroup(REF))?.state.members.size).toBe(0);
    expect(await gauge(rig)).toBe(0);
  });

  it('through the owned groups, the work runs again on the group as it is now: written once', async () => {
    const { rig, entry, before } = await droppedAtFirstTurn();
    const context = await rig.owned.withEntry(REF, (current) =>
      rig.committer.dispatch(current, joinEvent(rig, 'm1')),
    );
    expect((unwrap(context) as HeartbeatReply).memberEpoch).toBeGreaterThan(0);
    // The first run (on the dropped entry) wrote nothing; the second, on the reloaded one, once.
    expect(rig.faulty.count('commitGroup')).toBe(before + 1);
    const reloaded = rig.table.get(REF);
    expect(reloaded).toBeDefined();
    expect(reloaded).not.toBe(entry);
    expect(publishedMembers(reloaded!)).toBe(1);
    expect(await gauge(rig)).toBe(1);
  });

  it('dropped while its write is in flight: the committed answer stands, the entry publishes nothing more', async () => {
    const rig = partsRig();
    rig.sweeper.start();
    const entry = await rig.owned.create(REF, 4);
    rig.faulty.hang('commitGroup', { times: 1 });
    const pending = rig.committer.dispatch(entry, joinEvent(rig, 'm1'));
    await expect.poll(() => rig.faulty.pending).toBe(1);
    rig.owned.drop(REF);
    rig.faulty.release();
    expect((unwrap(await pending) as HeartbeatReply).memberEpoch).toBeGreaterThan(0);
    expect((await rig.faulty.inner.loadGroup(REF))?.state.members.size).toBe(1);
    // The gauges count owned groups only; the dropped entry's published state stays as it was.
    expect(await gauge(rig)).toBe(0);
    expect(publishedMembers(entry)).toBe(0);
  });
});
