import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/machines/clock.js';
import {
  CHANGE,
  startTestCoordinator,
  type TestCoordinator,
  groupView,
  recover,
} from '../support/coordinator.js';
import { coordctl } from '../support/cli.js';
import { joinBody, SimulatedMember } from '../support/members.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';

const OVERRIDES = { 'membership.assignment-debounce': '0ms' };

describe('metadata durability on a real redis-server', () => {
  let redis: RedisServerHandle;
  let c: TestCoordinator;
  const clock = new ManualClock(Date.now());
  const key = (sp: string) => `${c.keyPrefix}:{${sp}:g}:metadata`;
  const group = (sp: string) => groupView(c, sp);
  const metric = async (pattern: RegExp) =>
    pattern.test(await (await c.call('GET', '/metrics')).text());
  /** One period of the verify loop (coordinator.store.verify-interval, 5 s by default) passes. */
  const verifyPeriod = async (sp: string) => {
    clock.advance(5_000);
    await waitFor(async () => (await group(sp)).status === 'FAILED_CLOSED', {
      what: `${sp} to fail closed`,
    });
  };

  beforeAll(async () => {
    redis = await startRedisServer();
    c = await startTestCoordinator({
      store: 'redis',
      redisUrl: redis.url,
      clock,
      overrides: OVERRIDES,
    });
  });
  afterAll(async () => {
    await c?.close();
    await redis?.stop();
  });

  async function liveGroup(sp: string, shardCount: number, memberIds: string[]) {
    const res = await c.call('PUT', `/coord/v1/admin/streams/${sp}/groups/g`, {
      user: 'writer',
      body: { shardCount, ...CHANGE },
    });
    expect(res.status).toBe(201);
    const members = memberIds.map((id) => new SimulatedMember(c, id, sp, 'g'));
    for (let i = 0; i < 4; i++) for (const m of members) await m.beat();
    expect(members.every((m) => m.last?.outcome === 'OK')).toBe(true);
    return members;
  }

  it('a deleted metadata key fails the group closed: 503 to members, 409 to admin, no key recreated', async () => {
    const members = await liveGroup('lost', 4, ['a', 'b']);
    await redis.client().del(key('lost'));
    await verifyPeriod('lost');
    expect(await group('lost')).toMatchObject({
      status: 'FAILED_CLOSED',
      failureReason: 'METADATA_LOST',
    });

    const owned = members.map((m) => [...m.owned]);
    for (const m of members) await expect(m.beat()).rejects.toThrow(/503.*GROUP_FAILED_CLOSED/);
    expect(members.map((m) => m.owned)).toEqual(owned); // nothing new handed out, nothing taken
    const joiner = await c.call('POST', '/coord/v1/consumer/streams/lost/groups/g/heartbeat', {
      user: 'consumer',
      body: joinBody('new'),
    });
    expect(joiner.status).toBe(503);
    const routing = await c.call('GET', '/coord/v1/routing/streams/lost/groups/g', {
      user: 'producer',
    });
    expect(routing.status).toBe(503);
    expect(await routing.json()).toMatchObject({ error: { code: 'GROUP_FAILED_CLOSED' } });
    const freeze = await c.call('POST', '/coord/v1/admin/streams/lost/groups/g/producers/pause', {
      user: 'writer',
      body: CHANGE,
    });
    expect(freeze.status).toBe(409);
    clock.advance(60_000);
    await c.host.sweep();
    await c.host.verify();
    expect(await redis.client().exists(key('lost'))).toBe(0);
    expect(
      JSON.parse((await redis.client().get(`${c.keyPrefix}:{lost:g}:failure`)) ?? '{}'),
    ).toMatchObject({ reason: 'METADATA_LOST' });
    expect(await metric(/coord_groups_failed_closed_total\{reason="METADATA_LOST"\} [1-9]/)).toBe(
      true,
    );
  });

  it('an older backup restored under the coordinator is detected; RESUME is refused; RECREATE starts a new lifecycle', async () => {
    const members = await liveGroup('restore', 4, ['a', 'b']);
    const dir = mkdtempSync(join(tmpdir(), 'coord-backup-'));
    const file = join(dir, 'backup.json');
    const backup = await coordctl([
      'backup',
      '--url',
      redis.url,
      '--key-prefix',
      c.keyPrefix,
      '--group',
      'restore:g',
      '--out',
      file,
    ]);
    expect(backup.stderr).toMatch(/backed up 1\/1 groups/);

    // Changes after the backup: routing moves on to a higher version the producers see.
    await c.call('POST', '/coord/v1/admin/streams/restore/groups/g/scale', {
      user: 'writer',
      body: { shardCount: 6, ...CHANGE },
    });
    for (let i = 0; i < 4; i++) for (const m of members) await m.beat();
    const newer = await group('restore');
    expect(newer.metadataVersion).toBeGreaterThan(1);

    const restored = await coordctl([
      'restore',
      '--url',
      redis.url,
      '--key-prefix',
      c.keyPrefix,
      '--in',
      file,
    ]);
    expect(restored.stderr).toMatch(/restored 1 groups/);
    await verifyPeriod('restore');
    expect(await group('restore')).toMatchObject({
      status: 'FAILED_CLOSED',
      failureReason: 'STORE_REVISION_REGRESSION',
    });
    expect(await metric(/coord_store_revision_regression_total [1-9]/)).toBe(true);

    // Members who saw the newer version are not told to downgrade.
    for (const m of members) await expect(m.beat()).rejects.toThrow(/503.*GROUP_FAILED_CLOSED/);
    const storedVersion = Number(await redis.client().hget(key('restore'), 'metadataVersion'));
    expect(storedVersion).toBeLessThan(newer.metadataVersion);

    const resume = await recover(c, 'restore', { action: 'RESUME' });
    expect(resume.status).toBe(409);
    expect(await resume.json()).toMatchObject({ error: { code: 'RESUME_REFUSED' } });
    const noCount = await recover(c, 'restore', { action: 'RECREATE' });
    expect(noCount.status).toBe(400);

    const recreate = await recover(c, 'restore', { action: 'RECREATE', shardCount: 6 });
    expect(recreate.status).toBe(200);
    const fresh = await group('restore');
    expect(fresh).toMatchObject({ status: 'ACTIVE' });
    expect(fresh.lifecycleId).not.toBe(newer.lifecycleId);
    expect(fresh.metadataVersion).toBeGreaterThan(newer.metadataVersion);

    // Old members are fenced, rejoin with epoch 0 as the new lifecycle, and converge.
    const replies = await Promise.all(members.map((m) => m.beat()));
    expect(replies.map((r) => r.outcome)).toEqual(['FENCED_MEMBER_EPOCH', 'FENCED_MEMBER_EPOCH']);
    for (let i = 0; i < 4; i++) for (const m of members) await m.beat();
    expect(members.map((m) => [m.last?.outcome, m.last?.lifecycleId])).toEqual([
      ['OK', fresh.lifecycleId],
      ['OK', fresh.lifecycleId],
    ]);
    expect(members.flatMap((m) => m.owned).sort()).toEqual([0, 1, 2, 3, 4, 5]);

    const { records } = (await (
      await c.call('GET', '/coord/v1/monitoring/audit?streamPrefix=restore', { user: 'reader' })
    ).json()) as {
      records: Array<{ operation: string; status: number }>;
    };
    expect(
      records
        .filter((r) => r.operation === 'recovery')
        .map((r) => r.status)
        .sort(),
    ).toEqual([200, 400, 409]);
  });

  it('RESUME after restoring a backup that is not older than what clients saw', async () => {
    await liveGroup('resume', 2, ['a']);
    const dir = mkdtempSync(join(tmpdir(), 'coord-backup-'));
    const file = join(dir, 'backup.json');
    await coordctl(['backup', '--url', redis.url, '--key-prefix', c.keyPrefix, '--out', file]);
    await redis.client().del(key('resume'));
    await verifyPeriod('resume');
    expect(await group('resume')).toMatchObject({
      status: 'FAILED_CLOSED',
      failureReason: 'METADATA_LOST',
    });
    const early = await recover(c, 'resume', { action: 'RESUME' });
    expect(early.status).toBe(409);
    await coordctl([
      'restore',
      '--url',
      redis.url,
      '--key-prefix',
      c.keyPrefix,
      '--in',
      file,
      '--group',
      'resume:g',
    ]);
    const res = await recover(c, 'resume', { action: 'RESUME' });
    expect(res.status).toBe(200);
    expect(await group('resume')).toMatchObject({ status: 'ACTIVE' });
    const again = await recover(c, 'resume', { action: 'RESUME' });
    expect(again.status).toBe(409);
    expect(await again.json()).toMatchObject({ error: { code: 'GROUP_NOT_FAILED_CLOSED' } });
  });

  it('a group loaded again from its failure record is not counted again as a revision regression, nor as failed closed', async () => {
    await liveGroup('reread', 2, ['a']);
    const regressions = async () => {
      const text = await (await c.call('GET', '/metrics')).text();
      return Number(/^coord_store_revision_regression_total (\S+)$/m.exec(text)?.[1] ?? 0);
    };
    const failedClosed = async () => {
      const text = await (await c.call('GET', '/metrics')).text();
      const line =
        /^coord_groups_failed_closed_total\{reason="STORE_REVISION_REGRESSION"\} (\S+)$/m;
      return Number(line.exec(text)?.[1] ?? 0);
    };
    const before = await regressions();
    const failedBefore = await failedClosed();
    // An older revision under the owner (docs/operations.md#fail-closed-behaviour): one read
    // finds it, one is counted.
    await redis.client().hset(key('reread'), 'storeRevision', '1');
    await verifyPeriod('reread');
    expect(await regressions()).toBe(before + 1);
    // The group leaves this replica (a handover) and is loaded again, failed closed from its
    // failure record: no read found a lower revision, so the alert on the counter does not
    // fire again.
    await c.host.release({ streamPrefix: 'reread', consumerGroup: 'g' });
    expect(c.host.heldGroups().some((ref) => ref.streamPrefix === 'reread')).toBe(false);
    expect(await group('reread')).toMatchObject({
      status: 'FAILED_CLOSED',
      failureReason: 'STORE_REVISION_REGRESSION',
    });
    expect(c.host.heldGroups().some((ref) => ref.streamPrefix === 'reread')).toBe(true);
    expect(await regressions()).toBe(before + 1);
    expect(await failedClosed()).toBe(failedBefore + 1);
  });

  it('shows each rollback signal in metrics and monitoring', async () => {
    const [member] = await liveGroup('signals', 1, ['a']);
    const m = member as SimulatedMember;
    m.metadataVersion = 50;
    expect((await m.beat()).outcome).toBe('SYNC_METADATA');
    const routing = await c.call('GET', '/coord/v1/routing/streams/signals/groups/g', {
      user: 'producer',
      headers: { 'x-observed-metadata-version': '77' },
    });
    expect(routing.status).toBe(200);
    expect(await routing.json()).toMatchObject({ metadataVersion: 1 });
    const view = await group('signals');
    expect(view.rollbackSignals).toMatchObject({
      count: 2,
      highestVersionSeen: 77,
      lastSource: 'routing',
    });
    expect(
      await metric(/coord_metadata_version_regression_total\{source="heartbeat"\} [1-9]/),
    ).toBe(true);
    expect(await metric(/coord_metadata_version_regression_total\{source="routing"\} [1-9]/)).toBe(
      true,
    );
    expect(view.rollbackSignals).toHaveProperty('firstAt');
    expect(view.rollbackSignals).toHaveProperty('lastAt');

    // A higher assignmentEpoch is a signal too (SYNC_METADATA), and so is a memberEpoch above any
    // ever issued (fenced); each one adds to the count.
    m.metadataVersion = 1;
    m.assignmentEpoch = 40;
    expect((await m.beat()).outcome).toBe('SYNC_METADATA');
    const ahead = await c.call('POST', '/coord/v1/consumer/streams/signals/groups/g/heartbeat', {
      user: 'consumer',
      body: {
        memberId: 'a',
        memberEpoch: 9_999,
        assignmentEpoch: 0,
        metadataVersion: 0,
        currentAssignments: [],
      },
    });
    expect(await ahead.json()).toMatchObject({ outcome: 'FENCED_MEMBER_EPOCH' });
    expect((await group('signals')).rollbackSignals).toMatchObject({
      count: 4,
      lastSource: 'heartbeat',
    });
  });
});

