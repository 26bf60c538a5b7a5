/**
 * A position reset whose owner dies half-way (docs/operations.md#replay-or-skip): two
 * coordinator replicas are real child processes on a real redis-server (the store and the
 * streams), an SDK consumer in this process records every delivery. A reset to `earliest` is
 * started and the owning replica is SIGKILLed while the reset is under way; the other replica
 * takes the group, finds the reset in its metadata and finishes it: every entry is delivered
 * exactly once more, and no shard is left paused.
 *
 * Each kill is made deterministic by holding the reset in the stage it is to die in:
 * - `resetting.pausing`: the consumer's handler blocks on a gate the test holds, so the member
 *   cannot report the shard DONE; the gate opens only after the kill.
 * - `resetting.moving` with one shard moved: the second shard's stream is set aside and its key
 *   made a string, so its move fails (WRONGTYPE) and is tried again at every verify interval
 *   while the first is recorded as moved; the stream is put back only after the kill.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  Consumer,
  CoordinatorClient,
  Producer,
  type ConsumerMessage,
} from '../../src/client/index.js';
import { shardForKey } from '../../src/machines/routing.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';
import { ReplicaCaller } from '../support/replica-members.js';
import { ChildProcesses, ReplicaSet, replicaToken } from '../support/replica-processes.js';

const LEASE_TTL_MS = 2_000;
const SHARDS = 2;
/** Entries written and consumed before the reset, per shard. */
const PER_SHARD = 5;
const CHANGE = { requestedBy: 'reset-failover-e2e', reason: 'owner killed mid-reset' };
const TOKEN = replicaToken('reset-e2e', ['READ', 'WRITE', 'CONSUMER', 'PRODUCER']);
const say = (line: string) => console.log(`[reset-failover] ${line}`);

let redis: RedisServerHandle;
let children: ChildProcesses;
let set: ReplicaSet;
let failed = false;
const closers: (() => Promise<void>)[] = [];

beforeAll(async () => {
  redis = await startRedisServer();
  children = new ChildProcesses('reset-failover');
  set = await ReplicaSet.start(children, {
    count: 2,
    store: { type: 'redis', url: redis.url },
    keyPrefix: `rf-${randomBytes(4).toString('hex')}`,
    env: {
      COORDINATOR_STREAMS_URL: redis.url,
      COORDINATOR_STREAMS_LAG_CACHE: '0ms',
      COORDINATOR_LEASE_TTL: `${LEASE_TTL_MS}ms`,
      // A move that failed is tried again this often.
      COORDINATOR_STORE_VERIFY_INTERVAL: '500ms',
      COORDINATOR_MEMBERSHIP_HEARTBEAT_INTERVAL: '1s',
      COORDINATOR_MEMBERSHIP_REBALANCE_HEARTBEAT_INTERVAL: '100ms',
      COORDINATOR_MEMBERSHIP_ASSIGNMENT_DEBOUNCE: '50ms',
    },
  });
}, 120_000);

afterEach(async (context) => {
  if (context.task.result?.state === 'fail') failed = true;
  for (const close of closers.splice(0).reverse()) await close();
});

afterAll(async () => {
  if (failed && children) say(`replica logs kept in ${children.dir}`);
  await children?.cleanUp(failed);
  await redis?.stop();
});

const runningUrls = () => set.running().map((i) => set.urls[i]!);
const client = () => new CoordinatorClient({ baseUrl: [...set.urls], token: TOKEN });
const caller = () => new ReplicaCaller({ targets: runningUrls, retryForMs: 30_000 });
const viewPath = (sp: string) => `/coord/v1/monitoring/streams/${sp}/groups/g`;

interface ResetView {
  resetId: string;
  stage: string;
  moves: { shard: number; moved: boolean }[];
}

interface GroupView {
  owner?: string;
  consumption: {
    state: string;
    pausedShards: number[];
    reset: ResetView | null;
    lastReset: ResetView | null;
  };
}

/** The group as a running replica serves it (200), with the owner that answered it. */
async function view(sp: string, urls: () => readonly string[] = runningUrls) {
  for (const url of urls()) {
    const res = await fetch(`${url}${viewPath(sp)}`, {
      headers: { authorization: `Bearer ${TOKEN}` },
      signal: AbortSignal.timeout(2_000),
    }).catch(() => null);
    if (res?.status === 200) {
      return { owner: res.headers.get('x-coord-owner'), body: (await res.json()) as GroupView };
    }
    await res?.body?.cancel();
  }
  return null;
}

