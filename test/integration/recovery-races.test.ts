import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/machines/clock.js';
import {
  CHANGE,
  startTestCoordinator,
  type TestCoordinator,
  useCoordinator,
  groupView,
  recover,
} from '../support/coordinator.js';
import { coordctl } from '../support/cli.js';
import { joinBody, SimulatedMember } from '../support/members.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';

const OVERRIDES = { 'membership.assignment-debounce': '0ms' };

describe('recovery keeps epochs and versions going up', () => {
  let redis: RedisServerHandle;
  const opened: TestCoordinator[] = [];
  const clock = new ManualClock(Date.now());
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => {
    for (const c of opened) await c.close();
    await redis?.stop();
  });
  const start = async (keyPrefix?: string) => {
    const c = await startTestCoordinator({
      store: 'redis',
      redisUrl: redis.url,
      clock,
      overrides: { ...OVERRIDES, ...(keyPrefix ? { 'store.key-prefix': keyPrefix } : {}) },
    });
    opened.push(c);
    return c;
  };
  const view = groupView;
  const backup = async (c: TestCoordinator, sp: string) => {
    const file = join(mkdtempSync(join(tmpdir(), 'coord-backup-')), 'b.json');
    await coordctl([
      'backup',
      '--url',
      redis.url,
      '--key-prefix',
      c.keyPrefix,
      '--group',
      `${sp}:g`,
      '--out',
      file,
    ]);
    return file;
  };
  const restore = (c: TestCoordinator, file: string) =>
    coordctl(['restore', '--url', redis.url, '--key-prefix', c.keyPrefix, '--in', file]);
  const failClosed = async (c: TestCoordinator, sp: string) => {
    clock.advance(5_000);
    await waitFor(async () => (await view(c, sp)).status === 'FAILED_CLOSED', {
      what: `${sp} failed closed`,
    });
  };

  it('RESUME fences a process that still holds an epoch issued after the backup', async () => {
    const c = await start();
    await c.call('PUT', '/coord/v1/admin/streams/re/groups/g', {
      user: 'writer',
      body: { shardCount: 4, ...CHANGE },
    });
    const file = await backup(c, 're');
    const old = new SimulatedMember(c, 'b', 're', 'g');
    for (let i = 0; i < 3; i++) await old.beat();
    expect(old.last?.assignedShards).toEqual([0, 1, 2, 3]);
    await restore(c, file);
    await failClosed(c, 're');
    expect((await recover(c, 're', { action: 'RESUME' })).status).toBe(200);

    const fresh = new SimulatedMember(c, 'b', 're', 'g');
    for (let i = 0; i < 3; i++) await fresh.beat();
    expect(fresh.epoch).toBeGreaterThan(old.epoch);
    const zombie = await old.beat();
    expect(zombie.outcome).toBe('FENCED_MEMBER_EPOCH');
  });

  it('RECREATE in a new process continues above the epochs the failed process had issued', async () => {
    const a = await start();
    await a.call('PUT', '/coord/v1/admin/streams/rc/groups/g', {
      user: 'writer',
      body: { shardCount: 2, ...CHANGE },
    });
    const file = await backup(a, 'rc');
    const members = ['x', 'y', 'z'].map((id) => new SimulatedMember(a, id, 'rc', 'g'));
    for (let i = 0; i < 4; i++) for (const m of members) await m.beat();
    const before = await view(a, 'rc');
    const highestEpoch = Math.max(...members.map((m) => m.epoch));
    await restore(a, file);
    await failClosed(a, 'rc');
    await a.close();

    const b = await start(a.keyPrefix);
    expect(await view(b, 'rc')).toMatchObject({
      status: 'FAILED_CLOSED',
      failureReason: 'STORE_REVISION_REGRESSION',
    });
    expect((await recover(b, 'rc', { action: 'RECREATE', shardCount: 2 })).status).toBe(200);
    const after = await view(b, 'rc');
    expect(after.metadataVersion).toBeGreaterThan(before.metadataVersion);
    expect(after.assignmentEpoch).toBeGreaterThan(before.assignmentEpoch);
    const newcomer = new SimulatedMember(b, 'w', 'rc', 'g');
    await newcomer.beat();
    expect(newcomer.epoch).toBeGreaterThan(highestEpoch);
  });

  it('a corrupt metadata hash keeps the earlier failure evidence: RESUME of an old backup stays refused', async () => {
    const a = await start();
    await a.call('PUT', '/coord/v1/admin/streams/co/groups/g', {
      user: 'writer',
      body: { shardCount: 2, ...CHANGE },
    });
    const file = await backup(a, 'co');
    await a.call('POST', '/coord/v1/admin/streams/co/groups/g/producers/pause', {
      user: 'writer',
      body: CHANGE,
    });
    await restore(a, file);
    await failClosed(a, 'co');
    await a.close();

    await redis.client().hset(`${a.keyPrefix}:{co:g}:metadata`, 'shard:0', 'not json');
    const b = await start(a.keyPrefix);
    expect(await view(b, 'co')).toMatchObject({
      status: 'FAILED_CLOSED',
      failureReason: 'METADATA_CORRUPT',
      highestVersionSeen: 2,
    });
    await restore(b, file);
    const resume = await recover(b, 'co', { action: 'RESUME' });
    expect(resume.status).toBe(409);
    expect(await resume.json()).toMatchObject({
      error: { code: 'RESUME_REFUSED', details: { highestVersionSeen: 2 } },
    });
  });

  it('corrupt metadata of a healthy group fails it closed (METADATA_CORRUPT); RECREATE goes above its numbers', async () => {
    const a = await start();
    await a.call('PUT', '/coord/v1/admin/streams/cx/groups/g', {
      user: 'writer',
      body: { shardCount: 2, ...CHANGE },
    });
    await a.call('POST', '/coord/v1/admin/streams/cx/groups/g/producers/pause', {
      user: 'writer',
      body: CHANGE,
    });
    await a.close();
    await redis.client().hset(`${a.keyPrefix}:{cx:g}:metadata`, 'members', '{', 'shard:1', '[');
    const b = await start(a.keyPrefix);
    expect(await view(b, 'cx')).toMatchObject({
      status: 'FAILED_CLOSED',
      failureReason: 'METADATA_CORRUPT',
    });
    const heartbeat = await b.call('POST', '/coord/v1/consumer/streams/cx/groups/g/heartbeat', {
      user: 'consumer',
      body: joinBody('m'),
    });
    expect(heartbeat.status).toBe(503);
    expect((await recover(b, 'cx', { action: 'RECREATE', shardCount: 3 })).status).toBe(200);
    expect(await view(b, 'cx')).toMatchObject({ status: 'ACTIVE', metadataVersion: 3 });
  });
});

