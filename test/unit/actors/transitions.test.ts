import { describe, expect, it } from 'vitest';
import { TRANSITIONS_KEPT } from '../../../src/actors/publication.js';
import type { GroupTransition } from '../../../src/actors/types.js';
import { actorRig, joinRequest, REF } from './actor-harness.js';

const SESSION_TIMEOUT = 10_000; // testSettings()
const CHANGE = { requestedBy: 'ops-bob', reason: 'unit test' };

/** Oldest first, easier to read in order. */
async function kept(rig: ReturnType<typeof actorRig>): Promise<GroupTransition[]> {
  const view = await rig.host.getTransitions(REF);
  expect(view.owner).toBe('replica-a');
  expect(view.capacity).toBe(TRANSITIONS_KEPT);
  return [...view.transitions].reverse();
}

describe("a group's recent transitions, kept by its owner", () => {
  it('keeps each transition with its command, the regions it moved and its cause', async () => {
    const rig = actorRig();
    await rig.host.createGroup(REF, { shardCount: 2 }, { requestId: 'req-1', principal: 'alice' });
    await rig.host.heartbeat(REF, { ...joinRequest('m1'), sessionTimeoutMs: SESSION_TIMEOUT });
    await rig.host.command(
      REF,
      { type: 'SCALE', shardCount: 4, ...CHANGE },
      { requestId: 'req-2', principal: 'alice' },
    );
    await rig.host.command(REF, { type: 'FREEZE' });
    rig.clock.advance(SESSION_TIMEOUT + 1);
    await rig.host.sweep();

    const list = await kept(rig);
    const [created, joined] = list;
    expect(created).toMatchObject({
      event: 'CREATE',
      from: null,
      cause: { kind: 'admin', requestId: 'req-1', principal: 'alice' },
    });
    expect(created?.changes.map((c) => c.region).sort()).toEqual([
      'consumption',
      'lifecycle',
      'membership',
      'migration',
    ]);
    expect(joined).toMatchObject({
      event: 'HEARTBEAT',
      cause: { kind: 'member', memberId: 'm1' },
      raised: expect.arrayContaining(['MEMBER_JOINED']) as unknown,
    });
    expect(joined?.effects).toContainEqual({ type: 'MEMBER_JOINED', memberId: 'm1' });
    expect(joined?.changes).toContainEqual({
      region: 'membership',
      from: 'empty',
      to: expect.stringMatching(/^(stable|rebalancing\.\w+)$/) as unknown,
    });

    const scale = list.find((t) => t.event === 'SCALE');
    expect(scale).toMatchObject({
      cause: { kind: 'admin', requestId: 'req-2', principal: 'alice', requestedBy: 'ops-bob' },
      changes: expect.arrayContaining([
        { region: 'migration', from: 'idle', to: 'inProgress' },
      ]) as unknown,
    });
    // A command without a request behind it (e.g. called in-process) still names its command.
    const freeze = list.find((t) => t.event === 'FREEZE');
    expect(freeze).toMatchObject({
      cause: { kind: 'admin', requestId: null, principal: null },
      changes: [{ region: 'lifecycle', from: 'active', to: 'frozen' }],
    });
    // The session ran out: the deadline's tick, caused by the timer.
    const expired = list.at(-1);
    expect(expired).toMatchObject({ event: 'TICK', cause: { kind: 'timer' } });
    expect(expired?.effects).toContainEqual({ type: 'MEMBER_EXPIRED', memberId: 'm1' });
    // Each transition's `from` is the state the one before it left.
    for (let i = 1; i < list.length; i++) expect(list[i]?.from).toEqual(list[i - 1]?.state);
    const seqs = list.map((t) => t.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
  });

  it('keeps an admin command that changed no state (producers paused)', async () => {
    const rig = actorRig();
    await rig.host.createGroup(REF, { shardCount: 1 });
    await rig.host.command(
      REF,
      { type: 'PAUSE_PRODUCERS' },
      { requestId: 'r', principal: 'p', requestedBy: 'ops-eve' },
    );
    const last = (await kept(rig)).at(-1);
    expect(last).toMatchObject({
      event: 'PAUSE_PRODUCERS',
      stateChanged: false,
      changes: [],
      cause: { kind: 'admin', requestId: 'r', principal: 'p', requestedBy: 'ops-eve' },
    });
  });

  it(`keeps the last ${TRANSITIONS_KEPT}, newest first`, async () => {
    const rig = actorRig();
    await rig.host.createGroup(REF, { shardCount: 1 });
    for (let i = 0; i < TRANSITIONS_KEPT; i++) {
      await rig.host.command(REF, { type: 'FREEZE' }, { requestId: `f${i}`, principal: 'p' });
      await rig.host.command(REF, { type: 'UNFREEZE' }, { requestId: `u${i}`, principal: 'p' });
    }
    const view = await rig.host.getTransitions(REF);
    expect(view.transitions).toHaveLength(TRANSITIONS_KEPT);
    expect(view.transitions[0]).toMatchObject({
      event: 'UNFREEZE',
      cause: { requestId: `u${TRANSITIONS_KEPT - 1}` },
    });
    expect(view.transitions.at(-1)).toMatchObject({
      event: 'FREEZE',
      cause: { requestId: `f${TRANSITIONS_KEPT / 2}` },
    });
  });

  it('keeps no arrays of its own for what a transition did not do', async () => {
    // Every group keeps its last transitions whether anyone reads them or not: what each one
    // holds is paid for by every group a replica serves (docs/BENCHMARKS.md, capacity).
    const rig = actorRig();
    const other = { ...REF, consumerGroup: `${REF.consumerGroup}-2` };
    await rig.host.createGroup(REF, { shardCount: 1 });
    await rig.host.createGroup(other, { shardCount: 1 });
    for (const ref of [REF, other]) {
      await rig.host.command(ref, { type: 'FREEZE' }, { requestId: 'f', principal: 'p' });
      await rig.host.command(ref, { type: 'UNFREEZE' }, { requestId: 'u', principal: 'p' });
    }
    await rig.host.heartbeat(REF, { ...joinRequest('m1'), sessionTimeoutMs: SESSION_TIMEOUT });
    const transitions = [
      ...(await rig.host.getTransitions(REF)).transitions,
      ...(await rig.host.getTransitions(other)).transitions,
    ];
    const empty = transitions.flatMap((t) =>
      [t.effects, t.raised].filter((items) => items.length === 0),
    );
    expect(empty.length).toBeGreaterThan(4);
    expect(new Set(empty).size).toBe(1);
    // A member's transitions still name it.
    expect(transitions[0]).toMatchObject({ cause: { kind: 'member', memberId: 'm1' } });
  });

  it('is the same record the events stream sends', async () => {
    const rig = actorRig();
    await rig.host.createGroup(REF, { shardCount: 1 });
    const sent: GroupTransition[] = [];
    const stop = await rig.host.subscribe(REF, (t) => sent.push(t));
    await rig.host.command(REF, { type: 'FREEZE' }, { requestId: 'r1', principal: 'p' });
    stop();
    const [newest] = (await rig.host.getTransitions(REF)).transitions;
    expect(sent).toEqual([newest]);
  });
});
