/**
 * Pausing consumption and resetting positions end to end (docs/operations.md#pausing-consumption,
 * docs/operations.md#replay-or-skip), with the SDK on a real Redis and a real coordinator over
 * HTTP: a paused shard is revoked and read by nobody until resumed; a replay to the beginning
 * delivers exactly what was there again; a skip to the end delivers none of what it skipped;
 * bad input and conflicting requests are refused with a code and change nothing.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  Consumer,
  CoordinatorClient,
  Producer,
  type ConsumerMessage,
  type PausedShardsEvent,
} from '../../src/client/index.js';
import { shardForKey } from '../../src/machines/routing.js';
import { moveShardPosition } from '../../src/streams/positions.js';
import { CHANGE, type TestCoordinator, startStreamsCoordinator } from '../support/coordinator.js';
import { monitorRedis } from '../support/redis-monitor.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';
import { metricSum } from '../support/replica-processes.js';
import { serverSentEvents } from '../support/server-sent-events.js';

let redis: RedisServerHandle;
let c: TestCoordinator;
const closers: (() => Promise<void>)[] = [];

beforeAll(async () => {
  redis = await startRedisServer();
  c = await startStreamsCoordinator(redis.url);
});
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});
afterAll(async () => {
  await c?.close();
  await redis?.stop();
});

const client = (user: string) => new CoordinatorClient({ baseUrl: c.url, token: c.token(user) });
const groupPath = (sp: string) => `/coord/v1/admin/streams/${sp}/groups/g`;

async function createGroup(shardCount: number): Promise<string> {
  const sp = `cc-${randomBytes(4).toString('hex')}`;
  const res = await c.call('POST', '/coord/v1/admin/groups', {
    user: 'writer',
    body: { streamPrefix: sp, consumerGroup: 'g', shardCount, startAt: 'earliest', ...CHANGE },
  });
  expect(res.status).toBe(201);
  return sp;
}

/** A key that routes to `shard` of a group with `count` shards. */
function keyFor(shard: number, count: number, salt = ''): string {
  for (let i = 0; ; i++) {
    const key = `k${salt}-${i}`;
    if (shardForKey(key, count) === shard) return key;
  }
}

