import { createHash } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/machines/clock.js';
import { READ_REVISIONS_SCRIPT } from '../../src/store/redis-store.js';
import {
  CHANGE,
  startTestCoordinator,
  type TestCoordinator,
  useCoordinator,
} from '../support/coordinator.js';
import { joinBody, SimulatedMember } from '../support/members.js';
import { monitorRedis } from '../support/redis-monitor.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';

const OVERRIDES = {
  'membership.assignment-debounce': '0ms',
  'membership.session-timeout': '10s',
  'membership.rebalance-timeout': '5s',
};

async function createGroup(c: TestCoordinator, sp: string, shardCount: number) {
  const res = await c.call('POST', '/coord/v1/admin/groups', {
    user: 'writer',
    body: { streamPrefix: sp, consumerGroup: 'g', shardCount, ...CHANGE },
  });
  expect(res.status).toBe(201);
}

describe.each(['memory', 'redis'] as const)('heartbeat over HTTP on the %s store', (storeKind) => {
  let c: TestCoordinator;
  const clock = new ManualClock(Date.now());
  useCoordinator({ store: storeKind, clock, overrides: OVERRIDES }, (started) => (c = started));

  it('a joining member gets every shard, then a second member gets half after the first revokes', async () => {
    await createGroup(c, 'hb1', 4);
    const a = new SimulatedMember(c, 'a', 'hb1', 'g');
    const b = new SimulatedMember(c, 'b', 'hb1', 'g');
    let reply = await a.beat();
    expect(reply.outcome).toBe('OK');
    reply = await a.beat();
    expect(reply.assignedShards).toEqual([0, 1, 2, 3]);
    expect(reply.outcome).toBe('OK');

    reply = await b.beat();
    expect(reply.assignedShards).toEqual([]);
    expect(reply.outcome).toBe('REVOKE_PENDING');
    expect(reply.pendingShards).toHaveLength(2);
    expect(reply.heartbeatIntervalMs).toBe(250);

    reply = await a.beat({ revokeDone: false });
    expect(reply.revokeShards).toHaveLength(2);
    expect(reply.outcome).toBe('REVOKE_PENDING');
    // b is not granted anything while a still drains
    expect((await b.beat()).assignedShards).toEqual([]);
    await a.beat(); // reports DONE
    reply = await b.beat();
    expect(reply.outcome).toBe('OK');
    expect(reply.assignedShards).toHaveLength(2);
    expect((await a.beat()).assignedShards).toHaveLength(2);

    const assignments = (await (
      await c.call('GET', '/coord/v1/monitoring/streams/hb1/groups/g/assignments', {
        user: 'reader',
      })
    ).json()) as {
      shards: Array<{ state: string; owner: string; target: string }>;
    };
    expect(assignments.shards.every((s) => s.state === 'assigned' && s.owner === s.target)).toBe(
      true,
    );
    const members = (await (
      await c.call('GET', '/coord/v1/monitoring/streams/hb1/groups/g/members', { user: 'reader' })
    ).json()) as {
      members: Array<{ memberId: string; assignedShards: number[] }>;
    };
    expect(members.members.map((m) => m.assignedShards.length)).toEqual([2, 2]);
  });

  it('a stale epoch is fenced and a rejoin with epoch 0 is accepted', async () => {
    await createGroup(c, 'hb2', 2);
    const a = new SimulatedMember(c, 'a', 'hb2', 'g');
    await a.beat();
    await a.beat();
    const stale = await a.beat({ epoch: a.epoch + 5 });
    expect(stale.outcome).toBe('FENCED_MEMBER_EPOCH');
    const again = await a.beat();
    expect(again.outcome).toBe('OK');
  });

  it('a higher reported metadataVersion is answered SYNC_METADATA and counted', async () => {
    await createGroup(c, 'hb3', 1);
    const a = new SimulatedMember(c, 'a', 'hb3', 'g');
    await a.beat();
    a.metadataVersion = 99;
    const reply = await a.beat();
    expect(reply.outcome).toBe('SYNC_METADATA');
    expect(reply.metadataVersion).toBe(1);
    const metrics = await (await c.call('GET', '/metrics')).text();
    expect(metrics).toMatch(/coord_metadata_version_regression_total\{source="heartbeat"\} [1-9]/);
  });

  it('an unsupported coordinationVersion is a 400 naming the range; an unknown group is a 404', async () => {
    await createGroup(c, 'hb4', 1);
    const res = await c.call('POST', '/coord/v1/consumer/streams/hb4/groups/g/heartbeat', {
      user: 'consumer',
      body: joinBody('m', { coordinationVersion: 7 }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      error: { code: 'UNSUPPORTED_COORDINATION_VERSION', details: { min: 1, max: 1 } },
    });
    const missing = await c.call('POST', '/coord/v1/consumer/streams/nope/groups/g/heartbeat', {
      user: 'consumer',
      body: joinBody('m'),
    });
    expect(missing.status).toBe(404);
  });

  it('a silent member expires after its session timeout and its shards move', async () => {
    await createGroup(c, 'hb5', 2);
    const a = new SimulatedMember(c, 'a', 'hb5', 'g');
    const b = new SimulatedMember(c, 'b', 'hb5', 'g');
    await a.beat();
    await b.beat();
    await a.beat();
    await b.beat();
    clock.advance(6_000);
    await b.beat();
    clock.advance(6_000);
    await c.host.sweep();
    const reply = await b.beat();
    expect(reply.assignedShards).toEqual([0, 1]);
    expect((await a.beat()).outcome).toBe('FENCED_MEMBER_EPOCH');
    const metrics = await (await c.call('GET', '/metrics')).text();
    expect(metrics).toMatch(/coord_member_expiry_total [1-9]/);
  });
});

describe('restart on the Redis store keeps every member', () => {
  let redis: RedisServerHandle;
  afterAll(async () => redis?.stop());

  it('keeps epochs and assignments, fences nobody, and gives a full session timeout of grace', async () => {
    redis = await startRedisServer();
    const clock = new ManualClock(Date.now());
    const first = await startTestCoordinator({
      store: 'redis',
      redisUrl: redis.url,
      clock,
      overrides: OVERRIDES,
    });
    await createGroup(first, 'rs', 4);
    const a = new SimulatedMember(first, 'a', 'rs', 'g');
    const b = new SimulatedMember(first, 'b', 'rs', 'g');
    for (let i = 0; i < 4; i++) {
      await a.beat();
      await b.beat();
    }
    expect(a.last?.assignedShards).toHaveLength(2);
    const before = { a: [a.epoch, [...a.owned]], b: [b.epoch, [...b.owned]] };
    await first.close();

    clock.advance(9_000);
    const second = await startTestCoordinator({
      store: 'redis',
      redisUrl: redis.url,
      clock,
      overrides: { ...OVERRIDES, 'store.key-prefix': first.keyPrefix },
    });
    try {
      // Point the simulated members at the new process.
      const a2 = Object.assign(new SimulatedMember(second, 'a', 'rs', 'g'), {
        epoch: a.epoch,
        owned: a.owned,
        last: a.last,
        assignmentEpoch: a.assignmentEpoch,
        metadataVersion: a.metadataVersion,
      });
      clock.advance(9_000); // 18 s since a's last heartbeat: more than the session timeout, but grace started at load
      const ra = await a2.beat();
      expect(ra.outcome).toBe('OK');
      expect([ra.memberEpoch, ra.assignedShards]).toEqual(before.a);
      clock.advance(9_000);
      await second.host.sweep();
      const b2 = Object.assign(new SimulatedMember(second, 'b', 'rs', 'g'), {
        epoch: b.epoch,
        owned: b.owned,
        last: b.last,
        assignmentEpoch: b.assignmentEpoch,
        metadataVersion: b.metadataVersion,
      });
      const rb = await b2.beat();
      expect(rb.outcome).toBe('OK');
      expect([rb.memberEpoch, rb.assignedShards]).toEqual(before.b);
      const metrics = await (await second.call('GET', '/metrics')).text();
      expect(metrics).not.toMatch(/coord_fenced_members_total\{[^}]*\} [1-9]/);
    } finally {
      await second.close();
    }
  });
});

