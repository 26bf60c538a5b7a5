/**
 * Two consumer groups on one stream prefix, through the SDK against a real coordinator (real
 * HTTP) and real Redis streams: each group receives every message, also across a scale-out and
 * a scale-in of the prefix started on one of them (docs/protocol.md#one-shard-layout-per-stream-prefix).
 */
import { randomBytes } from 'node:crypto';
import { coordctl } from '../support/cli.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Consumer, CoordinatorClient, Producer } from '../../src/client/index.js';
import {
  CHANGE,
  startStreamsCoordinator,
  useCoordinator,
  type TestCoordinator,
  QUICK_MEMBERSHIP,
} from '../support/coordinator.js';
import { lostKeys, overlaps, type Processed, recordingHandler } from '../support/processing-log.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';

let streams: RedisServerHandle;
let coordinator: TestCoordinator;
const closers: (() => Promise<void>)[] = [];

useCoordinator(
  {
    store: 'memory',
    overrides: {
      ...QUICK_MEMBERSHIP,
      'migration.rollback-window': '1s',
    },
  },
  (c) => {
    coordinator = c;
  },
);
beforeAll(async () => {
  streams = await startRedisServer();
});
afterAll(async () => {
  await streams.stop();
});
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

function client(user: string): CoordinatorClient {
  return new CoordinatorClient({ baseUrl: coordinator.url, token: coordinator.token(user) });
}

async function startConsumer(
  sp: string,
  group: string,
  name: string,
  log: Processed[],
): Promise<Consumer> {
  const consumer = new Consumer({
    client: client('consumer'),
    redis: streams.url,
    streamPrefix: sp,
    consumerGroup: group,
    memberId: name,
    blockMs: 50,
    sessionTimeoutMs: 6_000,
    handler: recordingHandler(log, name),
  });
  consumer.on('error', () => undefined);
  await consumer.start();
  closers.push(() => consumer.close());
  return consumer;
}

/** Every group's active migration, until each has converged (or none is active). */
async function converged(sp: string, groups: string[]): Promise<boolean> {
  for (const g of groups) {
    const res = await coordinator.call(
      'GET',
      `/coord/v1/monitoring/streams/${sp}/groups/${g}/migrations`,
      { user: 'reader' },
    );
    const body = (await res.json()) as { active: { state: string } | null };
    if (body.active && body.active.state === 'IN_PROGRESS') return false;
  }
  return true;
}

describe('two groups on one stream prefix', () => {
  it('each receives every message, across a scale-out and a scale-in of the prefix', async () => {
    const sp = `orders-${randomBytes(4).toString('hex')}`;
    const writer = client('writer');
    await writer.createGroup(sp, 'billing', 4, CHANGE);
    // The second group adopts the prefix's count; it starts at its creation (latest).
    await writer.createGroup(sp, 'emails', undefined, CHANGE);
    const billing: Processed[] = [];
    const emails: Processed[] = [];
    await startConsumer(sp, 'billing', 'billing-a', billing);
    await startConsumer(sp, 'billing', 'billing-b', billing);
    await startConsumer(sp, 'emails', 'emails-a', emails);

    const producer = new Producer({
      client: client('producer'),
      redis: streams.url,
      streamPrefix: sp,
      consumerGroup: 'billing',
      longPollWaitMs: 2_000,
    });
    closers.push(() => producer.close());
    const keys: string[] = [];
    let stop = false;
    const sending = (async () => {
      for (let i = 0; !stop; i++) {
        await producer.send(`order-${i}`, { n: String(i) });
        keys.push(`order-${i}`);
      }
    })();
    sending.catch(() => undefined);

    await waitFor(() => emails.length > 50 && billing.length > 50, { what: 'traffic flowing' });
    // Scaled through the emails group: billing, whose routing the producer reads, follows.
    await writer.scale(sp, 'emails', 6, CHANGE);
    await waitFor(() => producer.routing()?.shardCount === 6, { what: 'producer on 6 shards' });
    await waitFor(() => converged(sp, ['billing', 'emails']), {
      timeoutMs: 15_000,
      what: 'both groups converged on 6 shards',
    });
    await waitFor(() => keys.length > 400, { what: 'traffic on six shards' });
    // And back in, so emails retires shards whose writes chose them with billing's routing.
    await writer.scale(sp, 'billing', 3, CHANGE);
    await waitFor(() => producer.routing()?.shardCount === 3, { what: 'producer on 3 shards' });
    await waitFor(() => keys.length > 700, { what: 'traffic on three shards' });
    stop = true;
    await sending;

    for (const [name, log] of [
      ['billing', billing],
      ['emails', emails],
    ] as const) {
      await waitFor(() => lostKeys(keys, log).length === 0, {
        timeoutMs: 30_000,
        what: `every key processed by ${name}`,
      }).catch((error: unknown) => {
        const lost = lostKeys(keys, log);
        throw new Error(
          `${name} never processed ${lost.length} keys: ${lost.slice(0, 10).join(', ')}`,
          {
            cause: error,
          },
        );
      });
      expect(overlaps(log)).toEqual([]);
    }
    // Both groups' routing describes one layout.
    const routings = await Promise.all(
      ['billing', 'emails'].map((g) => client('producer').routing(sp, g)),
    );
    expect(routings.map((r) => r.shardCount)).toEqual([3, 3]);
    expect(routings[0]!.layoutVersion).toBe(routings[1]!.layoutVersion);
  }, 90_000);
});