describe('Redis restarted empty under a running coordinator', () => {
  let redis: RedisServerHandle;
  let c: TestCoordinator;
  beforeAll(async () => {
    redis = await startRedisServer();
    c = await startTestCoordinator({
      store: 'redis',
      redisUrl: redis.url,
      overrides: { ...OVERRIDES, 'store.verify-interval': '100ms' },
    });
  });
  afterAll(async () => {
    await c?.close();
    await redis?.stop();
  });

  it('fails every known group closed instead of serving empty groups', async () => {
    for (const sp of ['e1', 'e2']) {
      await c.call('PUT', `/coord/v1/admin/streams/${sp}/groups/g`, {
        user: 'writer',
        body: { shardCount: 2, ...CHANGE },
      });
    }
    const m = new SimulatedMember(c, 'a', 'e1', 'g');
    await m.beat();
    await m.beat();
    await redis.kill();
    await redis.restart();
    await waitFor(
      async () => {
        const health = (await (await c.call('GET', '/coord/v1/monitoring/health')).json()) as {
          store: string;
        };
        return health.store === 'UP';
      },
      { what: 'the store to reconnect' },
    );
    for (const sp of ['e1', 'e2']) {
      await waitFor(
        async () => {
          const res = await c.call('GET', `/coord/v1/monitoring/streams/${sp}/groups/g`, {
            user: 'reader',
          });
          return ((await res.json()) as { status: string }).status === 'FAILED_CLOSED';
        },
        { what: `${sp} to fail closed by the verify loop` },
      );
    }
    for (const sp of ['e1', 'e2']) {
      const view = (await (
        await c.call('GET', `/coord/v1/monitoring/streams/${sp}/groups/g`, { user: 'reader' })
      ).json()) as { status: string; failureReason: string };
      expect(view).toMatchObject({ status: 'FAILED_CLOSED', failureReason: 'METADATA_LOST' });
    }
    await expect(m.beat()).rejects.toThrow(/503/);
    // Nothing recreated: no metadata key; the failure records, kept beside the lost metadata,
    // and the registry listing both again (docs/operations.md#lost-metadata).
    const keys = (await redis.client().keys('*')).sort();
    expect(keys.filter((key) => key.endsWith(':metadata'))).toEqual([]);
    expect(keys).toEqual(
      expect.arrayContaining([`${c.keyPrefix}:{e1:g}:failure`, `${c.keyPrefix}:{e2:g}:failure`]),
    );
    expect((await redis.client().zrange(`${c.keyPrefix}:groups`, '0', '-1')).sort()).toEqual([
      '["e1","g"]',
      '["e2","g"]',
    ]);
  });
});

