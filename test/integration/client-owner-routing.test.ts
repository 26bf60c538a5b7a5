/**
 * Owner-direct clients (docs/operations.md#owner-direct-clients): every group answer names the
 * owner's advertised URL, and the SDK sends the group's next requests straight there, falling
 * back to its base URLs when the owner cannot be reached. Two replicas in this process on one
 * real redis-server, real HTTP.
 */
import {
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoordinatorClient } from '../../src/client/index.js';
import { DIRECT_ANSWER_MS } from '../../src/client/coordinator-client.js';
import type { HeartbeatReply, HeartbeatRequest } from '../../src/machines/protocol.js';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CHANGE,
  PASSWORD,
  mintToken,
  startReplicaOn,
  startTestReplica,
  type TestCoordinator,
  waitUntilSeenByEach,
} from '../support/coordinator.js';
import {
  freePort,
  randomKeyPrefix,
  startRedisServer,
  waitFor,
  type RedisServerHandle,
} from '../support/redis-server.js';
import { TcpProxy } from '../support/tcp-proxy.js';

let redis: RedisServerHandle;
const replicas = new Map<string, TestCoordinator>();
const prefix = randomKeyPrefix();

beforeAll(async () => {
  redis = await startRedisServer();
  for (const id of ['o1', 'o2'])
    replicas.set(id, await startTestReplica(redis.url, prefix, id, '30s'));
  await waitUntilSeenByEach(replicas.values(), ['o1', 'o2']);
}, 60_000);
afterAll(async () => {
  for (const c of replicas.values()) await c.close();
  await redis?.stop();
});

/**
 * A group owned by `owner`'s replica; returns its stream prefix (the first `<tag>-<owner>-<i>`
 * that owner serves: the same one again for the same tag).
 */
async function groupOwnedBy(owner: string, tag = 'own'): Promise<string> {
  const any = [...replicas.values()][0]!; // o1, or o2 once o1 is gone
  for (let i = 0; i < 50; i++) {
    const sp = `${tag}-${owner}-${i}`;
    const res = await any.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: sp, consumerGroup: 'g', shardCount: 2, ...CHANGE },
    });
    if (res.headers.get('x-coord-owner') === owner) return sp;
  }
  throw new Error(`no group owned by ${owner}`);
}

async function forwarded(c: TestCoordinator): Promise<number> {
  const text = await (await c.call('GET', '/metrics')).text();
  return [...text.matchAll(/^coord_forwarded_requests_total\{[^}]*\} (\d+)/gm)].reduce(
    (sum, m) => sum + Number(m[1]),
    0,
  );
}

const join = (memberId: string): HeartbeatRequest => ({
  memberId,
  memberEpoch: 0,
  assignmentEpoch: 0,
  metadataVersion: 0,
  currentAssignments: [],
  revokeProgress: [],
});

/** `memberId`'s next heartbeat after `reply`: steady, reporting what it was told. */
const steadyBeat = (memberId: string, reply: HeartbeatReply): HeartbeatRequest => ({
  ...join(memberId),
  memberEpoch: reply.memberEpoch,
  assignmentEpoch: reply.assignmentEpoch,
  metadataVersion: reply.metadataVersion,
  currentAssignments: reply.assignedShards,
});

