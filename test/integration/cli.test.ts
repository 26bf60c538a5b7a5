import { execFile, spawn } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyPassword } from '../../src/http/auth/password-hash.js';
import { coordctl } from '../support/cli.js';
import {
  CHANGE,
  PASSWORD,
  startReplicaOn,
  startTestCoordinator,
  useCoordinator,
  type TestCoordinator,
} from '../support/coordinator.js';
import { SimulatedMember } from '../support/members.js';
import {
  randomKeyPrefix,
  startRedisServer,
  waitFor,
  type RedisServerHandle,
} from '../support/redis-server.js';

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
  it('refuses a short password with a message and exit code 1', async () => {
    const { code, stderr } = await coordctl(['hash-password'], { input: 'short\n' });
    expect(code).toBe(1);
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

  it('resumes producers when interrupted (Ctrl-C) before the scale', async () => {
    const child = spawn(
      process.execPath,
      [
        'bin/coordctl.js',
        'scale',
        'dup:g',
        '6',
        '--duplicate-sensitive',
        '--drain',
        '10m',
        '--coordinator',
        c.url,
        '--requested-by',
        'ops',
        '--reason',
        'interrupted',
      ],
      { env: { PATH: process.env.PATH ?? '', COORDCTL_TOKEN: c.token('admin') } },
    );
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const paused = async () =>
      (
        (await (
          await c.call('GET', '/coord/v1/routing/streams/dup/groups/g', { user: 'producer' })
        ).json()) as { producersPaused: boolean; shardCount: number }
      ).producersPaused;
    await waitFor(() => /2\/6 waiting/.test(stderr) && paused(), {
      timeoutMs: 15_000,
      what: 'producers paused, the drain under way',
    });
    child.kill('SIGINT');
    const code = await exited;
    expect(code).not.toBe(0);
    expect(stderr).toMatch(/resuming producers/);
    expect(await paused()).toBe(false);
    const routing = (await (
      await c.call('GET', '/coord/v1/routing/streams/dup/groups/g', { user: 'producer' })
    ).json()) as { shardCount: number };
    expect(routing.shardCount).toBe(4);
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

/** coordctl against `c` with the token of `user` (none: no token at all). */
function ctl(
  c: TestCoordinator,
  user: string | null,
  args: string[],
  env: Record<string, string> = {},
  input?: string,
) {
  return coordctl(args, {
    env: { COORDCTL_URL: c.url, ...(user ? { COORDCTL_TOKEN: c.token(user) } : {}), ...env },
    ...(input === undefined ? {} : { input }),
  });
}

const AUDITED = ['--requested-by', 'ops-oncall', '--reason', 'cli test'];

async function createGroup(c: TestCoordinator, streamPrefix: string, shardCount: number) {
  const res = await c.call('PUT', `/coord/v1/admin/streams/${streamPrefix}/groups/g`, {
    user: 'writer',
    body: { shardCount, ...CHANGE },
  });
  expect(res.status).toBe(201);
}

async function routingOf(c: TestCoordinator, streamPrefix: string) {
  const res = await c.call('GET', `/coord/v1/routing/streams/${streamPrefix}/groups/g`, {
    user: 'producer',
  });
  return (await res.json()) as { shardCount: number; producersPaused: boolean };
}

describe('coordctl login', () => {
  let c: TestCoordinator;
  let home: string;
  beforeAll(async () => {
    c = await startTestCoordinator({ store: 'memory' });
    home = await mkdtemp(join(tmpdir(), 'coordctl-home-'));
  });
  afterAll(async () => {
    await c?.close();
    await rm(home, { recursive: true, force: true });
  });

  it('keeps the token in $XDG_CONFIG_HOME/stream-coordinator/token, mode 0600, never printed, and later commands use it', async () => {
    const env = { XDG_CONFIG_HOME: home };
    const login = await ctl(c, null, ['login', '--username', 'reader'], env, `${PASSWORD}\n`);
    expect(login.code).toBe(0);
    const file = join(home, 'stream-coordinator', 'token');
    const token = (await readFile(file, 'utf8')).trim();
    expect(token.split('.')).toHaveLength(3);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(login.stdout + login.stderr).not.toContain(token);
    expect(login.stderr).toMatch(/logged in .* as reader/);

    const groups = await ctl(c, null, ['groups'], env);
    expect(groups.code).toBe(0);
    expect(groups.stdout).toMatch(/^GROUP\s+SHARDS/);

    await chmod(file, 0o644);
    const widened = await ctl(c, null, ['groups'], env);
    expect(widened.code).toBe(1);
    expect(widened.stderr).toContain(`chmod 600 ${file}`);

    const logout = await ctl(c, null, ['logout'], env);
    expect(logout.code).toBe(0);
    const after = await ctl(c, null, ['groups'], env);
    expect(after.code).toBe(1);
    expect(after.stderr).toMatch(/not logged in .*coordctl login --username/);
  });

  it('a wrong password fails with exit 1, the URL, the code and what to do', async () => {
    const tokenFile = join(home, 'other', 'token');
    const { code, stderr } = await coordctl(
      ['login', '--username', 'reader', '--token-file', tokenFile],
      { input: 'wrong password\n', env: { COORDCTL_URL: c.url } },
    );
    expect(code).toBe(1);
    expect(stderr).toContain(`POST ${c.url}/coord/v1/auth/login failed: 401 INVALID_CREDENTIALS`);
    expect(stderr).toMatch(/what to do: check the username and password/);
    await expect(stat(tokenFile)).rejects.toThrow(/ENOENT/);
  });
});

describe('coordctl reads: tables by default, -o json', () => {
  let c: TestCoordinator;
  useCoordinator({ store: 'memory' }, (coordinator) => (c = coordinator));
  beforeAll(async () => {
    await createGroup(c, 'rd', 4);
    const member = new SimulatedMember(c, 'm1', 'rd', 'g');
    await member.beat();
    await waitFor(async () => (await member.beat()).assignedShards.length === 4, {
      what: 'm1 owns all four shards',
    });
  });

  it('groups lists every group with its shard count, status and members', async () => {
    const table = await ctl(c, 'reader', ['groups']);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(
      /^GROUP\s+SHARDS\s+VERSION\s+EPOCH\s+STATUS\s+PHASE\s+MEMBERS\s+OWNER\n/,
    );
    expect(table.stdout).toMatch(/^rd:g\s+4\s+\d+\s+\d+\s+ACTIVE\s+\S+\s+1\s/m);
    const json = await ctl(c, 'reader', ['groups', '-o', 'json']);
    const { groups } = JSON.parse(json.stdout) as {
      groups: Array<{ consumerGroup: string; shardCount: number }>;
    };
    expect(groups).toContainEqual(expect.objectContaining({ consumerGroup: 'g', shardCount: 4 }));
  });

  it('describe shows status, shard count, members and the active migration', async () => {
    const table = await ctl(c, 'reader', ['describe', 'rd:g']);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^status:\s+ACTIVE$/m);
    expect(table.stdout).toMatch(/^shard count:\s+4$/m);
    expect(table.stdout).toMatch(/^members:\s+1$/m);
    expect(table.stdout).toMatch(/^active migration:\s+none$/m);
    const json = JSON.parse(
      (await ctl(c, 'reader', ['describe', 'rd:g', '-o', 'json'])).stdout,
    ) as Record<string, unknown>;
    expect(json).toMatchObject({
      streamPrefix: 'rd',
      shardCount: 4,
      status: 'ACTIVE',
      activeMigration: null,
    });
  });

  it('members shows each member with its shards', async () => {
    const table = await ctl(c, 'reader', ['members', 'rd:g']);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^MEMBER\s+STATE\s+CLIENT\s+EPOCH\s+ASSIGNED/);
    expect(table.stdout).toMatch(/^m1\s+.*0,1,2,3/m);
    const json = JSON.parse((await ctl(c, 'reader', ['members', 'rd:g', '-o', 'json'])).stdout) as {
      members: Array<{ memberId: string; assignedShards: number[] }>;
    };
    expect(json.members).toEqual([
      expect.objectContaining({ memberId: 'm1', assignedShards: [0, 1, 2, 3] }),
    ]);
  });

  it('assignments shows every shard with state and owner', async () => {
    const table = await ctl(c, 'reader', ['assignments', 'rd:g']);
    expect(table.code).toBe(0);
    const rows = table.stdout.trim().split('\n');
    expect(rows[0]).toMatch(/^SHARD\s+STATE\s+OWNER\s+TARGET\s+OWNER EPOCH$/);
    expect(rows.slice(1).map((r) => r.split(/\s+/).slice(0, 3))).toEqual([
      ['0', 'assigned', 'm1'],
      ['1', 'assigned', 'm1'],
      ['2', 'assigned', 'm1'],
      ['3', 'assigned', 'm1'],
    ]);
  });

  it('audit lists records of the group with who asked and why', async () => {
    const table = await ctl(c, 'reader', ['audit', '--group', 'rd:g', '--limit', '5']);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^TIME\s+PRINCIPAL\s+OPERATION\s+OUTCOME/);
    expect(table.stdout).toMatch(
      /writer\s+putGroup\s+SUCCEEDED\s+201\s+rd:g\s+test-suite\s+integration test/,
    );
  });

  it('statechart shows the state of each region; --mermaid the diagram; -o json the definition', async () => {
    const table = await ctl(c, 'reader', ['statechart', 'rd:g']);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^REGION\s+STATE$/m);
    expect(table.stdout).toMatch(/^lifecycle\s+active$/m);
    const mermaid = await ctl(c, 'reader', ['statechart', 'rd:g', '--mermaid']);
    expect(mermaid.stdout).toMatch(/^stateDiagram-v2/);
    const json = JSON.parse(
      (await ctl(c, 'reader', ['statechart', 'rd:g', '-o', 'json'])).stdout,
    ) as { definition: unknown; value: { lifecycle: string } };
    expect(json.definition).toBeTruthy();
    expect(json.value.lifecycle).toBe('active');
  });

  it('replicas lists the live replicas with their URL (GET /coord/v1/monitoring/replicas)', async () => {
    const info = (await (
      await c.call('GET', '/coord/v1/monitoring/info', { user: 'reader' })
    ).json()) as {
      replicaId: string;
    };
    const table = await ctl(c, 'reader', ['replicas']);
    expect(table.stderr).toBe('');
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^REPLICA\s+URL\s+GROUPS OWNED/);
    expect(table.stdout).toContain(info.replicaId);
    const json = JSON.parse((await ctl(c, 'reader', ['replicas', '-o', 'json'])).stdout) as {
      replicas: unknown[];
    };
    expect(json.replicas.length).toBeGreaterThanOrEqual(1);
  });

  it('an unknown group: exit 1, the URL, the code, and what to do', async () => {
    const { code, stderr } = await ctl(c, 'reader', ['describe', 'rd:nope']);
    expect(code).toBe(1);
    expect(stderr).toContain(
      `GET ${c.url}/coord/v1/monitoring/streams/rd/groups/nope failed: 404 GROUP_NOT_FOUND`,
    );
    expect(stderr).toMatch(/what to do: check the name with `coordctl groups`/);
  });

  it('a coordinator that cannot be reached: exit 1, the URL, and what to check', async () => {
    const { code, stderr } = await coordctl([
      'groups',
      '--coordinator',
      'http://127.0.0.1:9',
      '--token',
      'x',
    ]);
    expect(code).toBe(1);
    expect(stderr).toContain(
      'cannot reach the coordinator at http://127.0.0.1:9/coord/v1/monitoring/groups: ',
    );
    expect(stderr).toMatch(/--coordinator \(or COORDCTL_URL\)/);
  });

  it('a coordinator URL with a user name and password is refused without printing them', async () => {
    // coordctl authenticates with a bearer token: credentials in the URL were never sent, only
    // echoed (`logged in to http://user:…@…`).
    const { code, stdout, stderr } = await coordctl(
      ['login', '--coordinator', 'http://ops:hunter2-secret@127.0.0.1:9/', '--username', 'admin'],
      { input: 'password\n' },
    );
    expect(code).toBe(1);
    expect(stderr).toMatch(/--coordinator carries a user name or password/);
    expect(stderr).toContain('http://127.0.0.1:9/');
    expect(stdout + stderr).not.toContain('hunter2-secret');
    expect(stdout + stderr).not.toContain('ops:');
  });

  it('a token without the role: exit 1, 403, and which role is needed', async () => {
    const { code, stderr } = await ctl(c, 'reader', ['freeze', 'rd:g', ...AUDITED]);
    expect(code).toBe(1);
    expect(stderr).toMatch(/POST \S+\/admin\/streams\/rd\/groups\/g\/freeze failed: 403 FORBIDDEN/);
    expect(stderr).toMatch(/changes need WRITE/);
  });
});