describe('races between requests for one group', () => {
  let c: TestCoordinator;
  useCoordinator({ store: 'redis', overrides: OVERRIDES }, (started) => (c = started));

  it('a create racing the first heartbeat never costs the heartbeat a 503', async () => {
    for (let i = 0; i < 25; i++) {
      const [create, beat] = await Promise.all([
        c.call('POST', '/coord/v1/admin/groups', {
          user: 'writer',
          body: { streamPrefix: `race${i}`, consumerGroup: 'g', shardCount: 2, ...CHANGE },
        }),
        c.call('POST', `/coord/v1/consumer/streams/race${i}/groups/g/heartbeat`, {
          user: 'consumer',
          body: joinBody('m'),
        }),
      ]);
      expect(create.status).toBe(201);
      expect([200, 404]).toContain(beat.status);
    }
  });

  it('two identical desired-state PUTs answer 201 then 200, and 202 then 200', async () => {
    const put = (shardCount: number) =>
      c.call('PUT', '/coord/v1/admin/streams/puts/groups/g', {
        user: 'writer',
        body: { shardCount, ...CHANGE },
      });
    const created = (await Promise.all([put(4), put(4)])).map((r) => r.status).sort();
    expect(created).toEqual([200, 201]);
    const replies = await Promise.all([put(8), put(8)]);
    const scaled = replies.map((r) => r.status).sort();
    expect(scaled).toEqual([200, 202]);
  });
});
