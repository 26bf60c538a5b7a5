/**
 * Paused shards are part of the group's metadata (docs/operations.md#pausing-consumption): the
 * pause is written to the group's metadata hash with the rest of the change, so the replica
 * that takes the group over after its owner stopped, and a replica started afresh once every
 * replica was gone, keep the shard paused and grant it to nobody until it is resumed. Real
 * replicas in this process on one real redis-server, a simulated member over real HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HeartbeatReply } from '../../src/machines/protocol.js';
import { keyNames } from '../../src/store/keys.js';
import { CHANGE, startTestReplica, type TestCoordinator } from '../support/coordinator.js';
import { SimulatedMember } from '../support/members.js';
import {
  randomKeyPrefix,
  startRedisServer,
  waitFor,
  type RedisServerHandle,
} from '../support/redis-server.js';

const SP = 'paused-move';
const REF = { streamPrefix: SP, consumerGroup: 'g' };

describe('paused shards across a failover and a restart', () => {
  let redis: RedisServerHandle;
  const prefix = randomKeyPrefix();
  const replicas = new Map<string, TestCoordinator>();

  async function start(id: string): Promise<TestCoordinator> {
    const c = await startTestReplica(redis.url, prefix, id, '30s');
    replicas.set(id, c);
    return c;
  }

  async function stop(id: string): Promise<void> {
    await replicas.get(id)?.close();
    replicas.delete(id);
  }

  beforeAll(async () => {
    redis = await startRedisServer();
  });

  afterAll(async () => {
    for (const c of replicas.values()) await c.close();
    await redis?.stop();
  });

  /** The group's view and the replica that owns it, as X-Coord-Owner says. */
  async function view(c: TestCoordinator) {
    const res = await c.call('GET', `/coord/v1/monitoring/streams/${SP}/groups/g`, {
      user: 'reader',
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      metadataVersion: number;
      consumption: { state: string; pausedShards: number[] };
      state: { consumption: string };
    };
    return { ...body, owner: res.headers.get('x-coord-owner') };
  }

  async function metadataHash(): Promise<Record<string, string>> {
    return redis.client().hgetall(keyNames(prefix).metadata(REF));
  }

  /** Beats until the member holds `shards` and has nothing left to give up. */
  async function settle(member: SimulatedMember, shards: number[]): Promise<HeartbeatReply> {
    let reply: HeartbeatReply | null = null;
    await waitFor(
      async () => {
        reply = await member.beat();
        return (
          reply.outcome === 'OK' &&
          reply.revokeShards.length === 0 &&
          JSON.stringify(reply.assignedShards) === JSON.stringify(shards)
        );
      },
      { what: `the member to hold shards ${shards.join(',')}`, intervalMs: 50, timeoutMs: 10_000 },
    );
    return reply!;
  }

  /** Member `a` as it stands, talking to `c` from now on. */
  let current: SimulatedMember | null = null;
  function on(c: TestCoordinator): SimulatedMember {
    const next = new SimulatedMember(c, 'a', SP, 'g');
    if (current) {
      const { epoch, owned, assignmentEpoch, metadataVersion, last } = current;
      Object.assign(next, { epoch, owned, assignmentEpoch, metadataVersion, last });
    }
    current = next;
    return next;
  }

  it('the replica that takes the group over, and one started afresh, keep the shard paused', async () => {
    const r1 = await start('r1');
    const r2 = await start('r2');
    for (const c of [r1, r2]) {
      await waitFor(() => ['r1', 'r2'].every((id) => c.services.replicas?.urlOf(id)), {
        what: 'both replicas seen by each',
      });
    }
    const created = await r1.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { ...REF, shardCount: 2, ...CHANGE },
    });
    expect(created.status).toBe(201);
    const member = on(r1);
    await settle(member, [0, 1]);

    const paused = await r1.call('POST', `/coord/v1/admin/streams/${SP}/groups/g/consumption`, {
      user: 'writer',
      body: { action: 'PAUSE', shards: [1], ...CHANGE },
    });
    expect(paused.status, await paused.clone().text()).toBe(200);
    const held = await settle(member, [0]);
    expect(held.pausedShards).toEqual([1]);
    const before = await view(r1);
    expect(before.consumption).toEqual({
      ...before.consumption,
      state: 'paused',
      pausedShards: [1],
    });

    // In the metadata hash, written with the version it belongs to.
    const hash = await metadataHash();
    expect(JSON.parse(hash.pausedShards!)).toEqual([1]);
    expect(Number(hash.metadataVersion)).toBe(before.metadataVersion);

    // The owner stops: the other replica loads the group from the store.
    const ownerId = before.owner!;
    const otherId = ownerId === 'r1' ? 'r2' : 'r1';
    const other = replicas.get(otherId)!;
    await stop(ownerId);
    let moved: Awaited<ReturnType<typeof view>> | null = null;
    await waitFor(
      async () => {
        moved = await view(other);
        return moved.owner === otherId;
      },
      { what: `${otherId} to serve the group`, intervalMs: 100, timeoutMs: 10_000 },
    );
    expect(moved!.consumption).toMatchObject({ state: 'paused', pausedShards: [1] });
    expect(moved!.state.consumption).toBe('paused');
    const served = await settle(on(other), [0]);
    expect(served.pausedShards).toEqual([1]);
    expect(served.pendingShards).not.toContain(1);

    // Every replica gone, then one started afresh: nothing of the pause is left in memory.
    await stop(otherId);
    const fresh = await start('r3');
    const restarted = await view(fresh);
    expect(restarted.consumption).toMatchObject({ state: 'paused', pausedShards: [1] });
    const onFresh = on(fresh);
    const again = await settle(onFresh, [0]);
    expect(again.pausedShards).toEqual([1]);

    // Resumed: granted again, and the field leaves the hash.
    const resumed = await fresh.call('POST', `/coord/v1/admin/streams/${SP}/groups/g/consumption`, {
      user: 'writer',
      body: { action: 'RESUME', ...CHANGE },
    });
    expect(resumed.status).toBe(200);
    const back = await settle(onFresh, [0, 1]);
    expect(back.pausedShards ?? []).toEqual([]);
    expect((await metadataHash()).pausedShards).toBeUndefined();
    expect((await view(fresh)).consumption).toMatchObject({ state: 'running', pausedShards: [] });
  }, 60_000);
});