/** Waits until a running replica serves a view that passes `check`; that view. */
async function viewWhen(
  sp: string,
  check: (v: { owner: string | null; body: GroupView }) => boolean,
  what: string,
  timeoutMs = 30_000,
) {
  let seen: { owner: string | null; body: GroupView } | null = null;
  await waitFor(
    async () => {
      const v = await view(sp);
      if (v === null || !check(v)) return false;
      seen = v;
      return true;
    },
    { timeoutMs, intervalMs: 50, what },
  );
  return seen!;
}

/** Starts replica `i` again and waits until every replica lists all of them as live. */
async function restartAndSettle(i: number): Promise<void> {
  await set.restart(i);
  await waitFor(
    async () => {
      for (const url of set.urls) {
        const res = await fetch(`${url}/coord/v1/monitoring/replicas`, {
          headers: { authorization: `Bearer ${TOKEN}` },
        });
        const body = (await res.json()) as { replicas: Array<{ replicaId: string }> };
        if (body.replicas.length !== set.ids.length) return false;
      }
      return true;
    },
    { timeoutMs: 30_000, intervalMs: 100, what: 'every replica live again' },
  );
}

/** The group's owner now, as the replica serving it names it. */
async function ownerOf(sp: string): Promise<string> {
  const v = await viewWhen(sp, (candidate) => candidate.owner !== null, 'the group served');
  expect(set.ids).toContain(v.owner);
  return v.owner!;
}

/** A key that routes to `shard`. */
function keyFor(shard: number, salt: string): string {
  for (let i = 0; ; i++) {
    const key = `${salt}-${i}`;
    if (shardForKey(key, SHARDS) === shard) return key;
  }
}

async function createGroup(): Promise<string> {
  const sp = `rf-${randomBytes(4).toString('hex')}`;
  const res = await caller().call('POST', '/coord/v1/admin/groups', {
    user: 'admin',
    body: {
      streamPrefix: sp,
      consumerGroup: 'g',
      shardCount: SHARDS,
      startAt: 'earliest',
      ...CHANGE,
    },
  });
  expect(res.status, await res.clone().text()).toBe(201);
  return sp;
}

async function send(sp: string, entries: Array<[key: string, body: string]>): Promise<void> {
  const producer = new Producer({
    client: client(),
    redis: redis.url,
    streamPrefix: sp,
    consumerGroup: 'g',
  });
  try {
    for (const [key, body] of entries) await producer.send(key, { body });
  } finally {
    await producer.close();
  }
}

/**
 * A consumer recording `shard:body` of every delivery. Once `hold` is called, the next
 * delivery of `body` stays in the handler until the returned release is called.
 */
async function startConsumer(sp: string) {
  const seen: string[] = [];
  let holding: { body: string; entered: boolean; release: () => void; gate: Promise<void> } | null =
    null;
  const consumer = new Consumer({
    client: client(),
    redis: redis.url,
    streamPrefix: sp,
    consumerGroup: 'g',
    memberId: `m-${randomBytes(3).toString('hex')}`,
    blockMs: 100,
    // The held message must outlast the failover: no drain timeout cuts it short.
    rebalanceTimeoutMs: 120_000,
    sessionTimeoutMs: 30_000,
    handler: async (message: ConsumerMessage) => {
      seen.push(`${message.shard}:${message.fields.body}`);
      const hold = holding;
      if (hold && message.fields.body === hold.body) {
        holding = null;
        hold.entered = true;
        await hold.gate;
      }
    },
  });
  consumer.on('error', () => undefined);
  await consumer.start();
  closers.push(() => consumer.close());
  return {
    consumer,
    seen,
    /** Arms the gate for `body`: its delivery stays in the handler until `release()`. */
    hold: (body: string) => {
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const armed = { body, entered: false, release, gate };
      holding = armed;
      return { entered: () => armed.entered, release };
    },
  };
}

/** Writes PER_SHARD entries to every shard and waits until the consumer got them all. */
async function fill(sp: string, seen: readonly string[]): Promise<Map<number, string[]>> {
  const written = new Map<number, string[]>();
  const entries: Array<[string, string]> = [];
  for (let n = 0; n < PER_SHARD; n++) {
    for (let shard = 0; shard < SHARDS; shard++) {
      const body = `s${shard}-e${n}`;
      entries.push([keyFor(shard, `${body}-k`), body]);
      written.set(shard, [...(written.get(shard) ?? []), body]);
    }
  }
  await send(sp, entries);
  await waitFor(() => seen.length === entries.length, {
    timeoutMs: 20_000,
    what: 'every entry delivered once',
  });
  return written;
}

