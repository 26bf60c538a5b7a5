/**
 * `coordctl describe`, `lag` and `watch` against a real coordinator and real streams: the lag
 * table, the exit code of the lag check, a live watch ended by SIGINT, and one-line usage errors.
 */
import { spawn } from 'node:child_process';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { coordctl } from '../support/cli.js';
import { CHANGE, startTestCoordinator, type TestCoordinator } from '../support/coordinator.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';
import { TcpProxy } from '../support/tcp-proxy.js';

let redis: RedisServerHandle;
let c: TestCoordinator;

beforeAll(async () => {
  redis = await startRedisServer();
  c = await startTestCoordinator({
    store: 'memory',
    overrides: { 'streams.url': redis.url, 'streams.lag-cache': '0ms' },
  });
  for (const [sp, shards, entries] of [
    ['behind', 2, 5],
    ['calm', 1, 0],
  ] as const) {
    await c.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: sp, consumerGroup: 'g', shardCount: shards, ...CHANGE },
    });
    const streams = new Redis(redis.url);
    for (let i = 0; i < entries; i++) await streams.xadd(`${sp}:0`, '*', 'key', `k${i}`);
    streams.disconnect();
  }
});
afterAll(async () => {
  await c?.close();
  await redis?.stop();
});

const env = () => ({ COORDCTL_URL: c.url, COORDCTL_TOKEN: c.token('reader') });

describe('coordctl describe', () => {
  it('prints the group and a lag table with a row per shard', async () => {
    const { code, stdout } = await coordctl(['describe', 'behind:g'], { env: env() });
    expect(code).toBe(0);
    expect(stdout).toMatch(
      /SHARD\s+STREAM\s+OWNER\s+EPOCH\s+LENGTH\s+LAG\s+LAG-SECONDS\s+PENDING\s+OLDEST-PENDING/,
    );
    expect(stdout).toMatch(/^0\s+behind:0\s+-\s+-\s+5\s+5 \(no group yet\)/m);
    expect(stdout).toMatch(/^1\s+behind:1 \(missing\)\s+-\s+-\s+0\s+0/m);
    expect(stdout).toMatch(/total: 5 behind on 1 shard\(s\), 0 pending/);
  });

  it('-o json carries the lag reading', async () => {
    const { code, stdout } = await coordctl(['describe', 'behind:g', '-o', 'json'], {
      env: env(),
    });
    expect(code).toBe(0);
    const body = JSON.parse(stdout) as { lag: { totals: { lagEntries: number } } };
    expect(body.lag.totals.lagEntries).toBe(5);
  });
});

describe('coordctl lag', () => {
  it('lists groups most behind first', async () => {
    const { code, stdout } = await coordctl(['lag'], { env: env() });
    expect(code).toBe(0);
    const lines = stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^GROUP\s+SHARDS\s+LAG\s+LAG-SECONDS\s+PENDING/);
    expect(lines[1]).toMatch(/^behind:g\s+2\s+5\s/);
    expect(lines[2]).toMatch(/^calm:g\s+1\s+0\s/);
  });

  it('exits 2 naming the groups above --max-lag-seconds, 0 when none is', async () => {
    const over = await coordctl(['lag', '--max-lag-seconds', '0'], { env: env() });
    expect(over.code).toBe(2);
    expect(over.stderr).toMatch(/1 group\(s\) more than 0s behind: behind:g/);
    const fine = await coordctl(['lag', '--max-lag-seconds', '3600'], { env: env() });
    expect(fine.code).toBe(0);
  });
});

describe('coordctl with a shard whose key is broken', () => {
  let streamsRedis: RedisServerHandle;
  let coordinator: TestCoordinator;
  const brokenEnv = () => ({
    COORDCTL_URL: coordinator.url,
    COORDCTL_TOKEN: coordinator.token('reader'),
  });

  beforeAll(async () => {
    streamsRedis = await startRedisServer();
    coordinator = await startTestCoordinator({
      store: 'memory',
      overrides: { 'streams.url': streamsRedis.url, 'streams.lag-cache': '0ms' },
    });
    await coordinator.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: 'broken', consumerGroup: 'g', shardCount: 2, ...CHANGE },
    });
    const streams = new Redis(streamsRedis.url);
    await streams.set('broken:1', 'not a stream');
    streams.disconnect();
  });
  afterAll(async () => {
    await coordinator?.close();
    await streamsRedis?.stop();
  });

  it("describe marks the shard unreadable and prints Redis's error under the table", async () => {
    const { code, stdout } = await coordctl(['describe', 'broken:g'], { env: brokenEnv() });
    expect(code).toBe(0);
    expect(stdout).toMatch(/^0\s+broken:0 \(missing\)\s+-\s+-\s+0\s+0\s/m);
    expect(stdout).toMatch(/^1\s+broken:1\s+-\s+-\s+0\s+unreadable\s/m);
    expect(stdout).toMatch(/^shard 1 unreadable: broken:1: WRONGTYPE Operation against a key/m);
  });

  it('lag notes the shard, and --max-lag-seconds counts the group as lag unknown (exit 2)', async () => {
    const listed = await coordctl(['lag'], { env: brokenEnv() });
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(/^broken:g\s+2\s+0\s.*shard 1 unreadable \(broken:1: WRONGTYPE/m);
    const checked = await coordctl(['lag', '--max-lag-seconds', '3600'], { env: brokenEnv() });
    expect(checked.code).toBe(2);
    expect(checked.stderr).toMatch(
      /1 group\(s\) counted as more than 3600s behind: broken:g \(lag unknown: shard 1 unreadable/,
    );
  });
});