describe('coordctl scale --watch, migrations, rollback', () => {
  let c: TestCoordinator;
  useCoordinator({ store: 'memory' }, (coordinator) => (c = coordinator));

  async function groupWithMember(streamPrefix: string, shardCount: number) {
    await createGroup(c, streamPrefix, shardCount);
    const member = new SimulatedMember(c, 'm1', streamPrefix, 'g');
    await member.beat();
    await waitFor(async () => (await member.beat()).assignedShards.length === shardCount, {
      what: `m1 owns every shard of ${streamPrefix}`,
    });
    return member;
  }

  it('scale --watch prints progress until the migration has converged, then migrations shows it', async () => {
    const member = await groupWithMember('sc', 2);
    let finished = false;
    const run = ctl(c, 'admin', [
      'scale',
      'sc:g',
      '4',
      '--watch',
      '--interval',
      '50ms',
      ...AUDITED,
    ]);
    void run.finally(() => (finished = true));
    // The member takes the new shards while the CLI watches.
    await waitFor(
      async () => {
        await member.beat();
        return finished;
      },
      { timeoutMs: 20_000, intervalMs: 50, what: 'scale --watch to finish' },
    );
    const { code, stdout, stderr } = await run;
    expect(stderr).toMatch(/scaling sc:g to 4 shards: migration [0-9a-f-]{36}/);
    expect(stderr).toMatch(
      /CONVERGED: shards 4\/4 converged, members 1\/1 reporting\n.*converged\n$/,
    );
    expect(code).toBe(0);
    const migrationId = stdout.trim();
    expect(member.owned).toEqual([0, 1, 2, 3]);

    const table = await ctl(c, 'reader', ['migrations', 'sc:g']);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^MIGRATION\s+KIND\s+FROM\s+TO\s+STATE\s+ROLLBACK/);
    expect(table.stdout).toMatch(
      new RegExp(`^${migrationId}\\s+SCALE\\s+2\\s+4\\s+CONVERGED\\s+until `, 'm'),
    );
    expect(table.stdout).toMatch(/ops-oncall\s+cli test$/m);
    expect(table.stdout).toMatch(
      new RegExp(`^active: ${migrationId} CONVERGED 2 → 4 shards; shards 4/4 converged`, 'm'),
    );
  });

  it('scale --watch gives up with exit 3 and what to do when the migration does not converge in time; rollback undoes it', async () => {
    await groupWithMember('stuck', 2); // its member stops heartbeating
    const { code, stdout, stderr } = await ctl(c, 'admin', [
      'scale',
      'stuck:g',
      '4',
      '--watch',
      '--interval',
      '50ms',
      '--timeout',
      '300ms',
      ...AUDITED,
    ]);
    expect(code).toBe(3);
    expect(stderr).toMatch(/IN_PROGRESS: shards 2\/4 converged, members 1\/1 reporting\n/);
    expect(stderr).toMatch(/has not converged after 300 ms/);
    expect(stderr).toMatch(/what to do: .*coordctl rollback stuck:g/);
    const scaleId = stdout.trim();

    const rollback = await ctl(c, 'writer', ['rollback', 'stuck:g', ...AUDITED]);
    expect(rollback.code).toBe(0);
    expect(rollback.stderr).toMatch(/rolling stuck:g back from 4 to 2 shards/);
    const { active, migrations } = JSON.parse(
      (await ctl(c, 'reader', ['migrations', 'stuck:g', '-o', 'json'])).stdout,
    ) as {
      active: { kind: string; migrationId: string };
      migrations: Array<{ migrationId: string; state: string }>;
    };
    expect(active).toMatchObject({ kind: 'ROLLBACK', migrationId: rollback.stdout.trim() });
    expect(migrations).toContainEqual(
      expect.objectContaining({ migrationId: scaleId, state: 'ROLLED_BACK' }),
    );
    expect((await routingOf(c, 'stuck')).shardCount).toBe(2);
  });

  it('rollback of an unknown migration: exit 1 with the code and where to look', async () => {
    await createGroup(c, 'nomig', 2);
    const { code, stderr } = await ctl(c, 'writer', [
      'rollback',
      'nomig:g',
      'no-such-id',
      ...AUDITED,
    ]);
    expect(code).toBe(1);
    expect(stderr).toMatch(/404 MIGRATION_NOT_FOUND/);
    expect(stderr).toMatch(/coordctl migrations nomig:g/);
  });
});

