/**
 * `coordctl pause`, `resume`, `reset-positions`, `cancel-reset` and `describe`
 * (docs/cli.md#pause-resume, docs/cli.md#reset-positions, docs/cli.md#cancel-reset) against a
 * real coordinator and real streams: a pause waits until the member holding the shard gave it
 * up; the plan's exit code says whether anything would change; an executed replay moves the
 * Redis consumer group back, so the entries are delivered again; a reset a member will not let
 * through is cancelled with nothing moved; a refused request exits 1 with the code and what to do.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Consumer, CoordinatorClient } from '../../src/client/index.js';
import { coordctl } from '../support/cli.js';
import { CHANGE, type TestCoordinator, startStreamsCoordinator } from '../support/coordinator.js';
import { SimulatedMember } from '../support/members.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';

let redis: RedisServerHandle;
let c: TestCoordinator;
let streams: Redis;

const client = (user: string) => new CoordinatorClient({ baseUrl: c.url, token: c.token(user) });
const env = (user = 'admin') => ({
  COORDCTL_URL: c.url,
  COORDCTL_TOKEN: c.token(user),
  COORDCTL_REQUESTED_BY: 'alice',
});

beforeAll(async () => {
  redis = await startRedisServer();
  c = await startStreamsCoordinator(redis.url);
  streams = new Redis(redis.url);
});
afterAll(async () => {
  streams?.disconnect();
  await c?.close();
  await redis?.stop();
});

async function createGroup(shardCount: number): Promise<string> {
  const sp = `cli-cc-${randomBytes(3).toString('hex')}`;
  await client('writer').createGroup(sp, 'g', shardCount, CHANGE);
  return sp;
}

interface Consumption {
  state: string;
  pausedShards: number[];
  reset: unknown;
  lastReset: { resetId: string; stage: string; cancelled?: boolean } | null;
}

async function consumptionOf(sp: string): Promise<Consumption> {
  const res = await c.call('GET', `/coord/v1/monitoring/streams/${sp}/groups/g`, {
    user: 'reader',
  });
  return ((await res.json()) as { consumption: Consumption }).consumption;
}

/**
 * A member that holds shard 0 of `sp` and never gives it up: it beats on, still draining the
 * shard, so a reset of it stays in `pausing`. Resolves with the function that stops it.
 */
