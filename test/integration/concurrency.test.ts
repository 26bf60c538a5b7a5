import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/machines/clock.js';
import type { HeartbeatReply } from '../../src/machines/protocol.js';
import type { GroupRef } from '../../src/machines/types.js';
import { decodeGroup } from '../../src/store/codec.js';
import { keyNames } from '../../src/store/keys.js';
import { CHANGE, startTestCoordinator, type TestCoordinator } from '../support/coordinator.js';
import { SimulatedMember } from '../support/members.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';

/*
 * Concurrent traffic against the real coordinator over real HTTP. Random
 * scenarios fire member heartbeats, admin calls, routing reads and long polls, sweeps, verifies
 * and clock advances in parallel lanes; after every batch the safety properties are read back
 * through the monitoring API, /metrics and the store. A calm-down phase then checks that
 * honest members converge.
 *
 * CONCURRENCY_RUNS sets the number of scenarios per store for a longer hunt.
 */

const SESSION_TIMEOUT_MS = 10_000;
const OVERRIDES = {
  'membership.session-timeout': `${SESSION_TIMEOUT_MS}ms`,
  'membership.rebalance-timeout': '5s',
  'membership.assignment-debounce': '100ms',
  'membership.sweep-interval': '250ms',
  'migration.rollback-window': '4s',
  'store.verify-interval': '2s',
};
/** Longer than the debounce and the sweep interval: one calm-down round lets a recompute run. */
const CALM_STEP_MS = 300;
const CALM_ROUNDS = 40;
const RUNS = { memory: 40, redis: 25 } as const;
/** A longer hunt: `CONCURRENCY_RUNS=500 npx vitest run test/integration/concurrency.test.ts`. */
const HUNT_RUNS = process.env.CONCURRENCY_RUNS ? Number(process.env.CONCURRENCY_RUNS) : null;
const TIME_LIMIT_MS = HUNT_RUNS === null ? 100_000 : 3_600_000;

/** Statuses the contract allows for this traffic. */
const ALLOWED = new Set([200, 201, 202, 204, 304, 400, 404, 409, 503]);
/** The only codes a 503 may carry here; none of them may occur on a healthy store. */
const CODES_503 = new Set([
  'STORE_UNAVAILABLE',
  'GROUP_FAILED_CLOSED',
  'FENCED_WRITE',
  'STALE_REVISION',
]);
/** Counters that stay absent or 0 on a healthy store. */
const ZERO_COUNTERS = [
  'coord_invariant_violations_total',
  'coord_metadata_version_regression_total',
  'coord_store_revision_regression_total',
  'coord_groups_failed_closed_total',
  'coord_store_errors_total',
];

/**
 * `stuck` keeps revoking/retiring shards DRAINING; `stale` sends an epoch 1-3 behind;
 * `rejoin` sends epoch 0; `duplicate` sends the same request twice at once (a retry racing the
 * original); `lost` is an honest beat whose reply never reaches the member.
 */
type BeatMode = 'honest' | 'stuck' | 'stale' | 'leave' | 'rejoin' | 'duplicate' | 'lost';
type Op =
  | { kind: 'beat'; member: number; mode: BeatMode; back: number }
  | { kind: 'scale'; shardCount: number }
  | { kind: 'rollback' | 'pause' | 'resume' | 'freeze' | 'unfreeze' }
  | { kind: 'routing'; mode: 'plain' | 'etag' | 'behind' | 'poll'; waitMs: number }
  | { kind: 'sweep' | 'verify' | 'monitor' }
  | { kind: 'advance'; ms: number }
  /** A long advance (members expire); only in scenarios with `expiries`, else capped at 1 s. */
  | { kind: 'expire'; ms: number };

interface Scenario {
  members: number;
  shards: number;
  expiries: boolean;
  /** Each batch is 1-5 lanes run in parallel; a lane runs its ops one after another. */
  batches: Op[][][];
}

