/**
 * A steady heartbeat answered again from its kept decision (`GroupCoordinator.steadyTicket` and
 * `steadyAgain`, the heartbeat fast path's memo): the same reply and the same liveness refresh as
 * deciding it anew, only while nothing the decision read has changed.
 */
import { describe, expect, it } from 'vitest';
import type { HeartbeatReply, HeartbeatRequest } from '../../../src/machines/protocol.js';
import { groupId } from '../../../src/machines/types.js';
import {
  actorRig,
  joinRequest,
  nextRequest,
  REF,
  TestOwnership,
  type ActorRig,
  steadyReply,
} from './actor-harness.js';

/** A group of 8 shards with members `ids` settled (their last replies OK); the rig and those replies. */
async function settled(
  ids: string[],
  options: Parameters<typeof actorRig>[0] = {},
): Promise<{ rig: ActorRig; last: Map<string, HeartbeatReply> }> {
  const rig = actorRig(options);
  await rig.host.createGroup(REF, 8);
  const last = new Map<string, HeartbeatReply>();
  for (const id of ids) last.set(id, await rig.host.heartbeat(REF, joinRequest(id)));
  rig.clock.advance(10_000);
  for (let round = 0; round < 6; round++) {
    for (const id of ids)
      last.set(id, await rig.host.heartbeat(REF, nextRequest(id, last.get(id)!)));
  }
  for (const id of ids) expect(last.get(id)?.outcome).toBe('OK');
  await idle();
  return { rig, last };
}

/** Lets the group's mailbox wind down after the last answer. */
const idle = () => new Promise((resolve) => setImmediate(resolve));

const livenessOf = async (rig: ActorRig, id: string) =>
  (await rig.host.getMembers(REF)).members.find((m) => m.memberId === id);

describe('a kept steady decision answers the same heartbeat again', () => {
  it('with the reply deciding it anew gives, and the same liveness refresh', async () => {
    const { rig, last } = await settled(['m-a', 'm-b']);
    const request: HeartbeatRequest = nextRequest('m-a', last.get('m-a')!);
    const ticket = rig.host.steadyTicket(REF, request);
    expect(ticket?.reply.outcome).toBe('OK');
    expect(ticket?.groupSize).toBe(2);
    rig.clock.advance(2_000);
    expect(rig.host.steadyAgain(ticket!)).toBe(true);
    const refreshed = await livenessOf(rig, 'm-a');
    expect(refreshed?.lastHeartbeatAt).toBe(new Date(rig.clock.now()).toISOString());
    // Deciding it anew at the same time gives the same bytes and the same liveness.
    const fresh = steadyReply(rig.host, REF, request);
    expect(JSON.stringify(fresh)).toBe(JSON.stringify(ticket!.reply));
    expect(await livenessOf(rig, 'm-a')).toEqual(refreshed);
  });

  it('not once the group changed: a join makes it decide anew, and the new answer differs', async () => {
    const { rig, last } = await settled(['m-a']);
    const request = nextRequest('m-a', last.get('m-a')!);
    const ticket = rig.host.steadyTicket(REF, request)!;
    expect(ticket.reply.assignedShards).toHaveLength(8);
    await rig.host.heartbeat(REF, joinRequest('m-b'));
    await idle();
    const before = await livenessOf(rig, 'm-a');
    expect(rig.host.steadyAgain(ticket)).toBe(false);
    expect(await livenessOf(rig, 'm-a')).toEqual(before);
    rig.clock.advance(10_000);
    const reply = await rig.host.heartbeat(REF, request);
    expect(reply.revokeShards.length).toBeGreaterThan(0);
  });

  it('not once a waiting recompute fell due, though nothing else changed', async () => {
    const { rig, last } = await settled(['m-a', 'm-b']);
    // A join with members there is debounced: the group waits for its recompute.
    await rig.host.heartbeat(REF, joinRequest('m-c'));
    await idle();
    const ticket = rig.host.steadyTicket(REF, nextRequest('m-a', last.get('m-a')!));
    expect(ticket).not.toBeNull();
    expect(rig.host.steadyAgain(ticket!)).toBe(true);
    rig.clock.advance(10_000);
    expect(rig.host.steadyAgain(ticket!)).toBe(false);
  });

  it('not while the group is busy, nor once it is no longer served here', async () => {
    const ownership = { current: null as TestOwnership | null };
    const { rig, last } = await settled(['m-a'], {
      ownership: (faulty) => (ownership.current = new TestOwnership(faulty)),
    });
    const ticket = rig.host.steadyTicket(REF, nextRequest('m-a', last.get('m-a')!))!;
    rig.faulty.hang('commitGroup', { times: 1 });
    const join = rig.host.heartbeat(REF, joinRequest('m-b'));
    await expect.poll(() => rig.faulty.pending).toBe(1);
    expect(rig.host.steadyAgain(ticket)).toBe(false);
    rig.faulty.release();
    await join;
    await idle();
    const again = rig.host.steadyTicket(REF, nextRequest('m-a', last.get('m-a')!));
    expect(again).not.toBeNull();
    expect(rig.host.steadyAgain(again!)).toBe(true);
    ownership.current!.unservable.add(groupId(REF));
    expect(rig.host.steadyAgain(again!)).toBe(false);
    ownership.current!.unservable.clear();
    ownership.current!.lose(REF, 'replica-b');
    expect(rig.host.steadyAgain(again!)).toBe(false);
  });
});
