/**
 * Redis loses every key under running replicas (docs/operations.md#lost-metadata): FLUSHALL,
 * or a Redis without persistence killed and started again. The lease keys go with the
 * metadata, so the owner loses its lease before it re-reads the group; what the replicas and
 * the members remember must make the group fail closed (503 GROUP_FAILED_CLOSED, reason
 * METADATA_LOST) on every replica, never answer 404, never re-create it, and list it until an
 * operator recovers it (RECREATE, or a restored backup and RESUME).
 *
 * Real redis-server processes, coordinator replicas as child processes (dist/main.js), real
 * HTTP. The verify loop is slowed to an hour so that only the lease loss and the members can
 * notice the loss: the path a store wiped together with its leases takes.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Role } from '../../src/http/auth/roles.js';
import type { HeartbeatReply } from '../../src/machines/protocol.js';
import { keyNames } from '../../src/store/keys.js';
import { coordctl } from '../support/cli.js';
import { CHANGE as TEST_CHANGE, startTestCoordinator } from '../support/coordinator.js';
import { captureLogs } from '../support/logs.js';
import {
  randomKeyPrefix,
  startRedisServer,
  waitFor,
  type RedisServerHandle,
} from '../support/redis-server.js';
import {
  ChildProcesses,
  metricSum,
  ownersNamed,
  replicaToken,
  ReplicaSet,
} from '../support/replica-processes.js';

const CHANGE = { requestedBy: 'lost-metadata-test', reason: 'the store lost its data' };
const ROLES: Record<string, Role[]> = {
  writer: ['WRITE'],
  reader: ['READ'],
  consumer: ['CONSUMER'],
  producer: ['PRODUCER'],
};

/** One answer of one replica, as a member or a reader saw it. */
interface Seen {
  readonly url: string;
  readonly status: number;
  readonly code: string | null;
  readonly failureReason: unknown;
  readonly body: unknown;
}

/** One request to one replica, no retry. */
async function ask(
  url: string,
  method: string,
  path: string,
  user: string,
  body?: unknown,
): Promise<Seen> {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${replicaToken(user, ROLES[user] ?? [])}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  const parsed: unknown = text ? JSON.parse(text) : null;
  const error = (parsed as { error?: { code?: string; details?: { failureReason?: unknown } } })
    ?.error;
  return {
    url,
    status: res.status,
    code: error?.code ?? null,
    failureReason: error?.details?.failureReason,
    body: parsed,
  };
}

/** Retries an admin call while replicas answer 503 for a moment (a move, the store coming back). */
async function admin(urls: readonly string[], method: string, path: string, body: unknown) {
  let last: Seen | null = null;
  await waitFor(
    async () => {
      for (const url of urls) {
        last = await ask(url, method, path, 'writer', body);
        if (last.status !== 503) return true;
      }
      return false;
    },
    { timeoutMs: 30_000, intervalMs: 200, what: `${method} ${path} answered` },
  );
  return last as unknown as Seen;
}

/**
 * A consumer member heartbeating through whichever replica it is given, reporting what it was
 * told as the SDK does: its epoch, versions and lifecycle.
 */
class Member {
  epoch = 0;
  assignmentEpoch = 0;
  metadataVersion = 0;
  lifecycleId: string | undefined;
  owned: number[] = [];
  last: HeartbeatReply | null = null;
  readonly seen: Seen[] = [];

  constructor(
    readonly memberId: string,
    private readonly path: string,
  ) {}

  async beat(url: string): Promise<Seen> {
    const giving = [...(this.last?.revokeShards ?? []), ...(this.last?.retireShards ?? [])];
    const answer = await ask(url, 'POST', this.path, 'consumer', {
      memberId: this.memberId,
      memberEpoch: this.epoch,
      assignmentEpoch: this.assignmentEpoch,
      metadataVersion: this.metadataVersion,
      currentAssignments: this.owned.filter((shard) => !giving.includes(shard)),
      revokeProgress: giving.map((shard) => ({ shard, state: 'DONE' })),
      ...(this.lifecycleId ? { lifecycleId: this.lifecycleId } : {}),
    });
    this.seen.push(answer);
    if (answer.status !== 200) return answer;
    const reply = answer.body as HeartbeatReply;
    this.last = reply;
    this.lifecycleId = reply.lifecycleId;
    this.assignmentEpoch = reply.assignmentEpoch;
    this.metadataVersion = reply.metadataVersion;
    if (reply.outcome === 'FENCED_MEMBER_EPOCH') {
      this.epoch = 0;
      this.owned = [];
    } else if (reply.outcome !== 'SYNC_METADATA') {
      this.epoch = reply.memberEpoch;
      this.owned = [...reply.assignedShards, ...reply.revokeShards, ...reply.retireShards];
    }
    return answer;
  }
}

