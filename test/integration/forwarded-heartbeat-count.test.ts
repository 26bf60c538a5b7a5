import { request } from 'node:http';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rendezvousOwner } from '../../src/actors/ownership/rendezvous.js';
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

/*
 * A heartbeat that reaches a replica not serving its group is forwarded to the owner before
 * anything is done for it (docs/architecture.md#the-request-pipeline), and counted once: as
 * forwarded where it arrived, as a heartbeat where it was answered. Two replicas on one real
 * redis-server; every count is read from `/metrics` over HTTP.
 */

/** One sample of a Prometheus text exposition: the value of `name{labels}`, 0 when absent. */
function sample(text: string, name: string, labels = ''): number {
  const line = text
    .split('\n')
    .find((l) => l.startsWith(labels === '' ? `${name} ` : `${name}{${labels}} `));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** The sum of every sample of `name` (all its label values). */
function total(text: string, name: string): number {
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

interface Counts {
  heartbeats: number;
  heartbeatsOk: number;
  groupMoved: number;
  forwarded: number;
}

async function countsOf(c: TestCoordinator): Promise<Counts> {
  const res = await fetch(`${c.url}/metrics`);
  expect(res.status).toBe(200);
  const text = await res.text();
  return {
    heartbeats: total(text, 'coord_heartbeats_total'),
    heartbeatsOk: sample(text, 'coord_heartbeats_total', 'outcome="OK"'),
    groupMoved: sample(text, 'coord_heartbeats_total', 'outcome="GROUP_MOVED"'),
    forwarded: sample(text, 'coord_forwarded_requests_total', 'outcome="forwarded"'),
  };
}

function delta(after: Counts, before: Counts): Counts {
  return {
    heartbeats: after.heartbeats - before.heartbeats,
    heartbeatsOk: after.heartbeatsOk - before.heartbeatsOk,
    groupMoved: after.groupMoved - before.groupMoved,
    forwarded: after.forwarded - before.forwarded,
  };
}

describe('a heartbeat forwarded to the owner is counted once', () => {
  let redis: RedisServerHandle;
  const prefix = randomKeyPrefix();
  const replicas = new Map<string, TestCoordinator>();
  let owner: TestCoordinator;
  let other: TestCoordinator;
  let member: SimulatedMember;
  const path = '/coord/v1/consumer/streams/once/groups/g/heartbeat';

  beforeAll(async () => {
    redis = await startRedisServer();
    for (const id of ['r1', 'r2'])
      replicas.set(id, await startTestReplica(redis.url, prefix, id, '30s'));
    await waitUntilSeenByEach(replicas.values(), ['r1', 'r2']);
    const first = replicas.get('r1') as TestCoordinator;
    const created = await first.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: 'once', consumerGroup: 'g', shardCount: 4, ...CHANGE },
    });
    expect(created.status).toBe(201);
    const ownerId = created.headers.get('x-coord-owner') ?? '';
    const [otherId] = [...replicas.keys()].filter((id) => id !== ownerId);
    owner = replicas.get(ownerId) as TestCoordinator;
    other = replicas.get(otherId ?? '') as TestCoordinator;
    expect(owner).toBeDefined();
    expect(other).toBeDefined();
    // Joined and at steady state through the non-owner.
    member = new SimulatedMember(other, 'a', 'once', 'g');
    await member.beat();
    expect((await member.beat()).outcome).toBe('OK');
  }, 60_000);

  afterAll(async () => {
    for (const c of replicas.values()) await c.close();
    await redis?.stop();
  });

  it('through the fast path: forwarded where it arrived, answered and counted by the owner', async () => {
    const [ownerBefore, otherBefore] = [await countsOf(owner), await countsOf(other)];
    const beats = 5;
    for (let i = 0; i < beats; i++) {
      const res = await other.call('POST', path, { user: 'consumer', body: heartbeatOf(member) });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-coord-path')).toBe('fast');
      expect(res.headers.get('x-coord-owner')).toBe(owner.services.replicaId);
      expect(((await res.json()) as { outcome: string }).outcome).toBe('OK');
    }
    const atOther = delta(await countsOf(other), otherBefore);
    const atOwner = delta(await countsOf(owner), ownerBefore);
    // Not a heartbeat where it arrived (no GROUP_MOVED refusal): one forward each.
    expect(atOther).toEqual({ heartbeats: 0, heartbeatsOk: 0, groupMoved: 0, forwarded: beats });
    // Answered by the owner, which forwarded nothing.
    expect(atOwner).toEqual({
      heartbeats: beats,
      heartbeatsOk: beats,
      groupMoved: 0,
      forwarded: 0,
    });
    // The non-owner never took the group.
    expect(other.host.heldGroups()).toEqual([]);
  });

  it('through express (an encoded body): counted once the same way', async () => {
    const [ownerBefore, otherBefore] = [await countsOf(owner), await countsOf(other)];
    const res = await fetch(`${other.url}${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'content-encoding': 'gzip',
        authorization: `Bearer ${other.token('consumer')}`,
      },
      body: gzipSync(JSON.stringify(heartbeatOf(member))),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { outcome: string }).outcome).toBe('OK');
    const atOther = delta(await countsOf(other), otherBefore);
    const atOwner = delta(await countsOf(owner), ownerBefore);
    expect(atOther).toEqual({ heartbeats: 0, heartbeatsOk: 0, groupMoved: 0, forwarded: 1 });
    expect(atOwner).toEqual({ heartbeats: 1, heartbeatsOk: 1, groupMoved: 0, forwarded: 0 });
  });

  it('a caller refused where it arrived (no token, a token without the group) is not forwarded', async () => {
    const [ownerBefore, otherBefore] = [await countsOf(owner), await countsOf(other)];
    const anonymous = await other.call('POST', path, { body: heartbeatOf(member) });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('x-coord-owner')).toBeNull();
    const reader = await other.call('POST', path, { user: 'reader', body: heartbeatOf(member) });
    expect(reader.status).toBe(403);
    expect(delta(await countsOf(other), otherBefore).forwarded).toBe(0);
    expect(delta(await countsOf(owner), ownerBefore).heartbeats).toBe(0);
  });
});

describe('a heartbeat whose group moves while its body is read is counted once', () => {
  let redis: RedisServerHandle;
  const prefix = randomKeyPrefix();
  const started: TestCoordinator[] = [];
  const stream = 'moving';
  /** A group the rendezvous gives to r2 once r2 is live: r1 owns it alone, then hands it over. */
  const group =
    Array.from({ length: 64 }, (_, i) => `g${i}`).find(
      (name) =>
        rendezvousOwner({ streamPrefix: stream, consumerGroup: name }, [{ id: 'r1' }, { id: 'r2' }])
          ?.id === 'r2',
    ) ?? 'none';
  const ref = { streamPrefix: stream, consumerGroup: group };
  const path = `/coord/v1/consumer/streams/${stream}/groups/${group}/heartbeat`;

  beforeAll(async () => {
    redis = await startRedisServer();
  }, 60_000);

  afterAll(async () => {
    for (const c of started) await c.close();
    await redis?.stop();
  });

  it('through the fast path: refused GROUP_MOVED where it arrived, forwarded, counted by the new owner only', async () => {
    const r1 = await startTestReplica(redis.url, prefix, 'r1', '30s');
    started.push(r1);
    const created = await r1.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { ...ref, shardCount: 4, ...CHANGE },
    });
    expect(created.status).toBe(201);
    expect(created.headers.get('x-coord-owner')).toBe('r1');
    const member = new SimulatedMember(r1, 'a', stream, group);
    await member.beat();
    expect((await member.beat()).outcome).toBe('OK');

    // The heartbeat's headers reach r1, which decides from the URL that it serves the group
    // (its own listener ran once this one runs); half of its body follows.
    const body = Buffer.from(JSON.stringify(heartbeatOf(member)));
    const routed = new Promise<void>((resolve) => r1.server.once('request', () => resolve()));
    const req = request(`${r1.url}${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'content-length': String(body.length),
        authorization: `Bearer ${r1.token('consumer')}`,
      },
    });
    const answered = new Promise<{ status: number; owner: unknown; text: string }>(
      (resolve, reject) => {
        req.on('error', reject);
        req.on('response', (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (text += chunk));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, owner: res.headers['x-coord-owner'], text }),
          );
        });
      },
    );
    req.write(body.subarray(0, body.length >> 1));
    await routed;

    // Meanwhile r2 joins and the group moves to it.
    const r2 = await startTestReplica(redis.url, prefix, 'r2', '30s');
    started.push(r2);
    await waitFor(
      () =>
        r1.services.replicas?.ownerOf(ref) === 'r2' &&
        r1.services.replicas.urlOf('r2') !== null &&
        !r1.host.heldGroups().some((g) => g.consumerGroup === group) &&
        r2.host.heldGroups().some((g) => g.consumerGroup === group),
      { what: 'the group moved to r2', timeoutMs: 20_000 },
    );
    const [r1Before, r2Before] = [await countsOf(r1), await countsOf(r2)];

    req.end(body.subarray(body.length >> 1));
    const res = await answered;
    expect(res.status).toBe(200);
    expect(res.owner).toBe('r2');
    const atR1 = delta(await countsOf(r1), r1Before);
    const atR2 = delta(await countsOf(r2), r2Before);
    // Not a heartbeat where it arrived (its GROUP_MOVED was forwarded, not answered): one forward.
    expect(atR1).toEqual({ heartbeats: 0, heartbeatsOk: 0, groupMoved: 0, forwarded: 1 });
    // One heartbeat, answered and counted by the new owner.
    expect(atR2.heartbeats).toBe(1);
    expect(atR2.groupMoved).toBe(0);
    expect(atR2.forwarded).toBe(0);
  }, 60_000);
});