describe('owner-direct clients', () => {
  it('every group answer names the owner and its advertised URL', async () => {
    const sp = await groupOwnedBy('o1');
    const res = await replicas.get('o2')!.call('GET', `/coord/v1/routing/streams/${sp}/groups/g`, {
      user: 'producer',
    });
    expect(res.headers.get('x-coord-owner')).toBe('o1');
    expect(res.headers.get('x-coord-owner-url')).toBe(replicas.get('o1')!.url);
  });

  it('every answer names the replica that gave it; a forwarded one, the replica that relayed it', async () => {
    const sp = await groupOwnedBy('o1');
    const routing = `/coord/v1/routing/streams/${sp}/groups/g`;
    const heartbeat = `/coord/v1/consumer/streams/${sp}/groups/g/heartbeat`;
    for (const id of ['o1', 'o2']) {
      const c = replicas.get(id)!;
      // express, forwarded by o2 to the owner o1
      const read = await c.call('GET', routing, { user: 'producer' });
      expect(read.status).toBe(200);
      expect(read.headers.get('x-coord-replica')).toBe(id);
      expect(read.headers.get('x-coord-owner')).toBe('o1');
      // the heartbeat fast path: an answer and a refusal
      for (const token of [c.token('admin'), 'not-a-token']) {
        const res = await fetch(`${c.url}${heartbeat}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify(join(`named-by-${id}`)),
        });
        expect(res.status).toBe(token === 'not-a-token' ? 401 : 200);
        expect(res.headers.get('x-coord-replica')).toBe(id);
      }
    }
  });

  it('a caller without a valid token learns no owner and no address (401, on express and the fast path)', async () => {
    const sp = await groupOwnedBy('o1');
    const other = replicas.get('o2')!;
    for (const [method, path] of [
      ['GET', `/coord/v1/routing/streams/${sp}/groups/g`],
      ['POST', `/coord/v1/consumer/streams/${sp}/groups/g/heartbeat`],
    ] as const) {
      const res = await fetch(`${other.url}${path}`, {
        method,
        headers: { authorization: 'Bearer not-a-token', 'content-type': 'application/json' },
        ...(method === 'POST' ? { body: JSON.stringify(join('anon')) } : {}),
      });
      expect(res.status).toBe(401);
      expect(res.headers.get('x-coord-owner')).toBeNull();
      expect(res.headers.get('x-coord-owner-url')).toBeNull();
    }
  });

  it('a body refused before the token is read names no owner to a caller without a valid token or the group', async () => {
    const sp = await groupOwnedBy('o1');
    const outsider = mintToken('outsider', ['WRITE', 'CONSUMER'], Date.now(), ['elsewhere:g']);
    const insider = mintToken('insider', ['WRITE', 'CONSUMER'], Date.now(), [`${sp}:g`]);
    // The admin route through express, the heartbeat through the fast path; each body is
    // refused (400, 415, 413), on express before its token is looked at.
    const bodies = [
      { type: 'application/json', body: '{' },
      { type: 'text/plain', body: 'x' },
      { type: 'application/json', body: `"${'x'.repeat(100_000)}"` },
    ];
    // Asked of the owner and of the replica that would forward to it.
    for (const [url, path] of ['o1', 'o2'].flatMap((id) =>
      [
        `/coord/v1/admin/streams/${sp}/groups/g/freeze`,
        `/coord/v1/consumer/streams/${sp}/groups/g/heartbeat`,
      ].map((path) => [replicas.get(id)!.url, path] as const),
    )) {
      for (const { type, body } of bodies) {
        for (const authorization of [undefined, 'Bearer not-a-token', `Bearer ${outsider}`]) {
          const res = await fetch(`${url}${path}`, {
            method: 'POST',
            headers: { 'content-type': type, ...(authorization ? { authorization } : {}) },
            body,
          });
          const what = `${url}${path} ${type} ${body.length} ${authorization?.slice(0, 20)}`;
          expect([400, 401, 403, 413, 415], what).toContain(res.status);
          expect(res.headers.get('x-coord-owner'), what).toBeNull();
          expect(res.headers.get('x-coord-owner-url'), what).toBeNull();
        }
        // A caller the group admits is still told where it lives.
        const res = await fetch(`${url}${path}`, {
          method: 'POST',
          headers: { 'content-type': type, authorization: `Bearer ${insider}` },
          body,
        });
        expect([400, 413, 415], `${url}${path} ${type}`).toContain(res.status);
        expect(res.headers.get('x-coord-owner'), `${url}${path} ${type}`).toBe('o1');
        expect(res.headers.get('x-coord-owner-url'), `${url}${path} ${type}`).toBe(
          replicas.get('o1')!.url,
        );
      }
    }
  });

  it('after the first answer, a group is reached at its owner: the other replica forwards nothing', async () => {
    const sp = await groupOwnedBy('o1');
    const other = replicas.get('o2')!;
    const client = new CoordinatorClient({ baseUrl: other.url, token: other.token('admin') });
    let reply = await client.heartbeat(sp, 'g', join('direct-1'));
    const before = await forwarded(other);
    for (let i = 0; i < 10; i++) {
      reply = await client.heartbeat(sp, 'g', steadyBeat('direct-1', reply));
      await client.routing(sp, 'g');
    }
    expect(await forwarded(other)).toBe(before);
    // With routing 'any' every request goes through the base URL and is forwarded.
    const viaAny = new CoordinatorClient({
      baseUrl: other.url,
      token: other.token('admin'),
      routing: 'any',
    });
    for (let i = 0; i < 3; i++) await viaAny.routing(sp, 'g');
    expect(await forwarded(other)).toBe(before + 3);
  });

  it('the owner among several base URLs: its group goes there, the base URL of the moment forwards nothing', async () => {
    const sp = await groupOwnedBy('o1');
    const spOfOther = await groupOwnedBy('o2');
    const owner = replicas.get('o1')!;
    const other = replicas.get('o2')!;
    // Every replica listed, the owner not first: the first request goes through o2.
    const client = new CoordinatorClient({
      baseUrl: [other.url, owner.url],
      token: other.token('admin'),
    });
    await client.routing(sp, 'g');
    const before = await forwarded(other);
    for (let i = 0; i < 5; i++) await client.routing(sp, 'g');
    expect(await forwarded(other)).toBe(before);
    // The other group still goes to the base URL of the moment, which owns it: nothing forwarded.
    const ownerBefore = await forwarded(owner);
    for (let i = 0; i < 3; i++) await client.routing(spOfOther, 'g');
    expect(client.ownerHint(spOfOther, 'g')).toBe('o2');
    expect(await forwarded(owner)).toBe(ownerBefore);
    expect(await forwarded(other)).toBe(before);
  });

  it('an advertised URL the client cannot reach: it falls back to its base URLs and keeps working', async () => {
    const sp = await groupOwnedBy('o1');
    const other = replicas.get('o2')!;
    // A proxy in front of o2 that names an owner URL where nothing listens.
    const dead = `http://127.0.0.1:${await freePort()}`;
    const proxy = await rewritingProxy(other.url, dead);
    try {
      const client = new CoordinatorClient({
        baseUrl: proxy.url,
        token: other.token('admin'),
        timeoutMs: 2_000,
      });
      for (let i = 0; i < 4; i++) {
        const routing = await client.routing(sp, 'g');
        expect(routing.shardCount).toBe(2);
      }
      // Tried once, then not again for a while: every later request went through the proxy.
      expect(proxy.requests()).toBe(4);
    } finally {
      await proxy.close();
    }
  });

  it('an owner that accepts and never answers costs at most the direct answer bound; a write is not sent twice', async () => {
    const sp = await groupOwnedBy('o1');
    const other = replicas.get('o2')!;
    const silent = await blackHole();
    const proxy = await rewritingProxy(other.url, silent.url);
    try {
      const client = new CoordinatorClient({ baseUrl: proxy.url, token: other.token('admin') });
      await client.routing(sp, 'g'); // learns the silent "owner"
      const startedAt = Date.now();
      expect((await client.routing(sp, 'g')).shardCount).toBe(2);
      const took = Date.now() - startedAt;
      expect(took).toBeGreaterThanOrEqual(DIRECT_ANSWER_MS - 100);
      expect(took).toBeLessThan(DIRECT_ANSWER_MS + 3_000);
      // A change sent straight to an owner that never answered may have been made there: it is
      // not sent again through the base URLs; the caller hears that no answer came.
      // It gets the whole timeout, not the direct bound: cut short, a slow success would only
      // become an unknown outcome.
      const writer = new CoordinatorClient({
        baseUrl: proxy.url,
        token: other.token('admin'),
        retry: { maxAttempts: 1 },
        timeoutMs: DIRECT_ANSWER_MS + 1_000,
      });
      await writer.routing(sp, 'g');
      const before = proxy.requests();
      const writeFrom = Date.now();
      await expect(
        writer.request('POST', `/coord/v1/admin/streams/${sp}/groups/g/freeze`, CHANGE),
      ).rejects.toMatchObject({ name: 'CoordinatorUnreachableError' });
      expect(Date.now() - writeFrom).toBeGreaterThanOrEqual(DIRECT_ANSWER_MS + 900);
      expect(proxy.requests()).toBe(before);
    } finally {
      await proxy.close();
      await silent.close();
    }
  });

  it('one base URL that the answers name as the owner: a request goes there once, with the whole timeout', async () => {
    const sp = await groupOwnedBy('o1');
    const owner = replicas.get('o1')!;
    // The owner behind a proxy that names itself as the owner's URL, and answers slower than
    // the direct answer bound (a replica resuming from a pause, a slow change).
    const proxy = await rewritingProxy(owner.url);
    try {
      const client = new CoordinatorClient({
        baseUrl: proxy.url,
        token: owner.token('admin'),
        timeoutMs: DIRECT_ANSWER_MS + 4_000,
        retry: { maxAttempts: 1 },
      });
      await client.routing(sp, 'g'); // the owner's URL is the base URL
      proxy.slow(DIRECT_ANSWER_MS + 1_000);
      // Not cut at the direct bound and sent again to the same replica: one request, answered.
      const before = proxy.requests();
      expect((await client.routing(sp, 'g')).shardCount).toBe(2);
      expect(proxy.requests() - before).toBe(1);
      // A change is not given up at the direct bound either: it gets the client's timeout.
      await client.pauseProducers(sp, 'g', CHANGE);
      expect(proxy.requests() - before).toBe(2);
      expect((await client.routing(sp, 'g')).producersPaused).toBe(true);
    } finally {
      await proxy.close();
    }
  });

  it.each([
    ['GROUP_MOVED', {}],
    // Relayed about another replica: this one forwarded to an owner that did not answer.
    ['OWNER_UNAVAILABLE', { owner: 'o9', ownerUrl: 'http://127.0.0.1:9', reason: 'no-answer' }],
  ])(
    'a 503 %s about one group from its owner among the base URLs: the owner keeps its other groups',
    async (code, details) => {
      const kept = await groupOwnedBy('o1', `kept-${code}`);
      const { sp, owner, other, base } = await ownerBehindProxies(`refused-${code}`);
      try {
        const client = new CoordinatorClient({
          baseUrl: [base.url, owner.url],
          token: other.token('admin'),
        });
        await client.routing(sp, 'g');
        await client.routing(kept, 'g');
        owner.refuse(sp, { error: { code, message: `refused: ${code}`, details } });
        const before = { owner: owner.requests(), base: base.requests() };
        await client.routing(sp, 'g'); // 503 straight from the owner, then through the base URL
        expect({
          owner: owner.requests() - before.owner,
          base: base.requests() - before.base,
        }).toEqual({
          owner: 1,
          base: 1,
        });
        for (let i = 0; i < 3; i++) await client.routing(kept, 'g');
        expect(owner.requests() - before.owner).toBe(4);
        expect(base.requests() - before.base).toBe(1);
      } finally {
        await owner.close();
        await base.close();
      }
    },
  );

  it('a base URL with a path (a gateway routing by prefix): every request keeps the prefix', async () => {
    const sp = await groupOwnedBy('o2', 'prefixed');
    const o2 = replicas.get('o2')!;
    const gateway = await prefixGateway('/coordinator', o2.url);
    try {
      const client = new CoordinatorClient({
        baseUrl: `${gateway.url}/coordinator`,
        token: o2.token('admin'),
        routing: 'any',
      });
      expect((await client.routing(sp, 'g')).shardCount).toBe(2);
      await client.pauseProducers(sp, 'g', CHANGE);
      expect((await client.routing(sp, 'g')).producersPaused).toBe(true);
      expect(gateway.outsidePrefix()).toBe(0);
    } finally {
      await gateway.close();
    }
  });

  it('the only base URL reaches the owner by another address: the group is reached there alone', async () => {
    const sp = await groupOwnedBy('o1', 'sole-alias');
    const owner = replicas.get('o1')!;
    // A plain proxy: the answers keep naming the owner's own advertised URL.
    const alias = await rewritingProxy(owner.url, owner.url);
    try {
      const client = new CoordinatorClient({ baseUrl: alias.url, token: owner.token('admin') });
      await client.routing(sp, 'g');
      const before = alias.requests();
      for (let i = 0; i < 4; i++) await client.routing(sp, 'g');
      // Answered as that replica: its advertised URL is no second way to it.
      expect(alias.requests()).toBe(before + 4);
    } finally {
      await alias.close();
    }
  });

  it('a load balancer as the only base URL: after answers from two replicas, groups go to their owners', async () => {
    const sp = await groupOwnedBy('o1', 'balanced');
    const [o1, o2] = [replicas.get('o1')!, replicas.get('o2')!];
    const lb = await balancer([o1.url, o2.url]);
    try {
      const client = new CoordinatorClient({ baseUrl: lb.url, token: o2.token('admin') });
      // o1 answers first: the balancer could be o1 alone, so the next request goes there too.
      await client.routing(sp, 'g');
      await client.routing(sp, 'g');
      expect(lb.requests()).toBe(2);
      const before = await forwarded(o2);
      for (let i = 0; i < 4; i++) await client.routing(sp, 'g');
      expect(lb.requests()).toBe(2);
      expect(await forwarded(o2)).toBe(before);
    } finally {
      await lb.close();
    }
  });

  it('a slow owner among several base URLs: a change gets the whole timeout and is sent once', async () => {
    const { sp, owner, client } = await ownerFirstAmongBaseUrls('own', {
      timeoutMs: DIRECT_ANSWER_MS + 4_000,
      retry: { maxAttempts: 1 },
    });
    try {
      owner.slow(DIRECT_ANSWER_MS + 1_000);
      const before = owner.requests();
      await client.pauseProducers(sp, 'g', CHANGE);
      expect(owner.requests() - before).toBe(1);
      owner.slow(0);
      expect((await client.routing(sp, 'g')).producersPaused).toBe(true);
    } finally {
      await owner.close();
    }
  });

  it('a gateway in front of the owner answering 502: the group falls back and the gateway is set aside', async () => {
    const sp = await groupOwnedBy('o1', 'gateway');
    const other = replicas.get('o2')!;
    const gateway = await answering(502);
    const base = await rewritingProxy(other.url, gateway.url);
    try {
      const client = new CoordinatorClient({ baseUrl: base.url, token: other.token('admin') });
      await client.routing(sp, 'g'); // learns the gateway as the owner's URL
      for (let i = 0; i < 3; i++) expect((await client.routing(sp, 'g')).shardCount).toBe(2);
      expect(gateway.requests()).toBe(1);
    } finally {
      await base.close();
      await gateway.close();
    }
  });

  it('a held heartbeat whose owner is silent is not held again where it falls back', async () => {
    const { sp, owner, other, base } = await ownerBehindProxies('held');
    try {
      const client = new CoordinatorClient({ baseUrl: base.url, token: other.token('admin') });
      const beat = (reply: HeartbeatReply, timeoutMs?: number, waitMs?: number) =>
        client.heartbeat(
          sp,
          'g',
          steadyBeat('held-1', reply),
          timeoutMs,
          waitMs === undefined ? undefined : { waitMs },
        );
      let reply = await client.heartbeat(sp, 'g', join('held-1'));
      for (let i = 0; i < 3; i++) reply = await beat(reply); // steady, straight to the owner
      owner.slow(6_000); // silent for longer than the held heartbeat's bound
      const waitMs = 2_000;
      const from = Date.now();
      await beat(reply, 5_000, waitMs);
      const took = Date.now() - from;
      // The silent owner gets the wait plus the direct bound; the base URL answers at once.
      expect(took).toBeGreaterThanOrEqual(waitMs + DIRECT_ANSWER_MS - 100);
      expect(took).toBeLessThan(waitMs + DIRECT_ANSWER_MS + 1_000);
    } finally {
      await base.close();
      await owner.close();
    }
  });

  it('a base URL that gave no answer is not tried straight for its groups either', async () => {
    const { sp, owner, client } = await ownerFirstAmongBaseUrls('quiet');
    try {
      owner.slow(DIRECT_ANSWER_MS + 1_500);
      await noAnswer(client, DIRECT_ANSWER_MS); // a shorter timeout would say nothing of it
      const from = Date.now();
      expect((await client.routing(sp, 'g')).shardCount).toBe(2);
      expect(Date.now() - from).toBeLessThan(1_000);
    } finally {
      await owner.close();
    }
  });

  it('falling back to a base URL that gave no answer a moment ago: only the direct bound', async () => {
    const { sp, owner, other, base } = await ownerBehindProxies('both');
    try {
      const client = new CoordinatorClient({
        baseUrl: [base.url, owner.url],
        token: other.token('admin'),
        timeoutMs: DIRECT_ANSWER_MS + 6_000,
        retry: { maxAttempts: 1 },
      });
      await client.routing(sp, 'g'); // learns the owner's URL, the second base URL
      base.slow(4_000); // the other base URL answers nothing in time
      await noAnswer(client, DIRECT_ANSWER_MS); // a shorter timeout would say nothing of it
      // The owner answers a quick 503 about the group; the only other base URL is silent.
      owner.refuse(sp, { error: { code: 'OWNER_MOVING', message: 'handing over' } });
      const from = Date.now();
      await expect(client.routing(sp, 'g')).rejects.toMatchObject({
        name: 'CoordinatorUnreachableError',
      });
      expect(Date.now() - from).toBeLessThan(DIRECT_ANSWER_MS + 1_000);
    } finally {
      await base.close();
      await owner.close();
    }
  });

  it("a caller's short timeout or unserialisable body does not set the owner aside", async () => {
    const { sp, owner, other, client } = await ownerFirstAmongBaseUrls('caller');
    try {
      owner.slow(500);
      await noAnswer(client, 100);
      owner.slow(0);
      await expect(
        client.request('POST', `/coord/v1/admin/streams/${sp}/groups/g/freeze`, { n: 1n }),
      ).rejects.toThrow(TypeError);
      const before = { owner: owner.requests(), forwarded: await forwarded(other) };
      for (let i = 0; i < 3; i++) await client.routing(sp, 'g');
      expect(owner.requests() - before.owner).toBe(3);
      expect(await forwarded(other)).toBe(before.forwarded);
    } finally {
      await owner.close();
    }
  });

  it('a store error relayed from another owner sets that owner aside, not the relaying replica', async () => {
    const cut = await groupOwnedBy('o1', 'relayed');
    const own = await groupOwnedBy('o2', 'relaying');
    // o2 behind a proxy that names itself for o2's groups, and relays a store error for `cut`.
    const relaying = await rewritingProxy(replicas.get('o2')!.url);
    const o1 = replicas.get('o1')!;
    try {
      const client = new CoordinatorClient({
        baseUrl: [relaying.url, o1.url],
        token: o1.token('admin'),
        retry: { maxAttempts: 1 },
      });
      await client.routing(own, 'g'); // o2's group: straight to the relaying proxy from now on
      relaying.refuse(
        cut,
        { error: { code: 'STORE_UNAVAILABLE', message: 'the store did not answer' } },
        { 'x-coord-owner': 'o9', 'x-coord-owner-url': 'http://127.0.0.1:9' },
      );
      await expect(client.routing(cut, 'g')).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
      const before = { relaying: relaying.requests(), forwarded: await forwarded(o1) };
      for (let i = 0; i < 3; i++) await client.routing(own, 'g');
      expect(relaying.requests() - before.relaying).toBe(3);
      expect(await forwarded(o1)).toBe(before.forwarded);
    } finally {
      await relaying.close();
    }
  });

  it('the owner gone: the next requests go to the base URLs, which serve the group again', async () => {
    const sp = await groupOwnedBy('o1');
    const other = replicas.get('o2')!;
    const client = new CoordinatorClient({ baseUrl: other.url, token: other.token('admin') });
    await client.routing(sp, 'g'); // learns o1's URL
    await replicas.get('o1')!.close();
    replicas.delete('o1');
    const routing = await client.routing(sp, 'g');
    expect(routing.shardCount).toBe(2);
    expect(client.ownerHint(sp, 'g')).toBe('o2');
  });
});

describe('owner-direct clients at the edges', () => {
  it.each([
    ['listed twice', (url: string) => [url, url]],
    ['listed with and without a trailing slash', (url: string) => [url, `${url}/`]],
  ])(
    'a silent replica %s: it is set aside, and the other base URL serves',
    async (_how, spellings) => {
      const sp = await groupOwnedBy('o2', 'twice');
      const other = replicas.get('o2')!;
      const silent = await blackHole();
      try {
        const client = new CoordinatorClient({
          baseUrl: [...spellings(silent.url), other.url],
          token: other.token('admin'),
          timeoutMs: 1_000,
        });
        // One replica, one answer missing: the retries go to the replica that answers.
        for (let i = 0; i < 3; i++) expect((await client.routing(sp, 'g')).shardCount).toBe(2);
      } finally {
        await silent.close();
      }
    },
  );

  it.each([
    ['a host and port without a scheme', 'o1.internal:8080'],
    ['a relative path', '/coord-owner'],
    ['no URL at all', 'http://[::1'],
  ])(
    'an owner URL header that is %s: the group is served through the base URLs',
    async (_what, ownerUrl) => {
      const sp = await groupOwnedBy('o2', 'malformed');
      const other = replicas.get('o2')!;
      const proxy = await rewritingProxy(other.url, ownerUrl);
      try {
        // A second base URL (never reached here): with one, the header would name no other way
        // to the replica that answers there, and nothing would be sent to it.
        const client = new CoordinatorClient({
          baseUrl: [proxy.url, 'http://127.0.0.1:1'],
          token: other.token('admin'),
        });
        for (let i = 0; i < 3; i++) expect((await client.routing(sp, 'g')).shardCount).toBe(2);
        await client.pauseProducers(sp, 'g', CHANGE);
        expect((await client.routing(sp, 'g')).producersPaused).toBe(true);
      } finally {
        await proxy.close();
      }
    },
  );

  it('a group named "heartbeat": deleting it is a change, given the whole timeout and sent once', async () => {
    const o2 = replicas.get('o2')!;
    let sp = '';
    for (let i = 0; sp === '' && i < 50; i++) {
      const res = await o2.call('POST', '/coord/v1/admin/groups', {
        user: 'writer',
        body: { streamPrefix: `named-${i}`, consumerGroup: 'heartbeat', shardCount: 1, ...CHANGE },
      });
      if (res.headers.get('x-coord-owner') === 'o2') sp = `named-${i}`;
    }
    // o2 behind a proxy that names itself as the owner's URL, listed first; o2 again behind
    // one that names that proxy, second.
    const owner = await rewritingProxy(o2.url);
    const base = await rewritingProxy(o2.url, owner.url);
    try {
      const client = new CoordinatorClient({
        baseUrl: [owner.url, base.url],
        token: o2.token('admin'),
        timeoutMs: DIRECT_ANSWER_MS + 4_000,
        retry: { maxAttempts: 1 },
      });
      await client.routing(sp, 'heartbeat'); // learns the owner's URL
      owner.slow(DIRECT_ANSWER_MS + 1_000);
      const before = { owner: owner.requests(), base: base.requests() };
      const from = Date.now();
      await client.request('DELETE', `/coord/v1/admin/streams/${sp}/groups/heartbeat`, CHANGE);
      // Not cut at the direct bound and sent again through the other base URL.
      expect({
        owner: owner.requests() - before.owner,
        base: base.requests() - before.base,
      }).toEqual({ owner: 1, base: 0 });
      expect(Date.now() - from).toBeGreaterThanOrEqual(DIRECT_ANSWER_MS + 900);
    } finally {
      await owner.close();
      await base.close();
    }
  });

  it('a held heartbeat whose token expires while its owner is silent is not held again after the renewal', async () => {
    // Two replicas of their own key prefix whose logins mint tokens of 3 s.
    const keyPrefix = randomKeyPrefix();
    const start = (id: string) =>
      startReplicaOn(redis.url, keyPrefix, id, { 'security.token-ttl': '3s' });
    const t1 = await start('t1');
    const t2 = await start('t2');
    const proxies: Array<{ close(): Promise<void> }> = [];
    try {
      await waitFor(
        () =>
          [t1, t2].every(
            (c) => c.services.replicas?.urlOf('t1') && c.services.replicas?.urlOf('t2'),
          ),
        {
          what: 'both replicas seen by each',
        },
      );
      let sp = '';
      for (let i = 0; sp === '' && i < 50; i++) {
        const res = await t2.call('POST', '/coord/v1/admin/groups', {
          user: 'writer',
          body: { streamPrefix: `expiring-${i}`, consumerGroup: 'g', shardCount: 1, ...CHANGE },
        });
        if (res.headers.get('x-coord-owner') === 't1') sp = `expiring-${i}`;
      }
      // t1 behind a proxy that names itself as the owner's URL; t2 behind one that names it.
      const owner = await rewritingProxy(t1.url);
      const base = await rewritingProxy(t2.url, owner.url);
      proxies.push(owner, base);
      const client = new CoordinatorClient({
        baseUrl: base.url,
        username: 'admin',
        password: PASSWORD,
      });
      const loggedInAt = Date.now();
      await client.login('admin', PASSWORD);
      const beat = (reply: HeartbeatReply, timeoutMs?: number, waitMs?: number) =>
        client.heartbeat(
          sp,
          'g',
          steadyBeat('expiring-1', reply),
          timeoutMs,
          waitMs === undefined ? undefined : { waitMs },
        );
      let reply = await client.heartbeat(sp, 'g', join('expiring-1'));
      for (let i = 0; i < 3; i++) reply = await beat(reply); // steady, straight to the owner
      // Sent before the client renews its token (at 80 % of its 3 s), with a token that has
      // expired by the time the silent owner is given up (the wait plus the direct bound).
      expect(Date.now() - loggedInAt).toBeLessThan(2_000);
      owner.slow(8_000);
      const waitMs = 2_000;
      const from = Date.now();
      await beat(reply, 5_000, waitMs);
      const took = Date.now() - from;
      // The silent owner gets the wait plus the direct bound; after the renewal the base URL
      // answers at once, as without it.
      expect(took).toBeLessThan(waitMs + DIRECT_ANSWER_MS + 1_500);
    } finally {
      for (const proxy of proxies) await proxy.close();
      await Promise.all([t1, t2].map((c) => c.close()));
    }
  });

  it('renewing the token through a silent base URL: a heartbeat to its owner still keeps to its timeout', async () => {
    // Two replicas of their own key prefix whose logins mint tokens of 10 s: renewed after 8 s,
    // valid for 9 s at least (their expiry is in whole seconds).
    const keyPrefix = randomKeyPrefix();
    const start = (id: string) =>
      startReplicaOn(redis.url, keyPrefix, id, { 'security.token-ttl': '10s' });
    const r1 = await start('r1');
    const r2 = await start('r2');
    // r2 behind a proxy whose answers name r1's URL for r1's groups, as r2's own would.
    const link = await rewritingProxy(r2.url, r1.url);
    try {
      await waitFor(
        () =>
          [r1, r2].every(
            (c) => c.services.replicas?.urlOf('r1') && c.services.replicas?.urlOf('r2'),
          ),
        { what: 'both replicas seen by each' },
      );
      let sp = '';
      for (let i = 0; sp === '' && i < 50; i++) {
        const res = await r2.call('POST', '/coord/v1/admin/groups', {
          user: 'writer',
          body: { streamPrefix: `renewing-${i}`, consumerGroup: 'g', shardCount: 1, ...CHANGE },
        });
        if (res.headers.get('x-coord-owner') === 'r1') sp = `renewing-${i}`;
      }
      // Every replica listed, r2 (through a link) first: the owner r1 is reached straight.
      const client = new CoordinatorClient({
        baseUrl: [link.url, r1.url],
        username: 'admin',
        password: PASSWORD,
        timeoutMs: 10_000,
      });
      let reply = await client.heartbeat(sp, 'g', join('renewing-1'));
      // r2 pauses; the owner answers. The token is due for renewal and valid for most of a
      // second more: the renewal goes to r2, the heartbeat straight to r1 with the token it has.
      link.slow(60_000);
      await sleep(8_300);
      const from = Date.now();
      reply = await client.heartbeat(
        sp,
        'g',
        steadyBeat('renewing-1', reply),
        DIRECT_ANSWER_MS, // a Consumer's heartbeat timeout
      );
      expect(reply.outcome).toBe('OK');
      expect(Date.now() - from).toBeLessThan(DIRECT_ANSWER_MS + 500);
    } finally {
      link.slow(0);
      await link.close();
      await Promise.all([r1, r2].map((c) => c.close()));
    }
  });

  it('a gateway in front of the owner that passed a scale on, then answered a bare 503: the scale is not sent again', async () => {
    const sp = await groupOwnedBy('o2', 'bare503');
    const o2 = replicas.get('o2')!;
    // A gateway that hands the request to the owner and, once the owner has answered, answers
    // 503 without an error code itself (a proxy whose upstream connection was reset).
    const gateway = await passingOnThen503(o2.url);
    const base = await rewritingProxy(o2.url, gateway.url);
    try {
      // A second base URL (never reached here): the gateway is then no other name for the only
      // base URL's replica, and the owner is reached through it.
      const client = new CoordinatorClient({
        baseUrl: [base.url, 'http://127.0.0.1:1'],
        token: o2.token('admin'),
      });
      await client.routing(sp, 'g'); // learns the gateway as the owner's URL
      const before = { gateway: gateway.requests(), base: base.requests() };
      const outcome = await client
        .request(
          'POST',
          `/coord/v1/admin/streams/${sp}/groups/g/scale`,
          { shardCount: 3, ...CHANGE },
          {
            retry: false,
          },
        )
        .then(
          () => 'accepted',
          (error: { status?: number; code?: string }) => `${error.status} ${error.code}`,
        );
      // The owner started the migration; a 503 that names no code does not say nothing was
      // done, so the caller hears that 503, and the scale is not sent a second time.
      expect({
        outcome,
        gateway: gateway.requests() - before.gateway,
        base: base.requests() - before.base,
      }).toEqual({ outcome: '503 HTTP_503', gateway: 1, base: 0 });
      expect((await client.routing(sp, 'g')).shardCount).toBe(3);
    } finally {
      await base.close();
      await gateway.close();
    }
  });
});

/**
 * Two replicas of their own key prefix (leases of 1.5 s): `a`, whose store link goes through a
 * TCP proxy (and, with `pausable`, whose HTTP is advertised and reached through another), and
 * `b`; a group `a` owns; a client listing both as base URLs, `b` first, that learned `a` is the
 * owner.
 */
/**
 * A group owned by `<tag>-a` (its store behind `storeLink`, its HTTP behind `httpLink`, its
 * advertised URL, when `pausable`), `<tag>-b`, and a client whose base URLs are `b` (behind
 * `bLink`) and then `a`; with `alias`, `a` first, behind a link of its own to `httpLink`: a base
 * URL spelled otherwise than the advertised URL of the replica it reaches.
 */
async function ownerAmongBaseUrls(
  tag: string,
  pausable: boolean,
  options: { alias?: boolean; timeoutMs?: number } = {},
) {
  const keyPrefix = randomKeyPrefix();
  const storeLink = await TcpProxy.start(redis.url.replace('redis://', 'http://'));
  const port = await freePort();
  const httpLink = pausable ? await TcpProxy.start(`http://127.0.0.1:${port}`) : null;
  const start = (id: string, overrides: Record<string, unknown>) =>
    startReplicaOn(redis.url, keyPrefix, id, overrides);
  const a = await start(`${tag}-a`, {
    'store.url': storeLink.url.replace('http://', 'redis://'),
    // A paused process closes no connection: neither may its server while the link stalls.
    ...(httpLink
      ? {
          'http.port': port,
          'http.advertised-url': httpLink.url,
          'http.keep-alive-timeout': '120s',
          'http.headers-timeout': '0',
          'http.request-timeout': '0',
        }
      : {}),
  });
  const b = await start(`${tag}-b`, {});
  const aUrl = httpLink?.url ?? a.url;
  await waitFor(
    () =>
      [a, b].every(
        (c) => c.services.replicas?.urlOf(`${tag}-a`) && c.services.replicas?.urlOf(`${tag}-b`),
      ),
    {
      what: 'both replicas seen by each',
    },
  );
  let sp = '';
  for (let i = 0; sp === '' && i < 50; i++) {
    const res = await b.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: `${tag}-${i}`, consumerGroup: 'g', shardCount: 1, ...CHANGE },
    });
    if (res.headers.get('x-coord-owner') === `${tag}-a`) sp = `${tag}-${i}`;
  }
  if (sp === '') throw new Error(`no group owned by ${tag}-a`);
  // `b` through a link of its own, to make it fail once as a base URL.
  const bLink = await TcpProxy.start(b.url);
  const alias = options.alias ? await TcpProxy.start(aUrl) : null;
  const client = new CoordinatorClient({
    baseUrl: alias ? [alias.url, bLink.url] : [bLink.url, aUrl],
    token: b.token('admin'),
    ...(options.timeoutMs ? { timeoutMs: options.timeoutMs } : {}),
  });
  const version = (await client.routing(sp, 'g')).metadataVersion;
  expect(client.ownerHint(sp, 'g')).toBe(`${tag}-a`);
  /** `b` names itself as the owner: the lease moved. */
  const movedToB = () =>
    waitFor(
      async () => {
        const res = await b.call('GET', `/coord/v1/routing/streams/${sp}/groups/g`, {
          user: 'producer',
        });
        await res.body?.cancel();
        return res.status === 200 && res.headers.get('x-coord-owner') === `${tag}-b`;
      },
      { timeoutMs: 20_000, intervalMs: 100, what: `${tag}-b serves the group` },
    );
  const close = async () => {
    httpLink?.setMode('pass');
    storeLink.setMode('pass');
    // A replica that lost its store may take long to hand over what it thinks it holds.
    await Promise.all(
      [a, b].map((c) => Promise.race([c.close().catch(() => undefined), sleep(5_000)])),
    );
    await Promise.all([storeLink.close(), httpLink?.close(), bLink.close(), alias?.close()]);
  };
  return { client, sp, version, storeLink, httpLink, bLink, movedToB, close };
}