describe('coordctl lag with the streams Redis down', () => {
  let streamsRedis: RedisServerHandle;
  let down: TestCoordinator;
  const groups = ['s0', 's1', 's2', 's3', 's4'];

  beforeAll(async () => {
    streamsRedis = await startRedisServer();
    down = await startTestCoordinator({
      store: 'memory',
      overrides: { 'streams.url': streamsRedis.url, 'streams.lag-cache': '0ms' },
    });
    for (const sp of groups) {
      await down.call('POST', '/coord/v1/admin/groups', {
        user: 'writer',
        body: { streamPrefix: sp, consumerGroup: 'g', shardCount: 1, ...CHANGE },
      });
    }
    await streamsRedis.kill();
  });
  afterAll(async () => {
    await down?.close();
    await streamsRedis?.stop();
  });

  it('--max-lag-seconds exits 2 within seconds, naming every group as lag unknown with the cause', async () => {
    const started = Date.now();
    const { code, stdout, stderr } = await coordctl(['lag', '--max-lag-seconds', '300'], {
      env: { COORDCTL_URL: down.url, COORDCTL_TOKEN: down.token('reader') },
    });
    const tookMs = Date.now() - started;
    expect(code).toBe(2);
    const where = `127.0.0.1:${streamsRedis.port}`;
    expect(stderr).toContain(
      `5 group(s) counted as more than 300s behind: ${groups.map((sp) => `${sp}:g`).join(', ')}`,
    );
    expect(stderr).toMatch(new RegExp(`lag unknown: STREAMS_UNAVAILABLE: .*${where}`));
    // The cause in the table, on each group's row.
    for (const sp of groups) {
      expect(stdout).toMatch(new RegExp(`^${sp}:g\\s+1\\s.*lag unknown: STREAMS_UNAVAILABLE`, 'm'));
    }
    // Read a few at a time and never retried: a check that pages must answer in seconds.
    expect(tookMs).toBeLessThan(10_000);
  }, 30_000);

  it('without --max-lag-seconds lists the groups with the cause and exits 0', async () => {
    const { code, stdout } = await coordctl(['lag', '-o', 'json'], {
      env: { COORDCTL_URL: down.url, COORDCTL_TOKEN: down.token('reader') },
    });
    expect(code).toBe(0);
    const body = JSON.parse(stdout) as { groups: Array<{ problem?: string }> };
    expect(body.groups).toHaveLength(5);
    for (const group of body.groups) expect(group.problem).toMatch(/^STREAMS_UNAVAILABLE: /);
  }, 30_000);
});

describe('coordctl watch', () => {
  it('prints the group and its lag until interrupted, then exits 0', async () => {
    const child = spawn(
      process.execPath,
      ['bin/coordctl.js', 'watch', 'behind:g', '--interval', '200ms'],
      { env: { PATH: process.env.PATH ?? '', ...env() } },
    );
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    await waitFor(() => (out.match(/lag 5 /g) ?? []).length >= 2, { what: 'two readings' });
    expect(out).toMatch(/state \{/);
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    child.kill('SIGINT');
    expect(await exited).toBe(0);
  });
});

describe('coordctl watch across a restart of the replica it reads', () => {
  it('says it cannot read meanwhile and goes on once the replica answers again', async () => {
    let door = await TcpProxy.start(c.url);
    const port = Number(new URL(door.url).port);
    const child = spawn(
      process.execPath,
      ['bin/coordctl.js', 'watch', 'calm:g', '--interval', '200ms'],
      { env: { PATH: process.env.PATH ?? '', ...env(), COORDCTL_URL: door.url } },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    let code: number | null | undefined;
    const exited = new Promise<number | null>((resolve) =>
      child.on('exit', (c) => resolve((code = c))),
    );
    try {
      const readings = () => (out.match(/ calm:g ACTIVE /g) ?? []).length;
      await waitFor(() => readings() >= 1, { what: 'a first reading' });
      // The replica goes away (connections refused), as in a restart or a rolling upgrade.
      await door.close();
      await waitFor(() => code !== undefined || /cannot read calm:g: /.test(err), {
        timeoutMs: 20_000,
        what: 'the watch to say it cannot read',
      });
      expect(code).toBeUndefined();
      const before = readings();
      door = await TcpProxy.start(c.url, port);
      await waitFor(() => code !== undefined || readings() > before, {
        timeoutMs: 20_000,
        what: 'a reading once the replica is back',
      });
      expect(code).toBeUndefined();
      child.kill('SIGINT');
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
      await door.close();
    }
  }, 60_000);
});

describe('usage errors', () => {
  it('print the one line that is wrong and a hint, not the whole help', async () => {
    const { code, stderr } = await coordctl(['lag', '--max-lag-seconds'], { env: env() });
    expect(code).toBe(1);
    const lines = stderr.trim().split('\n');
    expect(lines.length).toBeLessThanOrEqual(2);
    expect(stderr).toMatch(/--max-lag-seconds/);
    expect(stderr).toMatch(/--help/);
  });
});