const beatMode = fc.oneof(
  { arbitrary: fc.constant<BeatMode>('honest'), weight: 8 },
  { arbitrary: fc.constant<BeatMode>('stuck'), weight: 2 },
  {
    arbitrary: fc.constantFrom<BeatMode>('stale', 'leave', 'rejoin', 'duplicate', 'lost'),
    weight: 5,
  },
);

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    arbitrary: fc.record({
      kind: fc.constant('beat' as const),
      member: fc.nat({ max: 11 }),
      mode: beatMode,
      back: fc.integer({ min: 1, max: 3 }),
    }),
    weight: 12,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('scale' as const),
      shardCount: fc.integer({ min: 1, max: 32 }),
    }),
    weight: 3,
  },
  {
    arbitrary: fc
      .constantFrom(...(['rollback', 'pause', 'resume', 'freeze', 'unfreeze'] as const))
      .map((kind) => ({ kind })),
    weight: 3,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('routing' as const),
      mode: fc.constantFrom(...(['plain', 'etag', 'behind', 'poll'] as const)),
      waitMs: fc.integer({ min: 1, max: 200 }),
    }),
    weight: 3,
  },
  {
    arbitrary: fc
      .constantFrom(...(['sweep', 'verify', 'monitor'] as const))
      .map((kind) => ({ kind })),
    weight: 3,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('advance' as const),
      ms: fc.integer({ min: 10, max: 1_500 }),
    }),
    weight: 2,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('expire' as const),
      ms: fc.integer({ min: 4_000, max: SESSION_TIMEOUT_MS + 2_000 }),
    }),
    weight: 1,
  },
);

const scenario: fc.Arbitrary<Scenario> = fc.record({
  members: fc.integer({ min: 3, max: 12 }),
  shards: fc.integer({ min: 1, max: 32 }),
  expiries: fc.boolean(),
  batches: fc.array(fc.array(fc.array(op, { maxLength: 6 }), { minLength: 1, maxLength: 5 }), {
    minLength: 2,
    maxLength: 8,
  }),
});

interface MemberView {
  memberId: string;
  assignedShards: number[];
}
interface ShardView {
  shard: number;
  state: string;
  owner: string | null;
  target: string | null;
}
interface AssignmentsView {
  shardCount: number;
  metadataVersion: number;
  assignmentEpoch: number;
  shards: ShardView[];
  members: MemberView[];
}
interface GroupView {
  shardCount: number;
  metadataVersion: number;
  assignmentEpoch: number;
  lifecycleId: string;
  status: string;
  producersPaused: boolean;
  storeRevision: number;
  rollbackSignals: unknown;
}
interface MigrationsView {
  active: { migrationId: string; state: string } | null;
}