describe('a restored backup taken before the current owner took over', () => {
  let redis: RedisServerHandle;
  afterAll(async () => redis?.stop());

  it('is detected on the next write (older fence and revision): 503, no downgrade, survives a restart', async () => {
    redis = await startRedisServer();
    const first = await startTestCoordinator({
      store: 'redis',
      redisUrl: redis.url,
      overrides: OVERRIDES,
    });
    await first.call('PUT', '/coord/v1/admin/streams/old/groups/g', {
      user: 'writer',
      body: { shardCount: 2, ...CHANGE },
    });
    const dir = mkdtempSync(join(tmpdir(), 'coord-backup-'));
    const file = join(dir, 'backup.json');
    await coordctl(['backup', '--url', redis.url, '--key-prefix', first.keyPrefix, '--out', file]);
    await first.close();

    const second = await startTestCoordinator({
      store: 'redis',
      redisUrl: redis.url,
      overrides: { ...OVERRIDES, 'store.key-prefix': first.keyPrefix },
    });
    const third = { close: async () => undefined } as { close: () => Promise<void> };
    try {
      const a = new SimulatedMember(second, 'a', 'old', 'g');
      for (let i = 0; i < 3; i++) await a.beat();
      const scaled = await second.call('POST', '/coord/v1/admin/streams/old/groups/g/scale', {
        user: 'writer',
        body: { shardCount: 4, ...CHANGE },
      });
      expect(scaled.status).toBe(202);
      for (let i = 0; i < 3; i++) await a.beat();
      expect(a.last?.shardCount).toBe(4);

      await coordctl([
        'restore',
        '--url',
        redis.url,
        '--key-prefix',
        first.keyPrefix,
        '--in',
        file,
      ]);
      // A join needs a write: it finds the older metadata and fails the group closed.
      const join = await second.call('POST', '/coord/v1/consumer/streams/old/groups/g/heartbeat', {
        user: 'consumer',
        body: joinBody('b'),
      });
      expect(join.status).toBe(503);
      expect(await join.json()).toMatchObject({ error: { code: 'GROUP_FAILED_CLOSED' } });
      await expect(a.beat()).rejects.toThrow(/503.*GROUP_FAILED_CLOSED/);
      const routing = await second.call('GET', '/coord/v1/routing/streams/old/groups/g', {
        user: 'producer',
      });
      expect(routing.status).toBe(503);
      await second.close();

      // A new process finds the failure record: still failed closed, RESUME still refused.
      const restarted = await startTestCoordinator({
        store: 'redis',
        redisUrl: redis.url,
        overrides: { ...OVERRIDES, 'store.key-prefix': first.keyPrefix },
      });
      third.close = () => restarted.close();
      const view = (await (
        await restarted.call('GET', '/coord/v1/monitoring/streams/old/groups/g', { user: 'reader' })
      ).json()) as {
        status: string;
        failureReason: string;
      };
      expect(view).toMatchObject({
        status: 'FAILED_CLOSED',
        failureReason: 'STORE_REVISION_REGRESSION',
      });
      const resume = await recover(restarted, 'old', { action: 'RESUME' });
      expect(resume.status).toBe(409);
      const recreate = await recover(restarted, 'old', { action: 'RECREATE', shardCount: 4 });
      expect(recreate.status).toBe(200);
      expect(await redis.client().exists(`${first.keyPrefix}:{old:g}:failure`)).toBe(0);
    } finally {
      await second.close();
      await third.close();
    }
  });
});