describe('coordctl freeze, unfreeze, producers pause|resume', () => {
  let c: TestCoordinator;
  useCoordinator({ store: 'memory' }, (coordinator) => (c = coordinator));

  it('freeze refuses changes until unfreeze; producers pause and resume reach routing; each audited', async () => {
    await createGroup(c, 'fz', 2);
    const freeze = await ctl(c, 'writer', ['freeze', 'fz:g', ...AUDITED]);
    expect(freeze).toMatchObject({
      code: 0,
      stdout: 'froze fz:g: status FROZEN, 2 shards, producers running\n',
    });
    const refused = await ctl(c, 'writer', ['scale', 'fz:g', '3', ...AUDITED]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/409 GROUP_FROZEN/);
    expect(refused.stderr).toMatch(/what to do: .*`coordctl unfreeze fz:g`/);
    const unfreeze = await ctl(c, 'writer', ['unfreeze', 'fz:g', ...AUDITED]);
    expect(unfreeze.stdout).toBe('unfroze fz:g: status ACTIVE, 2 shards, producers running\n');

    const pause = await ctl(c, 'writer', ['producers', 'pause', 'fz:g', ...AUDITED]);
    expect(pause.stdout).toBe(
      'paused producers of fz:g: status ACTIVE, 2 shards, producers paused\n',
    );
    expect((await routingOf(c, 'fz')).producersPaused).toBe(true);
    const resume = await ctl(c, 'writer', ['producers', 'resume', 'fz:g', ...AUDITED]);
    expect(resume.code).toBe(0);
    expect((await routingOf(c, 'fz')).producersPaused).toBe(false);

    const { records } = (await (
      await c.call('GET', '/coord/v1/monitoring/audit?streamPrefix=fz&limit=10', { user: 'reader' })
    ).json()) as {
      records: Array<{ operation: string; status: number; requestedBy: string; reason: string }>;
    };
    expect(
      records
        .slice(0, 5)
        .reverse()
        .map((r) => [r.operation, r.status, r.requestedBy, r.reason]),
    ).toEqual([
      ['freeze', 200, 'ops-oncall', 'cli test'],
      ['scale', 409, 'ops-oncall', 'cli test'],
      ['unfreeze', 200, 'ops-oncall', 'cli test'],
      ['pauseProducers', 200, 'ops-oncall', 'cli test'],
      ['resumeProducers', 200, 'ops-oncall', 'cli test'],
    ]);
  });

  it('a change without --requested-by or --reason is refused before anything is sent', async () => {
    await createGroup(c, 'noreason', 2);
    const { code, stderr } = await ctl(c, 'writer', [
      'freeze',
      'noreason:g',
      '--requested-by',
      'ops',
    ]);
    expect(code).toBe(1);
    expect(stderr).toMatch(/required option '--reason <why>' not specified/);
    const { records } = (await (
      await c.call('GET', '/coord/v1/monitoring/audit?streamPrefix=noreason', { user: 'reader' })
    ).json()) as { records: unknown[] };
    expect(records).toHaveLength(1); // the PUT that created it
  });
});

