import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyPassword } from '../../src/http/auth/password-hash.js';
import { coordctl } from '../support/cli.js';
import { CHANGE, startTestCoordinator, type TestCoordinator } from '../support/coordinator.js';

const run = promisify(execFile);

describe('coordctl hash-password', () => {
  it('prints a scrypt hash of the password read from stdin that verifies', async () => {
    const { code, stdout } = await coordctl(['hash-password'], { input: 'a-good-password\n' });
    expect(code).toBe(0);
    const hash = stdout.trim();
    expect(hash).toMatch(/^scrypt\$/);
    expect(await verifyPassword('a-good-password', hash)).toBe(true);
    expect(await verifyPassword('another-password', hash)).toBe(false);
  });
  it('refuses a short password with a message and exit code 2', async () => {
    const { code, stderr } = await coordctl(['hash-password'], { input: 'short\n' });
    expect(code).toBe(2);
    expect(stderr).toMatch(/at least 8 characters/);
  });
  it('is what the package bin runs (npx coordctl)', async () => {
    const { stdout } = await run(
      'node',
      ['-e', 'console.log(require("./package.json").bin.coordctl)'],
      { cwd: process.cwd() },
    );
    expect(stdout.trim()).toBe('bin/coordctl.js');
  });
});

describe('coordctl scale --duplicate-sensitive', () => {
  let c: TestCoordinator;
  beforeAll(async () => {
    c = await startTestCoordinator({ store: 'memory' });
    await c.call('PUT', '/coord/v1/admin/streams/dup/groups/g', {
      user: 'writer',
      body: { shardCount: 2, ...CHANGE },
    });
  });
  afterAll(async () => c?.close());

  it('pauses producers, scales, waits for routing, resumes — each step audited in order', async () => {
    const { code, stdout, stderr } = await coordctl(
      [
        'scale',
        'dup:g',
        '4',
        '--duplicate-sensitive',
        '--drain',
        '10ms',
        '--refresh',
        '10ms',
        '--coordinator',
        c.url,
        '--requested-by',
        'ops',
        '--reason',
        'more shards',
      ],
      { env: { COORDCTL_TOKEN: c.token('admin') } },
    );
    expect(stderr).toMatch(
      /1\/6 pausing producers[\s\S]*3\/6 scaling to 4[\s\S]*5\/6 routing shows shardCount 4[\s\S]*6\/6 resuming/,
    );
    expect(code).toBe(0);
    expect(stdout.trim()).toMatch(/^[0-9a-f-]{36}$/);
    const routing = (await (
      await c.call('GET', '/coord/v1/routing/streams/dup/groups/g', { user: 'producer' })
    ).json()) as {
      shardCount: number;
      producersPaused: boolean;
    };
    expect(routing).toMatchObject({ shardCount: 4, producersPaused: false });
    const { records } = (await (
      await c.call('GET', '/coord/v1/monitoring/audit?streamPrefix=dup', { user: 'reader' })
    ).json()) as {
      records: Array<{ operation: string; principal: string }>;
    };
    expect(
      records
        .slice(0, 3)
        .map((r) => r.operation)
        .reverse(),
    ).toEqual(['pauseProducers', 'scale', 'resumeProducers']);
  });

  it('resumes producers when the scale is refused', async () => {
    const { code, stderr } = await coordctl(
      [
        'scale',
        'dup:g',
        '4',
        '--duplicate-sensitive',
        '--drain',
        '1ms',
        '--coordinator',
        c.url,
        '--requested-by',
        'ops',
        '--reason',
        'same count',
      ],
      { env: { COORDCTL_TOKEN: c.token('admin') } },
    );
    expect(code).toBe(1);
    expect(stderr).toMatch(/resuming producers/);
    const routing = (await (
      await c.call('GET', '/coord/v1/routing/streams/dup/groups/g', { user: 'producer' })
    ).json()) as { producersPaused: boolean };
    expect(routing.producersPaused).toBe(false);
  });
});
