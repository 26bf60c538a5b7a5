import { describe, expect, it, vi } from 'vitest';
import { groupOf } from '../../../src/actors/group-entry.js';
import { joinRequest, partsRig, REF } from './actor-harness.js';

const SESSION_TIMEOUT = 10_000; // testSettings()

async function rigWithMember() {
  const rig = partsRig();
  const entry = await rig.owned.create(REF, 4);
  await rig.committer.dispatch(entry, {
    type: 'HEARTBEAT',
    now: rig.clock.now(),
    request: { ...joinRequest('m1'), sessionTimeoutMs: SESSION_TIMEOUT },
  });
  return { ...rig, entry };
}

const members = (rig: Awaited<ReturnType<typeof rigWithMember>>) =>
  Object.keys(groupOf(rig.entry).members);

describe('deadline sweep: a silent member expires at its session deadline', () => {
  it('does nothing before any deadline is due', async () => {
    const rig = await rigWithMember();
    const writes = rig.faulty.count('commitGroup');
    rig.clock.advance(SESSION_TIMEOUT - 1);
    await rig.sweeper.sweep();
    expect(members(rig)).toEqual(['m1']);
    expect(rig.faulty.count('commitGroup')).toBe(writes);
  });

  it('expires the member once its session deadline has passed, with one write', async () => {
    const rig = await rigWithMember();
    const writes = rig.faulty.count('commitGroup');
    rig.clock.advance(SESSION_TIMEOUT + 1);
    await rig.sweeper.sweep();
    expect(members(rig)).toEqual([]);
    expect(rig.faulty.count('commitGroup')).toBe(writes + 1);
    expect(Object.keys((await rig.faulty.inner.loadGroup(REF))?.state.members ?? {})).toEqual([]);
  });

  it('a tick whose write fails is forgotten and the next sweep expires the member', async () => {
    const rig = await rigWithMember();
    rig.clock.advance(SESSION_TIMEOUT + 1);
    rig.faulty.fail('commitGroup', { times: 1 });
    await rig.sweeper.sweep(); // resolves: one group's failure does not stop the sweep
    expect(members(rig)).toEqual(['m1']);
    await rig.sweeper.sweep();
    expect(members(rig)).toEqual([]);
  });

  it('started, it runs on the clock every sweep interval', async () => {
    const rig = await rigWithMember();
    const stop = rig.sweeper.start();
    rig.clock.advance(SESSION_TIMEOUT + 1_000);
    await vi.waitFor(() => expect(members(rig)).toEqual([]));
    stop();
  });
});