describe('coordctl backup, restore and recovery (redis)', () => {
  let c: TestCoordinator;
  let redis: RedisServerHandle;
  useCoordinator({ store: 'redis', overrides: { 'store.verify-interval': '100ms' } }, (co, r) => {
    c = co;
    redis = r!;
  });
  const storeFlags = () => ['--url', redis.url, '--key-prefix', c.keyPrefix];
  const status = async (sp: string) => {
    const res = await ctl(c, 'reader', ['describe', `${sp}:g`, '-o', 'json']);
    return JSON.parse(res.stdout) as {
      status: string;
      failureReason: string | null;
      lifecycleId: string;
    };
  };

  it('backup to a 0600 file, lose the metadata, restore it, recovery resume', async () => {
    await createGroup(c, 'dr', 3);
    const dir = await mkdtemp(join(tmpdir(), 'coordctl-backup-'));
    const file = join(dir, 'backup.json');
    const backup = await coordctl(['backup', ...storeFlags(), '--group', 'dr:g', '--out', file]);
    expect(backup.code).toBe(0);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({
      groups: [{ streamPrefix: 'dr' }],
    });

    await redis.client().del(`${c.keyPrefix}:{dr:g}:metadata`);
    await waitFor(async () => (await status('dr')).status === 'FAILED_CLOSED', {
      what: 'dr to fail closed',
    });
    const describe = await ctl(c, 'reader', ['describe', 'dr:g']);
    expect(describe.stdout).toMatch(/^failure reason:\s+METADATA_LOST$/m);
    const refused = await ctl(c, 'writer', ['scale', 'dr:g', '4', ...AUDITED]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/coordctl recovery dr:g resume\|recreate/);

    const restore = await coordctl(['restore', ...storeFlags(), '--in', file, '--group', 'dr:g']);
    expect(restore).toMatchObject({ code: 0 });
    expect(restore.stderr).toMatch(/restored 1 groups/);
    const resume = await ctl(c, 'writer', ['recovery', 'dr:g', 'resume', ...AUDITED]);
    expect(resume).toMatchObject({
      code: 0,
      stdout: 'resumed dr:g: status ACTIVE, 3 shards, producers running\n',
    });
    await rm(dir, { recursive: true, force: true });
  });

  it('recovery recreate needs --shard-count and starts a new lifecycle; recovery of a healthy group says so', async () => {
    await createGroup(c, 'rc', 2);
    const before = await status('rc');
    await redis.client().del(`${c.keyPrefix}:{rc:g}:metadata`);
    await waitFor(async () => (await status('rc')).status === 'FAILED_CLOSED', {
      what: 'rc to fail closed',
    });
    const missing = await ctl(c, 'writer', ['recovery', 'rc:g', 'recreate', ...AUDITED]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/needs --shard-count/);
    const recreate = await ctl(c, 'writer', [
      'recovery',
      'rc:g',
      'recreate',
      '--shard-count',
      '5',
      ...AUDITED,
    ]);
    expect(recreate.stdout).toBe('recreated rc:g: status ACTIVE, 5 shards, producers running\n');
    expect((await status('rc')).lifecycleId).not.toBe(before.lifecycleId);
    const healthy = await ctl(c, 'writer', ['recovery', 'rc:g', 'resume', ...AUDITED]);
    expect(healthy.code).toBe(1);
    expect(healthy.stderr).toMatch(
      /409 GROUP_NOT_FAILED_CLOSED.*\n.*only for a failed-closed group/,
    );
  });

  it('restore of an edited backup names the group that is not valid and writes none (docs/cli.md#backup-and-restore-straight-from-redis)', async () => {
    await createGroup(c, 'ed1', 2);
    await createGroup(c, 'ed2', 2);
    const dir = await mkdtemp(join(tmpdir(), 'coordctl-backup-'));
    const file = join(dir, 'backup.json');
    const backup = await coordctl([
      'backup',
      ...storeFlags(),
      '--group',
      'ed1:g',
      '--group',
      'ed2:g',
    ]);
    expect(backup.code).toBe(0);
    const edited = JSON.parse(backup.stdout) as {
      groups: Array<{ fields: Record<string, string> }>;
    };
    edited.groups[1]!.fields.shardCount = 'four';
    await writeFile(file, JSON.stringify(edited));
    const into = ['--url', redis.url, '--key-prefix', `${c.keyPrefix}-elsewhere`];
    const restore = await coordctl(['restore', ...into, '--in', file]);
    expect(await redis.client().keys(`${c.keyPrefix}-elsewhere*`)).toEqual([]);
    expect(restore.code).toBe(1);
    expect(restore.stderr).toMatch(
      /not a valid metadata hash in the backup: ed2:g; nothing restored/,
    );

    delete (edited.groups[1] as { fields?: unknown }).fields;
    await writeFile(file, JSON.stringify(edited));
    const noFields = await coordctl(['restore', ...into, '--in', file]);
    expect(noFields.code).toBe(1);
    expect(noFields.stderr).toMatch(/ed2:g/);
    expect(await redis.client().keys(`${c.keyPrefix}-elsewhere*`)).toEqual([]);
    await rm(dir, { recursive: true, force: true });
  });

  it('backup --group of a group the store does not hold fails and writes no file (docs/cli.md#backup-and-restore-straight-from-redis)', async () => {
    await createGroup(c, 'bk', 2);
    const dir = await mkdtemp(join(tmpdir(), 'coordctl-backup-'));
    const file = join(dir, 'backup.json');
    const backup = await coordctl([
      'backup',
      ...storeFlags(),
      '--group',
      'bk:g',
      '--group',
      'bk:typo',
      '--out',
      file,
    ]);
    expect(backup.code).toBe(1);
    expect(backup.stderr).toMatch(/bk:typo/);
    await expect(stat(file)).rejects.toThrow(/ENOENT/);
    await rm(dir, { recursive: true, force: true });
  });

  it('recovery resume before any restore says the metadata is missing and to restore it (docs/operations.md#recovery-procedure)', async () => {
    await createGroup(c, 'nr', 2);
    await redis.client().del(`${c.keyPrefix}:{nr:g}:metadata`);
    await waitFor(async () => (await status('nr')).status === 'FAILED_CLOSED', {
      what: 'nr to fail closed',
    });
    const resume = await ctl(c, 'writer', ['recovery', 'nr:g', 'resume', ...AUDITED]);
    expect(resume.code).toBe(1);
    expect(resume.stderr).toMatch(/409 RESUME_REFUSED: the metadata key is missing/);
    expect(resume.stderr).not.toMatch(/clients saw a newer metadataVersion/);
    expect(resume.stderr).toMatch(
      /what to do: .*coordctl restore --group nr:g.*then `coordctl recovery nr:g resume`.*coordctl recovery nr:g recreate --shard-count <n>/,
    );
  });

  it('recovery resume refuses --shard-count, which only recreate takes, and sends nothing (docs/cli.md#recovery)', async () => {
    await createGroup(c, 'rs', 2);
    const backup = await coordctl(['backup', ...storeFlags(), '--group', 'rs:g']);
    await redis.client().del(`${c.keyPrefix}:{rs:g}:metadata`);
    await waitFor(async () => (await status('rs')).status === 'FAILED_CLOSED', {
      what: 'rs to fail closed',
    });
    const dir = await mkdtemp(join(tmpdir(), 'coordctl-backup-'));
    await writeFile(join(dir, 'backup.json'), backup.stdout);
    const restore = await coordctl(['restore', ...storeFlags(), '--in', join(dir, 'backup.json')]);
    expect(restore.code).toBe(0);
    await rm(dir, { recursive: true, force: true });
    const resume = await ctl(c, 'writer', [
      'recovery',
      'rs:g',
      'resume',
      '--shard-count',
      '8',
      ...AUDITED,
    ]);
    expect(resume.code).toBe(1);
    expect(resume.stdout).toBe('');
    expect(resume.stderr).toMatch(/--shard-count is for recreate/);
    expect((await status('rs')).status).toBe('FAILED_CLOSED');
  });

  it('restore of a backup that holds a group twice restores nothing (docs/cli.md#backup-and-restore-straight-from-redis)', async () => {
    await createGroup(c, 'tw', 2);
    const backup = await coordctl(['backup', ...storeFlags(), '--group', 'tw:g']);
    const parsed = JSON.parse(backup.stdout) as {
      groups: Array<{ fields: Record<string, string> }>;
    };
    const older = structuredClone(parsed.groups[0]!);
    older.fields.metadataVersion = '0';
    parsed.groups.push(older);
    const dir = await mkdtemp(join(tmpdir(), 'coordctl-backup-'));
    const file = join(dir, 'backup.json');
    await writeFile(file, JSON.stringify(parsed));
    const into = ['--url', redis.url, '--key-prefix', `${c.keyPrefix}-twice`];
    const restore = await coordctl(['restore', ...into, '--in', file]);
    expect(await redis.client().keys(`${c.keyPrefix}-twice*`)).toEqual([]);
    expect(restore.code).toBe(1);
    expect(restore.stderr).toMatch(/tw:g is in the backup twice; nothing restored/);
    await rm(dir, { recursive: true, force: true });
  });

  it('restore without --key-prefix of a backup taken under another prefix writes nothing and names it (docs/cli.md#backup-and-restore-straight-from-redis)', async () => {
    await createGroup(c, 'kp', 2);
    const dir = await mkdtemp(join(tmpdir(), 'coordctl-backup-'));
    const file = join(dir, 'backup.json');
    expect(
      (await coordctl(['backup', ...storeFlags(), '--group', 'kp:g', '--out', file])).code,
    ).toBe(0);
    const restore = await coordctl(['restore', '--url', redis.url, '--in', file]);
    expect(await redis.client().keys('redis-stream:coord*')).toEqual([]);
    expect(restore.code).toBe(1);
    expect(restore.stderr).toContain(
      `the backup was taken under key prefix ${c.keyPrefix}, not redis-stream:coord; nothing restored`,
    );
    // named explicitly, another prefix is taken (with a note)
    const elsewhere = `${c.keyPrefix}-copy`;
    const copy = await coordctl([
      'restore',
      '--url',
      redis.url,
      '--key-prefix',
      elsewhere,
      '--in',
      file,
    ]);
    expect(copy.code).toBe(0);
    expect(await redis.client().exists(`${elsewhere}:{kp:g}:metadata`)).toBe(1);
    await rm(dir, { recursive: true, force: true });
  });

  it('backup with a group named twice holds it once, and restores (docs/cli.md#backup-and-restore-straight-from-redis)', async () => {
    await createGroup(c, 'nt', 2);
    const dir = await mkdtemp(join(tmpdir(), 'coordctl-backup-'));
    const file = join(dir, 'backup.json');
    const backup = await coordctl([
      'backup',
      ...storeFlags(),
      '--group',
      'nt:g',
      '--group',
      'nt:g',
      '--out',
      file,
    ]);
    expect(backup.code).toBe(0);
    const held = JSON.parse(await readFile(file, 'utf8')) as { groups: unknown[] };
    expect(held.groups).toHaveLength(1);
    const into = ['--url', redis.url, '--key-prefix', `${c.keyPrefix}-once`];
    expect((await coordctl(['restore', ...into, '--in', file])).code).toBe(0);
    await rm(dir, { recursive: true, force: true });
  });

  it('backup --out over an existing file others may read leaves it 0600 (docs/operations.md#durability-controls)', async () => {
    await createGroup(c, 'ow', 2);
    const dir = await mkdtemp(join(tmpdir(), 'coordctl-backup-'));
    const file = join(dir, 'backup.json');
    await writeFile(file, 'an older backup\n', { mode: 0o644 });
    await chmod(file, 0o644);
    const backup = await coordctl(['backup', ...storeFlags(), '--group', 'ow:g', '--out', file]);
    expect(backup.code).toBe(0);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({
      groups: [{ streamPrefix: 'ow' }],
    });
    await rm(dir, { recursive: true, force: true });
  });

  it('restore of a group the backup does not hold names the groups it does', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'coordctl-backup-'));
    const file = join(dir, 'backup.json');
    await writeFile(
      file,
      JSON.stringify({
        format: 'stream-coordinator-metadata-backup',
        version: 1,
        keyPrefix: c.keyPrefix,
        createdAt: '',
        groups: [],
      }),
    );
    const { code, stderr } = await coordctl([
      'restore',
      ...storeFlags(),
      '--in',
      file,
      '--group',
      'x:g',
    ]);
    expect(code).toBe(1);
    expect(stderr).toMatch(/not in the backup: x:g\n.*it holds no groups/);
    await rm(dir, { recursive: true, force: true });
  });
});

