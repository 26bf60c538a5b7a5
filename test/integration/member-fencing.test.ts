/**
 * The consumer protocol (docs/protocol.md#outcomes) over real HTTP on both stores: a heartbeat
 * answered FENCED_MEMBER_EPOCH changes nothing in the group (not even the store revision), a member
 * belongs to the principal that joined it, and a join beyond
 * `coordinator.limits.max-members-per-group` gets GROUP_FULL.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/machines/clock.js';
import type { HeartbeatReply } from '../../src/machines/protocol.js';
import {
  CHANGE,
  groupView,
  mintToken,
  type TestCoordinator,
  useCoordinator,
} from '../support/coordinator.js';
import { joinBody } from '../support/members.js';

const MAX_MEMBERS = 2;
const OVERRIDES = {
  'membership.assignment-debounce': '0ms',
  'limits.max-members-per-group': MAX_MEMBERS,
};

describe.each(['memory', 'redis'] as const)('member fencing on the %s store', (storeKind) => {
  let c: TestCoordinator;
  const clock = new ManualClock(Date.now());
  useCoordinator({ store: storeKind, clock, overrides: OVERRIDES }, (started) => (c = started));

  const groupPath = (sp: string) => `/coord/v1/admin/streams/${sp}/groups/g`;

  async function createGroup(sp: string, shardCount: number): Promise<void> {
    const res = await c.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: sp, consumerGroup: 'g', shardCount, ...CHANGE },
    });
    expect(res.status).toBe(201);
  }

  /** One heartbeat as the CONSUMER principal `sub`. */
  function send(sp: string, sub: string, body: Record<string, unknown>): Promise<Response> {
    return fetch(`${c.url}/coord/v1/consumer/streams/${sp}/groups/g/heartbeat`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: `Bearer ${mintToken(sub, ['CONSUMER'], clock.now())}`,
      },
      body: JSON.stringify({ revokeProgress: [], ...body }),
    });
  }

  async function beat(sp: string, sub: string, body: Record<string, unknown>) {
    const res = await send(sp, sub, body);
    expect(res.status).toBe(200);
    return (await res.json()) as HeartbeatReply;
  }

  /** The next heartbeat of an honest member after `last`: it reports revoked shards DONE. */
  function nextBody(memberId: string, last: HeartbeatReply): Record<string, unknown> {
    return {
      memberId,
      memberEpoch: last.memberEpoch,
      assignmentEpoch: last.assignmentEpoch,
      metadataVersion: last.metadataVersion,
      lifecycleId: last.lifecycleId,
      currentAssignments: last.assignedShards,
      revokeProgress: last.revokeShards.map((shard) => ({ shard, state: 'DONE' })),
    };
  }

  /** Every stored field of the group, store revision included. */
  async function stored(sp: string) {
    const fields = await c.services.store.exportGroup({ streamPrefix: sp, consumerGroup: 'g' });
    expect(fields?.storeRevision).toBeDefined();
    return fields;
  }

  /** Sends `body` as `sub`, expects `status`, and that the stored group did not change. */
  async function expectNoChange(sp: string, sub: string, body: Record<string, unknown>) {
    const before = await stored(sp);
    const res = await send(sp, sub, body);
    const answer = (await res.json()) as Record<string, unknown>;
    expect(await stored(sp)).toEqual(before);
    return { status: res.status, answer };
  }

  /**
   * Two members of a 2-shard group after a handoff: `a` (principal alice) owns shard 0 and
   * has a previous epoch, `b` (principal bob) owns shard 1.
   */
  async function afterHandoff(sp: string) {
    await createGroup(sp, 2);
    let a = await beat(sp, 'alice', joinBody('a'));
    expect(a.assignedShards).toEqual([0, 1]);
    let b = await beat(sp, 'bob', joinBody('b'));
    a = await beat(sp, 'alice', nextBody('a', a)); // told to revoke shard 1
    expect(a.revokeShards).toEqual([1]);
    a = await beat(sp, 'alice', nextBody('a', a)); // reports it DONE
    b = await beat(sp, 'bob', nextBody('b', b));
    expect([a.assignedShards, b.assignedShards]).toEqual([[0], [1]]);
    const firstEpoch = 1;
    expect(a.memberEpoch).toBeGreaterThan(firstEpoch + 1);
    return { a, b, firstEpoch };
  }

  describe('a heartbeat answered FENCED_MEMBER_EPOCH changes nothing in the group', () => {
    it('a stale epoch (a delayed duplicate) leaves the live member its shards', async () => {
      const { a, firstEpoch } = await afterHandoff('fence-stale');
      const { status, answer } = await expectNoChange('fence-stale', 'alice', {
        ...nextBody('a', a),
        memberEpoch: firstEpoch,
      });
      expect([status, answer.outcome]).toEqual([200, 'FENCED_MEMBER_EPOCH']);
      const live = await beat('fence-stale', 'alice', nextBody('a', a));
      expect(live).toMatchObject({
        outcome: 'OK',
        memberEpoch: a.memberEpoch,
        assignedShards: [0],
      });
    });

    it('an epoch above the current one changes nothing and is counted as a rollback signal', async () => {
      const { a } = await afterHandoff('fence-ahead');
      const { status, answer } = await expectNoChange('fence-ahead', 'alice', {
        ...nextBody('a', a),
        memberEpoch: a.memberEpoch + 50,
      });
      expect([status, answer.outcome]).toEqual([200, 'FENCED_MEMBER_EPOCH']);
      expect((await groupView(c, 'fence-ahead')).rollbackSignals?.count).toBe(1);
      expect(await beat('fence-ahead', 'alice', nextBody('a', a))).toMatchObject({
        outcome: 'OK',
        assignedShards: [0],
      });
    });

    it('the previous epoch listing a shard now owned by another member changes nothing', async () => {
      const { a, b } = await afterHandoff('fence-prev');
      // Epochs come from one sequence: a joined at 1, b at 2, a's revoke took 3 and its
      // release 4, so 3 is a's previous epoch.
      const { status, answer } = await expectNoChange('fence-prev', 'alice', {
        ...nextBody('a', a),
        memberEpoch: a.memberEpoch - 1,
        currentAssignments: [0, 1],
      });
      expect([status, answer.outcome]).toEqual([200, 'FENCED_MEMBER_EPOCH']);
      expect(await beat('fence-prev', 'bob', nextBody('b', b))).toMatchObject({
        outcome: 'OK',
        assignedShards: [1],
      });
    });

    it('a heartbeat of another lifecycle is fenced before versions are compared', async () => {
      const { a } = await afterHandoff('fence-life');
      const { status, answer } = await expectNoChange('fence-life', 'alice', {
        ...nextBody('a', a),
        lifecycleId: 'another-lifecycle',
        metadataVersion: a.metadataVersion + 10,
        assignmentEpoch: a.assignmentEpoch + 10,
      });
      expect([status, answer.outcome]).toEqual([200, 'FENCED_MEMBER_EPOCH']);
      expect(answer.lifecycleId).toBe(a.lifecycleId);
      expect((await groupView(c, 'fence-life')).rollbackSignals).toBeNull();
    });

    it('a member of a deleted and recreated group is fenced, not told to sync down', async () => {
      const { a } = await afterHandoff('fence-recreated');
      const deleted = await c.call('DELETE', `${groupPath('fence-recreated')}?force=true`, {
        user: 'writer',
        body: CHANGE,
      });
      expect(deleted.status).toBe(204);
      await createGroup('fence-recreated', 2);
      const fresh = await groupView(c, 'fence-recreated');
      expect(fresh.lifecycleId).not.toBe(a.lifecycleId);
      // The old lifecycle's assignment epoch is above the new one's: before the lifecycle
      // check came first, this was answered SYNC_METADATA.
      expect(a.assignmentEpoch).toBeGreaterThan(fresh.assignmentEpoch);
      const { status, answer } = await expectNoChange('fence-recreated', 'alice', nextBody('a', a));
      expect([status, answer.outcome]).toEqual([200, 'FENCED_MEMBER_EPOCH']);
      expect(answer.lifecycleId).toBe(fresh.lifecycleId);
      const rejoined = await beat('fence-recreated', 'alice', joinBody('a'));
      expect(rejoined).toMatchObject({ outcome: 'OK', assignedShards: [0, 1] });
    });
  });

  describe('a member belongs to the principal that joined it', () => {
    it("another CONSUMER principal cannot take over a live member's id: 403 MEMBER_ID_IN_USE", async () => {
      await createGroup('takeover', 2);
      let victim = await beat('takeover', 'alice', joinBody('victim'));
      expect(victim.assignedShards).toEqual([0, 1]);
      const attempts = [
        joinBody('victim'),
        nextBody('victim', victim),
        { ...nextBody('victim', victim), memberEpoch: -1 },
      ];
      for (const body of attempts) {
        const { status, answer } = await expectNoChange('takeover', 'mallory', body);
        expect(status).toBe(403);
        expect(answer).toMatchObject({ error: { code: 'MEMBER_ID_IN_USE' } });
      }
      victim = await beat('takeover', 'alice', nextBody('victim', victim));
      expect(victim).toMatchObject({ outcome: 'OK', assignedShards: [0, 1] });

      // Once the member has left, its id is free again.
      await beat('takeover', 'alice', { ...nextBody('victim', victim), memberEpoch: -1 });
      const taken = await beat('takeover', 'mallory', joinBody('victim'));
      expect(taken).toMatchObject({ outcome: 'OK', assignedShards: [0, 1] });
    });
  });

  describe('a join beyond max-members-per-group gets 409 GROUP_FULL', () => {
    it('refuses a new member at the cap and changes nothing; a rejoin is never refused', async () => {
      await createGroup('capped', 4);
      const members = ['m-1', 'm-2'];
      const replies = new Map<string, HeartbeatReply>();
      for (const id of members) replies.set(id, await beat('capped', 'alice', joinBody(id)));
      expect(members).toHaveLength(MAX_MEMBERS);

      const { status, answer } = await expectNoChange('capped', 'bob', joinBody('m-3'));
      expect(status).toBe(409);
      expect(answer).toMatchObject({
        error: { code: 'GROUP_FULL', details: { maxMembersPerGroup: MAX_MEMBERS } },
      });
      expect((await send('capped', 'alice', joinBody('m-1'))).status).toBe(200);

      const leaving = replies.get('m-2') as HeartbeatReply;
      await beat('capped', 'alice', { ...nextBody('m-2', leaving), memberEpoch: -1 });
      expect((await send('capped', 'bob', joinBody('m-3'))).status).toBe(200);
    });
  });
});