describe('a duplicate-sensitive scale of one group on a prefix with two', () => {
  it('pauses the producers of both groups, and resumes them on the new count', async () => {
    const sp = `orders-${randomBytes(4).toString('hex')}`;
    const writer = client('writer');
    await writer.createGroup(sp, 'billing', 4, CHANGE);
    await writer.createGroup(sp, 'emails', undefined, CHANGE);
    const billing: Processed[] = [];
    const emails: Processed[] = [];
    await startConsumer(sp, 'billing', 'billing-a', billing);
    await startConsumer(sp, 'emails', 'emails-a', emails);

    // One producer follows billing's routing, the other emails': both write the prefix's shards.
    const sends: { via: string; key: string; shardCount: number; id: string }[] = [];
    let stop = false;
    const run = async (via: string) => {
      const producer = new Producer({
        client: client('producer'),
        redis: streams.url,
        streamPrefix: sp,
        consumerGroup: via,
        longPollWaitMs: 2_000,
      });
      closers.push(() => producer.close());
      for (let i = 0; !stop; i++) {
        const key = `${via}-${i}`;
        const { shardCount, id } = await producer.send(key, { n: String(i) });
        sends.push({ via, key, shardCount, id });
      }
    };
    const producing = Promise.all([run('billing'), run('emails')]);
    producing.catch(() => undefined);
    await waitFor(() => sends.filter((s) => s.via === 'emails').length > 50, {
      what: 'traffic through both routings',
    });

    const { code, stderr } = await coordctl(
      [
        'scale',
        `${sp}:billing`,
        '8',
        '--duplicate-sensitive',
        '--drain',
        '1s',
        '--refresh',
        '500ms',
        '--coordinator',
        coordinator.url,
        '--requested-by',
        'ops',
        '--reason',
        'more shards',
      ],
      { env: { COORDCTL_TOKEN: coordinator.token('admin') } },
    );
    expect(stderr).toMatch(/6\/6 resuming/);
    expect(code).toBe(0);
    await waitFor(
      () =>
        ['billing', 'emails'].every(
          (via) => sends.filter((s) => s.via === via && s.shardCount === 8).length > 50,
        ),
      { timeoutMs: 15_000, what: 'traffic under 8 shards through both routings' },
    );
    stop = true;
    await producing;

    // Stream ids carry the Redis server's clock: every append under 4 shards precedes every
    // append under 8, whichever group's routing chose the shard.
    const ms = (id: string) => Number(id.split('-')[0]);
    const lastOld = Math.max(...sends.filter((s) => s.shardCount === 4).map((s) => ms(s.id)));
    const firstNew = Math.min(...sends.filter((s) => s.shardCount === 8).map((s) => ms(s.id)));
    // Nothing was appended from the end of the drain to the resume, by either producer.
    const { records } = (await (
      await coordinator.call('GET', `/coord/v1/monitoring/audit?streamPrefix=${sp}`, {
        user: 'reader',
      })
    ).json()) as { records: { operation: string; consumerGroup: string; timestamp: string }[] };
    const at = (operation: string) =>
      Math.min(
        ...records
          .filter((r) => r.operation === operation && r.consumerGroup === 'billing')
          .map((r) => Date.parse(r.timestamp)),
      );
    const pausedFrom = at('pauseProducers') + 1_000;
    const resumedAt = at('resumeProducers');
    const whilePaused = sends.filter((s) => ms(s.id) > pausedFrom && ms(s.id) < resumedAt);
    expect({
      lastOldBeforeFirstNew: lastOld < firstNew,
      appendedWhilePaused: whilePaused.length,
    }).toEqual({ lastOldBeforeFirstNew: true, appendedWhilePaused: 0 });
    const keys = sends.map((s) => s.key);
    for (const log of [billing, emails]) {
      await waitFor(() => lostKeys(keys, log).length === 0, {
        timeoutMs: 30_000,
        what: 'every key processed by each group',
      });
    }
    const routings = await Promise.all(
      ['billing', 'emails'].map((g) => client('producer').routing(sp, g)),
    );
    expect(routings.map((r) => [r.shardCount, r.producersPaused])).toEqual([
      [8, false],
      [8, false],
    ]);
  }, 90_000);
});