describe('coordctl restore of a group that moved on since the backup (redis)', () => {
  let redis: RedisServerHandle;
  const replicas: TestCoordinator[] = [];
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => {
    for (const r of replicas) await r.close();
    await redis.stop();
  });

  it('never puts the fence back: after restore and resume it is above every fence issued before (docs/operations.md#durability-controls)', async () => {
    const keyPrefix = randomKeyPrefix();
    const key = `${keyPrefix}:{mv:g}:metadata`;
    const fence = async () => BigInt((await redis.client().hget(key, 'fence')) ?? '0');
    const first = await startReplicaOn(redis.url, keyPrefix, 'r1');
    replicas.push(first);
    await createGroup(first, 'mv', 2);
    await waitFor(async () => (await fence()) > 0n, { what: 'mv to be claimed' });
    const dir = await mkdtemp(join(tmpdir(), 'coordctl-backup-'));
    const file = join(dir, 'backup.json');
    const storeFlags = ['--url', redis.url, '--key-prefix', keyPrefix];
    expect((await coordctl(['backup', ...storeFlags, '--out', file])).code).toBe(0);
    const backedUp = await fence();

    // The group moves on: another replica claims it, with the next fence.
    await first.close();
    replicas.pop();
    const second = await startReplicaOn(redis.url, keyPrefix, 'r2');
    replicas.push(second);
    await waitFor(
      async () => {
        await second.call('GET', '/coord/v1/routing/streams/mv/groups/g', { user: 'producer' });
        return (await fence()) > backedUp;
      },
      { what: 'r2 to claim mv' },
    );
    const issued = await fence();

    const restore = await coordctl(['restore', ...storeFlags, '--in', file]);
    expect(restore.code).toBe(0);
    const status = async () =>
      (
        JSON.parse((await ctl(second, 'reader', ['describe', 'mv:g', '-o', 'json'])).stdout) as {
          status: string;
        }
      ).status;
    await waitFor(async () => (await status()) === 'FAILED_CLOSED', {
      what: 'mv to fail closed',
    });
    const resume = await ctl(second, 'writer', ['recovery', 'mv:g', 'resume', ...AUDITED]);
    expect(resume.code).toBe(0);
    expect(await fence()).toBeGreaterThan(issued);
    await rm(dir, { recursive: true, force: true });
  });
});