/** What the consumer got of `shard`, in order. */
function deliveredOn(seen: readonly string[], shard: number): string[] {
  return seen.filter((s) => s.startsWith(`${shard}:`)).map((s) => s.slice(`${shard}:`.length));
}

async function lagEntries(sp: string): Promise<number[]> {
  const res = await caller().call('GET', `${viewPath(sp)}/lag`, { user: 'admin' });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { shards: { shard: number; lagEntries: number }[] };
  return body.shards.map((s) => s.lagEntries);
}

/** Each shard's state as the group's owner has it (`assigned`, `revoking`, `released`, …). */
async function shardStates(sp: string): Promise<Record<number, string>> {
  const res = await caller().call('GET', `${viewPath(sp)}/assignments`, { user: 'admin' });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { shards: { shard: number; state: string }[] };
  return Object.fromEntries(body.shards.map((s) => [s.shard, s.state]));
}

function sameShards(a: Record<number, string>, b: Record<number, string>): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

async function startReset(sp: string, resetId: string) {
  const res = await caller().call('POST', `/coord/v1/admin/streams/${sp}/groups/g/positions`, {
    user: 'admin',
    body: { to: 'earliest', dryRun: false, ...CHANGE },
    headers: { 'x-request-id': resetId },
  });
  expect(res.status, await res.clone().text()).toBe(202);
  const body = (await res.json()) as { reset: ResetView };
  expect(body.reset.resetId).toBe(resetId);
  expect(body.reset.moves.map((m) => m.shard)).toEqual([0, 1]);
}

/**
 * After the new owner ended the reset: it is the last one, nothing is paused, and every entry
 * was delivered exactly twice per shard, in order (once before the reset, once in the replay).
 */
async function expectReplayed(
  sp: string,
  resetId: string,
  seen: readonly string[],
  written: Map<number, string[]>,
  killed: string,
) {
  const done = await viewWhen(
    sp,
    (v) => v.body.consumption.lastReset?.resetId === resetId,
    'the reset to end',
  );
  expect(done.owner).not.toBe(killed);
  expect(done.body.consumption).toMatchObject({ state: 'running', pausedShards: [], reset: null });
  expect(done.body.consumption.lastReset!.moves.every((m) => m.moved)).toBe(true);
  const total = [...written.values()].reduce((n, list) => n + list.length, 0);
  await waitFor(() => seen.length >= 2 * total, {
    timeoutMs: 30_000,
    what: 'the replay delivered',
  });
  await waitFor(async () => (await lagEntries(sp)).every((lag) => lag === 0), {
    timeoutMs: 20_000,
    what: 'the group caught up',
  });
  for (const [shard, bodies] of written) {
    expect(deliveredOn(seen, shard), `shard ${shard}`).toEqual([...bodies, ...bodies]);
  }
  expect(seen).toHaveLength(2 * total);
}