describe('an owner among several base URLs that fails', () => {
  it('answering 503 (cut off from its store): the group goes to the other base URL within the call', async () => {
    const run = await ownerAmongBaseUrls('cut', false);
    try {
      // The other base URL gave no answer a moment ago: it is demoted, yet still the way out.
      run.bLink.setMode('stall');
      await noAnswer(run.client, DIRECT_ANSWER_MS); // a shorter timeout would say nothing of it
      run.bLink.setMode('pass');
      await run.storeLink.close();
      await run.movedToB();
      const took: number[] = [];
      for (let i = 0; i < 5; i++) {
        const from = Date.now();
        await run.client.routing(run.sp, 'g');
        took.push(Date.now() - from);
      }
      expect(run.client.ownerHint(run.sp, 'g')).toBe('cut-b');
      // The first call learns of the 503 and goes on to the other base URL; the rest go there.
      expect(took[0]).toBeLessThan(DIRECT_ANSWER_MS + 2_000);
      expect(Math.max(...took.slice(1))).toBeLessThan(1_000);
    } finally {
      await run.close();
    }
  }, 60_000);

  it('paused (accepts, answers nothing): a long poll falls back after its wait plus the direct answer bound', async () => {
    const run = await ownerAmongBaseUrls('pause', true);
    try {
      run.httpLink!.setMode('stall');
      run.storeLink.setMode('stall');
      const waitMs = 1_000;
      const from = Date.now();
      await run.client.routing(run.sp, 'g', { afterVersion: run.version, waitMs });
      const took = Date.now() - from;
      // The owner's base URL given up at the bound, then the other replica, which forwards to the
      // paused owner until the lease moves, then serves the group (each attempt waits `waitMs`).
      expect(took).toBeGreaterThanOrEqual(waitMs + DIRECT_ANSWER_MS);
      expect(took).toBeLessThan(waitMs + DIRECT_ANSWER_MS + 2 * (waitMs + 2_000) + 2_000);
      expect(run.client.ownerHint(run.sp, 'g')).toBe('pause-b');
    } finally {
      await run.close();
    }
  }, 60_000);

  it('paused, and a base URL reaches it by another address: that base URL is set aside with it', async () => {
    const timeoutMs = 10_000;
    const run = await ownerAmongBaseUrls('alias', true, { alias: true, timeoutMs });
    try {
      run.httpLink!.setMode('stall');
      run.storeLink.setMode('stall');
      const from = Date.now();
      await run.client.routing(run.sp, 'g');
      const took = Date.now() - from;
      // The owner given up at the bound; then not its other address (the first base URL, which
      // answered as that replica), which would take the whole timeout, but the other replica.
      expect(took).toBeGreaterThanOrEqual(DIRECT_ANSWER_MS);
      expect(took).toBeLessThan(DIRECT_ANSWER_MS + timeoutMs);
      expect(run.client.ownerHint(run.sp, 'g')).toBe('alias-b');
    } finally {
      await run.close();
    }
  }, 60_000);
});

