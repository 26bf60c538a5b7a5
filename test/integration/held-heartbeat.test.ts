/**
 * Held heartbeats (docs/protocol.md "Held heartbeats") over real HTTP on a real redis-server: a
 * steady heartbeat that asks for `waitMs` is held and answered the moment its member must act,
 * also through another replica; a held reply is never left hanging when its group moves, its
 * lease is lost or its replica stops; the SDK holds its heartbeats by default.
 *
 * The waits asked for are longer than the test's own timeout: a test passes only if the reply
 * came because something happened, never because the wait ran out.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Consumer, CoordinatorClient } from '../../src/client/index.js';
import type { HeartbeatReply } from '../../src/machines/protocol.js';
import { keyNames } from '../../src/store/keys.js';
import {
  CHANGE,
  startTestCoordinator,
  startTestReplica,
  type TestCoordinator,
  waitUntilSeenByEach,
} from '../support/coordinator.js';
import { SimulatedMember } from '../support/members.js';
import {
  randomKeyPrefix,
  startRedisServer,
  waitFor,
  type RedisServerHandle,
} from '../support/redis-server.js';

/** Longer than any test here may run: a reply that comes came because something happened. */
const WAIT_MS = 20_000;
const TEST_TIMEOUT = { timeout: 15_000 };
/** Sessions long enough that a 20 s hold is allowed (held at most half the session). */
const SESSION = '60s';

let redis: RedisServerHandle;
beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await redis?.stop();
});

const path = (sp: string) => `/coord/v1/consumer/streams/${sp}/groups/g/heartbeat`;

/** A member's next heartbeat body (what it was told last), asking for `waitMs`. */
function heldBody(member: SimulatedMember, waitMs = WAIT_MS) {
  return {
    memberId: member.memberId,
    memberEpoch: member.epoch,
    assignmentEpoch: member.assignmentEpoch,
    metadataVersion: member.metadataVersion,
    lifecycleId: member.last?.lifecycleId,
    currentAssignments: member.owned,
    revokeProgress: [],
    waitMs,
  };
}

async function heldCount(c: TestCoordinator): Promise<number> {
  const text = await (await c.call('GET', '/metrics')).text();
  return Number(/^coord_held_heartbeats (\d+)/m.exec(text)?.[1] ?? 0);
}

/** `coord_heartbeats_total{outcome="GROUP_MOVED"}` of `c`. */
async function movedCount(c: TestCoordinator): Promise<number> {
  const text = await (await c.call('GET', '/metrics')).text();
  return Number(/^coord_heartbeats_total\{outcome="GROUP_MOVED"\} (\d+)/m.exec(text)?.[1] ?? 0);
}

async function createGroup(c: TestCoordinator, sp: string, shardCount = 4): Promise<void> {
  const res = await c.call('POST', '/coord/v1/admin/groups', {
    user: 'writer',
    body: { streamPrefix: sp, consumerGroup: 'g', shardCount, ...CHANGE },
  });
  expect(res.status).toBe(201);
}

/** A member that joined and settled: its last reply is OK and changed nothing. */
async function settled(c: TestCoordinator, sp: string, id: string): Promise<SimulatedMember> {
  const member = new SimulatedMember(c, id, sp, 'g');
  await member.beat();
  let reply = await member.beat();
  while (reply.revokeShards.length > 0 || reply.pendingShards.length > 0)
    reply = await member.beat();
  expect(reply.outcome).toBe('OK');
  return member;
}