/** Beats every member (round-robin over the replicas) until all hold `shardCount` shards, OK. */
async function settle(members: readonly Member[], urls: readonly string[], shardCount: number) {
  let round = 0;
  await waitFor(
    async () => {
      round++;
      for (const [i, member] of members.entries()) {
        await member.beat(urls[(round + i) % urls.length]!);
      }
      const settled = members.every(
        (m) =>
          m.last?.outcome === 'OK' &&
          m.last.pendingShards.length === 0 &&
          m.last.revokeShards.length === 0 &&
          m.seen.at(-1)?.status === 200,
      );
      const shards = members.flatMap((m) => m.owned).sort((a, b) => a - b);
      return settled && shards.join() === [...Array(shardCount).keys()].join();
    },
    { timeoutMs: 30_000, intervalMs: 50, what: 'the members to settle' },
  );
}

const isLostAnswer = (seen: Seen) =>
  seen.status === 503 &&
  seen.code === 'GROUP_FAILED_CLOSED' &&
  seen.failureReason === 'METADATA_LOST';

/**
 * Members keep heartbeating through every replica in turn until each has had 503
 * GROUP_FAILED_CLOSED / METADATA_LOST from every replica; none may ever be told 404.
 */
async function beatUntilFailedClosed(members: readonly Member[], urls: readonly string[]) {
  const from = members.map((m) => m.seen.length);
  let round = 0;
  await waitFor(
    async () => {
      // Each member through every replica in turn.
      round++;
      for (const [i, member] of members.entries()) {
        await member.beat(urls[(round + i) % urls.length]!);
      }
      return members.every((member, i) =>
        urls.every((url) =>
          member.seen.slice(from[i]).some((seen) => seen.url === url && isLostAnswer(seen)),
        ),
      );
    },
    { timeoutMs: 40_000, intervalMs: 100, what: 'every member to be refused METADATA_LOST' },
  );
  const since = members.flatMap((m, i) => m.seen.slice(from[i]));
  expect(since.filter((seen) => seen.status === 404)).toEqual([]);
  // Once refused, a member is never served again before recovery.
  for (const [i, member] of members.entries()) {
    const after = member.seen.slice(from[i]);
    const first = after.findIndex(isLostAnswer);
    expect(after.slice(first).filter((seen) => seen.status === 200)).toEqual([]);
  }
}

/** What every replica lists and shows of the group: failed closed with METADATA_LOST. */
async function expectListedLost(urls: readonly string[], stream: string, group: string) {
  for (const url of urls) {
    await waitFor(
      async () => {
        const list = await ask(url, 'GET', '/coord/v1/monitoring/groups', 'reader');
        const groups = (list.body as { groups?: Array<Record<string, unknown>> }).groups ?? [];
        return groups.some(
          (g) =>
            g.streamPrefix === stream &&
            g.consumerGroup === group &&
            g.status === 'FAILED_CLOSED' &&
            g.failureReason === 'METADATA_LOST',
        );
      },
      { timeoutMs: 15_000, intervalMs: 200, what: `${url} to list ${stream}:${group} lost` },
    );
    await waitFor(
      async () => {
        const view = await ask(
          url,
          'GET',
          `/coord/v1/monitoring/streams/${stream}/groups/${group}`,
          'reader',
        );
        return (
          view.status === 200 &&
          (view.body as { status?: string }).status === 'FAILED_CLOSED' &&
          (view.body as { failureReason?: string }).failureReason === 'METADATA_LOST'
        );
      },
      { timeoutMs: 15_000, intervalMs: 200, what: `${url} to show ${stream}:${group} lost` },
    );
  }
}

const ENV = (stateDir: string) => ({
  COORDINATOR_LEASE_TTL: '2s',
  // Only the lease loss and the members may notice the loss (see the top of the file).
  COORDINATOR_STORE_VERIFY_INTERVAL: '1h',
  COORDINATOR_MEMBERSHIP_SESSION_TIMEOUT: '20s',
  COORDINATOR_MEMBERSHIP_HEARTBEAT_INTERVAL: '1s',
  COORDINATOR_MEMBERSHIP_REBALANCE_HEARTBEAT_INTERVAL: '100ms',
  COORDINATOR_MEMBERSHIP_ASSIGNMENT_DEBOUNCE: '100ms',
  COORDINATOR_REPLICA_STATE_DIR: stateDir,
});