/**
 * A group o1 owns, o1 behind a proxy that names itself as the owner's URL, and a client whose
 * base URLs are that proxy, then o2, that learned the proxy as the group's owner.
 */
async function ownerFirstAmongBaseUrls(
  tag: string,
  options: { timeoutMs?: number; retry?: { maxAttempts: number } } = {},
) {
  const sp = await groupOwnedBy('o1', tag);
  const owner = await rewritingProxy(replicas.get('o1')!.url);
  const other = replicas.get('o2')!;
  const client = new CoordinatorClient({
    baseUrl: [owner.url, other.url],
    token: other.token('admin'),
    ...options,
  });
  await client.routing(sp, 'g');
  return { sp, owner, other, client };
}

/**
 * A group o1 owns, o1 behind a proxy that names itself as the owner's URL (`owner`), and o2
 * behind one whose every answer names that proxy as the owner's URL (`base`).
 */
async function ownerBehindProxies(tag: string) {
  const sp = await groupOwnedBy('o1', tag);
  const owner = await rewritingProxy(replicas.get('o1')!.url);
  const other = replicas.get('o2')!;
  const base = await rewritingProxy(other.url, owner.url);
  return { sp, owner, other, base };
}

/** A health check given `timeoutMs` that the base URL of the moment does not answer. */
async function noAnswer(client: CoordinatorClient, timeoutMs: number): Promise<void> {
  await expect(
    client.request('GET', '/coord/v1/monitoring/health/live', undefined, {
      timeoutMs,
      retry: false,
    }),
  ).rejects.toMatchObject({ name: 'CoordinatorUnreachableError' });
}

