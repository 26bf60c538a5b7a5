/**
 * A consumer that does not know about pausing (docs/operations.md#pausing-consumption): it
 * ignores `pausedShards` and the revoke that comes with them, and keeps reporting the paused
 * shard as its own, never DONE. It is fenced at its rebalance timeout like any member stuck
 * revoking; the shard is then released and granted to nobody while the group stays paused, and
 * the other member keeps its shard. Real HTTP heartbeats sent by hand, a manual clock.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/machines/clock.js';
import type { HeartbeatReply } from '../../src/machines/protocol.js';
import { CHANGE, type TestCoordinator, useCoordinator } from '../support/coordinator.js';
import { joinBody } from '../support/members.js';

const REBALANCE_TIMEOUT_MS = 5_000;
const OVERRIDES = {
  'membership.assignment-debounce': '0ms',
  'membership.session-timeout': '60s',
  'membership.rebalance-timeout': `${REBALANCE_TIMEOUT_MS}ms`,
};

interface ConsumptionView {
  state: string;
  pausedShards: number[];
}

describe.each(['memory', 'redis'] as const)(
  'an old client on a paused shard (%s store)',
  (store) => {
    let c: TestCoordinator;
    const clock = new ManualClock(Date.now());
    useCoordinator({ store, clock, overrides: OVERRIDES }, (started) => (c = started));

    const sp = `old-client-${store}`;
    const heartbeatPath = `/coord/v1/consumer/streams/${sp}/groups/g/heartbeat`;

    async function beat(body: Record<string, unknown>): Promise<HeartbeatReply> {
      const res = await c.call('POST', heartbeatPath, {
        user: 'consumer',
        body: { revokeProgress: [], ...body },
      });
      expect(res.status, await res.clone().text()).toBe(200);
      return (await res.json()) as HeartbeatReply;
    }

    /** An honest member's next heartbeat: what it was granted, revoked shards reported DONE. */
    function honest(memberId: string, last: HeartbeatReply): Record<string, unknown> {
      return {
        memberId,
        memberEpoch: last.memberEpoch,
        assignmentEpoch: last.assignmentEpoch,
        metadataVersion: last.metadataVersion,
        currentAssignments: last.assignedShards,
        revokeProgress: last.revokeShards.map((shard) => ({ shard, state: 'DONE' })),
      };
    }

    /**
     * The old client's next heartbeat: it keeps `held` as its own and says nothing about the
     * revoke, as a client from before pausing would once told to give up a shard it does not
     * know why (and as a stuck one does).
     */
    function stubborn(last: HeartbeatReply, held: readonly number[]): Record<string, unknown> {
      return {
        memberId: 'old',
        memberEpoch: last.memberEpoch,
        assignmentEpoch: last.assignmentEpoch,
        metadataVersion: last.metadataVersion,
        currentAssignments: held,
      };
    }

    async function consumption(): Promise<ConsumptionView> {
      const res = await c.call('GET', `/coord/v1/monitoring/streams/${sp}/groups/g`, {
        user: 'reader',
      });
      expect(res.status).toBe(200);
      return ((await res.json()) as { consumption: ConsumptionView }).consumption;
    }

    async function shards() {
      const res = await c.call('GET', `/coord/v1/monitoring/streams/${sp}/groups/g/assignments`, {
        user: 'reader',
      });
      expect(res.status).toBe(200);
      return (
        (await res.json()) as {
          shards: Array<{
            shard: number;
            state: string;
            owner: string | null;
            target: string | null;
          }>;
        }
      ).shards;
    }

    async function memberIds(): Promise<string[]> {
      const res = await c.call('GET', `/coord/v1/monitoring/streams/${sp}/groups/g/members`, {
        user: 'reader',
      });
      expect(res.status).toBe(200);
      return ((await res.json()) as { members: Array<{ memberId: string }> }).members
        .map((m) => m.memberId)
        .sort();
    }

    it('is fenced at its rebalance timeout; the paused shard goes to nobody', async () => {
      const created = await c.call('POST', '/coord/v1/admin/groups', {
        user: 'writer',
        body: { streamPrefix: sp, consumerGroup: 'g', shardCount: 2, ...CHANGE },
      });
      expect(created.status).toBe(201);

      // old takes both shards, then gives shard 1 to the newcomer as any client does.
      let old = await beat(joinBody('old'));
      if (old.assignedShards.length < 2) old = await beat(honest('old', old));
      expect(old.assignedShards).toEqual([0, 1]);
      let other = await beat(joinBody('other'));
      old = await beat(honest('old', old));
      expect(old.revokeShards).toEqual([1]);
      old = await beat(honest('old', old));
      other = await beat(honest('other', other));
      expect([old.assignedShards, other.assignedShards]).toEqual([[0], [1]]);
      expect(old.pausedShards ?? []).toEqual([]);

      const paused = await c.call('POST', `/coord/v1/admin/streams/${sp}/groups/g/consumption`, {
        user: 'writer',
        body: { action: 'PAUSE', shards: [0], ...CHANGE },
      });
      expect(paused.status, await paused.clone().text()).toBe(200);

      // Told that shard 0 is paused and to give it up; it keeps it, never reporting DONE.
      const pausedAt = clock.now();
      old = await beat(stubborn(old, [0]));
      expect(old.pausedShards).toEqual([0]);
      expect(old.revokeShards).toEqual([0]);
      expect(old.assignedShards).toEqual([]);
      expect((await consumption()).state).toBe('pausing');

      // Still inside its rebalance timeout: the shard stays its own, revoking.
      clock.advance(REBALANCE_TIMEOUT_MS - 1_000);
      await c.host.sweep();
      old = await beat(stubborn(old, [0]));
      expect(old.outcome).not.toBe('FENCED_MEMBER_EPOCH');
      expect(old.revokeShards).toEqual([0]);
      other = await beat(honest('other', other));
      expect(other.assignedShards).toEqual([1]);
      expect((await shards()).find((s) => s.shard === 0)).toMatchObject({
        state: 'revoking',
        owner: 'old',
      });
      expect((await consumption()).state).toBe('pausing');

      // Past it: fenced and removed; the shard is released and nobody is granted it.
      clock.advance(pausedAt + REBALANCE_TIMEOUT_MS + 1_000 - clock.now());
      await c.host.sweep();
      expect(await memberIds()).toEqual(['other']);
      const fenced = await beat(stubborn(old, [0]));
      expect(fenced.outcome).toBe('FENCED_MEMBER_EPOCH');
      expect(await consumption()).toEqual(
        expect.objectContaining({ state: 'paused', pausedShards: [0] }),
      );
      const shard0 = (await shards()).find((s) => s.shard === 0)!;
      expect(shard0.state).toBe('released');
      expect(shard0.owner ?? null).toBeNull();
      expect(shard0.target ?? null).toBeNull();

      other = await beat(honest('other', other));
      other = await beat(honest('other', other));
      expect(other).toMatchObject({ outcome: 'OK', assignedShards: [1], pausedShards: [0] });
      expect(other.pendingShards).toEqual([]);

      // Rejoining, it is told the shard is paused and is not granted it.
      let again = await beat(joinBody('old'));
      expect(again.pausedShards).toEqual([0]);
      expect(again.assignedShards).not.toContain(0);
      expect(again.pendingShards).not.toContain(0);
      again = await beat(honest('old', again));
      expect(again.assignedShards).not.toContain(0);
      expect((await shards()).find((s) => s.shard === 0)).toMatchObject({ state: 'released' });
      expect((await consumption()).state).toBe('paused');
    });
  },
);