async function send(sp: string, entries: Array<[key: string, body: string]>): Promise<void> {
  const producer = new Producer({
    client: client('producer'),
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

interface Started {
  consumer: Consumer;
  /** `shard:body` of every delivery, in order. */
  seen: string[];
  paused: PausedShardsEvent[];
}

/** A consumer of the group `g` on `sp`; `handle` runs after a delivery is recorded. */
async function startConsumer(
  sp: string,
  handle: (message: ConsumerMessage) => Promise<void> | void = () => undefined,
): Promise<Started> {
  const seen: string[] = [];
  const paused: PausedShardsEvent[] = [];
  const consumer = new Consumer({
    client: client('consumer'),
    redis: redis.url,
    streamPrefix: sp,
    consumerGroup: 'g',
    memberId: `m-${randomBytes(3).toString('hex')}`,
    blockMs: 50,
    handler: (message: ConsumerMessage) => {
      seen.push(`${message.shard}:${message.fields.body}`);
      return handle(message);
    },
  });
  consumer.on('pausedShards', (event) => paused.push(event));
  consumer.on('error', () => undefined);
  await consumer.start();
  closers.push(() => consumer.close());
  return { consumer, seen, paused };
}

async function view(sp: string) {
  const res = await c.call('GET', `/coord/v1/monitoring/streams/${sp}/groups/g`, {
    user: 'reader',
  });
  expect(res.status).toBe(200);
  return (await res.json()) as {
    metadataVersion: number;
    consumption: {
      state: string;
      pausedShards: number[];
      reset: { stage: string; moves: { shard: number; moved: boolean }[] } | null;
      lastReset: { resetId: string } | null;
    };
    state: { consumption: unknown };
  };
}

async function consumption(sp: string, body: Record<string, unknown>) {
  return c.call('POST', `${groupPath(sp)}/consumption`, {
    user: 'writer',
    body: { ...CHANGE, ...body },
  });
}

async function positions(sp: string, body: Record<string, unknown>, requestId?: string) {
  return c.call('POST', `${groupPath(sp)}/positions`, {
    user: 'writer',
    body: { ...CHANGE, ...body },
    ...(requestId ? { headers: { 'x-request-id': requestId } } : {}),
  });
}

/** `coord_paused_shards` of the replica (every other test's group is resumed or gone by then). */
async function pausedGauge(): Promise<number> {
  const text = await (await c.call('GET', '/metrics')).text();
  return metricSum(text, 'coord_paused_shards');
}

async function lagOf(sp: string, shard: number): Promise<number> {
  const res = await c.call('GET', `/coord/v1/monitoring/streams/${sp}/groups/g/lag`, {
    user: 'reader',
  });
  const lag = (await res.json()) as { shards: { shard: number; lagEntries: number }[] };
  return lag.shards.find((s) => s.shard === shard)!.lagEntries;
}

interface StreamedEvent {
  event: string;
  data: {
    event?: string;
    changes?: { region: string; from: string | null; to: string }[];
    consumption?: { state: string };
  };
}

/**
 * Opens the group's events stream (server-sent events); `next(test)` answers the next event
 * that passes `test`, skipping the others.
 */
async function openEvents(sp: string) {
  const abort = new AbortController();
  const res = await fetch(`${c.url}/coord/v1/monitoring/streams/${sp}/groups/g/events`, {
    headers: { authorization: `Bearer ${c.token('reader')}` },
    signal: abort.signal,
  });
  expect(res.status).toBe(200);
  const stream = serverSentEvents<StreamedEvent['data']>(res.body as ReadableStream<Uint8Array>);
  closers.push(async () => abort.abort());
  const next = async (test: (e: StreamedEvent) => boolean): Promise<StreamedEvent> => {
    for (;;) {
      const arrived = await stream.next();
      if (arrived.done) throw new Error('the events stream ended');
      if (test(arrived.value)) return arrived.value;
    }
  };
  return { next };
}

/** The change of the consumption region a transition made, if any. */
const consumptionChange = (e: StreamedEvent) =>
  e.data.changes?.find((change) => change.region === 'consumption');

describe('pause and resume consumption', () => {
  it('revokes a paused shard, delivers nothing of it until resumed, then delivers it', async () => {
    const sp = await createGroup(2);
    const { consumer, seen, paused } = await startConsumer(sp);
    await send(sp, [
      [keyFor(0, 2), 'a0'],
      [keyFor(1, 2), 'a1'],
    ]);
    await waitFor(() => seen.length === 2, { what: 'both shards delivered' });

    const res = await consumption(sp, { action: 'PAUSE', shards: [1] });
    expect(res.status).toBe(200);
    await waitFor(async () => (await view(sp)).consumption.state === 'paused', {
      what: 'the pause to end in paused',
    });
    expect((await view(sp)).consumption.pausedShards).toEqual([1]);
    expect((await view(sp)).state.consumption).toBe('paused');
    expect(await pausedGauge()).toBe(1);
    await waitFor(() => !consumer.shards().includes(1), { what: 'shard 1 revoked' });
    expect(consumer.pausedShards()).toEqual([1]);
    expect(paused[0]).toEqual({ paused: [1], resumed: [] });

    await send(sp, [
      [keyFor(1, 2, 'x'), 'b1'],
      [keyFor(0, 2, 'x'), 'b0'],
    ]);
    await waitFor(() => seen.includes('0:b0'), { what: 'shard 0 still delivered' });
    // Written before b0, and nobody read it: it waits on the paused shard.
    expect(seen).not.toContain('1:b1');
    expect(await lagOf(sp, 1)).toBe(1);

    expect((await consumption(sp, { action: 'RESUME', shards: [1] })).status).toBe(200);
    await waitFor(() => seen.includes('1:b1'), { what: 'shard 1 delivered after resume' });
    expect((await view(sp)).consumption).toMatchObject({ state: 'running', pausedShards: [] });
    expect(paused.at(-1)).toEqual({ paused: [], resumed: [1] });
    expect(await pausedGauge()).toBe(0);
  });

  it('lets the message in hand finish before the shard is given up: pausing until then', async () => {
    const sp = await createGroup(1);
    let release: () => void = () => undefined;
    const inHand = new Promise<void>((resolve) => (release = resolve));
    const { consumer, seen } = await startConsumer(sp, async (message) => {
      if (message.fields.body === 'slow') await inHand;
    });
    await send(sp, [['k1', 'slow']]);
    await waitFor(() => seen.includes('0:slow'), { what: 'the slow message in hand' });

    expect((await consumption(sp, { action: 'PAUSE' })).status).toBe(200);
    // The member drains: it keeps the shard, so the group waits in pausing. What is asserted is
    // that nothing moves on, so time must pass: several of the member's heartbeats.
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect((await view(sp)).consumption.state).toBe('pausing');
    const assignments = await c.call(
      'GET',
      `/coord/v1/monitoring/streams/${sp}/groups/g/assignments`,
      {
        user: 'reader',
      },
    );
    const { shards } = (await assignments.json()) as { shards: { shard: number; state: string }[] };
    expect(shards.find((s) => s.shard === 0)?.state).toBe('revoking');

    release();
    await waitFor(async () => (await view(sp)).consumption.state === 'paused', {
      what: 'the pause to end once the message was handled',
    });
    expect(consumer.shards()).toEqual([]);
    // Handled and acknowledged before the shard was given up: nothing left pending.
    const pending = (await redis.client().xpending(`${sp}:0`, 'g')) as [number, ...unknown[]];
    expect(pending[0]).toBe(0);
    expect(seen).toEqual(['0:slow']);
  });

  it('refuses a shard the group does not have and a scale while paused, changing nothing', async () => {
    const sp = await createGroup(2);
    const before = await view(sp);
    const outside = await consumption(sp, { action: 'PAUSE', shards: [2] });
    expect(outside.status).toBe(400);
    expect(await outside.json()).toMatchObject({ error: { code: 'SHARD_OUT_OF_RANGE' } });
    expect((await view(sp)).metadataVersion).toBe(before.metadataVersion);

    expect((await consumption(sp, { action: 'PAUSE' })).status).toBe(200);
    const scale = await c.call('POST', `${groupPath(sp)}/scale`, {
      user: 'writer',
      body: { shardCount: 3, ...CHANGE },
    });
    expect(scale.status).toBe(409);
    expect(await scale.json()).toMatchObject({ error: { code: 'CONSUMPTION_PAUSED' } });
    const reset = await positions(sp, { to: 'earliest', shards: [0], dryRun: false });
    expect(reset.status).toBe(409);
    expect(await reset.json()).toMatchObject({ error: { code: 'CONSUMPTION_PAUSED' } });
    expect((await view(sp)).consumption).toMatchObject({ state: 'paused', pausedShards: [0, 1] });
  });

  it('keeps the stream prefix from moving while another group on it is paused', async () => {
    const sp = await createGroup(2);
    const other = await c.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: sp, consumerGroup: 'other', ...CHANGE },
    });
    expect(other.status).toBe(201);
    expect((await consumption(sp, { action: 'PAUSE', shards: [0] })).status).toBe(200);
    const scale = await c.call('POST', `/coord/v1/admin/streams/${sp}/groups/other/scale`, {
      user: 'writer',
      body: { shardCount: 4, ...CHANGE },
    });
    expect(scale.status).toBe(409);
    const refused = (await scale.json()) as { error: { code: string; message: string } };
    expect(refused.error.code).toBe('CONSUMPTION_PAUSED');
    expect(refused.error.message).toContain(`${sp}:g`);
    expect((await consumption(sp, { action: 'RESUME' })).status).toBe(200);
    const again = await c.call('POST', `/coord/v1/admin/streams/${sp}/groups/other/scale`, {
      user: 'writer',
      body: { shardCount: 4, ...CHANGE },
    });
    expect(again.status).toBe(202);
  });

  it('is refused while frozen, and so is a reset, changing nothing', async () => {
    const sp = await createGroup(1);
    expect(
      (await c.call('POST', `${groupPath(sp)}/freeze`, { user: 'writer', body: CHANGE })).status,
    ).toBe(200);
    const before = await view(sp);
    const res = await consumption(sp, { action: 'PAUSE' });
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({ error: { code: 'GROUP_FROZEN' } });
    const reset = await positions(sp, { to: 'earliest', dryRun: false });
    expect(reset.status).toBe(409);
    expect(await reset.json()).toMatchObject({ error: { code: 'GROUP_FROZEN' } });
    const after = await view(sp);
    expect(after.metadataVersion).toBe(before.metadataVersion);
    expect(after.consumption).toMatchObject({ state: 'running', pausedShards: [], reset: null });
  });
});