/**
 * A gateway to `target` that passes every request on and, once the answer came, answers 503
 * with a plain-text body instead (a proxy whose upstream connection was reset before headers).
 */
async function passingOnThen503(target: string) {
  const to = new URL(target);
  let count = 0;
  const server = createServer((req, res) => {
    count++;
    const upstream = httpRequest(
      { host: to.hostname, port: to.port, path: req.url, method: req.method, headers: req.headers },
      (answer) => {
        answer.resume();
        answer.on('end', () => {
          res.writeHead(503, { 'content-type': 'text/plain' });
          res.end('upstream connect error or disconnect/reset before headers');
        });
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  return { ...(await listening(server)), requests: () => count };
}

/** A server that answers every request with `status` and counts them (a broken gateway). */
async function answering(status: number) {
  let count = 0;
  const server = createServer((req, res) => {
    count++;
    req.resume();
    res.writeHead(status, { 'content-type': 'text/plain' });
    res.end('bad gateway');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests: () => count,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A server that accepts connections and never answers (a paused process). */
async function blackHole() {
  const sockets = new Set<Socket>();
  const server = createNetServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * An HTTP proxy to `target` that sets `X-Coord-Owner-Url` to `ownerUrl` on every answer (without
 * one: its own URL, as if it were the owner), and holds each request `slow(ms)` before passing it on.
 */
async function rewritingProxy(target: string, ownerUrl?: string) {
  let count = 0;
  let delayMs = 0;
  let url = ownerUrl;
  let refusal: {
    readonly sp: string;
    readonly body: unknown;
    readonly headers: Readonly<Record<string, string>>;
  } | null = null;
  const server: Server = createServer((req, res) => {
    count++;
    if (refusal !== null && req.url?.includes(`/streams/${refusal.sp}/groups/`)) {
      // A 503 about that group only, as an owner that just handed it over answers.
      res.writeHead(503, {
        'content-type': 'application/json',
        'retry-after': '1',
        ...refusal.headers,
      });
      res.end(JSON.stringify(refusal.body));
      req.resume();
      return;
    }
    const forward = () =>
      passOn(req, res, target, {
        headers: (headers) =>
          headers['x-coord-owner'] ? { ...headers, 'x-coord-owner-url': url } : headers,
      });
    if (delayMs > 0) setTimeout(forward, delayMs);
    else forward();
  });
  const listener = await listening(server);
  url ??= listener.url;
  return {
    ...listener,
    requests: () => count,
    slow: (ms: number) => {
      delayMs = ms;
    },
    /** Answers 503 with `body` (and `headers`) for the groups of stream prefix `sp` from now on. */
    refuse: (sp: string, body: unknown, headers: Record<string, string> = {}) => {
      refusal = { sp, body, headers };
    },
  };
}

/** An HTTP proxy that sends each request to the next of `targets` in turn (a load balancer). */
async function balancer(targets: readonly string[]) {
  let count = 0;
  const server: Server = createServer((req, res) =>
    passOn(req, res, targets[count++ % targets.length]!),
  );
  return { ...(await listening(server)), requests: () => count };
}

/** A gateway that serves `target` under `prefix` (stripped) and answers 404 elsewhere. */
async function prefixGateway(prefix: string, target: string) {
  let outside = 0;
  const server: Server = createServer((req, res) => {
    if (!req.url?.startsWith(`${prefix}/`)) {
      outside++;
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('not under the prefix');
      req.resume();
      return;
    }
    passOn(req, res, target, { path: req.url.slice(prefix.length) });
  });
  return { ...(await listening(server)), outsidePrefix: () => outside };
}

/**
 * Passes `req` on to `target` (at `path`, its own by default) and the answer back, its headers
 * as `headers` makes them; a caller that gave up takes its request upstream with it.
 */
function passOn(
  req: IncomingMessage,
  res: ServerResponse,
  target: string,
  options: {
    readonly path?: string;
    readonly headers?: (headers: IncomingHttpHeaders) => IncomingHttpHeaders;
  } = {},
): void {
  const to = new URL(target);
  const upstream = httpRequest(
    {
      host: to.hostname,
      port: to.port,
      path: options.path ?? req.url,
      method: req.method,
      headers: req.headers,
    },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, options.headers?.(answer.headers) ?? answer.headers);
      answer.pipe(res);
    },
  );
  upstream.on('error', () => res.destroy());
  req.pipe(upstream);
}

/** `server` listening on a free port of 127.0.0.1: its URL, and how to close it. */
async function listening(server: Server) {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