/** Sum of every sample of a metric family in Prometheus text (0 when absent). */
function metricSum(text: string, name: string): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name} `) || line.startsWith(`${name}{`)) {
      sum += Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return sum;
}

/** A shard in two members' assignedShards (one view, so one moment). */
function duplicateAssignments(members: readonly MemberView[]): string[] {
  const owners = new Map<number, string>();
  const problems: string[] = [];
  for (const m of members) {
    for (const shard of m.assignedShards) {
      const other = owners.get(shard);
      if (other !== undefined)
        problems.push(`shard ${shard} in assignedShards of ${other} and ${m.memberId}`);
      owners.set(shard, m.memberId);
    }
  }
  return problems;
}

/** Shards held (assigned, revoking, retiring) by a memberId that is not a member. */
function ownersNotMembers(view: AssignmentsView, memberIds: ReadonlySet<string>): string[] {
  return view.shards
    .filter((s) => s.state !== 'released' && s.owner !== null && !memberIds.has(s.owner))
    .map((s) => `shard ${s.shard} is ${s.state} by ${s.owner}, who is not in the members view`);
}

const sortShards = (shards: readonly ShardView[]) =>
  [...shards]
    .sort((a, b) => a.shard - b.shard)
    .map(({ shard, state, owner, target }) => ({ shard, state, owner, target }));

describe.each(['memory', 'redis'] as const)('concurrent traffic on the %s store', (storeKind) => {
  let redis: RedisServerHandle | null = null;
  let c: TestCoordinator;
  const clock = new ManualClock(Date.now());
  let run = 0;

  beforeAll(async () => {
    if (storeKind === 'redis') redis = await startRedisServer();
    c = await startTestCoordinator({
      store: storeKind,
      clock,
      overrides: OVERRIDES,
      ...(redis ? { redisUrl: redis.url } : {}),
    });
  });
  afterAll(async () => {
    await c?.close();
    await redis?.stop();
  });

  /** One scenario, on a fresh group of the shared coordinator (deleted at the end). */
  async function runScenario(s: Scenario): Promise<void> {
    const ref: GroupRef = { streamPrefix: `cc-${storeKind}-${run++}`, consumerGroup: 'g' };
    const sp = ref.streamPrefix;
    const admin = `/coord/v1/admin/streams/${sp}/groups/g`;
    const mon = `/coord/v1/monitoring/streams/${sp}/groups/g`;
    const routingPath = `/coord/v1/routing/streams/${sp}/groups/g`;
    /** Status and error code of every response since the last check. */
    const log: Array<{ what: string; status: number; code: string | null }> = [];
    /** metadataVersion/assignmentEpoch shown by replies during the current batch. */
    const seen: Array<{ what: string; mv: number; ae: number | null }> = [];
    const problems: string[] = [];

    // Every response of the scenario, the members' heartbeats included, is recorded.
    const rc: TestCoordinator = {
      ...c,
      async call(method, path, options) {
        const res = await c.call(method, path, options);
        let code: string | null = null;
        if (res.status >= 400) {
          const body = (await res
            .clone()
            .json()
            .catch(() => null)) as { error?: { code?: string } } | null;
          code = body?.error?.code ?? null;
        }
        log.push({ what: `${method} ${path}`, status: res.status, code });
        return res;
      },
    };
    const getJson = async <T>(path: string): Promise<T> => {
      const res = await rc.call('GET', path, { user: 'reader' });
      if (res.status !== 200) throw new Error(`GET ${path} answered ${res.status}`);
      return (await res.json()) as T;
    };
    const post = (path: string, body: unknown = CHANGE) =>
      rc.call('POST', path, { user: 'writer', body });

    const created = await post('/coord/v1/admin/groups', {
      streamPrefix: sp,
      consumerGroup: 'g',
      shardCount: s.shards,
      ...CHANGE,
    });
    expect(created.status).toBe(201);
    const members = Array.from(
      { length: s.members },
      (_, i) => new SimulatedMember(rc, `m-${i}`, sp, 'g'),
    );

    const checkSnapshot = (label: string, view: AssignmentsView, mv: readonly MemberView[]) => {
      problems.push(
        ...duplicateAssignments(mv).map((p) => `${label}: members view: ${p}`),
        ...duplicateAssignments(view.members).map((p) => `${label}: assignments view: ${p}`),
        ...ownersNotMembers(view, new Set(view.members.map((m) => m.memberId))).map(
          (p) => `${label}: assignments view: ${p}`,
        ),
      );
    };
    const readViews = () =>
      Promise.all([
        getJson<AssignmentsView>(`${mon}/assignments`),
        getJson<{ members: MemberView[] }>(`${mon}/members`),
        getJson<GroupView>(mon),
      ]);
    const noteReply = (what: string, reply: HeartbeatReply) => {
      seen.push({ what, mv: reply.metadataVersion, ae: reply.assignmentEpoch });
      const lists = [
        ...reply.assignedShards,
        ...reply.revokeShards,
        ...reply.retireShards,
        ...reply.pendingShards,
      ];
      if (new Set(lists).size !== lists.length)
        problems.push(`${what}: the shard lists of the reply overlap: ${JSON.stringify(reply)}`);
    };

    const beat = async (m: SimulatedMember, mode: BeatMode, back = 1) => {
      const what = `${mode} beat of ${m.memberId}`;
      let replies: HeartbeatReply[];
      switch (mode) {
        case 'honest':
          replies = [await m.beat()];
          break;
        case 'stuck':
          replies = [await m.beat({ revokeDone: false })];
          break;
        case 'stale':
          replies = [await m.beat({ epoch: Math.max(1, m.epoch - back) })];
          break;
        case 'leave':
          replies = [await m.leave()];
          break;
        case 'rejoin':
          replies = [await m.beat({ epoch: 0 })];
          break;
        case 'duplicate':
          // Both bodies are built before either reply arrives: identical requests.
          replies = await Promise.all([m.beat(), m.beat()]);
          break;
        case 'lost': {
          const { epoch, owned, assignmentEpoch, metadataVersion, last } = m;
          replies = [await m.beat()];
          Object.assign(m, { epoch, owned, assignmentEpoch, metadataVersion, last });
          break;
        }
      }
      for (const reply of replies) noteReply(what, reply);
      return replies[replies.length - 1] as HeartbeatReply;
    };

    /** Long polls not yet answered: drained at the end of each batch. */
    let polls: Array<{ settled: boolean; waitMs: number; done: Promise<void> }> = [];
    let knownVersion = 0;
    const routingRead = async (path: string, what: string, headers: Record<string, string>) => {
      const res = await rc.call('GET', path, { user: 'producer', headers });
      if (res.status === 200) {
        const body = (await res.json()) as { metadataVersion: number };
        seen.push({ what, mv: body.metadataVersion, ae: null });
      } else {
        await res.arrayBuffer();
      }
    };

    const runOp = async (o: Op): Promise<void> => {
      switch (o.kind) {
        case 'beat': {
          const m = members[o.member];
          if (m) await beat(m, o.mode, o.back);
          return;
        }
        case 'scale':
          await post(`${admin}/scale`, { shardCount: o.shardCount, ...CHANGE });
          return;
        case 'rollback':
          await post(`${admin}/migrations/current/rollback`);
          return;
        case 'pause':
        case 'resume':
          await post(`${admin}/producers/${o.kind}`);
          return;
        case 'freeze':
        case 'unfreeze':
          await post(`${admin}/${o.kind}`);
          return;
        case 'routing': {
          if (o.mode === 'poll') {
            // Parked until the version passes or (manual) time passes waitMs: not awaited here.
            const poll = { settled: false, waitMs: o.waitMs, done: Promise.resolve() };
            poll.done = routingRead(
              `${routingPath}?afterVersion=${knownVersion}&waitMs=${o.waitMs}`,
              'long poll',
              {},
            ).finally(() => {
              poll.settled = true;
            });
            polls.push(poll);
          } else if (o.mode === 'behind') {
            const after = Math.max(0, knownVersion - 1);
            await routingRead(
              `${routingPath}?afterVersion=${after}&waitMs=1`,
              'routing behind',
              {},
            );
          } else {
            const headers: Record<string, string> =
              o.mode === 'etag' ? { 'if-none-match': '"other:0", *' } : {};
            await routingRead(routingPath, `routing ${o.mode}`, headers);
          }
          return;
        }
        case 'sweep':
          await c.host.sweep();
          return;
        case 'verify':
          await c.host.verify();
          return;
        case 'monitor': {
          const [view, mv, group] = await readViews();
          checkSnapshot('mid-batch', view, mv.members);
          seen.push({
            what: 'assignments view',
            mv: view.metadataVersion,
            ae: view.assignmentEpoch,
          });
          seen.push({ what: 'group view', mv: group.metadataVersion, ae: group.assignmentEpoch });
          return;
        }
        case 'advance':
          clock.advance(o.ms);
          return;
        case 'expire':
          clock.advance(s.expiries ? o.ms : Math.min(o.ms, 1_000));
          return;
      }
    };

    /** Waits until every open long poll is parked (gauge), then moves time past their waitMs. */
    const drainPolls = async () => {
      const open = polls.filter((p) => !p.settled);
      if (open.length > 0) {
        await waitFor(
          async () => {
            const pending = polls.filter((p) => !p.settled).length;
            if (pending === 0) return true;
            const text = await (await c.call('GET', '/metrics')).text();
            return metricSum(text, 'coord_routing_long_polls') >= pending;
          },
          { what: 'every long poll to be parked or answered' },
        );
        clock.advance(Math.max(...open.map((p) => p.waitMs)));
      }
      await Promise.all(polls.map((p) => p.done));
      polls = [];
    };

    let previous = await getJson<GroupView>(mon);
    knownVersion = previous.metadataVersion;

    /** Everything checked between batches, while nothing else runs. */
    const afterBatch = async (label: string) => {
      await drainPolls();
      // The store checked (verify), then a mailbox barrier: every group's queued work (timer
      // ticks and writes in flight too) has run. verify() alone is no barrier: a group whose
      // stored revision is already at or past the one it holds is not queued (a write whose
      // answer has not come back yet, for instance).
      await c.host.verify();
      await c.host.idle();
      for (const r of log.splice(0)) {
        if (r.status === 503 && r.code !== null && CODES_503.has(r.code))
          problems.push(`${label}: ${r.what} answered 503 ${r.code} on a healthy store`);
        else if (!ALLOWED.has(r.status) || r.status === 503)
          problems.push(`${label}: ${r.what} answered ${r.status} ${r.code ?? ''}`);
      }
      const metrics = await (await c.call('GET', '/metrics')).text();
      for (const name of ZERO_COUNTERS) {
        const value = metricSum(metrics, name);
        if (value !== 0) problems.push(`${label}: ${name} is ${value}`);
      }
      const [view, mv, group] = await readViews();
      checkSnapshot(label, view, mv.members);
      const memberIds = new Set(mv.members.map((m) => m.memberId));
      problems.push(...ownersNotMembers(view, memberIds).map((p) => `${label}: ${p}`));
      // The host's gauges follow the group (the only one with members while it runs).
      const gaugeMembers = metricSum(metrics, 'coord_members');
      if (gaugeMembers !== memberIds.size)
        problems.push(`${label}: coord_members is ${gaugeMembers}, members view ${memberIds.size}`);
      const draining = view.shards.filter((x) => x.state === 'revoking' || x.state === 'retiring');
      const gaugeRevoking = metricSum(metrics, 'coord_revoke_pending');
      if (gaugeRevoking !== draining.length)
        problems.push(
          `${label}: coord_revoke_pending is ${gaugeRevoking}, views ${draining.length}`,
        );
      if (group.rollbackSignals !== null)
        problems.push(`${label}: rollback signals ${JSON.stringify(group.rollbackSignals)}`);
      if (group.status === 'FAILED_CLOSED') problems.push(`${label}: the group failed closed`);
      for (const [name, was, is] of [
        ['metadataVersion', previous.metadataVersion, group.metadataVersion],
        ['assignmentEpoch', previous.assignmentEpoch, group.assignmentEpoch],
        ['storeRevision', previous.storeRevision, group.storeRevision],
      ] as const) {
        if (is < was) problems.push(`${label}: ${name} went from ${was} to ${is}`);
      }
      // What any reply showed during the batch lies between the values before and after it.
      for (const x of seen.splice(0)) {
        if (x.mv < previous.metadataVersion || x.mv > group.metadataVersion)
          problems.push(
            `${label}: ${x.what} showed metadataVersion ${x.mv}, outside [${previous.metadataVersion}, ${group.metadataVersion}]`,
          );
        if (x.ae !== null && (x.ae < previous.assignmentEpoch || x.ae > group.assignmentEpoch))
          problems.push(
            `${label}: ${x.what} showed assignmentEpoch ${x.ae}, outside [${previous.assignmentEpoch}, ${group.assignmentEpoch}]`,
          );
      }
      // Nothing is shown that is not persisted: the stored group is the one monitoring shows.
      const stored = await c.services.store.loadGroup(ref);
      const persisted = stored && {
        shardCount: stored.state.shardCount,
        metadataVersion: stored.state.metadataVersion,
        assignmentEpoch: stored.state.assignmentEpoch,
        status: stored.state.status,
        producersPaused: stored.state.producersPaused,
        storeRevision: stored.revision,
        shards: sortShards(Object.values(stored.state.shards)),
        members: stored.state.members.keys().sort(),
      };
      const shown = {
        shardCount: group.shardCount,
        metadataVersion: group.metadataVersion,
        assignmentEpoch: group.assignmentEpoch,
        status: group.status,
        producersPaused: group.producersPaused,
        storeRevision: group.storeRevision,
        shards: sortShards(view.shards),
        members: [...memberIds].sort(),
      };
      if (JSON.stringify(persisted) !== JSON.stringify(shown))
        problems.push(
          `${label}: the store holds ${JSON.stringify(persisted)} but monitoring shows ${JSON.stringify(shown)}`,
        );
      previous = group;
      knownVersion = group.metadataVersion;
      if (problems.length > 0)
        throw new Error(`${problems.join('\n')}\nscenario: ${JSON.stringify(s)}`);
    };

    try {
      // A burst of joins, all at once.
      await Promise.all(members.map((m) => beat(m, 'rejoin')));
      await afterBatch('joins');

      for (const [b, lanes] of s.batches.entries()) {
        // One member is driven by one lane per batch (duplicates are a mode of their own).
        const claimed = new Map<number, number>();
        const plan = lanes.map((lane, l) =>
          lane.filter((o) => {
            if (o.kind !== 'beat') return true;
            if (o.member >= s.members) return false;
            const owner = claimed.get(o.member) ?? l;
            claimed.set(o.member, owner);
            return owner === l;
          }),
        );
        // Settled, not raced: a failing lane must not leave the others running into cleanup.
        const outcomes = await Promise.allSettled(
          plan.map(async (lane) => {
            for (const o of lane) await runOp(o);
          }),
        );
        for (const outcome of outcomes) if (outcome.status === 'rejected') throw outcome.reason;
        await afterBatch(`batch ${b}`);
      }

      // Calm down: unfrozen, producers resumed, the surviving members beat honestly.
      await post(`${admin}/unfreeze`);
      await post(`${admin}/producers/resume`);
      let survivors = members.filter((m) => m.epoch !== -1);
      if (survivors.length === 0) {
        const first = members[0] as SimulatedMember;
        await beat(first, 'rejoin');
        survivors = [first];
      }
      let stable = false;
      for (let round = 0; round < CALM_ROUNDS && !stable; round++) {
        clock.advance(CALM_STEP_MS);
        await c.host.sweep();
        // Settled means a round in which every member reported exactly its assignment and
        // nothing in progress: a member that was last told to revoke or retire a shard reports
        // it DONE this round (even one a rollback gave back to it), so that round does not count.
        const reported = survivors.map((m) => {
          const giving = (m.last?.revokeShards.length ?? 0) + (m.last?.retireShards.length ?? 0);
          return m.epoch > 0 && giving === 0 ? m.owned.join(',') : null;
        });
        const replies = await Promise.all(survivors.map((m) => beat(m, 'honest')));
        stable = replies.every(
          (r, i) =>
            r.outcome === 'OK' &&
            r.revokeShards.length === 0 &&
            r.retireShards.length === 0 &&
            r.pendingShards.length === 0 &&
            reported[i] === r.assignedShards.join(','),
        );
        await afterBatch(`calm round ${round}`);
      }
      expect(stable, `members settled within ${CALM_ROUNDS} honest rounds`).toBe(true);

      // Converged: every shard below shardCount assigned to exactly one live member.
      const [[view, mv, group], migrations] = await Promise.all([
        readViews(),
        getJson<MigrationsView>(`${mon}/migrations`),
      ]);
      const live = new Set(mv.members.map((m) => m.memberId));
      const all = Array.from({ length: group.shardCount }, (_, i) => i);
      expect([...live].sort()).toEqual(survivors.map((m) => m.memberId).sort());
      expect(view.shards.map((x) => x.shard)).toEqual(all);
      for (const shard of view.shards) {
        expect(shard.state, `state of shard ${shard.shard}`).toBe('assigned');
        expect(live.has(shard.owner ?? ''), `owner of shard ${shard.shard} is live`).toBe(true);
        expect(shard.target, `target of shard ${shard.shard}`).toBe(shard.owner);
      }
      expect(mv.members.flatMap((m) => m.assignedShards).sort((a, b) => a - b)).toEqual(all);
      const mean = group.shardCount / live.size;
      for (const m of mv.members) {
        expect(
          Math.abs(m.assignedShards.length - mean),
          `${m.memberId} within ±1 of the mean`,
        ).toBeLessThan(1);
      }
      expect([null, 'CONVERGED']).toContain(migrations.active?.state ?? null);
      expect(group.status).toBe('ACTIVE');

      if (redis) {
        // The metadata hash itself decodes to what monitoring shows.
        const fields = await redis.client().hgetall(keyNames(c.keyPrefix).metadata(ref));
        const decoded = decodeGroup(fields);
        expect({
          shardCount: decoded.shardCount,
          metadataVersion: decoded.metadataVersion,
          assignmentEpoch: decoded.assignmentEpoch,
          lifecycleId: decoded.lifecycleId,
          storeRevision: Number(fields.storeRevision),
          shards: sortShards(Object.values(decoded.shards)),
          activeMigration: decoded.activeMigration?.migrationId ?? null,
        }).toEqual({
          shardCount: group.shardCount,
          metadataVersion: group.metadataVersion,
          assignmentEpoch: group.assignmentEpoch,
          lifecycleId: group.lifecycleId,
          storeRevision: group.storeRevision,
          shards: sortShards(view.shards),
          activeMigration: migrations.active?.migrationId ?? null,
        });
      }
    } finally {
      // Leaves the coordinator (and its gauges) to the next scenario's group.
      await drainPolls().catch(() => undefined);
      await c.call('POST', `${admin}/unfreeze`, { user: 'writer', body: CHANGE });
      await c.call('DELETE', `${admin}?force=true`, { user: 'writer', body: CHANGE });
    }
  }

  it(
    'keeps the safety properties under concurrent traffic and converges once calm',
    async () => {
      await fc.assert(fc.asyncProperty(scenario, runScenario), {
        numRuns: HUNT_RUNS ?? RUNS[storeKind],
        // To replay a failure: CONCURRENCY_SEED and CONCURRENCY_PATH from its report.
        ...(process.env.CONCURRENCY_SEED
          ? { seed: Number(process.env.CONCURRENCY_SEED), path: process.env.CONCURRENCY_PATH }
          : {}),
        // A failure found late is still reported, shrunk as far as the time allowed.
        interruptAfterTimeLimit: TIME_LIMIT_MS,
      });
    },
    TIME_LIMIT_MS + 20_000,
  );
});