describe('reset positions', () => {
  it("a shard whose stream key holds another type is a 409 naming the key, not the streams' outage", async () => {
    const sp = await createGroup(2);
    await redis.client().set(`${sp}:1`, 'not a stream');
    for (const dryRun of [true, false]) {
      const res = await positions(sp, { to: 'earliest', dryRun });
      expect(res.status).toBe(409);
      const body = (await res.json()) as {
        error: { code: string; message: string; details: Record<string, unknown> };
      };
      expect(body.error.code).toBe('SHARD_STREAM_BROKEN');
      expect(body.error.message).toMatch(new RegExp(`^${sp}:1: WRONGTYPE`));
      expect(body.error.details).toMatchObject({ shard: 1, stream: `${sp}:1` });
    }
    // Nothing started: no reset, no shard paused.
    expect((await view(sp)).consumption.state).toBe('running');
  });

  it('plans a replay without changing anything, then delivers exactly those entries again', async () => {
    const sp = await createGroup(1);
    const { seen } = await startConsumer(sp);
    await send(
      sp,
      [1, 2, 3, 4, 5].map((n) => [`k${n}`, `e${n}`]),
    );
    await waitFor(() => seen.length === 5, { what: 'five delivered' });

    const plan = await positions(sp, { to: 'earliest' });
    expect(plan.status).toBe(200);
    const planned = (await plan.json()) as {
      dryRun: boolean;
      changes: number;
      plan: { shard: number; redeliver: number; skip: number; to: string }[];
      reset: unknown;
    };
    expect(planned).toMatchObject({ dryRun: true, changes: 1, reset: null });
    expect(planned.plan).toEqual([
      expect.objectContaining({ shard: 0, redeliver: 5, skip: 0, to: '0-0' }),
    ]);
    expect((await view(sp)).consumption.state).toBe('running');

    const run = await positions(sp, { to: 'earliest', dryRun: false }, 'replay-1');
    expect(run.status).toBe(202);
    await waitFor(async () => (await view(sp)).consumption.lastReset?.resetId === 'replay-1', {
      what: 'the reset to end',
    });
    await waitFor(() => seen.length === 10, { what: 'five delivered again' });
    await waitFor(async () => (await lagOf(sp, 0)) === 0, { what: 'caught up' });
    expect(seen).toEqual([
      '0:e1',
      '0:e2',
      '0:e3',
      '0:e4',
      '0:e5',
      '0:e1',
      '0:e2',
      '0:e3',
      '0:e4',
      '0:e5',
    ]);

    // The same request again answers the reset it started; nothing is replayed twice.
    const again = await positions(sp, { to: 'earliest', dryRun: false }, 'replay-1');
    expect(again.status).toBe(202);
    expect(await again.json()).toMatchObject({ reset: { resetId: 'replay-1', stage: 'done' } });
    expect((await view(sp)).consumption.state).toBe('running');
    expect(seen).toHaveLength(10);

    // The plan is audited as a read of intent, the run as the change it is, each with its reason.
    const res = await c.call('GET', `/coord/v1/monitoring/audit?streamPrefix=${sp}`, {
      user: 'reader',
    });
    const { records } = (await res.json()) as {
      records: { operation: string; status: number; requestedBy: string; reason: string }[];
    };
    expect(
      records
        .filter((r) => r.operation.endsWith('Positions'))
        .reverse()
        .map((r) => [r.operation, r.status, r.requestedBy, r.reason]),
    ).toEqual([
      ['planPositions', 200, CHANGE.requestedBy, CHANGE.reason],
      ['resetPositions', 202, CHANGE.requestedBy, CHANGE.reason],
      ['resetPositions', 202, CHANGE.requestedBy, CHANGE.reason],
    ]);
  });

  it('skips to the end: none of the skipped entries is delivered, later ones are', async () => {
    const sp = await createGroup(1);
    const first = await startConsumer(sp);
    await send(sp, [['k0', 'before']]);
    await waitFor(() => first.seen.length === 1, { what: 'first delivered' });
    await first.consumer.close();
    await send(
      sp,
      [1, 2, 3, 4].map((n) => [`k${n}`, `skipped${n}`]),
    );

    const run = await positions(sp, { to: 'latest', dryRun: false }, 'skip-1');
    expect(run.status).toBe(202);
    const started = (await run.json()) as { plan: { skip: number; to: string }[] };
    expect(started.plan[0]!.skip).toBe(4);
    await waitFor(async () => (await view(sp)).consumption.lastReset?.resetId === 'skip-1', {
      what: 'the reset to end',
    });

    const second = await startConsumer(sp);
    await send(sp, [['k9', 'after']]);
    await waitFor(() => second.seen.includes('0:after'), { what: 'the entry after the skip' });
    expect(second.seen).toEqual(['0:after']);

    // The move is named by the reset: the same move sent late (by an owner that lost the group
    // while it was under way) does not take back what the member read since.
    const last = (await view(sp)).consumption.lastReset as unknown as { startedAt: string };
    const streams = redis.client();
    const position = async () => ((await streams.xinfo('GROUPS', `${sp}:0`)) as unknown[][])[0]![7];
    const read = await position();
    const late = await moveShardPosition(streams, {
      stream: `${sp}:0`,
      consumerGroup: 'g',
      to: started.plan[0]!.to,
      acknowledgeUpTo: true,
      moveId: `${Date.parse(last.startedAt)}:skip-1`,
    });
    expect(late.repeated).toBe(true);
    expect(await position()).toBe(read);
  });

  it('to the end acknowledges the pending entries it plans to skip, also at the end already', async () => {
    const sp = await createGroup(1);
    const streams = redis.client();
    for (let i = 0; i < 3; i++) await streams.xadd(`${sp}:0`, '*', 'n', String(i));
    await streams.xgroup('CREATE', `${sp}:0`, 'g', '0');
    // Delivered and never acknowledged (a handler stuck on them): the group stands at the end.
    await streams.xreadgroup('GROUP', 'g', 'stuck', 'STREAMS', `${sp}:0`, '>');

    const plan = await positions(sp, { to: 'latest' });
    expect(plan.status).toBe(200);
    const planned = (await plan.json()) as {
      plan: { from: string; to: string; pendingSkipped: number }[];
      changes: number;
    };
    expect(planned.plan[0]).toMatchObject({ pendingSkipped: 3 });
    expect(planned.plan[0]!.from).toBe(planned.plan[0]!.to);
    // "pendingSkipped (delivered, unacknowledged entries up to to)", which "a skip then
    // acknowledges" (docs/operations.md#moving-a-groups-positions): a change to make.
    expect(planned.changes).toBe(1);

    const run = await positions(sp, { to: 'latest', dryRun: false }, `ack-${sp}`);
    expect(run.status).toBe(202);
    await waitFor(async () => (await view(sp)).consumption.lastReset?.resetId === `ack-${sp}`, {
      what: 'the reset to end',
    });
    expect((await streams.xpending(`${sp}:0`, 'g'))[0]).toBe(0);
  });

  it('refuses a future time, a bad id and a shard out of range with a code', async () => {
    const sp = await createGroup(2);
    const future = await positions(sp, { to: { timestamp: Date.now() + 3_600_000 } });
    expect(future.status).toBe(400);
    expect(await future.json()).toMatchObject({ error: { code: 'TIMESTAMP_IN_FUTURE' } });
    const badId = await positions(sp, { to: { ids: { '0': 'not-an-id' } }, shards: [0] });
    expect(badId.status).toBe(400);
    expect(await badId.json()).toMatchObject({ error: { code: 'INVALID_STREAM_ID' } });
    const unlisted = await positions(sp, { to: { ids: { '0': '1-0', '1': '1-0' } }, shards: [0] });
    expect(unlisted.status).toBe(400);
    expect(await unlisted.json()).toMatchObject({
      error: { code: 'VALIDATION_FAILED', details: { shards: [1] } },
    });
    // Without `shards`, an `ids` target resets the shards it names.
    const named = await positions(sp, { to: { ids: { '1': '1-0' } } });
    expect(named.status).toBe(200);
    expect(
      ((await named.json()) as { plan: { shard: number }[] }).plan.map((p) => p.shard),
    ).toEqual([1]);
    const outside = await positions(sp, { to: 'earliest', shards: [5], dryRun: false });
    expect(outside.status).toBe(400);
    expect(await outside.json()).toMatchObject({ error: { code: 'SHARD_OUT_OF_RANGE' } });
    expect((await view(sp)).consumption).toMatchObject({ state: 'running', reset: null });
    const cancel = await consumption(sp, { action: 'CANCEL_RESET' });
    expect(cancel.status).toBe(409);
    expect(await cancel.json()).toMatchObject({ error: { code: 'NO_RESET_IN_PROGRESS' } });
  });

  it('an ids key that is no shard number is 400 VALIDATION_FAILED naming the key, whatever it is', async () => {
    const sp = await createGroup(2);
    // "00" and "1e0" are refused as no shard number; "x", "-1" and "1.5" must be too, not
    // reported as a shard out of range ("no shard NaN", details.shards [null]).
    for (const key of ['00', '1e0', 'x', '-1', '1.5']) {
      const res = await positions(sp, { to: { ids: { [key]: '1-0' } } });
      const { error } = (await res.json()) as { error: { code: string; message: string } };
      expect({ key, status: res.status, code: error.code }).toEqual({
        key,
        status: 400,
        code: 'VALIDATION_FAILED',
      });
      expect(error.message).toContain(JSON.stringify(key));
    }
  });

  it('shows the pause, the resume and each step of a reset on the events stream', async () => {
    const sp = await createGroup(1);
    const streams = redis.client();
    await streams.xadd(`${sp}:0`, '*', 'n', '1');
    await streams.xadd(`${sp}:0`, '*', 'n', '2');
    await streams.xgroup('CREATE', `${sp}:0`, 'g', '$');
    const events = await openEvents(sp);
    const snapshot = await events.next((e) => e.event === 'snapshot');
    expect(snapshot.data.consumption).toMatchObject({ state: 'running' });
    const transition = (name: string) =>
      events.next((e) => e.event === 'transition' && e.data.event === name);

    // Nobody holds the shard: the pause is paused at once.
    expect((await consumption(sp, { action: 'PAUSE' })).status).toBe(200);
    expect(consumptionChange(await transition('PAUSE_CONSUMPTION'))).toEqual({
      region: 'consumption',
      from: 'running',
      to: 'paused',
    });
    expect((await consumption(sp, { action: 'RESUME' })).status).toBe(200);
    expect(consumptionChange(await transition('RESUME_CONSUMPTION'))).toEqual({
      region: 'consumption',
      from: 'paused',
      to: 'running',
    });

    const run = await positions(sp, { to: 'earliest', dryRun: false }, `sse-${sp}`);
    expect(run.status).toBe(202);
    expect(consumptionChange(await transition('RESET_POSITIONS'))).toMatchObject({
      from: 'running',
      to: expect.stringMatching(/^resetting\b/) as unknown,
    });
    expect(consumptionChange(await transition('SHARD_POSITIONS_MOVED'))).toMatchObject({
      from: 'resetting.moving',
      to: 'running',
    });
    expect((await view(sp)).consumption.lastReset).toMatchObject({ resetId: `sse-${sp}` });
  });

  it('cancelled while a shard is moving, moves no further shard of the reset', async () => {
    const sp = await createGroup(2);
    const streams = redis.client();
    // Shard 0 has 5,000 delivered, unacknowledged entries and one after them: its move to the
    // end acknowledges them, 1,000 per script call. Shard 1 stands at its beginning.
    const batch = streams.pipeline();
    for (let i = 0; i < 5_000; i++) batch.xadd(`${sp}:0`, '*', 'n', String(i));
    await batch.exec();
    await streams.xgroup('CREATE', `${sp}:0`, 'g', '0');
    await streams.xreadgroup('GROUP', 'g', 'old', 'STREAMS', `${sp}:0`, '>');
    await streams.xadd(`${sp}:0`, '*', 'n', 'skipped');
    await streams.xadd(`${sp}:1`, '*', 'n', 'kept');
    await streams.xgroup('CREATE', `${sp}:1`, 'g', '0');

    // The server is stopped (SIGSTOP) at shard 0's first acknowledgement, so its move is under
    // way, and the reset is cancelled then (the store is in memory: the cancel needs no Redis).
    let held = false;
    const monitor = await monitorRedis(redis.port, ([name, key]) => {
      if (held || name !== 'xack' || key !== `${sp}:0`) return;
      held = true;
      redis.pause();
    });
    closers.push(() => monitor.stop());
    const run = positions(sp, { to: 'latest', dryRun: false }, `cut-${sp}`);
    await waitFor(() => held, { what: "shard 0's move to start" });
    const cancel = await consumption(sp, { action: 'CANCEL_RESET' }).finally(() => redis.resume());
    expect((await run).status).toBe(202);
    expect(cancel.status).toBe(200);

    // A reset started after it is moved only once the cancelled one's moves are over.
    const after = await positions(
      sp,
      { to: 'earliest', shards: [0], dryRun: false },
      `after-${sp}`,
    );
    expect(after.status).toBe(202);
    await waitFor(async () => (await view(sp)).consumption.lastReset?.resetId === `after-${sp}`, {
      what: 'the later reset to end',
    });
    // "the shards moved so far stay moved, the others keep their positions"
    // (docs/operations.md#replay-or-skip): shard 1 was not moved.
    const groups = (await streams.xinfo('GROUPS', `${sp}:1`)) as unknown[][];
    const info = groups[0]!;
    expect(info[info.indexOf('last-delivered-id') + 1]).toBe('0-0');
  });

  it('cancels a reset its member still holds: nothing moves, the shard is given back', async () => {
    const sp = await createGroup(1);
    const { seen } = await startConsumer(sp);
    await send(sp, [['k1', 'e1']]);
    await waitFor(() => seen.length === 1, { what: 'delivered' });
    // Started, then cancelled at once: usually while its member still holds the shard.
    const run = await positions(sp, { to: 'earliest', dryRun: false }, 'cancel-1');
    expect(run.status).toBe(202);
    const cancel = await consumption(sp, { action: 'CANCEL_RESET' });
    if (cancel.status === 409) {
      // The member let go and the move was made first: the reset ended on its own.
      expect(await cancel.json()).toMatchObject({ error: { code: 'NO_RESET_IN_PROGRESS' } });
    } else {
      expect(cancel.status).toBe(200);
      expect((await view(sp)).consumption.lastReset).toMatchObject({ resetId: 'cancel-1' });
    }
    await waitFor(async () => (await view(sp)).consumption.state === 'running', {
      what: 'consumption running again',
    });
    await send(sp, [['k2', 'e2']]);
    await waitFor(() => seen.includes('0:e2'), { what: 'delivered after the cancel' });
  });
});