describe('one coordinator', () => {
  let c: TestCoordinator;
  beforeAll(async () => {
    c = await startTestCoordinator({
      store: 'redis',
      redisUrl: redis.url,
      overrides: { 'membership.session-timeout': SESSION },
    });
  });
  afterAll(async () => {
    await c?.close();
  });

  it(
    'a held heartbeat returns with revokeShards as soon as another member joins',
    TEST_TIMEOUT,
    async () => {
      await createGroup(c, 'hb-join');
      const a = await settled(c, 'hb-join', 'a');
      const held = c.call('POST', path('hb-join'), { user: 'consumer', body: heldBody(a) });
      await waitFor(async () => (await heldCount(c)) === 1, { what: 'the heartbeat held' });
      await new SimulatedMember(c, 'b', 'hb-join', 'g').beat();
      const res = await held;
      expect(res.status).toBe(200);
      const reply = (await res.json()) as HeartbeatReply;
      expect(reply.outcome).toBe('REVOKE_PENDING');
      expect(reply.revokeShards).toHaveLength(2);
      expect(await heldCount(c)).toBe(0);
    },
  );

  it(
    'a reply with news is not held: a join asking to wait is answered at once',
    TEST_TIMEOUT,
    async () => {
      await createGroup(c, 'hb-news');
      const res = await c.call('POST', path('hb-news'), {
        user: 'consumer',
        body: { ...heldBody(new SimulatedMember(c, 'a', 'hb-news', 'g')), memberEpoch: 0 },
      });
      expect(res.status).toBe(200);
      expect(((await res.json()) as HeartbeatReply).assignedShards).toEqual([0, 1, 2, 3]);
    },
  );

  it('waitMs is validated: an integer from 0 to 60000', async () => {
    await createGroup(c, 'hb-bad');
    const a = new SimulatedMember(c, 'a', 'hb-bad', 'g');
    for (const waitMs of [-1, 1.5, 60_001, 'soon']) {
      const res = await c.call('POST', path('hb-bad'), {
        user: 'consumer',
        body: { ...heldBody(a), memberEpoch: 0, waitMs },
      });
      expect(res.status, String(waitMs)).toBe(400);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe(
        'VALIDATION_FAILED',
      );
    }
  });
});

describe('a coordinator that stops', () => {
  // One replica (embedded): nobody to hand the group to, so the held heartbeat is decided on
  // the group as it is. With replicas the group is handed over first (see below).
  it('answers its held heartbeats before it closes its connections', TEST_TIMEOUT, async () => {
    const c = await startTestCoordinator({
      store: 'memory',
      overrides: { 'membership.session-timeout': SESSION },
    });
    try {
      await createGroup(c, 'hb-stop');
      const a = await settled(c, 'hb-stop', 'a');
      const held = c.call('POST', path('hb-stop'), { user: 'consumer', body: heldBody(a) });
      await waitFor(async () => (await heldCount(c)) === 1, { what: 'the heartbeat held' });
      await c.close();
      const res = await held;
      expect(res.status).toBe(200);
      expect(((await res.json()) as HeartbeatReply).assignedShards).toEqual(a.owned);
    } finally {
      await c.close();
    }
  });
});

