import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyNames } from '../../src/store/keys.js';
import {
  CHANGE,
  startTestReplica,
  type TestCoordinator,
  waitUntilSeenByEach,
} from '../support/coordinator.js';
import { heartbeatOf, SimulatedMember } from '../support/members.js';
import {
  randomKeyPrefix,
  startRedisServer,
  waitFor,
  type RedisServerHandle,
} from '../support/redis-server.js';

/**
 * Three coordinators in this process on one real redis-server (docs/architecture.md#replicas-leases-and-fences): each group has
 * one owner; any replica answers for it by forwarding over real HTTP.
 */
describe('several replicas on one Redis', () => {
  let redis: RedisServerHandle;
  const prefix = randomKeyPrefix();
  const replicas = new Map<string, TestCoordinator>();

  async function start(id: string): Promise<TestCoordinator> {
    const c = await startTestReplica(redis.url, prefix, id, '30s');
    replicas.set(id, c);
    return c;
  }

  async function liveIds(c: TestCoordinator): Promise<string[]> {
    const res = await c.call('GET', '/coord/v1/monitoring/replicas', { user: 'reader' });
    const body = (await res.json()) as { replicas: Array<{ replicaId: string }> };
    return body.replicas.map((r) => r.replicaId).sort();
  }

  /** The owner of a group (as X-Coord-Owner says) and a replica that does not own it. */
  async function ownerAndOther(sp: string) {
    const any = [...replicas.values()][0] as TestCoordinator;
    const res = await any.call('GET', `/coord/v1/monitoring/streams/${sp}/groups/g`, {
      user: 'reader',
    });
    expect(res.status).toBe(200);
    const ownerId = res.headers.get('x-coord-owner') ?? '';
    const owner = replicas.get(ownerId);
    const [otherId, other] = [...replicas.entries()].find(([id]) => id !== ownerId) ?? [];
    if (!owner || !other || !otherId) throw new Error(`no owner ${ownerId}`);
    return { ownerId, owner, otherId, other };
  }

  beforeAll(async () => {
    redis = await startRedisServer();
    for (const id of ['r1', 'r2', 'r3']) await start(id);
    // Each replica's own view of the live set (its registry refresh), not only the store's.
    await waitUntilSeenByEach(replicas.values(), ['r1', 'r2', 'r3']);
  }, 60_000);

  afterAll(async () => {
    for (const c of replicas.values()) await c.close();
    await redis?.stop();
  });

  async function createGroup(sp: string) {
    const c = replicas.get('r1') as TestCoordinator;
    const res = await c.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: sp, consumerGroup: 'g', shardCount: 4, ...CHANGE },
    });
    expect(res.status).toBe(201);
    expect(res.headers.get('x-coord-owner')).toMatch(/^r[123]$/);
  }

  it('lists the live replicas with their URLs, and says which one answers', async () => {
    const c = replicas.get('r2') as TestCoordinator;
    const res = await c.call('GET', '/coord/v1/monitoring/replicas', { user: 'reader' });
    const body = (await res.json()) as {
      self: string;
      replicas: Array<{ replicaId: string; advertisedUrl: string; groupsOwned: number }>;
    };
    expect(body.self).toBe('r2');
    expect(body.replicas.map((r) => [r.replicaId, r.advertisedUrl])).toEqual(
      ['r1', 'r2', 'r3'].map((id) => [id, replicas.get(id)?.url]),
    );
    expect(body.replicas.every((r) => typeof r.groupsOwned === 'number')).toBe(true);
  });

  it('a heartbeat through a non-owner is forwarded: same answer, X-Coord-Owner names the owner', async () => {
    await createGroup('fwd');
    const { ownerId, other } = await ownerAndOther('fwd');
    const member = new SimulatedMember(other, 'a', 'fwd', 'g');
    await member.beat();
    const reply = await member.beat();
    expect(reply.outcome).toBe('OK');
    expect(reply.assignedShards).toEqual([0, 1, 2, 3]);
    const res = await other.call('POST', '/coord/v1/consumer/streams/fwd/groups/g/heartbeat', {
      user: 'consumer',
      body: heartbeatOf(member),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-coord-owner')).toBe(ownerId);
    // Only the owner holds the group in memory.
    for (const [id, c] of replicas) expect(c.host.heldGroups().length > 0).toBe(id === ownerId);
  });

  it('an admin call through a non-owner is done by the owner and audited once, by the receiver', async () => {
    await createGroup('adm');
    const { other } = await ownerAndOther('adm');
    const requestId = `audit-${Date.now()}`;
    const res = await other.call('POST', '/coord/v1/admin/streams/adm/groups/g/scale', {
      user: 'writer',
      body: { shardCount: 6, ...CHANGE },
      headers: { 'x-request-id': requestId },
    });
    expect(res.status).toBeLessThan(300);
    expect(res.headers.get('x-request-id')).toBe(requestId);
    const audit = await other.call('GET', '/coord/v1/monitoring/audit?streamPrefix=adm', {
      user: 'reader',
    });
    const records = ((await audit.json()) as { records: Array<{ requestId: string }> }).records;
    const mine = records.filter((r) => r.requestId === requestId);
    expect(mine).toHaveLength(1);
    expect(mine[0]).toMatchObject({ status: res.status, outcome: 'SUCCEEDED' });
  });

  it('a forged forwarded-by header is not trusted: the request is audited and forwarded as usual', async () => {
    await createGroup('forged');
    const { other } = await ownerAndOther('forged');
    const requestId = `forged-${Date.now()}`;
    const res = await other.call('POST', '/coord/v1/admin/streams/forged/groups/g/scale', {
      user: 'writer',
      body: { shardCount: 5, ...CHANGE },
      headers: { 'x-request-id': requestId, 'x-coord-forwarded-by': 'r1' },
    });
    expect(res.status).toBeLessThan(300);
    const audit = await other.call('GET', '/coord/v1/monitoring/audit?streamPrefix=forged', {
      user: 'reader',
    });
    const records = ((await audit.json()) as { records: Array<{ requestId: string }> }).records;
    expect(records.filter((r) => r.requestId === requestId)).toHaveLength(1);
  });

  it('a routing long poll and an event stream through a non-owner are streamed from the owner', async () => {
    await createGroup('poll');
    const { ownerId, other } = await ownerAndOther('poll');
    const routing = await other.call('GET', '/coord/v1/routing/streams/poll/groups/g', {
      user: 'producer',
    });
    expect(routing.status).toBe(200);
    const version = ((await routing.json()) as { metadataVersion: number }).metadataVersion;
    const polling = other.call(
      'GET',
      `/coord/v1/routing/streams/poll/groups/g?afterVersion=${version}&waitMs=10000`,
      { user: 'producer' },
    );
    const events = await fetch(`${other.url}/coord/v1/monitoring/streams/poll/groups/g/events`, {
      headers: { authorization: `Bearer ${other.token('reader')}` },
    });
    expect(events.status).toBe(200);
    expect(events.headers.get('x-coord-owner')).toBe(ownerId);
    const reader = events.body?.getReader() as ReadableStreamDefaultReader<Uint8Array> | undefined;
    const first = new TextDecoder().decode((await reader?.read())?.value);
    expect(first).toContain('event: snapshot');
    // A change at the owner ends the long poll with the new version, through the non-owner.
    const scaled = await other.call('POST', '/coord/v1/admin/streams/poll/groups/g/scale', {
      user: 'writer',
      body: { shardCount: 8, ...CHANGE },
    });
    expect(scaled.status).toBeLessThan(300);
    const answer = await polling;
    expect(answer.status).toBe(200);
    expect(answer.headers.get('x-coord-owner')).toBe(ownerId);
    expect(((await answer.json()) as { metadataVersion: number }).metadataVersion).toBeGreaterThan(
      version,
    );
    let streamed = '';
    while (!streamed.includes('event: transition')) {
      streamed += new TextDecoder().decode((await reader?.read())?.value);
    }
    await reader?.cancel();
  });

  it('every replica lists every group with its owner, without taking it', async () => {
    await createGroup('lst');
    const { ownerId } = await ownerAndOther('lst');
    for (const [id, c] of replicas) {
      const res = await c.call('GET', '/coord/v1/monitoring/groups?limit=100', { user: 'reader' });
      const groups = (
        (await res.json()) as { groups: Array<{ streamPrefix: string; owner: string }> }
      ).groups;
      expect(groups.find((g) => g.streamPrefix === 'lst')?.owner, id).toBe(ownerId);
      if (id !== ownerId) {
        expect(c.host.heldGroups().some((ref) => ref.streamPrefix === 'lst')).toBe(false);
      }
    }
  });

  it('a lost lease stops serving: the group is dropped and not answered from memory', async () => {
    await createGroup('lost');
    const { owner } = await ownerAndOther('lost');
    const member = new SimulatedMember(owner, 'a', 'lost', 'g');
    await member.beat();
    expect(owner.host.heldGroups().some((r) => r.streamPrefix === 'lost')).toBe(true);
    // Another holder takes the lease key: the owner's next renew fails.
    const leaseKey = keyNames(prefix).lease({ streamPrefix: 'lost', consumerGroup: 'g' });
    await redis.client().set(leaseKey, 'intruder', 'PX', 20_000);
    await waitFor(() => !owner.host.heldGroups().some((r) => r.streamPrefix === 'lost'), {
      what: 'the group dropped',
    });
    const res = await owner.call('POST', '/coord/v1/consumer/streams/lost/groups/g/heartbeat', {
      user: 'consumer',
      body: heartbeatOf(member),
    });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('GROUP_MOVED');
    const metrics = await (await owner.call('GET', '/metrics')).text();
    expect(metrics).toMatch(/coord_lease_changes_total\{event="lost"\} [1-9]/);
    await redis.client().del(leaseKey);
  });

  it('groups of one stream prefix owned by different replicas follow one scale together', async () => {
    const r1 = replicas.get('r1') as TestCoordinator;
    const ownerOf = async (g: string) =>
      (
        await r1.call('GET', `/coord/v1/monitoring/streams/fan/groups/${g}`, { user: 'reader' })
      ).headers.get('x-coord-owner');
    const create = (consumerGroup: string, extra: object = {}) =>
      r1.call('POST', '/coord/v1/admin/groups', {
        user: 'writer',
        body: { streamPrefix: 'fan', consumerGroup, ...CHANGE, ...extra },
      });
    expect((await create('g0', { shardCount: 3 })).status).toBe(201);
    const first = await ownerOf('g0');
    // A sibling owned by another replica: its owner follows the scale on its own.
    let sibling = '';
    for (let i = 1; i < 20 && !sibling; i++) {
      expect((await create(`g${i}`)).status).toBe(201);
      if ((await ownerOf(`g${i}`)) !== first) sibling = `g${i}`;
    }
    expect(sibling).not.toBe('');
    const res = await r1.call('POST', '/coord/v1/admin/streams/fan/groups/g0/scale', {
      user: 'writer',
      body: { shardCount: 5, ...CHANGE },
    });
    expect(res.status).toBe(202);
    const routingOf = async (g: string) =>
      (await (
        await r1.call('GET', `/coord/v1/routing/streams/fan/groups/${g}`, { user: 'producer' })
      ).json()) as { shardCount: number; layoutVersion: number };
    await waitFor(async () => (await routingOf(sibling)).shardCount === 5, {
      what: `group ${sibling} on another replica following the scale`,
      timeoutMs: 20_000,
      intervalMs: 200,
    });
    expect((await routingOf(sibling)).layoutVersion).toBe((await routingOf('g0')).layoutVersion);
  });

  it('a replica that stops hands its groups over: members keep their epochs', async () => {
    await createGroup('hand');
    const { ownerId, owner } = await ownerAndOther('hand');
    const survivor = [...replicas.entries()].find(([id]) => id !== ownerId)?.[1];
    if (!survivor) throw new Error('no survivor');
    const member = new SimulatedMember(survivor, 'a', 'hand', 'g');
    await member.beat();
    const before = await member.beat();
    expect(before.outcome).toBe('OK');
    await owner.close();
    replicas.delete(ownerId);
    await waitFor(
      async () => {
        const ids = await liveIds(survivor);
        return !ids.includes(ownerId);
      },
      { what: 'the stopped replica gone from the registry' },
    );
    let after = null;
    await waitFor(
      async () => {
        after = await member.beat();
        return true;
      },
      { what: 'served again', timeoutMs: 5_000, intervalMs: 100 },
    );
    expect(after).toMatchObject({ outcome: 'OK', memberEpoch: before.memberEpoch });
    expect(member.epoch).toBe(before.memberEpoch);
  });
});