/**
 * Waits until every replica lists all of them as live. A group created before that may be
 * handed over once a replica sees the others, and a flush while no replica holds its lease
 * costs no lease: the lease the tests wait to see lost.
 */
async function registryConverged(urls: readonly string[]): Promise<void> {
  await waitFor(
    async () => {
      const seen = await Promise.all(
        urls.map((url) => ask(url, 'GET', '/coord/v1/monitoring/replicas', 'reader')),
      );
      return seen.every(
        (s) =>
          s.status === 200 && (s.body as { replicas: unknown[] }).replicas.length === urls.length,
      );
    },
    { timeoutMs: 30_000, intervalMs: 100, what: 'every replica to list the others' },
  );
}

/** Leases replica `i` holds now: acquired, less released and lost. */
async function leasesHeld(set: ReplicaSet, i: number): Promise<number> {
  const text = await set.metrics(i);
  const count = (event: string) => metricSum(text, 'coord_lease_changes_total', { event });
  return count('acquired') - count('released') - count('lost');
}

/**
 * Waits until every replica names the same owner of the group at `path` (X-Coord-Owner) and that
 * replica holds the one lease: no handover under way, whose gap (released here, not yet
 * acquired there) would leave no lease to lose.
 */
async function heldByItsOwner(set: ReplicaSet, urls: readonly string[], path: string) {
  const reader = replicaToken('reader', ROLES.reader ?? []);
  await waitFor(
    async () => {
      const owners = await ownersNamed(urls, path, reader);
      const owner = owners[0];
      if (!owner || owners.some((o) => o !== owner)) return false;
      const held = await Promise.all(urls.map((_, i) => leasesHeld(set, i)));
      return held[set.indexOf(owner)] === 1 && held.reduce((a, b) => a + b, 0) === 1;
    },
    { timeoutMs: 30_000, intervalMs: 100, what: "the group's lease held by the owner all name" },
  );
}

/** A redis-server without persistence and `count` replicas on it, for one describe block. */
function replicasOnRedis(label: string, count: number) {
  const state = {
    redis: null as RedisServerHandle | null,
    children: null as ChildProcesses | null,
    set: null as ReplicaSet | null,
    keyPrefix: randomKeyPrefix(),
    stateDir: mkdtempSync(join(tmpdir(), `${label}-state-`)),
    failed: false,
  };
  beforeAll(async () => {
    state.redis = await startRedisServer();
    state.children = new ChildProcesses(label);
    state.set = await ReplicaSet.start(state.children, {
      count,
      store: { type: 'redis', url: state.redis.url },
      keyPrefix: state.keyPrefix,
      env: ENV(state.stateDir),
    });
    await registryConverged(state.set.urls);
  }, 150_000);
  afterAll(async () => {
    if (state.failed && state.children)
      console.log(`[${label}] logs kept in ${state.children.dir}`);
    await state.children?.cleanUp(state.failed);
    await state.redis?.stop();
    rmSync(state.stateDir, { recursive: true, force: true });
  });
  return state;
}