describe('two replicas on one Redis', () => {
  const prefix = randomKeyPrefix();
  const replicas = new Map<string, TestCoordinator>();

  async function start(id: string): Promise<TestCoordinator> {
    const c = await startTestReplica(redis.url, prefix, id, SESSION);
    replicas.set(id, c);
    return c;
  }

  beforeAll(async () => {
    for (const id of ['r1', 'r2']) await start(id);
    await waitUntilSeenByEach(replicas.values(), ['r1', 'r2']);
  }, 60_000);

  afterAll(async () => {
    for (const c of replicas.values()) await c.close();
  });

  /** A group's owner (as X-Coord-Owner says) and the other replica. */
  async function ownerAndOther(sp: string) {
    const any = replicas.get('r1')!;
    await createGroup(any, sp);
    const res = await any.call('GET', `/coord/v1/monitoring/streams/${sp}/groups/g`, {
      user: 'reader',
    });
    const ownerId = res.headers.get('x-coord-owner') ?? '';
    const owner = replicas.get(ownerId);
    const other = [...replicas.values()].find((r) => r !== owner);
    if (!owner || !other) throw new Error(`no owner ${ownerId}`);
    return { ownerId, owner, other };
  }

  it(
    'a heartbeat sent to the other replica is held at the owner and answered through it',
    TEST_TIMEOUT,
    async () => {
      const sp = `fwd-${randomBytes(3).toString('hex')}`;
      const { ownerId, owner, other } = await ownerAndOther(sp);
      const a = await settled(other, sp, 'a');
      const held = other.call('POST', path(sp), { user: 'consumer', body: heldBody(a) });
      await waitFor(async () => (await heldCount(owner)) === 1, { what: 'held at the owner' });
      expect(await heldCount(other)).toBe(0);
      await new SimulatedMember(other, 'b', sp, 'g').beat();
      const res = await held;
      expect(res.status).toBe(200);
      expect(res.headers.get('x-coord-owner')).toBe(ownerId);
      expect(((await res.json()) as HeartbeatReply).revokeShards).toHaveLength(2);
    },
  );

  it(
    'a lost lease answers the held heartbeat GROUP_MOVED, not from memory',
    TEST_TIMEOUT,
    async () => {
      const sp = `lost-${randomBytes(3).toString('hex')}`;
      const { owner } = await ownerAndOther(sp);
      const a = await settled(owner, sp, 'a');
      const held = owner.call('POST', path(sp), { user: 'consumer', body: heldBody(a) });
      await waitFor(async () => (await heldCount(owner)) === 1, { what: 'the heartbeat held' });
      const movedBefore = await movedCount(owner);
      // Another holder takes the lease key: the owner's next renew fails and it drops the group.
      const leaseKey = keyNames(prefix).lease({ streamPrefix: sp, consumerGroup: 'g' });
      await redis.client().set(leaseKey, 'intruder', 'PX', 20_000);
      try {
        const res = await held;
        expect(res.status).toBe(503);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe('GROUP_MOVED');
        // Answered here, not forwarded: counted here, once.
        expect((await movedCount(owner)) - movedBefore).toBe(1);
      } finally {
        await redis.client().del(leaseKey);
      }
    },
  );

  it(
    'a group handed over by its stopping owner answers the held heartbeat GROUP_MOVED',
    TEST_TIMEOUT,
    async () => {
      const sp = `move-${randomBytes(3).toString('hex')}`;
      const { ownerId, owner, other } = await ownerAndOther(sp);
      const a = await settled(owner, sp, 'a');
      const held = owner.call('POST', path(sp), { user: 'consumer', body: heldBody(a) });
      await waitFor(async () => (await heldCount(owner)) === 1, { what: 'the heartbeat held' });
      await owner.close();
      replicas.delete(ownerId);
      const res = await held;
      expect(res.status).toBe(503);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('GROUP_MOVED');
      // The member asks again (the survivor now) and keeps its epoch.
      const moved = Object.assign(new SimulatedMember(other, 'a', sp, 'g'), {
        epoch: a.epoch,
        owned: a.owned,
        assignmentEpoch: a.assignmentEpoch,
        metadataVersion: a.metadataVersion,
      });
      await waitFor(
        async () => {
          const reply = await moved.beat();
          return reply.outcome === 'OK' && reply.memberEpoch === a.epoch;
        },
        { what: 'the member served by the survivor with its epoch', timeoutMs: 10_000 },
      );
    },
  );
});

describe('the SDK holds its heartbeats', () => {
  let c: TestCoordinator;
  let streams: RedisServerHandle;
  beforeAll(async () => {
    streams = await startRedisServer();
    // A steady member is told to heartbeat only every 25 s: a handoff within the test's
    // timeout needs the coordinator to reach it at once.
    c = await startTestCoordinator({
      store: 'memory',
      overrides: {
        'membership.heartbeat-interval': '25s',
        'membership.session-timeout': SESSION,
      },
    });
  });
  afterAll(async () => {
    await c?.close();
    await streams?.stop();
  });

  function consumer(sp: string, memberId: string): Consumer {
    const client = new CoordinatorClient({ baseUrl: c.url, token: c.token('consumer') });
    const one = new Consumer({
      client,
      redis: streams.url,
      streamPrefix: sp,
      consumerGroup: 'g',
      memberId,
      blockMs: 50,
      sessionTimeoutMs: 60_000,
      handler: async () => undefined,
    });
    one.on('error', () => undefined);
    return one;
  }

  it(
    'a consumer joining gets its shards without waiting for the others’ next heartbeat',
    TEST_TIMEOUT,
    async () => {
      await createGroup(c, 'sdk-hold');
      const a = consumer('sdk-hold', 'a');
      const b = consumer('sdk-hold', 'b');
      try {
        await a.start();
        await waitFor(() => a.shards().length === 4, { what: 'a owns every shard' });
        await waitFor(async () => (await heldCount(c)) === 1, { what: "a's heartbeat held" });
        await b.start();
        await waitFor(() => a.shards().length === 2 && b.shards().length === 2, {
          what: 'the shards shared',
          timeoutMs: 10_000,
        });
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
    },
  );
});