describe('the owner of a group is SIGKILLed while a position reset is under way', () => {
  it('in resetting.pausing: the new owner finds the reset, waits for the shard, and ends it', async () => {
    const sp = await createGroup();
    const { consumer, seen, hold } = await startConsumer(sp);
    await waitFor(() => consumer.shards().length === SHARDS, {
      timeoutMs: 30_000,
      what: 'the consumer holds every shard',
    });
    const written = await fill(sp, seen);

    // One more entry on shard 0, which the consumer keeps in hand: shard 0 stays held.
    const held = hold('held');
    await send(sp, [[keyFor(0, 'held-k'), 'held']]);
    written.get(0)!.push('held');
    await waitFor(() => held.entered(), {
      timeoutMs: 20_000,
      what: 'the held entry in the handler',
    });

    const resetId = `reset-pausing-${randomBytes(3).toString('hex')}`;
    await startReset(sp, resetId);
    // Shard 1 given up, shard 0 still held: the reset waits in pausing.
    const pausing = await viewWhen(
      sp,
      (v) => v.body.consumption.reset?.stage === 'pausing',
      'the reset pausing',
    );
    await waitFor(async () => sameShards(await shardStates(sp), { 0: 'revoking', 1: 'released' }), {
      timeoutMs: 20_000,
      what: 'shard 1 given up, shard 0 still held',
    });
    expect(pausing.body.consumption).toMatchObject({ state: 'resetting', pausedShards: [] });
    // The consumer drains shard 0 with the held entry in hand.
    expect(consumer.stats().shards[0]).toMatchObject({ shard: 0, phase: 'draining', inFlight: 1 });
    expect(consumer.shards()).toEqual([]);
    const owner = await ownerOf(sp);
    await set.kill(set.indexOf(owner));
    const killedAt = Date.now();
    const taken = await viewWhen(
      sp,
      (v) => v.owner !== null && v.owner !== owner,
      'another replica serving the group',
    );
    say(
      `${owner} killed in resetting.pausing; ${taken.owner} serves the group after ${Date.now() - killedAt} ms`,
    );
    // The new owner found the reset in the metadata, still waiting for shard 0.
    expect(taken.body.consumption.state).toBe('resetting');
    expect(taken.body.consumption.reset).toMatchObject({ resetId, stage: 'pausing' });
    expect(taken.body.consumption.reset!.moves.every((m) => !m.moved)).toBe(true);

    held.release();
    await expectReplayed(sp, resetId, seen, written, owner);
    await waitFor(
      () => consumer.shards().length === SHARDS && consumer.pausedShards().length === 0,
      {
        timeoutMs: 20_000,
        what: 'both shards granted again',
      },
    );
    await restartAndSettle(set.indexOf(owner));
  }, 120_000);

  it('in resetting.moving with one shard moved: the new owner moves the other and ends it', async () => {
    const sp = await createGroup();
    const { consumer, seen, hold } = await startConsumer(sp);
    await waitFor(() => consumer.shards().length === SHARDS, {
      timeoutMs: 30_000,
      what: 'the consumer holds every shard',
    });
    const written = await fill(sp, seen);

    // Held in pausing first, so that shard 1's stream can be set aside before any move.
    const held = hold('held');
    await send(sp, [[keyFor(0, 'held-k'), 'held']]);
    written.get(0)!.push('held');
    await waitFor(() => held.entered(), {
      timeoutMs: 20_000,
      what: 'the held entry in the handler',
    });
    const resetId = `reset-moving-${randomBytes(3).toString('hex')}`;
    await startReset(sp, resetId);
    await viewWhen(sp, (v) => v.body.consumption.reset?.stage === 'pausing', 'the reset pausing');
    await waitFor(async () => sameShards(await shardStates(sp), { 0: 'revoking', 1: 'released' }), {
      timeoutMs: 20_000,
      what: 'shard 1 given up, shard 0 still held',
    });

    // Shard 1's stream (and its consumer group) aside; a string in its place fails its move.
    const streams: Redis = redis.client();
    const stream1 = `${sp}:1`;
    const aside = `${sp}:1:aside`;
    await streams.rename(stream1, aside);
    await streams.set(stream1, 'not a stream');

    held.release();
    const moving = await viewWhen(
      sp,
      (v) => {
        const moves = v.body.consumption.reset?.moves ?? [];
        return (
          v.body.consumption.reset?.stage === 'moving' &&
          moves.some((m) => m.shard === 0 && m.moved)
        );
      },
      'shard 0 moved, shard 1 not',
    );
    expect(moving.body.consumption.reset!.moves).toEqual([
      expect.objectContaining({ shard: 0, moved: true }),
      expect.objectContaining({ shard: 1, moved: false }),
    ]);
    expect(await shardStates(sp)).toEqual({ 0: 'released', 1: 'released' });
    const owner = await ownerOf(sp);
    await set.kill(set.indexOf(owner));
    const killedAt = Date.now();
    const taken = await viewWhen(
      sp,
      (v) => v.owner !== null && v.owner !== owner,
      'another replica serving the group',
    );
    say(
      `${owner} killed in resetting.moving; ${taken.owner} serves the group after ${Date.now() - killedAt} ms`,
    );
    expect(taken.body.consumption.state).toBe('resetting');
    expect(taken.body.consumption.reset).toMatchObject({ resetId, stage: 'moving' });
    expect(taken.body.consumption.reset!.moves).toEqual([
      expect.objectContaining({ shard: 0, moved: true }),
      expect.objectContaining({ shard: 1, moved: false }),
    ]);

    // The stream back: the new owner's next try moves it and ends the reset.
    await streams.multi().del(stream1).rename(aside, stream1).exec();
    await expectReplayed(sp, resetId, seen, written, owner);
    await waitFor(
      () => consumer.shards().length === SHARDS && consumer.pausedShards().length === 0,
      {
        timeoutMs: 20_000,
        what: 'both shards granted again',
      },
    );
    await restartAndSettle(set.indexOf(owner));
  }, 120_000);
});