describe('a scale-in of a prefix whose second group never had a member', () => {
  it('lets that group go of removed shards holding only what came before it', async () => {
    // A coordinator that reads the streams: it seals ownerless retiring shards itself.
    const sc = await startStreamsCoordinator(streams.url);
    closers.push(() => sc.close());
    const scClient = (user: string) =>
      new CoordinatorClient({ baseUrl: sc.url, token: sc.token(user) });
    const sp = `orders-${randomBytes(4).toString('hex')}`;
    const writer = scClient('writer');
    await writer.createGroup(sp, 'billing', 4, CHANGE);
    const billing: Processed[] = [];
    for (const name of ['billing-a', 'billing-b']) {
      const consumer = new Consumer({
        client: scClient('consumer'),
        redis: streams.url,
        streamPrefix: sp,
        consumerGroup: 'billing',
        memberId: name,
        blockMs: 50,
        sessionTimeoutMs: 6_000,
        handler: recordingHandler(billing, name),
      });
      consumer.on('error', () => undefined);
      await consumer.start();
      closers.push(() => consumer.close());
    }
    const producer = new Producer({
      client: scClient('producer'),
      redis: streams.url,
      streamPrefix: sp,
      consumerGroup: 'billing',
      longPollWaitMs: 2_000,
    });
    closers.push(() => producer.close());
    const keys: string[] = [];
    for (let i = 0; i < 200; i++) {
      await producer.send(`order-${i}`, { n: String(i) });
      keys.push(`order-${i}`);
    }
    await waitFor(() => lostKeys(keys, billing).length === 0, { what: 'billing read all' });
    // emails starts at its creation (latest): nothing on the streams is for it yet.
    await writer.createGroup(sp, 'emails', undefined, CHANGE);
    await writer.scale(sp, 'billing', 2, CHANGE);
    const active = async (g: string) => {
      const res = await sc.call(
        'GET',
        `/coord/v1/monitoring/streams/${sp}/groups/${g}/migrations`,
        {
          user: 'reader',
        },
      );
      return ((await res.json()) as { active: { state: string; progress: unknown } | null }).active;
    };
    await waitFor(async () => (await active('billing'))?.state !== 'IN_PROGRESS', {
      timeoutMs: 15_000,
      what: 'billing converged',
    });
    await waitFor(async () => (await active('emails'))?.state !== 'IN_PROGRESS', {
      timeoutMs: 10_000,
      what: 'emails converged without a member',
    }).catch(async (error: unknown) => {
      throw new Error(`emails: ${JSON.stringify(await active('emails'))}`, { cause: error });
    });
    // The prefix can move again.
    await writer.scale(sp, 'billing', 3, CHANGE);
  }, 60_000);
});