describe('steady-state heartbeats write nothing to Redis', () => {
  let redis: RedisServerHandle;
  let c: TestCoordinator;
  // The verify loop reads every held group each `verify-interval`: often enough here that its
  // reads fall within the heartbeats below, every run.
  const overrides = { ...OVERRIDES, 'store.verify-interval': '100ms' };
  useCoordinator({ store: 'redis', overrides }, (started, server) => {
    c = started;
    redis = server as RedisServerHandle;
  });

  it('1,000 steady-state heartbeats cause no write command', async () => {
    await createGroup(c, 'steady', 8);
    const members = ['a', 'b', 'c', 'd'].map((id) => new SimulatedMember(c, id, 'steady', 'g'));
    // Beat until the group settled: two shards each, nothing left to move.
    await waitFor(
      async () => {
        for (const m of members) await m.beat();
        return members.every((m) => m.last?.outcome === 'OK' && m.last.assignedShards.length === 2);
      },
      { what: 'the group to settle' },
    );

    // Every command Redis runs meanwhile, seen through MONITOR: the replica registry and the
    // lease renewals write in the background; the group's own keys must not be.
    const monitor = await monitorRedis(redis.port);
    const seen = monitor.seen;
    // The four members beat side by side, as real ones do (and four times sooner than in turn).
    for (let i = 0; i < 250; i++) await Promise.all(members.map((m) => m.beat()));
    // A known write, to know MONITOR was watching: it must be seen.
    await redis.client().set('monitor-probe', '1');
    await waitFor(() =>
      seen.some(([command, key]) => command === 'set' && key === 'monitor-probe'),
    );
    await monitor.stop();
    expect(monitor.errors).toEqual([]);
    const writes = [
      'hset',
      'hdel',
      'hincrby',
      'del',
      'evalsha',
      'eval',
      'fcall',
      'xadd',
      'zadd',
      'set',
    ];
    // Group writes are scripts; the one script that only reads (the verify loop's revision
    // read, every `verify-interval`) is not a write, by its text (EVAL, the first time a replica
    // runs it) or its SHA1 (EVALSHA, after).
    const reads = new Set([
      READ_REVISIONS_SCRIPT,
      createHash('sha1').update(READ_REVISIONS_SCRIPT).digest('hex'),
    ]);
    const groupWrites = seen.filter(
      ([command, ...args]) =>
        writes.includes((command ?? '').toLowerCase()) &&
        !reads.has(args[0] ?? '') &&
        // A key of the group (its lease and the replica registry entries excepted).
        args.some(
          (arg) =>
            arg.startsWith(c.keyPrefix) &&
            arg.includes('steady') &&
            !arg.endsWith(':lease') &&
            !arg.startsWith(`${c.keyPrefix}:replica`),
        ),
    );
    expect(groupWrites).toEqual([]);
    // The group's metadata was read meanwhile (the verify loop), and that was no write.
    const read = seen.some(
      ([command, script]) =>
        ['eval', 'evalsha'].includes((command ?? '').toLowerCase()) && reads.has(script ?? ''),
    );
    expect(read).toBe(true);
    expect(members.every((m) => m.last?.outcome === 'OK')).toBe(true);
  });
});
