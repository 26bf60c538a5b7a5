import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/machines/clock.js';
import { CHANGE, type TestCoordinator, useCoordinator } from '../support/coordinator.js';
import { SimulatedMember } from '../support/members.js';
import { waitFor } from '../support/redis-server.js';

const OVERRIDES = { 'membership.assignment-debounce': '0ms', 'migration.rollback-window': '1m' };

interface MigrationView {
  migrationId: string;
  kind: string;
  fromShardCount: number;
  toShardCount: number;
  state: string;
  rollbackAllowed: boolean;
  progress?: { removedShardsRemaining: number[] };
}

describe.each(['memory', 'redis'] as const)('scaling over HTTP on the %s store', (storeKind) => {
  let c: TestCoordinator;
  const clock = new ManualClock(Date.now());
  useCoordinator({ store: storeKind, clock, overrides: OVERRIDES }, (started) => (c = started));

  const admin = (sp: string) => `/coord/v1/admin/streams/${sp}/groups/g`;
  const migrations = async (sp: string) =>
    (await (
      await c.call('GET', `/coord/v1/monitoring/streams/${sp}/groups/g/migrations`, {
        user: 'reader',
      })
    ).json()) as {
      active: MigrationView | null;
      migrations: MigrationView[];
    };
  const routing = async (sp: string) =>
    (await (
      await c.call('GET', `/coord/v1/routing/streams/${sp}/groups/g`, { user: 'producer' })
    ).json()) as {
      shardCount: number;
      metadataVersion: number;
      streams: string[];
    };
  async function settle(members: SimulatedMember[], rounds = 6) {
    for (let i = 0; i < rounds; i++) for (const m of members) await m.beat();
  }

  it('scales out 4→8: routing shows the new count at once, the migration converges and completes', async () => {
    await c.call('PUT', admin('mo'), { user: 'writer', body: { shardCount: 4, ...CHANGE } });
    const members = ['a', 'b'].map((id) => new SimulatedMember(c, id, 'mo', 'g'));
    await settle(members);
    const before = await routing('mo');
    const res = await c.call('POST', `${admin('mo')}/scale`, {
      user: 'writer',
      body: { shardCount: 8, ...CHANGE },
    });
    expect(res.status).toBe(202);
    const body = (await res.json()) as { migration: MigrationView };
    expect(body.migration).toMatchObject({
      kind: 'SCALE',
      fromShardCount: 4,
      toShardCount: 8,
      state: 'IN_PROGRESS',
      rollbackAllowed: true,
    });
    const after = await routing('mo');
    expect(after.shardCount).toBe(8);
    expect(after.streams).toHaveLength(8);
    expect(after.metadataVersion).toBeGreaterThan(before.metadataVersion);
    await settle(members);
    expect(members.map((m) => m.last?.assignedShards.length)).toEqual([4, 4]);
    expect((await migrations('mo')).active?.state).toBe('CONVERGED');
    const chart = (await (
      await c.call('GET', '/coord/v1/monitoring/streams/mo/groups/g/statechart', { user: 'reader' })
    ).json()) as { value: { migration: string } };
    expect(chart.value.migration).toBe('converged');
    clock.advance(61_000);
    await c.host.sweep();
    const done = await migrations('mo');
    expect(done.active).toBeNull();
    expect(done.migrations[0]).toMatchObject({ state: 'COMPLETED', rollbackAllowed: false });
    const refused = await c.call(
      'POST',
      `${admin('mo')}/migrations/${done.migrations[0]?.migrationId}/rollback`,
      { user: 'writer', body: CHANGE },
    );
    expect(refused.status).toBe(409);
    expect(await refused.json()).toMatchObject({ error: { code: 'ROLLBACK_NOT_ALLOWED' } });
    const current = await c.call('POST', `${admin('mo')}/migrations/current/rollback`, {
      user: 'writer',
      body: CHANGE,
    });
    expect(current.status).toBe(409);
  });

  it('scales in 8→3: removed shards retire with their owners and leave when DONE', async () => {
    await c.call('PUT', admin('mi'), { user: 'writer', body: { shardCount: 8, ...CHANGE } });
    const members = ['a', 'b', 'c'].map((id) => new SimulatedMember(c, id, 'mi', 'g'));
    await settle(members);
    const res = await c.call('PUT', admin('mi'), {
      user: 'writer',
      body: { shardCount: 3, ...CHANGE },
    });
    expect(res.status).toBe(202);
    const first = await Promise.all(members.map((m) => m.beat({ revokeDone: false })));
    expect(first.flatMap((r) => r.retireShards).sort()).toEqual([3, 4, 5, 6, 7]);
    expect((await migrations('mi')).active?.state).toBe('IN_PROGRESS');
    await settle(members);
    const view = await migrations('mi');
    expect(view.active).toMatchObject({
      state: 'CONVERGED',
      progress: { removedShardsRemaining: [] },
    });
    const assignments = (await (
      await c.call('GET', '/coord/v1/monitoring/streams/mi/groups/g/assignments', {
        user: 'reader',
      })
    ).json()) as { shards: Array<{ shard: number }> };
    expect(assignments.shards.map((s) => s.shard)).toEqual([0, 1, 2]);
  });

  it('rolls back an in-progress migration; a second scale meanwhile is 409; versions only go up', async () => {
    await c.call('PUT', admin('rb'), { user: 'writer', body: { shardCount: 2, ...CHANGE } });
    // A member that has not yet reported its new assignment keeps the migration in progress.
    const member = new SimulatedMember(c, 'a', 'rb', 'g');
    await member.beat();
    await member.beat();
    const v0 = (await routing('rb')).metadataVersion;
    expect(
      (
        await c.call('POST', `${admin('rb')}/scale`, {
          user: 'writer',
          body: { shardCount: 6, ...CHANGE },
        })
      ).status,
    ).toBe(202);
    const busy = await c.call('POST', `${admin('rb')}/scale`, {
      user: 'writer',
      body: { shardCount: 5, ...CHANGE },
    });
    expect(busy.status).toBe(409);
    expect(await busy.json()).toMatchObject({ error: { code: 'MIGRATION_IN_PROGRESS' } });
    const v1 = (await routing('rb')).metadataVersion;
    const rb = await c.call('POST', `${admin('rb')}/migrations/current/rollback`, {
      user: 'writer',
      body: CHANGE,
    });
    expect(rb.status).toBe(202);
    expect(await rb.json()).toMatchObject({
      migration: { kind: 'ROLLBACK', fromShardCount: 6, toShardCount: 2 },
    });
    const r2 = await routing('rb');
    expect(r2.shardCount).toBe(2);
    expect(v0).toBeLessThan(v1);
    expect(v1).toBeLessThan(r2.metadataVersion);
    const history = await migrations('rb');
    expect(history.migrations[0]).toMatchObject({ state: 'ROLLED_BACK' });
  });

  it('refuses a scale to the current count (400), on a frozen group (409), of an unknown group (404)', async () => {
    await c.call('PUT', admin('rf'), { user: 'writer', body: { shardCount: 2, ...CHANGE } });
    const same = await c.call('POST', `${admin('rf')}/scale`, {
      user: 'writer',
      body: { shardCount: 2, ...CHANGE },
    });
    expect(same.status).toBe(400);
    await c.call('POST', `${admin('rf')}/freeze`, { user: 'writer', body: CHANGE });
    const frozen = await c.call('POST', `${admin('rf')}/scale`, {
      user: 'writer',
      body: { shardCount: 3, ...CHANGE },
    });
    expect(frozen.status).toBe(409);
    expect(await frozen.json()).toMatchObject({ error: { code: 'GROUP_FROZEN' } });
    const missing = await c.call('POST', `${admin('nope')}/scale`, {
      user: 'writer',
      body: { shardCount: 3, ...CHANGE },
    });
    expect(missing.status).toBe(404);
  });

  it('pauses and resumes producers through routing metadata', async () => {
    await c.call('PUT', admin('pp'), { user: 'writer', body: { shardCount: 1, ...CHANGE } });
    expect(
      (await c.call('POST', `${admin('pp')}/producers/pause`, { user: 'writer', body: CHANGE }))
        .status,
    ).toBe(200);
    expect(await routing('pp')).toMatchObject({ producersPaused: true });
    expect(
      (await c.call('POST', `${admin('pp')}/producers/resume`, { user: 'writer', body: CHANGE }))
        .status,
    ).toBe(200);
    expect(await routing('pp')).toMatchObject({ producersPaused: false });
  });

  it('long poll returns as soon as the version passes N, and times out cleanly otherwise', async () => {
    await c.call('PUT', admin('lp'), { user: 'writer', body: { shardCount: 2, ...CHANGE } });
    const { metadataVersion } = await routing('lp');
    const waiting = c.call(
      'GET',
      `/coord/v1/routing/streams/lp/groups/g?afterVersion=${metadataVersion}&waitMs=60000`,
      { user: 'producer' },
    );
    await waitFor(
      async () =>
        /coord_routing_long_polls 1\b/.test(await (await c.call('GET', '/metrics')).text()),
      { what: 'the long poll to be open' },
    );
    await c.call('POST', `${admin('lp')}/scale`, {
      user: 'writer',
      body: { shardCount: 3, ...CHANGE },
    });
    const res = await waiting;
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ shardCount: 3, metadataVersion: metadataVersion + 1 });

    const current = (await routing('lp')).metadataVersion;
    const idle = c.call(
      'GET',
      `/coord/v1/routing/streams/lp/groups/g?afterVersion=${current}&waitMs=5000`,
      { user: 'producer' },
    );
    await waitFor(
      async () =>
        /coord_routing_long_polls 1\b/.test(await (await c.call('GET', '/metrics')).text()),
      { what: 'the long poll to be open' },
    );
    clock.advance(5_000);
    const timedOut = await idle;
    expect(timedOut.status).toBe(200);
    expect(await timedOut.json()).toMatchObject({ metadataVersion: current });
    const ahead = await c.call(
      'GET',
      `/coord/v1/routing/streams/lp/groups/g?afterVersion=${current - 1}&waitMs=60000`,
      { user: 'producer' },
    );
    expect(await ahead.json()).toMatchObject({ metadataVersion: current });
    const bad = await c.call(
      'GET',
      `/coord/v1/routing/streams/lp/groups/g?afterVersion=-1&waitMs=999999`,
      { user: 'producer' },
    );
    expect(bad.status).toBe(400);
  });

  it('audits every scaling admin call', async () => {
    const ids = ['scale', 'rollback', 'pause', 'resume'].map(
      (op) => `${storeKind}-mig-audit-${op}`,
    );
    await c.call('PUT', admin('au'), { user: 'writer', body: { shardCount: 2, ...CHANGE } });
    await c.call('POST', `${admin('au')}/scale`, {
      user: 'writer',
      body: { shardCount: 4, ...CHANGE },
      headers: { 'x-request-id': ids[0] as string },
    });
    await c.call('POST', `${admin('au')}/migrations/current/rollback`, {
      user: 'writer',
      body: CHANGE,
      headers: { 'x-request-id': ids[1] as string },
    });
    await c.call('POST', `${admin('au')}/producers/pause`, {
      user: 'reader',
      body: CHANGE,
      headers: { 'x-request-id': ids[2] as string },
    });
    await c.call('POST', `${admin('au')}/producers/resume`, {
      user: 'writer',
      body: {},
      headers: { 'x-request-id': ids[3] as string },
    });
    const { records } = (await (
      await c.call('GET', '/coord/v1/monitoring/audit?streamPrefix=au&limit=100', {
        user: 'reader',
      })
    ).json()) as {
      records: Array<{ requestId: string; operation: string; status: number; outcome: string }>;
    };
    const byId = (id: string) => records.filter((r) => r.requestId === id);
    expect(byId(ids[0] as string)).toEqual([
      expect.objectContaining({ operation: 'scale', status: 202, outcome: 'SUCCEEDED' }),
    ]);
    expect(byId(ids[1] as string)).toEqual([
      expect.objectContaining({ operation: 'rollback', status: 202, outcome: 'SUCCEEDED' }),
    ]);
    expect(byId(ids[2] as string)).toEqual([
      expect.objectContaining({ operation: 'pauseProducers', status: 403, outcome: 'DENIED' }),
    ]);
    expect(byId(ids[3] as string)).toEqual([
      expect.objectContaining({ operation: 'resumeProducers', status: 400, outcome: 'REJECTED' }),
    ]);
  });
});