async function stuckMember(sp: string): Promise<() => Promise<void>> {
  const stuck = new SimulatedMember(c, 'stuck', sp, 'g');
  await waitFor(async () => (await stuck.beat()).assignedShards.includes(0), {
    what: 'the member to be granted shard 0',
  });
  // It says it has it: the shard is the member's, no longer a grant to withdraw.
  await stuck.beat();
  let beating = true;
  const beats = (async () => {
    while (beating) {
      await stuck.beat({ revokeDone: false });
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();
  return async () => {
    beating = false;
    await beats;
  };
}

describe('coordctl pause and resume', () => {
  it('pause waits until the member gave the shard up, printing its progress; resume undoes it', async () => {
    const sp = await createGroup(2);
    const consumer = new Consumer({
      client: client('consumer'),
      redis: redis.url,
      streamPrefix: sp,
      consumerGroup: 'g',
      memberId: 'm-1',
      blockMs: 50,
      handler: () => undefined,
    });
    consumer.on('error', () => undefined);
    await consumer.start();
    try {
      await waitFor(() => consumer.shards().length === 2, {
        what: 'the member to hold both shards',
      });

      const paused = await coordctl(
        ['pause', `${sp}:g`, '--shards', '1', '--reason', 'poison message on 1'],
        { env: env() },
      );
      // A line each time the count changes: the member may have let go before the first read.
      expect(paused.stderr).toMatch(
        new RegExp(
          `^pausing shard 1 of ${sp}:g\n(pausing: 0 of 1 shards released\n)?pausing: 1 of 1 shards released\n$`,
        ),
      );
      expect(paused.code).toBe(0);
      expect(paused.stdout).toBe(`${sp}:g: consumption paused, paused shards 1\n`);
      // When coordctl returns, the member has given the shard up (it reported DONE).
      expect(consumer.shards()).toEqual([0]);
      expect(await consumptionOf(sp)).toMatchObject({ state: 'paused', pausedShards: [1] });

      const described = await coordctl(['describe', `${sp}:g`], { env: env('reader') });
      expect(described.code).toBe(0);
      expect(described.stdout).toMatch(/^consumption:\s+paused$/m);
      expect(described.stdout).toMatch(/^paused shards:\s+1$/m);
      expect(described.stdout).toMatch(/^position reset:\s+none$/m);

      const audit = await c.call(
        'GET',
        `/coord/v1/monitoring/audit?streamPrefix=${sp}&consumerGroup=g`,
        { user: 'reader' },
      );
      const { records } = (await audit.json()) as {
        records: { operation: string; requestedBy: string; reason: string }[];
      };
      expect(records[0]).toMatchObject({
        operation: 'consumption',
        requestedBy: 'alice',
        reason: 'poison message on 1',
      });

      const resumed = await coordctl(['resume', `${sp}:g`, '--reason', 'fixed', '--json'], {
        env: env(),
      });
      expect(resumed.code).toBe(0);
      expect(resumed.stderr).toContain('resuming: 2 of 2 shards resumed');
      expect(JSON.parse(resumed.stdout)).toMatchObject({ state: 'running', pausedShards: [] });
      await waitFor(() => consumer.shards().length === 2, { what: 'shard 1 granted again' });
    } finally {
      await consumer.close();
    }
  });

  it('--no-wait returns at once with the state the coordinator answered', async () => {
    const sp = await createGroup(3);
    const { code, stdout, stderr } = await coordctl(
      ['pause', `${sp}:g`, '--reason', 'maintenance', '--no-wait', '--json'],
      { env: env() },
    );
    expect(code).toBe(0);
    expect(stderr).toBe(`pausing shards 0,1,2 of ${sp}:g\n`);
    expect(JSON.parse(stdout)).toMatchObject({ pausedShards: [0, 1, 2] });
  });
});

describe('coordctl reset-positions', () => {
  /** A group on one shard whose consumer group has read and acknowledged five entries. */
  async function readFive(): Promise<{ sp: string; ids: string[] }> {
    const sp = await createGroup(1);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await streams.xadd(`${sp}:0`, '*', 'n', String(i)))!);
    await streams.xgroup('CREATE', `${sp}:0`, 'g', '0');
    await streams.xreadgroup('GROUP', 'g', 'c1', 'COUNT', 10, 'STREAMS', `${sp}:0`, '>');
    await streams.xack(`${sp}:0`, 'g', ...ids);
    return { sp, ids };
  }

  /** The ids XREADGROUP delivers next to a new reader of the consumer group. */
  async function delivered(sp: string): Promise<string[]> {
    const reply = (await streams.xreadgroup(
      'GROUP',
      'g',
      'c2',
      'COUNT',
      100,
      'STREAMS',
      `${sp}:0`,
      '>',
    )) as [string, [string, string[]][]][] | null;
    return (reply?.[0]?.[1] ?? []).map(([id]) => id);
  }

  it('plans: exit 0 when nothing would change, 2 with a table when it would', async () => {
    const { sp, ids } = await readFive();
    const none = await coordctl(['reset-positions', `${sp}:g`, '--to-latest'], { env: env() });
    expect(none.code).toBe(0);
    expect(none.stdout).toContain('nothing to change');

    const plan = await coordctl(['reset-positions', `${sp}:g`, '--to-earliest'], { env: env() });
    expect(plan.code).toBe(2);
    expect(plan.stderr).toBe('');
    const lines = plan.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^SHARD\s+STREAM\s+FROM\s+TO\s+REDELIVER\s+SKIP\s+PENDING-SKIPPED$/);
    expect(lines[1]).toMatch(new RegExp(`^0\\s+${sp}:0\\s+${ids[4]}\\s+0-0\\s+5\\s+0\\s+0$`));
    expect(lines[2]).toBe('1 of 1 shard(s) change: 5 entries delivered again, 0 skipped');

    const json = await coordctl(
      ['reset-positions', `${sp}:g`, '--to-ids', `0=${ids[1]}`, '--json'],
      {
        env: env(),
      },
    );
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stdout)).toMatchObject({
      dryRun: true,
      changes: 1,
      plan: [{ shard: 0, from: ids[4], to: ids[1], redeliver: 3, skip: 0 }],
      reset: null,
    });
    // Planning moved nothing.
    expect(await delivered(sp)).toEqual([]);
    expect((await consumptionOf(sp)).state).toBe('running');
  });

  it('--execute replays: waits for the reset to end, and the entries are delivered again', async () => {
    const { sp, ids } = await readFive();
    const args = ['reset-positions', `${sp}:g`, '--to-datetime', '2000-01-01T00:00:00Z'];
    const run = await coordctl(
      [...args, '--execute', '--reason', 'reprocess', '--request-id', `replay-${sp}`],
      { env: env() },
    );
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(
      new RegExp(`^reset replay-${sp} of ${sp}:g started: shard 0 to move$`, 'm'),
    );
    expect(run.stderr).toMatch(/^done: 1 of 1 shards moved$/m);
    expect(run.stdout).toMatch(new RegExp(`^0\\s+${ids[4]}\\s+0-0\\s+5\\s+0\\s+yes$`, 'm'));
    expect(run.stdout).toContain(`reset replay-${sp} of ${sp}:g: done`);
    expect((await consumptionOf(sp)).lastReset).toMatchObject({
      resetId: `replay-${sp}`,
      stage: 'done',
    });
    expect(await delivered(sp)).toEqual(ids);

    // The same request id again answers that reset; nothing is moved a second time.
    const again = await coordctl(
      [...args, '--execute', '--reason', 'reprocess', '--request-id', `replay-${sp}`, '--json'],
      { env: env() },
    );
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({
      reset: { resetId: `replay-${sp}`, stage: 'done' },
    });
    expect(await delivered(sp)).toEqual([]);
  });

  it('cancel-reset ends a reset its member will not let through: nothing moved, shards read again', async () => {
    const { sp } = await readFive();
    // The member keeps the reset in `pausing`.
    const stop = await stuckMember(sp);
    const started = await coordctl(
      [
        'reset-positions',
        `${sp}:g`,
        '--to-earliest',
        '--execute',
        '--no-wait',
        '--reason',
        'replay',
        '--request-id',
        `stuck-${sp}`,
      ],
      { env: env() },
    );
    expect(started.code).toBe(0);
    expect(started.stdout).toContain(`reset stuck-${sp} of ${sp}:g: under way (pausing)`);

    const cancel = await coordctl(['cancel-reset', `${sp}:g`, '--reason', 'member stuck'], {
      env: env(),
    });
    expect(cancel.code).toBe(0);
    expect(cancel.stdout).toMatch(/^0\s+\S+\s+0-0\s+5\s+0\s+no$/m);
    expect(cancel.stdout).toContain(`reset stuck-${sp} of ${sp}:g cancelled: 0 of 1 shards moved`);
    expect(cancel.stdout).toContain(`${sp}:g: consumption running, paused shards -`);
    expect((await consumptionOf(sp)).lastReset).toMatchObject({
      resetId: `stuck-${sp}`,
      cancelled: true,
    });
    await stop();
    // Nothing was moved back: the entries already read are not delivered again.
    expect(await delivered(sp)).toEqual([]);

    const again = await coordctl(['cancel-reset', `${sp}:g`, '--reason', 'again'], { env: env() });
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('409 NO_RESET_IN_PROGRESS');
    expect(again.stderr).toContain('what to do: no position reset is under way');
  });

  it('a waiting reset-positions whose reset another operator cancels exits 1 and says so', async () => {
    const { sp } = await readFive();
    const stop = await stuckMember(sp);
    // Operator A starts the reset and waits for it; the member keeps it in `pausing`.
    const waiting = coordctl(
      ['reset-positions', `${sp}:g`, '--to-earliest', '--execute', '--reason', 'replay'],
      { env: env() },
    );
    await waitFor(async () => (await consumptionOf(sp)).reset !== null, {
      what: 'the reset under way',
    });
    // Operator B cancels it.
    const cancel = await coordctl(['cancel-reset', `${sp}:g`, '--reason', 'member stuck'], {
      env: env(),
    });
    expect(cancel.code).toBe(0);
    const a = await waiting;
    await stop();
    expect(a.code).toBe(1);
    expect(a.stderr).toMatch(/^cancelled: 0 of 1 shards moved$/m);
    expect(a.stdout).toMatch(new RegExp(`reset \\S+ of ${sp}:g: cancelled, 0 of 1 shards moved`));
    expect(a.stderr).toContain('was cancelled before it ended (0 of 1 shards moved)');
    expect(a.stderr).toContain(`\`coordctl audit --group ${sp}:g\``);
    // describe says so too.
    const described = await coordctl(['describe', `${sp}:g`], { env: env('reader') });
    expect(described.stdout).toContain(': cancelled, 0 of 1 shards moved');
  });

  it('a refused request exits 1 with the code and what to do', async () => {
    const { sp } = await readFive();
    const outside = await coordctl(
      ['reset-positions', `${sp}:g`, '--to-earliest', '--shards', '3'],
      {
        env: env(),
      },
    );
    expect(outside.code).toBe(1);
    expect(outside.stderr).toContain('400 SHARD_OUT_OF_RANGE');
    expect(outside.stderr).toContain(
      `what to do: the group has no such shard: shards are numbered from 0 to its shard count less one (\`coordctl describe ${sp}:g\`)`,
    );

    const future = await coordctl(
      ['reset-positions', `${sp}:g`, '--to-datetime', '2999-01-01T00:00:00Z'],
      { env: env() },
    );
    expect(future.code).toBe(1);
    expect(future.stderr).toContain('400 TIMESTAMP_IN_FUTURE');
    expect(future.stderr).toContain('what to do: give a time before now');

    expect((await coordctl(['pause', `${sp}:g`, '--reason', 'hold'], { env: env() })).code).toBe(0);
    const paused = await coordctl(
      ['reset-positions', `${sp}:g`, '--to-earliest', '--execute', '--reason', 'replay'],
      { env: env() },
    );
    expect(paused.code).toBe(1);
    expect(paused.stderr).toContain('409 CONSUMPTION_PAUSED');
    expect(paused.stderr).toContain(`\`coordctl resume ${sp}:g --shards …\``);

    const noTarget = await coordctl(['reset-positions', `${sp}:g`], { env: env() });
    expect(noTarget.code).toBe(1);
    expect(noTarget.stderr).toContain('needs exactly one of --to-earliest');
    const noReason = await coordctl(['reset-positions', `${sp}:g`, '--to-latest', '--execute'], {
      env: env(),
    });
    expect(noReason.code).toBe(1);
    expect(noReason.stderr).toContain('--execute needs --reason');
  });

  it("a scale refused for another group's paused shards says to resume that group", async () => {
    const sp = await createGroup(2);
    await client('writer').createGroup(sp, 'other', undefined, CHANGE);
    const paused = await coordctl(['pause', `${sp}:g`, '--shards', '0', '--reason', 'poison'], {
      env: env(),
    });
    expect(paused.code).toBe(0);

    const scale = await coordctl(['scale', `${sp}:other`, '4', '--reason', 'more'], {
      env: env(),
    });
    expect(scale.code).toBe(1);
    expect(scale.stderr).toContain('409 CONSUMPTION_PAUSED');
    // The paused group is `g` (details.consumerGroup): resuming `other` would change nothing.
    expect(scale.stderr).toContain(`coordctl resume ${sp}:g --shards`);
    expect(scale.stderr).not.toContain(`${sp}:other`);
  });
});