describe('Redis flushed under three running replicas', () => {
  const state = replicasOnRedis('lost-flush', 3);

  it('members, routing and monitoring see the group failed closed (METADATA_LOST), never 404; RECREATE serves it again', async () => {
    try {
      const set = state.set!;
      const redis = state.redis!;
      const urls = set.urls;
      const created = await admin(urls, 'POST', '/coord/v1/admin/groups', {
        streamPrefix: 'lost',
        consumerGroup: 'g',
        shardCount: 4,
        ...CHANGE,
      });
      expect(created.status).toBe(201);
      const heartbeat = '/coord/v1/consumer/streams/lost/groups/g/heartbeat';
      const members = ['a', 'b'].map((id) => new Member(id, heartbeat));
      await settle(members, urls, 4);
      const before = members[0]!.last!;
      expect(before.metadataVersion).toBeGreaterThan(0);
      await heldByItsOwner(set, urls, '/coord/v1/monitoring/streams/lost/groups/g');

      const leasesLost = async () =>
        (await Promise.all(urls.map((_, i) => set.metrics(i)))).reduce(
          (sum, text) => sum + metricSum(text, 'coord_lease_changes_total', { event: 'lost' }),
          0,
        );
      const lostBefore = await leasesLost();
      await redis.client().flushall();
      // As reported: the owner loses its lease with the store before anyone asks again.
      await waitFor(async () => (await leasesLost()) > lostBefore, {
        timeoutMs: 10_000,
        intervalMs: 100,
        what: 'the owner to lose its lease',
      });

      await beatUntilFailedClosed(members, urls);
      // Producers that know a version are refused the same way, on every replica.
      for (const url of urls) {
        const routing = await ask(
          url,
          'GET',
          `/coord/v1/routing/streams/lost/groups/g?afterVersion=${before.metadataVersion}`,
          'producer',
        );
        expect(routing).toMatchObject({
          status: 503,
          code: 'GROUP_FAILED_CLOSED',
          failureReason: 'METADATA_LOST',
        });
      }
      await expectListedLost(urls, 'lost', 'g');
      const view = await ask(
        urls[0]!,
        'GET',
        '/coord/v1/monitoring/streams/lost/groups/g',
        'reader',
      );
      expect(view.body).toMatchObject({ lifecycleId: before.lifecycleId });
      expect(
        (view.body as { highestVersionSeen: number }).highestVersionSeen,
      ).toBeGreaterThanOrEqual(before.metadataVersion);
      const lost = await Promise.all(urls.map((_, i) => set.metrics(i)));
      expect(
        lost.reduce((sum, text) => sum + metricSum(text, 'coord_metadata_lost_total'), 0),
      ).toBeGreaterThan(0);
      // Failed closed: counted where the loss was noticed, not again by a later load.
      expect(
        lost.reduce((sum, text) => sum + metricSum(text, 'coord_groups_failed_closed_total'), 0),
      ).toBeGreaterThan(0);

      // Nothing was re-created from what anyone remembered.
      const keys = keyNames(state.keyPrefix);
      const ref = { streamPrefix: 'lost', consumerGroup: 'g' };
      expect(await redis.client().exists(keys.metadata(ref))).toBe(0);
      expect(JSON.parse((await redis.client().get(keys.failure(ref))) ?? '{}')).toMatchObject({
        reason: 'METADATA_LOST',
        lifecycleId: before.lifecycleId,
      });

      // A group nobody remembers, asked for without any version, is still unknown.
      const unknownJoin = await ask(
        urls[1]!,
        'POST',
        '/coord/v1/consumer/streams/never/groups/g/heartbeat',
        'consumer',
        {
          memberId: 'x',
          memberEpoch: 0,
          assignmentEpoch: 0,
          metadataVersion: 0,
          currentAssignments: [],
        },
      );
      expect(unknownJoin).toMatchObject({ status: 404, code: 'GROUP_NOT_FOUND' });
      const unknownRouting = await ask(
        urls[2]!,
        'GET',
        '/coord/v1/routing/streams/never/groups/g',
        'producer',
      );
      expect(unknownRouting).toMatchObject({ status: 404, code: 'GROUP_NOT_FOUND' });

      // Recovery: a new lifecycle, versions above everything seen; the members rejoin it.
      const recreated = await admin(
        urls,
        'POST',
        '/coord/v1/admin/streams/lost/groups/g/recovery',
        {
          action: 'RECREATE',
          shardCount: 4,
          ...CHANGE,
        },
      );
      expect(recreated.status).toBe(200);
      expect(recreated.body).toMatchObject({ status: 'ACTIVE' });
      const fresh = recreated.body as { lifecycleId: string; metadataVersion: number };
      expect(fresh.lifecycleId).not.toBe(before.lifecycleId);
      expect(fresh.metadataVersion).toBeGreaterThan(before.metadataVersion);
      await settle(members, urls, 4);
      expect(members.map((m) => m.lifecycleId)).toEqual([fresh.lifecycleId, fresh.lifecycleId]);
      expect(await redis.client().get(keys.failure(ref))).toBeNull();
    } catch (error) {
      state.failed = true;
      throw error;
    }
  }, 150_000);
});

