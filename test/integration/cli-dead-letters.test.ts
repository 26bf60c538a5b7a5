/**
 * `coordctl dead-letters list|replay|purge` (docs/cli.md#dead-letters) against a real
 * coordinator and real streams: a message an SDK consumer gave up on is listed, replayed and
 * handled again; purge refuses without --yes when it cannot ask; bad input fails with the code.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Consumer,
  CoordinatorClient,
  Producer,
  type DeadLetteredEvent,
} from '../../src/client/index.js';
import { coordctl } from '../support/cli.js';
import { CHANGE, type TestCoordinator, startStreamsCoordinator } from '../support/coordinator.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';

let redis: RedisServerHandle;
let c: TestCoordinator;
let streams: Redis;
let consumer: Consumer;
const sp = `cli-dl-${randomBytes(3).toString('hex')}`;
const letters: DeadLetteredEvent[] = [];
const handled: string[] = [];
let failing = true;

const client = (user: string) => new CoordinatorClient({ baseUrl: c.url, token: c.token(user) });
const env = (user = 'admin') => ({ COORDCTL_URL: c.url, COORDCTL_TOKEN: c.token(user) });
const change = ['--requested-by', CHANGE.requestedBy, '--reason', CHANGE.reason];

beforeAll(async () => {
  redis = await startRedisServer();
  c = await startStreamsCoordinator(redis.url);
  streams = new Redis(redis.url);
  await client('writer').createGroup(sp, 'g', 2, CHANGE);
  const producer = new Producer({
    client: client('producer'),
    redis: redis.url,
    streamPrefix: sp,
    consumerGroup: 'g',
  });
  await producer.send('poison', { amount: '5' });
  await producer.close();
  consumer = new Consumer({
    client: client('consumer'),
    redis: redis.url,
    streamPrefix: sp,
    consumerGroup: 'g',
    blockMs: 50,
    maxDeliveries: 2,
    retryBackoffMs: 20,
    handler: ({ key }) => {
      if (failing) throw new Error('no such customer');
      handled.push(key!);
    },
  });
  consumer.on('deadLettered', (letter) => letters.push(letter));
  consumer.on('error', () => undefined);
  // The group starts at `latest`, after the message: the consumer reads from the start.
  await streams.xgroup('CREATE', `${sp}:0`, 'g', '0', 'MKSTREAM');
  await streams.xgroup('CREATE', `${sp}:1`, 'g', '0', 'MKSTREAM');
  await consumer.start();
  await waitFor(() => letters.length === 1, { what: 'the message dead-lettered' });
});
afterAll(async () => {
  await consumer?.close();
  streams?.disconnect();
  await c?.close();
  await redis?.stop();
});

describe('coordctl dead-letters', () => {
  it('list prints a row per dead letter and the count per shard; --json the API answer', async () => {
    const [letter] = letters;
    const table = await coordctl(['dead-letters', 'list', `${sp}:g`], { env: env('reader') });
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^SHARD\s+ID\s+GROUP\s+ORIGINAL-ID\s+DELIVERIES\s+KEY\s+ERROR$/m);
    expect(table.stdout).toMatch(
      new RegExp(
        `^${letter!.shard}\\s+${letter!.deadLetterId}\\s+g\\s+${letter!.id}\\s+2\\s+poison\\s+no such customer$`,
        'm',
      ),
    );
    expect(table.stdout).toContain('total: 1 dead letter(s)');
    // The group given as two arguments, and --json.
    const json = await coordctl(['dead-letters', 'list', sp, 'g', '--json'], {
      env: env('reader'),
    });
    expect(json.code).toBe(0);
    const body = JSON.parse(json.stdout) as { deadLetters: { id: string; key: string }[] };
    expect(body.deadLetters).toEqual([
      expect.objectContaining({ id: letter!.deadLetterId, key: 'poison' }),
    ]);
  });

  it('purge without --yes and without a terminal refuses and deletes nothing', async () => {
    const { code, stderr } = await coordctl(['dead-letters', 'purge', `${sp}:g`, ...change], {
      env: env(),
    });
    expect(code).toBe(1);
    expect(stderr).toMatch(/pass --yes to confirm \(stdin is not a terminal/);
    expect(await streams.xlen(`${sp}:${letters[0]!.shard}:dead:g`)).toBe(1);
  });

  it('a shard the group does not have fails with VALIDATION_FAILED', async () => {
    const { code, stderr } = await coordctl(
      ['dead-letters', 'replay', `${sp}:g`, '--shards', '7', ...change],
      { env: env() },
    );
    expect(code).toBe(1);
    expect(stderr).toContain('VALIDATION_FAILED');
    expect(stderr).toContain('not a shard of the group: 7');
  });

  it('replay --dry-run says where, replay sends it back, and the consumer handles it', async () => {
    const dry = await coordctl(['dead-letters', 'replay', `${sp}:g`, '--dry-run', ...change], {
      env: env(),
    });
    expect(dry.code).toBe(0);
    expect(dry.stderr).toContain(`would replay 1 dead letter(s) of ${sp}:g`);
    expect(await streams.xlen(`${sp}:${letters[0]!.shard}:dead:g`)).toBe(1);

    failing = false;
    const replay = await coordctl(['dead-letters', 'replay', `${sp}:g`, '--json', ...change], {
      env: env(),
    });
    expect(replay.code).toBe(0);
    expect(replay.stderr).toContain(`replaying dead letters of ${sp}:g`);
    expect(replay.stderr).toContain(`replayed 1 dead letter(s) of ${sp}:g`);
    const result = JSON.parse(replay.stdout) as { replayed: { key: string; newId: string }[] };
    expect(result.replayed).toEqual([expect.objectContaining({ key: 'poison' })]);
    await waitFor(() => handled.includes('poison'), { what: 'the replayed message handled' });
    expect(await streams.xlen(`${sp}:${letters[0]!.shard}:dead:g`)).toBe(0);
  });

  it("purge --yes deletes them, a shared one (an older SDK's) too, listed as (shared)", async () => {
    const letter = ['originalId', '1-1', 'deliveries', '2', 'error', 'e', 'key', 'k'];
    const shared = await streams.xadd(`${sp}:1:dead`, '*', ...letter);
    const table = await coordctl(['dead-letters', 'list', `${sp}:g`, '--shards', '1'], {
      env: env('reader'),
    });
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(
      new RegExp(`^1\\s+${shared}\\s+\\(shared\\)\\s+1-1\\s+2\\s+k\\s+e$`, 'm'),
    );
    expect(table.stdout).toContain('1 of them (shared): not attributed to a group');
    const { code, stderr } = await coordctl(
      ['dead-letters', 'purge', `${sp}:g`, '--shards', '1', '--yes', ...change],
      { env: env() },
    );
    expect(code).toBe(0);
    expect(stderr).toContain(`purged 1 dead letter(s) of ${sp}:g`);
    expect(await streams.xlen(`${sp}:1:dead`)).toBe(0);
  });

  it('names a shard whose dead-letter key holds another type, and purge leaves that key alone', async () => {
    const other = `cli-dl-${randomBytes(3).toString('hex')}`;
    await client('writer').createGroup(other, 'g', 2, CHANGE);
    await streams.rpush(`${other}:1:dead`, 'not ours');
    const listed = await coordctl(['dead-letters', 'list', `${other}:g`], { env: env('reader') });
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(
      new RegExp(`^shard 1 unreadable: ${other}:1:dead: WRONGTYPE Operation against a key`, 'm'),
    );
    const purged = await coordctl(['dead-letters', 'purge', `${other}:g`, '--yes', ...change], {
      env: env(),
    });
    expect(purged.code).toBe(0);
    expect(purged.stderr).toMatch(/shard 1 left as it is: \S+:1:dead: WRONGTYPE/);
    expect(await streams.lrange(`${other}:1:dead`, 0, -1)).toEqual(['not ours']);
  });
});
