/**
 * The programs in examples/ as a user runs them (child processes through tsx, with
 * `--conditions=source`), against a real coordinator: a refusal ends them with one line and a
 * non-zero code, SIGTERM stops them within the close bound even with the streams Redis
 * unreachable, and ioredis never reports an error event as unhandled.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CoordinatorClient } from '../../src/client/index.js';
import { CHANGE, useCoordinator, type TestCoordinator } from '../support/coordinator.js';
import {
  freePort,
  startRedisServer,
  waitFor,
  type RedisServerHandle,
} from '../support/redis-server.js';
import { timed } from '../support/timed.js';

const ROOT = resolve(import.meta.dirname, '../..');
/** The consumer's default `closeTimeoutMs`. */
const CLOSE_TIMEOUT_MS = 5_000;

let coordinator: TestCoordinator;
let streams: RedisServerHandle;
useCoordinator({ store: 'memory' }, (c) => {
  coordinator = c;
});
beforeAll(async () => {
  streams = await startRedisServer();
});
afterAll(async () => {
  await streams.stop();
});

interface Run {
  readonly child: ChildProcess;
  stdout: string;
  stderr: string;
  /** The exit code (null: ended by a signal), once it exited. */
  readonly exited: Promise<number | null>;
}

const runs: Run[] = [];
afterEach(() => {
  for (const run of runs.splice(0)) {
    if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGKILL');
  }
});

/** Starts `examples/<name>.ts` with these settings (and no others from our environment). */
function example(name: 'consumer' | 'producer', env: Record<string, string>): Run {
  const child = spawn(
    process.execPath,
    ['--conditions=source', '--import', 'tsx', `examples/${name}.ts`],
    {
      cwd: ROOT,
      env: { PATH: process.env['PATH'] ?? '', CONSUMER_GROUP: 'billing', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const run: Run = {
    child,
    stdout: '',
    stderr: '',
    exited: new Promise((done) => child.once('exit', (code) => done(code))),
  };
  child.stdout.on('data', (chunk: Buffer) => (run.stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (run.stderr += chunk.toString()));
  runs.push(run);
  return run;
}

async function createGroup(): Promise<string> {
  const sp = `orders-${randomBytes(4).toString('hex')}`;
  const writer = new CoordinatorClient({
    baseUrl: coordinator.url,
    token: coordinator.token('writer'),
  });
  await writer.createGroup(sp, 'billing', 2, CHANGE);
  return sp;
}

/** A Redis URL where nothing listens. */
async function nowhere(): Promise<string> {
  return `redis://127.0.0.1:${await freePort()}`;
}

/** Asserts that a run's output has no stack trace and no unhandled ioredis error. */
function expectNoStacks(run: Run): void {
  const output = run.stdout + run.stderr;
  expect(output).not.toContain('Unhandled error event');
  expect(output).not.toMatch(/^\s+at /m);
}

describe('the examples end with one line when the coordinator refuses them', () => {
  it.each([
    ['401', 'not-a-token', 'existing', /^consumer cannot join: 401 /],
    ['403', 'reader', 'existing', /^consumer cannot join: 403 FORBIDDEN: /],
    ['404', 'consumer', 'missing', /^consumer cannot join: 404 GROUP_NOT_FOUND: /],
  ])('consumer, %s', async (_status, user, group, line) => {
    const sp =
      group === 'existing' ? await createGroup() : `missing-${randomBytes(4).toString('hex')}`;
    const run = example('consumer', {
      COORD_URL: coordinator.url,
      COORD_TOKEN: user === 'not-a-token' ? user : coordinator.token(user),
      REDIS_URL: streams.url,
      STREAM_PREFIX: sp,
    });
    await timed(run.exited, 20_000, 'the consumer example');
    expect(run.child.exitCode).toBe(1);
    const lines = run.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(line);
    expectNoStacks(run);
  });

  it.each([
    ['401', 'not-a-token', 'yes', /^producer: 401 /],
    ['403', 'consumer', 'yes', /^producer: 403 FORBIDDEN: /],
    ['404', 'producer', 'no', /^producer: 404 GROUP_NOT_FOUND: /],
  ])('producer, %s', async (_status, user, create, line) => {
    const run = example('producer', {
      COORD_URL: coordinator.url,
      COORD_TOKEN: user === 'not-a-token' ? user : coordinator.token(user),
      REDIS_URL: streams.url,
      STREAM_PREFIX: `missing-${randomBytes(4).toString('hex')}`,
      CREATE_GROUP: create,
    });
    await timed(run.exited, 20_000, 'the producer example');
    expect(run.child.exitCode).toBe(1);
    const lines = run.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(line);
    expectNoStacks(run);
  });
});

describe('SIGTERM stops the examples within the close bound, with the streams Redis unreachable', () => {
  it('consumer: holding shards it cannot read', async () => {
    const sp = await createGroup();
    const run = example('consumer', {
      COORD_URL: coordinator.url,
      COORD_TOKEN: coordinator.token('consumer'),
      REDIS_URL: await nowhere(),
      STREAM_PREFIX: sp,
      MEMBER_ID: 'example-consumer',
    });
    await waitFor(() => run.stdout.includes('now reading shards 0, 1'), {
      timeoutMs: 20_000,
      what: 'the example reading both shards',
    });
    // ioredis has reported the refused connection by now (once).
    await waitFor(() => run.stderr.includes('consumer error: connect ECONNREFUSED'), {
      timeoutMs: 10_000,
      what: 'the Redis error, in one line',
    });
    run.child.kill('SIGTERM');
    await timed(run.exited, CLOSE_TIMEOUT_MS + 2_000, 'the consumer example after SIGTERM');
    expect(run.child.exitCode).toBe(0);
    expect(run.stderr.match(/consumer error: connect ECONNREFUSED/g)).toHaveLength(1);
    expectNoStacks(run);
  });

  it('producer: a send waiting for Redis', async () => {
    const run = example('producer', {
      COORD_URL: coordinator.url,
      COORD_TOKEN: coordinator.token('admin'),
      REDIS_URL: await nowhere(),
      STREAM_PREFIX: `orders-${randomBytes(4).toString('hex')}`,
    });
    await waitFor(() => run.stdout.includes('created group'), {
      timeoutMs: 20_000,
      what: 'the example creating its group',
    });
    await waitFor(() => run.stderr.includes('producer error: connect ECONNREFUSED'), {
      timeoutMs: 10_000,
      what: 'the Redis error, in one line',
    });
    run.child.kill('SIGTERM');
    await timed(run.exited, CLOSE_TIMEOUT_MS + 2_000, 'the producer example after SIGTERM');
    expect(run.child.exitCode).toBe(0);
    expect(run.stdout).not.toContain('order 0');
    expectNoStacks(run);
  });
});