describe('Redis without persistence killed and started again under running replicas', () => {
  const state = replicasOnRedis('lost-restart', 2);

  it('the group fails closed (METADATA_LOST) on every replica, never 404; a restored backup is RESUMEd', async () => {
    try {
      const set = state.set!;
      const redis = state.redis!;
      const urls = set.urls;
      const created = await admin(urls, 'POST', '/coord/v1/admin/groups', {
        streamPrefix: 'restart',
        consumerGroup: 'g',
        shardCount: 3,
        ...CHANGE,
      });
      expect(created.status).toBe(201);
      const heartbeat = '/coord/v1/consumer/streams/restart/groups/g/heartbeat';
      const members = ['a', 'b'].map((id) => new Member(id, heartbeat));
      await settle(members, urls, 3);
      const before = members[0]!.last!;
      const dir = mkdtempSync(join(tmpdir(), 'lost-backup-'));
      const file = join(dir, 'backup.json');
      const backup = await coordctl([
        'backup',
        '--url',
        redis.url,
        '--key-prefix',
        state.keyPrefix,
        '--out',
        file,
      ]);
      expect(backup.code).toBe(0);

      await redis.kill();
      await redis.restart(); // no AOF, no RDB: it comes back empty
      expect(await redis.client().dbsize()).toBeLessThan(5);

      await beatUntilFailedClosed(members, urls);
      await expectListedLost(urls, 'restart', 'g');
      const ref = { streamPrefix: 'restart', consumerGroup: 'g' };
      expect(await redis.client().exists(keyNames(state.keyPrefix).metadata(ref))).toBe(0);

      // RESUME needs the metadata back first.
      const early = await admin(urls, 'POST', '/coord/v1/admin/streams/restart/groups/g/recovery', {
        action: 'RESUME',
        ...CHANGE,
      });
      expect(early).toMatchObject({ status: 409, code: 'RESUME_REFUSED' });
      const restored = await coordctl([
        'restore',
        '--url',
        redis.url,
        '--key-prefix',
        state.keyPrefix,
        '--in',
        file,
        '--group',
        'restart:g',
      ]);
      expect(restored.code).toBe(0);
      const resumed = await admin(
        urls,
        'POST',
        '/coord/v1/admin/streams/restart/groups/g/recovery',
        {
          action: 'RESUME',
          ...CHANGE,
        },
      );
      expect(resumed.status).toBe(200);
      expect(resumed.body).toMatchObject({
        status: 'ACTIVE',
        lifecycleId: before.lifecycleId,
        metadataVersion: before.metadataVersion,
      });
      await settle(members, urls, 3);
      rmSync(dir, { recursive: true, force: true });
    } catch (error) {
      state.failed = true;
      throw error;
    }
  }, 150_000);
});

describe('a replica started again on a store that came back empty', () => {
  it('says so at startup in one error line naming the store and what to do', async () => {
    const redis = await startRedisServer();
    const stateDir = mkdtempSync(join(tmpdir(), 'lost-startup-state-'));
    const overrides = {
      'store.key-prefix': randomKeyPrefix(),
      'replica.state-dir': stateDir,
      'store.verify-interval': '100ms',
    };
    try {
      const first = await startTestCoordinator({ store: 'redis', redisUrl: redis.url, overrides });
      const created = await first.call('POST', '/coord/v1/admin/groups', {
        user: 'writer',
        body: { streamPrefix: 'boot', consumerGroup: 'g', shardCount: 2, ...TEST_CHANGE },
      });
      expect(created.status).toBe(201);
      await waitFor(() => readdirSync(stateDir).some((name) => name.endsWith('.json')), {
        what: 'the state file to record that groups were seen',
      });
      await first.close();

      await redis.client().flushall(); // the store loses everything while no replica runs

      const logs = captureLogs('warn');
      const second = await startTestCoordinator({
        store: 'redis',
        redisUrl: redis.url,
        overrides,
        logger: logs.logger,
      });
      try {
        const emptied = () =>
          logs.lines.filter(
            (line) => line.level === 'error' && /holds no group/.test(line.message),
          );
        await waitFor(() => emptied().length > 0, { what: 'the emptied-store error line' });
        const [line] = emptied();
        expect(line?.message).toContain(`127.0.0.1:${redis.port}`);
        expect(line?.message).toContain(overrides['store.key-prefix']);
        expect(line?.message).toMatch(/coordctl restore.*RESUME.*RECREATE/);
        const metrics = await (await second.call('GET', '/metrics')).text();
        expect(metricSum(metrics, 'coord_store_emptied')).toBe(1);
      } finally {
        await second.close();
      }
    } finally {
      await redis.stop();
      rmSync(stateDir, { recursive: true, force: true });
    }
  }, 60_000);
});
