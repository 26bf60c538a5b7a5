/**
 * Dead letters end to end (docs/protocol.md#dead-letters), with the SDK on a real Redis and a
 * real coordinator over HTTP: a handler that always throws lands its message in its group's
 * dead-letter stream of the shard after `maxDeliveries`, the lag reading counts it, the admin
 * endpoints list, replay (through routing, for that group alone, audited) and purge it, another
 * group on the stream prefix sees none of it, and bad input is a 400 with a code.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  Consumer,
  CoordinatorClient,
  Producer,
  type ConsumerMessage,
  type DeadLetteredEvent,
} from '../../src/client/index.js';
import { shardForKey } from '../../src/machines/routing.js';
import { CHANGE, type TestCoordinator, startStreamsCoordinator } from '../support/coordinator.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';

let redis: RedisServerHandle;
let c: TestCoordinator;
let streams: Redis;
const closers: (() => Promise<void>)[] = [];

beforeAll(async () => {
  redis = await startRedisServer();
  c = await startStreamsCoordinator(redis.url);
  streams = new Redis(redis.url);
});
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});
afterAll(async () => {
  streams?.disconnect();
  await c?.close();
  await redis?.stop();
});

const client = (user: string) => new CoordinatorClient({ baseUrl: c.url, token: c.token(user) });

const admin = (sp: string, action: 'replay' | 'purge') =>
  `/coord/v1/admin/streams/${sp}/groups/g/dead-letters/${action}`;
const listPath = (sp: string, query = '') =>
  `/coord/v1/monitoring/streams/${sp}/groups/g/dead-letters${query}`;

async function createGroup(shardCount: number): Promise<string> {
  const sp = `dl-${randomBytes(4).toString('hex')}`;
  const res = await c.call('POST', '/coord/v1/admin/groups', {
    user: 'writer',
    body: { streamPrefix: sp, consumerGroup: 'g', shardCount, startAt: 'earliest', ...CHANGE },
  });
  expect(res.status).toBe(201);
  return sp;
}

async function send(sp: string, key: string, fields: Record<string, string>, group = 'g') {
  const producer = new Producer({
    client: client('producer'),
    redis: redis.url,
    streamPrefix: sp,
    consumerGroup: group,
  });
  try {
    return await producer.send(key, fields);
  } finally {
    await producer.close();
  }
}

/** A consumer with dead letters on; `handler` decides, `seen` records each delivery. */
async function startConsumer(
  sp: string,
  handler: (message: ConsumerMessage) => void,
  options: { maxDeliveries?: number; retryBackoffMs?: number } = {},
): Promise<{ consumer: Consumer; letters: DeadLetteredEvent[] }> {
  const consumer = new Consumer({
    client: client('consumer'),
    redis: redis.url,
    streamPrefix: sp,
    consumerGroup: 'g',
    memberId: `m-${randomBytes(3).toString('hex')}`,
    blockMs: 50,
    maxDeliveries: options.maxDeliveries ?? 3,
    retryBackoffMs: options.retryBackoffMs ?? 30,
    handler,
  });
  const letters: DeadLetteredEvent[] = [];
  consumer.on('deadLettered', (letter) => letters.push(letter));
  consumer.on('error', () => undefined);
  await consumer.start();
  closers.push(() => consumer.close());
  return { consumer, letters };
}

interface Listing {
  shards: { shard: number; stream: string; count: number }[];
  deadLetters: {
    shard: number;
    id: string;
    originalId: string;
    deliveries: number;
    error: string;
    key: string | null;
    fields: Record<string, string>;
  }[];
  more: boolean;
}

async function list(sp: string, query = ''): Promise<Listing> {
  const res = await c.call('GET', listPath(sp, query), { user: 'reader' });
  expect(res.status).toBe(200);
  return (await res.json()) as Listing;
}

/** A dead letter's fields as the consumer writes them (3 deliveries, error `e`), then `fields`. */
const deadLetter = (originalId: string, ...fields: string[]) => [
  'originalId',
  originalId,
  'deliveries',
  '3',
  'error',
  'e',
  ...fields,
];

