import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/machines/clock.js';
import { CHANGE, type TestCoordinator, useCoordinator } from '../support/coordinator.js';
import { PersistentMap } from '../../src/collections/persistent-map.js';
import { encodeGroup } from '../../src/store/codec.js';
import { makeGroupState, refOf } from '../support/fixtures.js';
import { SimulatedMember } from '../support/members.js';

const OVERRIDES = { 'membership.assignment-debounce': '0ms', 'migration.rollback-window': '1m' };

interface Routing {
  shardCount: number;
  metadataVersion: number;
  streams: string[];
  layoutId: string;
  layoutVersion: number;
}

interface Migration {
  kind: string;
  fromShardCount: number;
  toShardCount: number;
  state: string;
}

describe.each(['memory', 'redis'] as const)(
  'one shard layout per stream prefix, on the %s store',
  (storeKind) => {
    let c: TestCoordinator;
    const clock = new ManualClock(Date.now());
    useCoordinator({ store: storeKind, clock, overrides: OVERRIDES }, (started) => (c = started));

    const create = (streamPrefix: string, consumerGroup: string, extra: object = {}) =>
      c.call('POST', '/coord/v1/admin/groups', {
        user: 'writer',
        body: { streamPrefix, consumerGroup, ...CHANGE, ...extra },
      });
    const routing = async (sp: string, g: string) =>
      (await (
        await c.call('GET', `/coord/v1/routing/streams/${sp}/groups/${g}`, { user: 'producer' })
      ).json()) as Routing;
    const migrations = async (sp: string, g: string) =>
      (await (
        await c.call('GET', `/coord/v1/monitoring/streams/${sp}/groups/${g}/migrations`, {
          user: 'reader',
        })
      ).json()) as { active: Migration | null; migrations: Migration[] };
    const admin = (sp: string, g: string) => `/coord/v1/admin/streams/${sp}/groups/${g}`;
    /** Routing of every group agrees: one count, one layout. */
    async function expectOneLayout(sp: string, groups: string[], shardCount: number) {
      const seen = await Promise.all(groups.map((g) => routing(sp, g)));
      for (const r of seen) {
        expect(r.shardCount).toBe(shardCount);
        expect(r.streams).toHaveLength(shardCount);
        expect(r.layoutId).toBe(seen[0]!.layoutId);
        expect(r.layoutVersion).toBe(seen[0]!.layoutVersion);
      }
      expect(seen[0]!.layoutId).not.toBe('');
    }

    describe('creation', () => {
      it('a second group on a prefix adopts its shard count when it names none', async () => {
        expect((await create('cr1', 'billing', { shardCount: 5 })).status).toBe(201);
        const res = await create('cr1', 'emails');
        expect(res.status).toBe(201);
        expect(((await res.json()) as { shardCount: number }).shardCount).toBe(5);
        await expectOneLayout('cr1', ['billing', 'emails'], 5);
      });

      it('a different explicit shard count is refused with 409 SHARD_COUNT_MISMATCH and nothing is created', async () => {
        await create('cr2', 'billing', { shardCount: 5 });
        const res = await create('cr2', 'emails', { shardCount: 4 });
        expect(res.status).toBe(409);
        const body = (await res.json()) as { error: { code: string; details: object } };
        expect(body.error.code).toBe('SHARD_COUNT_MISMATCH');
        expect(body.error.details).toMatchObject({ shardCount: 5, requestedShardCount: 4 });
        const missing = await c.call('GET', '/coord/v1/monitoring/streams/cr2/groups/emails', {
          user: 'reader',
        });
        expect(missing.status).toBe(404);
        // The same count is accepted.
        expect((await create('cr2', 'emails', { shardCount: 5 })).status).toBe(201);
      });

      it('the first group on a prefix must name its shard count (400)', async () => {
        const res = await create('cr3', 'billing');
        expect(res.status).toBe(400);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe(
          'VALIDATION_FAILED',
        );
      });

      it('a desired-state PUT of a second group with another count is refused too', async () => {
        await create('cr4', 'billing', { shardCount: 3 });
        const res = await c.call('PUT', admin('cr4', 'emails'), {
          user: 'writer',
          body: { shardCount: 6, ...CHANGE },
        });
        expect(res.status).toBe(409);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe(
          'SHARD_COUNT_MISMATCH',
        );
      });
    });

    describe('scale and rollback move every group on the prefix', () => {
      it('a scale of one of two groups migrates both; each converges with its own members', async () => {
        await create('sc1', 'billing', { shardCount: 4 });
        await create('sc1', 'emails');
        const billing = ['b1', 'b2'].map((id) => new SimulatedMember(c, id, 'sc1', 'billing'));
        const emails = ['e1'].map((id) => new SimulatedMember(c, id, 'sc1', 'emails'));
        const all = [...billing, ...emails];
        for (let i = 0; i < 6; i++) for (const m of all) await m.beat();
        const res = await c.call('POST', `${admin('sc1', 'billing')}/scale`, {
          user: 'writer',
          body: { shardCount: 6, ...CHANGE },
        });
        expect(res.status).toBe(202);
        await expectOneLayout('sc1', ['billing', 'emails'], 6);
        expect((await migrations('sc1', 'emails')).active).toMatchObject({
          kind: 'SCALE',
          fromShardCount: 4,
          toShardCount: 6,
        });
        for (let i = 0; i < 8; i++) for (const m of all) await m.beat();
        expect(emails[0]!.last?.assignedShards).toEqual([0, 1, 2, 3, 4, 5]);
        expect(billing.map((m) => m.last?.assignedShards.length)).toEqual([3, 3]);
        expect((await migrations('sc1', 'billing')).active?.state).toBe('CONVERGED');
        expect((await migrations('sc1', 'emails')).active?.state).toBe('CONVERGED');
        // The heartbeat reply names the layout the retiring seals use.
        const layout = await routing('sc1', 'billing');
        expect(emails[0]!.last).toMatchObject({
          layoutId: layout.layoutId,
          layoutVersion: layout.layoutVersion,
        });
      });

      it('three groups: a scale-in of the third moves all, a rollback of the first brings all back', async () => {
        const groups = ['a', 'b', 'c'];
        await create('sc2', 'a', { shardCount: 8 });
        await create('sc2', 'b');
        await create('sc2', 'c');
        const scaled = await c.call('POST', `${admin('sc2', 'c')}/scale`, {
          user: 'writer',
          body: { shardCount: 2, ...CHANGE },
        });
        expect(scaled.status).toBe(202);
        await expectOneLayout('sc2', groups, 2);
        const rolled = await c.call('POST', `${admin('sc2', 'a')}/migrations/current/rollback`, {
          user: 'writer',
          body: CHANGE,
        });
        expect(rolled.status).toBe(202);
        await expectOneLayout('sc2', groups, 8);
        for (const g of groups) {
          const m = await migrations('sc2', g);
          expect(m.active).toMatchObject({ kind: 'ROLLBACK', toShardCount: 8 });
          expect(m.migrations[0]).toMatchObject({ state: 'ROLLED_BACK', toShardCount: 2 });
        }
      });

      it('a scale while another group on the prefix is frozen is refused and changes nothing', async () => {
        await create('sc3', 'a', { shardCount: 4 });
        await create('sc3', 'b');
        await c.call('POST', `${admin('sc3', 'b')}/freeze`, { user: 'writer', body: CHANGE });
        const res = await c.call('POST', `${admin('sc3', 'a')}/scale`, {
          user: 'writer',
          body: { shardCount: 6, ...CHANGE },
        });
        expect(res.status).toBe(409);
        const body = (await res.json()) as { error: { code: string; details: object } };
        expect(body.error).toMatchObject({
          code: 'GROUP_FROZEN',
          details: { consumerGroup: 'b' },
        });
        await expectOneLayout('sc3', ['a', 'b'], 4);
      });

      it('a second scale waits until every group followed the first (409 MIGRATION_IN_PROGRESS)', async () => {
        await create('sc4', 'a', { shardCount: 2 });
        await create('sc4', 'b');
        // b has a member that never reports its new shards: its migration stays in progress.
        const member = new SimulatedMember(c, 'slow', 'sc4', 'b');
        await member.beat();
        await member.beat();
        await c.call('POST', `${admin('sc4', 'a')}/scale`, {
          user: 'writer',
          body: { shardCount: 4, ...CHANGE },
        });
        const again = await c.call('POST', `${admin('sc4', 'a')}/scale`, {
          user: 'writer',
          body: { shardCount: 6, ...CHANGE },
        });
        expect(again.status).toBe(409);
        expect((await again.json()) as object).toMatchObject({
          error: { code: 'MIGRATION_IN_PROGRESS', details: { consumerGroup: 'b' } },
        });
        await expectOneLayout('sc4', ['a', 'b'], 4);
      });
    });

    describe('groups stored before layouts', () => {
      it('two groups of one prefix with different counts end on one layout once their owner looks', async () => {
        const { store } = c.services;
        for (const [consumerGroup, shardCount] of [
          ['billing', 5],
          ['emails', 4],
        ] as const) {
          const state = makeGroupState({
            streamPrefix: 'lg1',
            consumerGroup,
            shardCount,
            members: PersistentMap.empty(),
            shards: {},
            activeMigration: null,
            migrations: [],
          });
          const fields: Record<string, string> = { ...encodeGroup(state), storeRevision: '1' };
          for (const name of ['layoutId', 'layoutVersion', 'startAt', 'initialShardCount']) {
            delete fields[name];
          }
          await store.importGroup(refOf(state), fields);
          // Loaded here (its owner), as any request would.
          await c.call('GET', `/coord/v1/monitoring/streams/lg1/groups/${consumerGroup}`, {
            user: 'reader',
          });
        }
        expect((await routing('lg1', 'billing')).layoutId).toBe('');
        await c.host.followLayouts();
        const counts = [
          (await routing('lg1', 'billing')).shardCount,
          (await routing('lg1', 'emails')).shardCount,
        ];
        expect(counts[0]).toBe(counts[1]);
        await expectOneLayout('lg1', ['billing', 'emails'], counts[0]!);
        // A group from before start positions keeps reading from the beginning, as it did.
        const view = (await (
          await c.call('GET', '/coord/v1/monitoring/streams/lg1/groups/emails', { user: 'reader' })
        ).json()) as { startAt: string };
        expect(view.startAt).toBe('earliest');
      });
    });

    describe('deletion', () => {
      it('deleting the last group of a prefix frees it for another count', async () => {
        await create('dl1', 'a', { shardCount: 3 });
        await create('dl1', 'b');
        const del = (g: string) =>
          c.call('DELETE', admin('dl1', g), { user: 'writer', body: CHANGE });
        expect((await del('a')).status).toBe(204);
        // b is still on the prefix: its count holds.
        expect((await create('dl1', 'c', { shardCount: 5 })).status).toBe(409);
        expect((await del('b')).status).toBe(204);
        const res = await create('dl1', 'c', { shardCount: 5 });
        expect(res.status).toBe(201);
        const routed = await routing('dl1', 'c');
        expect(routed.shardCount).toBe(5);
      });
    });

    describe('start position', () => {
      it('defaults to latest, takes earliest, is shown in monitoring and sent to members', async () => {
        await create('st1', 'late', { shardCount: 2 });
        await create('st1', 'early', { startAt: 'earliest' });
        const list = (await (
          await c.call('GET', '/coord/v1/monitoring/groups', { user: 'reader' })
        ).json()) as {
          groups: Array<{ streamPrefix: string; consumerGroup: string; startAt: string }>;
        };
        const mine = list.groups.filter((g) => g.streamPrefix === 'st1');
        expect(Object.fromEntries(mine.map((g) => [g.consumerGroup, g.startAt]))).toEqual({
          late: 'latest',
          early: 'earliest',
        });
        const member = new SimulatedMember(c, 'm', 'st1', 'early');
        const reply = await member.beat();
        expect(reply).toMatchObject({ startAt: 'earliest', initialShardCount: 2 });
      });

      it('anything but earliest or latest is refused with 400', async () => {
        const res = await create('st2', 'g', { shardCount: 2, startAt: 'beginning' });
        expect(res.status).toBe(400);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe(
          'VALIDATION_FAILED',
        );
      });

      it('shards a scale-out adds lie at or above initialShardCount (they start at the beginning)', async () => {
        await create('st3', 'g', { shardCount: 2 });
        await c.call('POST', `${admin('st3', 'g')}/scale`, {
          user: 'writer',
          body: { shardCount: 4, ...CHANGE },
        });
        const member = new SimulatedMember(c, 'm', 'st3', 'g');
        const reply = await member.beat();
        expect(reply).toMatchObject({ startAt: 'latest', initialShardCount: 2, shardCount: 4 });
      });
    });
  },
);