async function post(sp: string, action: 'replay' | 'purge', body: object, user = 'writer') {
  const res = await c.call('POST', admin(sp, action), { user, body: { ...body, ...CHANGE } });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function auditOf(sp: string): Promise<{ operation: string; status: number }[]> {
  const res = await c.call('GET', `/coord/v1/monitoring/audit?streamPrefix=${sp}`, {
    user: 'reader',
  });
  return ((await res.json()) as { records: { operation: string; status: number }[] }).records;
}

async function deadLettersInLag(sp: string): Promise<number[]> {
  const lag = await client('reader').lag(sp, 'g');
  return lag.shards.map((s) => s.deadLetters);
}

describe('the SDK consumer with maxDeliveries', () => {
  it('moves a message whose handler always throws to <prefix>:<shard>:dead:<group> after maxDeliveries', async () => {
    const sp = await createGroup(2);
    const sent = await send(sp, 'poison', { amount: '42', note: 'line one' });
    const deliveries: string[] = [];
    const { consumer, letters } = await startConsumer(
      sp,
      (message) => {
        deliveries.push(message.id);
        throw new Error(`cannot bill ${message.fields.amount}\nstack line`);
      },
      { maxDeliveries: 3 },
    );
    await waitFor(() => letters.length === 1, { what: 'the message dead-lettered' });
    expect(deliveries).toEqual([sent.id, sent.id, sent.id]);
    expect(letters[0]).toMatchObject({
      shard: sent.shard,
      id: sent.id,
      deliveries: 3,
      error: 'cannot bill 42',
    });
    const dead = await streams.xrange(`${sp}:${sent.shard}:dead:g`, '-', '+');
    expect(await streams.exists(`${sp}:${sent.shard}:dead`)).toBe(0);
    expect(dead).toEqual([
      [
        letters[0]!.deadLetterId,
        [
          'originalId',
          sent.id,
          'deliveries',
          '3',
          'error',
          'cannot bill 42',
          'key',
          'poison',
          'amount',
          '42',
          'note',
          'line one',
        ],
      ],
    ]);
    // Acknowledged on the shard: nothing of the group pending there any more.
    const pending = (await streams.xpending(`${sp}:${sent.shard}`, 'g')) as [number, ...unknown[]];
    expect(pending[0]).toBe(0);
    expect(consumer.stats().totals).toMatchObject({ failed: 3, deadLettered: 1, acked: 0 });
    // The coordinator's lag reading counts it on its shard.
    const counts = await deadLettersInLag(sp);
    expect(counts[sent.shard]).toBe(1);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(1);
  });

  it('a message that fails and then succeeds is retried after the backoff and never dead-lettered', async () => {
    const sp = await createGroup(1);
    const sent = await send(sp, 'flaky', { n: '1' });
    let calls = 0;
    const { consumer, letters } = await startConsumer(
      sp,
      () => {
        if (++calls < 3) throw new Error('not yet');
      },
      { maxDeliveries: 3 },
    );
    await waitFor(() => consumer.stats().totals.acked === 1, { what: 'handled on the third try' });
    expect(calls).toBe(3);
    expect(letters).toEqual([]);
    expect(await streams.xlen(`${sp}:${sent.shard}:dead:g`)).toBe(0);
  });
});

describe('the dead-letter endpoints', () => {
  it('list shows it, replay sends it back through routing and a handler that now succeeds handles it', async () => {
    const sp = await createGroup(3);
    const sent = await send(sp, 'poison', { amount: '7' });
    let failing = true;
    const handled: string[] = [];
    const { consumer, letters } = await startConsumer(
      sp,
      (message) => {
        if (failing) throw new Error('downstream refused');
        handled.push(`${message.key}:${message.fields.amount}`);
      },
      { maxDeliveries: 2 },
    );
    await waitFor(() => letters.length === 1, { what: 'the message dead-lettered' });

    const listing = await list(sp);
    expect(listing.shards.map((s) => s.count)).toEqual(
      [0, 1, 2].map((shard) => (shard === sent.shard ? 1 : 0)),
    );
    expect(listing.shards[sent.shard]!.stream).toBe(`${sp}:${sent.shard}:dead:g`);
    expect(listing.deadLetters).toEqual([
      {
        shard: sent.shard,
        id: letters[0]!.deadLetterId,
        shared: false,
        originalId: sent.id,
        deliveries: 2,
        error: 'downstream refused',
        key: 'poison',
        fields: { key: 'poison', amount: '7' },
      },
    ]);
    expect(listing.more).toBe(false);

    // A dry run says what and where, and changes nothing.
    const dry = await post(sp, 'replay', { dryRun: true });
    expect(dry.status).toBe(200);
    expect(dry.body).toMatchObject({
      dryRun: true,
      shardCount: 3,
      replayed: [
        {
          shard: sent.shard,
          id: letters[0]!.deadLetterId,
          originalId: sent.id,
          key: 'poison',
          toShard: shardForKey('poison', 3),
          newId: null,
        },
      ],
      gone: [],
      more: false,
    });
    expect(await streams.xlen(`${sp}:${sent.shard}:dead:g`)).toBe(1);

    failing = false;
    const replay = await post(sp, 'replay', { limit: 10 });
    expect(replay.status).toBe(200);
    const [replayed] = replay.body.replayed as { toShard: number; newId: string }[];
    expect(replayed!.toShard).toBe(shardForKey('poison', 3));
    expect(await streams.xlen(`${sp}:${sent.shard}:dead:g`)).toBe(0);
    await waitFor(() => handled.length === 1, { what: 'the replayed message handled' });
    expect(handled).toEqual(['poison:7']);
    const back = await streams.xrange(
      `${sp}:${replayed!.toShard}`,
      replayed!.newId,
      replayed!.newId,
    );
    // Marked for its group, first, ahead of the message's own fields in their order.
    expect(back[0]![1]).toEqual(['__coord_replay_for', 'g', 'key', 'poison', 'amount', '7']);
    expect(consumer.stats().totals.acked).toBe(1);
    expect((await deadLettersInLag(sp)).every((n) => n === 0)).toBe(true);

    // Replaying again finds nothing: the dead letter went with its replay.
    const again = await post(sp, 'replay', {});
    expect(again.body).toMatchObject({ replayed: [], gone: [] });

    const audit = await auditOf(sp);
    expect(audit.filter((r) => r.operation === 'replayDeadLetters').map((r) => r.status)).toEqual([
      200, 200, 200,
    ]);
  });

  it('replays only the chosen ids and shards, up to limit; a keyless entry goes back to its own shard', async () => {
    const sp = await createGroup(2);
    // Dead letters written as the consumer writes them, one keyless.
    const dead0 = `${sp}:0:dead`;
    const a = await streams.xadd(dead0, '*', ...deadLetter('1-1', 'key', 'a', 'n', '1'));
    const b = await streams.xadd(dead0, '*', ...deadLetter('1-2', 'n', '2'));
    const c1 = await streams.xadd(`${sp}:1:dead`, '*', ...deadLetter('1-3', 'n', '3'));
    expect((await list(sp, '?limit=2')).deadLetters.map((d) => d.id)).toEqual([a, b]);
    expect((await list(sp, '?limit=2')).more).toBe(true);
    expect((await list(sp, '?shards=1')).deadLetters.map((d) => d.id)).toEqual([c1]);

    // Ids are per stream (shard 1's may equal b): `shards` says whose.
    const byId = await post(sp, 'replay', { shards: [0], ids: [b, '9-9'] });
    expect(byId.status).toBe(200);
    expect(byId.body).toMatchObject({
      replayed: [{ shard: 0, id: b, key: null, toShard: 0 }],
      notFound: ['9-9'],
    });
    const onShard0 = await streams.xrange(`${sp}:0`, '-', '+');
    expect(onShard0.map(([, f]) => f)).toEqual([['__coord_replay_for', 'g', 'n', '2']]);

    const limited = await post(sp, 'replay', { shards: [0, 1], limit: 1 });
    expect(limited.body).toMatchObject({
      replayed: [{ shard: 0, id: a, key: 'a', toShard: shardForKey('a', 2) }],
      more: true,
    });
    expect((await list(sp)).deadLetters.map((d) => d.id)).toEqual([c1]);
  });

  it('ids beyond limit are left for later (more: true), not reported as not found', async () => {
    const sp = await createGroup(2);
    const letter = deadLetter('1-1', 'n', '1');
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await streams.xadd(`${sp}:0:dead`, '*', ...letter))!);

    // "notFound are ids no chosen shard holds" (docs/operations.md#dead-letters): all three are
    // held; the limit takes one now and says more remain.
    for (const dryRun of [true, false]) {
      const first = await post(sp, 'replay', { ids: [...ids, '9-9'], limit: 1, dryRun });
      expect(first.status).toBe(200);
      expect(first.body).toMatchObject({
        replayed: [{ shard: 0, id: ids[0] }],
        notFound: ['9-9'],
        more: true,
      });
    }
    const rest = await post(sp, 'replay', { ids: [...ids, '9-9'], limit: 10 });
    expect(rest.body).toMatchObject({
      replayed: [{ id: ids[1] }, { id: ids[2] }],
      notFound: [ids[0], '9-9'],
      more: false,
    });
    expect(await streams.xlen(`${sp}:0`)).toBe(3);
  });

  it('purge deletes the chosen dead letters or all of them, audited', async () => {
    const sp = await createGroup(2);
    const letter = deadLetter('1-1', 'key', 'k');
    const x = await streams.xadd(`${sp}:0:dead`, '*', ...letter);
    await streams.xadd(`${sp}:0:dead`, '*', ...letter);
    await streams.xadd(`${sp}:1:dead`, '*', ...letter);
    // Ids are per stream: `shards` says whose.
    const one = await post(sp, 'purge', { shards: [0], ids: [x] });
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ purged: 1, shards: [{ shard: 0, purged: 1 }] });
    const rest = await post(sp, 'purge', {});
    expect(rest.body).toMatchObject({ purged: 2 });
    expect((await list(sp)).shards.map((s) => s.count)).toEqual([0, 0]);
    expect(await deadLettersInLag(sp)).toEqual([0, 0]);
    const audit = await auditOf(sp);
    expect(audit.filter((r) => r.operation === 'purgeDeadLetters')).toHaveLength(2);
  });

  it("a dead-letter key that holds another type is that shard's trouble: named, never deleted", async () => {
    const sp = await createGroup(2);
    const letter = deadLetter('1-1', 'key', 'k');
    const x = await streams.xadd(`${sp}:0:dead`, '*', ...letter);
    // Shard 1's dead-letter key name is taken by a list (another application's, say).
    await streams.rpush(`${sp}:1:dead`, 'not ours');

    const listed = await c.call('GET', listPath(sp), { user: 'reader' });
    expect(listed.status).toBe(200);
    const listing = (await listed.json()) as Listing & {
      shards: { shard: number; count: number; error: string | null }[];
    };
    expect(listing.deadLetters.map((d) => d.id)).toEqual([x]);
    expect(listing.shards[0]).toMatchObject({ shard: 0, count: 1, error: null });
    expect(listing.shards[1]).toMatchObject({ shard: 1, count: 0 });
    expect(listing.shards[1]!.error).toMatch(new RegExp(`^${sp}:1:dead: WRONGTYPE`));

    const replay = await post(sp, 'replay', { dryRun: true });
    expect(replay.status).toBe(200);
    expect(replay.body).toMatchObject({
      replayed: [{ shard: 0, id: x }],
      unreadable: [{ shard: 1 }],
    });

    // A purge of every shard deletes shard 0's dead letters and leaves the list alone.
    const purge = await post(sp, 'purge', {});
    expect(purge.status).toBe(200);
    expect(purge.body).toMatchObject({
      purged: 1,
      shards: [
        { shard: 0, purged: 1, error: null },
        { shard: 1, purged: 0, error: expect.stringMatching(/WRONGTYPE/) as unknown },
      ],
    });
    expect(await streams.lrange(`${sp}:1:dead`, 0, -1)).toEqual(['not ours']);
  });

  it('an id with a part past 2^64-1 is a 400 VALIDATION_FAILED, not a 503 from the streams Redis', async () => {
    const sp = await createGroup(2);
    for (const shard of [0, 1]) {
      await streams.xadd(`${sp}:${shard}:dead`, '*', ...deadLetter('1-1'));
    }
    // 20 digits, as the id check allows, but more than a stream id's 64-bit parts hold: Redis
    // refuses it ("Invalid stream ID"), which is the caller's mistake, not an outage.
    for (const id of [
      '18446744073709551616-0',
      '1-18446744073709551616',
      '99999999999999999999-0',
    ]) {
      for (const [action, body] of [
        ['replay', { ids: [id], dryRun: true }],
        ['replay', { ids: [id] }],
        ['purge', { ids: [id] }],
      ] as const) {
        const answer = await post(sp, action, body);
        expect({ action, id, status: answer.status, body: answer.body }).toMatchObject({
          status: 400,
          body: { error: { code: 'VALIDATION_FAILED' } },
        });
      }
    }
  });

  it('bad input is a 400 with a code, never a 500; roles and frozen groups are enforced', async () => {
    const sp = await createGroup(2);
    const code = (r: { body: Record<string, unknown> }) =>
      (r.body as { error: { code: string } }).error.code;
    for (const body of [
      { shards: [2] },
      { shards: [-1] },
      { shards: [] },
      { ids: ['nope'] },
      { ids: ['1-0', '$'] },
      { limit: 0 },
      { limit: 1_001 },
      { dryRun: 'yes' },
    ]) {
      const replay = await post(sp, 'replay', body);
      expect(replay.status, JSON.stringify(body)).toBe(400);
      expect(code(replay)).toBe('VALIDATION_FAILED');
    }
    const outOfRange = await post(sp, 'purge', { shards: [0, 5] });
    expect(outOfRange.status).toBe(400);
    expect((outOfRange.body as { error: { message: string } }).error.message).toContain('5');
    for (const query of ['?shards=7', '?shards=a', '?limit=0', '?limit=x']) {
      const res = await c.call('GET', listPath(sp, query), { user: 'reader' });
      expect(res.status, query).toBe(400);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe(
        'VALIDATION_FAILED',
      );
    }
    const noRequester = await c.call('POST', admin(sp, 'purge'), { user: 'writer', body: {} });
    expect(noRequester.status).toBe(400);
    expect((await post(sp, 'replay', {}, 'reader')).status).toBe(403);
    expect((await c.call('GET', listPath(sp), { user: 'consumer' })).status).toBe(403);
    expect((await c.call('GET', listPath('nope'), { user: 'reader' })).status).toBe(404);

    const freeze = await c.call('POST', `/coord/v1/admin/streams/${sp}/groups/g/freeze`, {
      user: 'writer',
      body: CHANGE,
    });
    expect(freeze.status).toBe(200);
    const frozen = await post(sp, 'purge', {});
    expect(frozen.status).toBe(409);
    expect(code(frozen)).toBe('GROUP_FROZEN');
  });
});

describe('two consumer groups on one stream prefix', () => {
  /** Groups `a` and `b` reading one prefix of 2 shards from its start. */
  async function createFanOut(): Promise<string> {
    const sp = `dl-fan-${randomBytes(4).toString('hex')}`;
    for (const [consumerGroup, shardCount] of [
      ['a', 2],
      ['b', undefined],
    ] as const) {
      const res = await c.call('POST', '/coord/v1/admin/groups', {
        user: 'writer',
        body: { streamPrefix: sp, consumerGroup, shardCount, startAt: 'earliest', ...CHANGE },
      });
      expect(res.status).toBe(201);
    }
    return sp;
  }

  interface Seen {
    consumer: Consumer;
    handled: ConsumerMessage[];
    letters: DeadLetteredEvent[];
  }

  /** A consumer of `group` whose handler rejects while `failing()` says so. */
  async function consume(sp: string, group: string, failing: () => boolean): Promise<Seen> {
    const handled: ConsumerMessage[] = [];
    const consumer = new Consumer({
      client: client('consumer'),
      redis: redis.url,
      streamPrefix: sp,
      consumerGroup: group,
      memberId: `${group}-${randomBytes(3).toString('hex')}`,
      blockMs: 50,
      maxDeliveries: 2,
      retryBackoffMs: 20,
      handler: (message) => {
        if (failing()) throw new Error(`${group} refused`);
        handled.push(message);
      },
    });
    const letters: DeadLetteredEvent[] = [];
    consumer.on('deadLettered', (letter) => letters.push(letter));
    consumer.on('error', () => undefined);
    await consumer.start();
    closers.push(() => consumer.close());
    return { consumer, handled, letters };
  }

  const groupList = async (
    sp: string,
    group: string,
  ): Promise<Listing & { shards: { shared: { count: number } }[] }> => {
    const res = await c.call(
      'GET',
      `/coord/v1/monitoring/streams/${sp}/groups/${group}/dead-letters`,
      {
        user: 'reader',
      },
    );
    expect(res.status).toBe(200);
    return (await res.json()) as Listing & { shards: { shared: { count: number } }[] };
  };
  const groupPost = async (sp: string, group: string, action: 'replay' | 'purge', body: object) => {
    const res = await c.call(
      'POST',
      `/coord/v1/admin/streams/${sp}/groups/${group}/dead-letters/${action}`,
      {
        user: 'writer',
        body: { ...body, ...CHANGE },
      },
    );
    expect(res.status).toBe(200);
    return (await res.json()) as Record<string, unknown>;
  };
  const lagCounts = async (sp: string, group: string) =>
    (await client('reader').lag(sp, group)).shards.map((s) => s.deadLetters);

  it("a group's dead letter is its own: listed, counted, replayed and purged for it alone", async () => {
    const sp = await createFanOut();
    let aFails = true;
    const a = await consume(sp, 'a', () => aFails);
    const b = await consume(sp, 'b', () => false);
    const sent = await send(sp, 'poison', { amount: '9' }, 'a');
    await waitFor(() => a.letters.length === 1, { what: "a's consumer gave the message up" });
    await waitFor(() => b.consumer.stats().totals.acked === 1, { what: 'b handled it' });

    // b's consumer handled it: none of it is b's dead letter.
    const ofB = await groupList(sp, 'b');
    expect(ofB.deadLetters).toEqual([]);
    expect(ofB.shards.map((s) => s.count)).toEqual([0, 0]);
    const ofA = await groupList(sp, 'a');
    expect(ofA.deadLetters).toMatchObject([
      { shard: sent.shard, id: a.letters[0]!.deadLetterId, shared: false, originalId: sent.id },
    ]);
    expect(ofA.shards[sent.shard]).toMatchObject({
      stream: `${sp}:${sent.shard}:dead:a`,
      count: 1,
    });
    expect(await lagCounts(sp, 'b')).toEqual([0, 0]);
    expect((await lagCounts(sp, 'a'))[sent.shard]).toBe(1);

    // b's purge of all its dead letters leaves a's.
    expect(await groupPost(sp, 'b', 'purge', {})).toMatchObject({ purged: 0 });
    expect((await groupList(sp, 'a')).deadLetters.map((d) => d.id)).toEqual([
      a.letters[0]!.deadLetterId,
    ]);

    // a's replay reaches a's handler once more, without the marker, and never b's.
    aFails = false;
    const replay = await groupPost(sp, 'a', 'replay', {});
    expect(replay).toMatchObject({ replayed: [{ shard: sent.shard, shared: false }], gone: [] });
    await waitFor(() => a.handled.length === 1, { what: 'a handled the replayed message' });
    expect(a.handled[0]).toMatchObject({ key: 'poison', fields: { amount: '9' } });
    expect(Object.keys(a.handled[0]!.fields)).toEqual(['amount']);
    await waitFor(() => b.consumer.stats().totals.skipped === 1, { what: 'b passed it over' });
    expect(b.handled.map((m) => m.id)).toEqual([sent.id]);
    expect(b.consumer.stats().totals).toMatchObject({ acked: 1, skipped: 1 });
    for (const group of ['a', 'b']) {
      const pending = (await streams.xpending(`${sp}:${sent.shard}`, group)) as [number];
      expect(pending[0]).toBe(0);
    }
    expect((await groupList(sp, 'a')).deadLetters).toEqual([]);
  });

  it('a dead letter in the shared <prefix>:<shard>:dead is listed for both, marked shared, and replayed for the group that asks', async () => {
    const sp = await createFanOut();
    const a = await consume(sp, 'a', () => false);
    const b = await consume(sp, 'b', () => false);
    // As an SDK without per-group dead letters wrote it.
    const legacy = await streams.xadd(
      `${sp}:1:dead`,
      '*',
      ...deadLetter('1-1', 'key', 'old', 'n', '1'),
    );
    for (const group of ['a', 'b']) {
      const listing = await groupList(sp, group);
      expect(listing.deadLetters).toMatchObject([
        { shard: 1, id: legacy, shared: true, key: 'old' },
      ]);
      expect(listing.shards[1]).toMatchObject({
        count: 1,
        shared: { stream: `${sp}:1:dead`, count: 1 },
      });
      expect(await lagCounts(sp, group)).toEqual([0, 1]);
    }

    const replay = await groupPost(sp, 'a', 'replay', {});
    expect(replay).toMatchObject({ replayed: [{ shard: 1, id: legacy, shared: true }] });
    await waitFor(() => a.handled.length === 1, { what: 'a handled the replayed message' });
    expect(a.handled[0]).toMatchObject({ key: 'old', fields: { n: '1' } });
    await waitFor(() => b.consumer.stats().totals.skipped === 1, { what: 'b passed it over' });
    expect(b.handled).toEqual([]);
    // Gone for both: it was replayed once.
    for (const group of ['a', 'b']) expect((await groupList(sp, group)).deadLetters).toEqual([]);
    expect(await groupPost(sp, 'b', 'replay', {})).toMatchObject({ replayed: [], gone: [] });
  });
});
