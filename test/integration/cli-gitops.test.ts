import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { coordctl } from '../support/cli.js';
import { CHANGE, useCoordinator, type TestCoordinator } from '../support/coordinator.js';

interface AuditRecord {
  operation: string;
  status: number;
  principal: string;
  requestedBy: string;
  reason: string;
  streamPrefix: string;
}

describe('coordctl plan -f / apply -f (GitOps)', () => {
  let c: TestCoordinator;
  let dir: string;
  useCoordinator({ store: 'memory' }, (coordinator) => (c = coordinator));
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'coordctl-gitops-'));
  });
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  /** Writes desired.yaml with these groups (`[streamPrefix, shardCount]`, consumer group `g`). */
  async function desired(groups: Array<[string, number]>): Promise<string> {
    const file = join(dir, 'desired.yaml');
    const lines = groups.map(
      ([sp, n]) => `  - streamPrefix: ${sp}\n    consumerGroup: g\n    shardCount: ${n}`,
    );
    await writeFile(
      file,
      `requestedBy: platform-gitops\nreason: "quarterly capacity review"\ngroups:\n${lines.join('\n') || '  []'}\n`,
    );
    return file;
  }
  const plan = (file: string, ...extra: string[]) =>
    coordctl(['plan', '-f', file, ...extra], {
      env: { COORDCTL_URL: c.url, COORDCTL_TOKEN: c.token('reader') },
    });
  const apply = (file: string, user = 'admin', ...extra: string[]) =>
    coordctl(['apply', '-f', file, ...extra], {
      env: { COORDCTL_URL: c.url, COORDCTL_TOKEN: c.token(user) },
    });
  const audit = async () =>
    (
      (await (
        await c.call('GET', '/coord/v1/monitoring/audit?limit=1000', { user: 'reader' })
      ).json()) as { records: AuditRecord[] }
    ).records;
  const shardCount = async (sp: string) => {
    const res = await c.call('GET', `/coord/v1/monitoring/streams/${sp}/groups/g`, {
      user: 'reader',
    });
    return res.status === 404 ? null : ((await res.json()) as { shardCount: number }).shardCount;
  };

  it('apply --force without --prune is a usage error: exit 1, nothing sent', async () => {
    const file = await desired([['fo', 2]]);
    const run = await apply(file, 'admin', '--force');
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/--force only takes effect with --prune/);
    expect(await shardCount('fo')).toBeNull();
  });

  it('create: plan exits 2 listing the creates (READ token); apply makes them, audited with the file’s requestedBy/reason', async () => {
    const file = await desired([
      ['go-a', 2],
      ['go-b', 3],
    ]);
    const planned = await plan(file);
    expect(planned.code).toBe(2);
    expect(planned.stdout).toContain(
      '+ create go-a:g with 2 shards\n+ create go-b:g with 3 shards\n',
    );
    expect(planned.stdout).toMatch(/plan: 2 to create, 0 to scale, 0 to delete, 0 unchanged/);
    expect(await shardCount('go-a')).toBeNull(); // plan changes nothing

    const applied = await apply(file);
    expect(applied.code).toBe(0);
    expect(applied.stdout).toBe('created go-a:g: 2 shards\ncreated go-b:g: 3 shards\n');
    expect([await shardCount('go-a'), await shardCount('go-b')]).toEqual([2, 3]);
    const records = (await audit()).filter((r) => r.streamPrefix?.startsWith('go-'));
    expect(
      records.map((r) => [r.operation, r.status, r.principal, r.requestedBy, r.reason]),
    ).toEqual([
      ['putGroup', 201, 'admin', 'platform-gitops', 'quarterly capacity review'],
      ['putGroup', 201, 'admin', 'platform-gitops', 'quarterly capacity review'],
    ]);
  });

  it('no-op: plan exits 0; apply again changes nothing and writes no audit record', async () => {
    const file = await desired([
      ['go-a', 2],
      ['go-b', 3],
    ]);
    const planned = await plan(file);
    expect(planned.code).toBe(0);
    expect(planned.stdout).toMatch(
      /plan: 0 to create, 0 to scale, 0 to delete, 2 unchanged, 0 not in the file/,
    );
    const before = (await audit()).length;
    const applied = await apply(file);
    expect(applied).toMatchObject({ code: 0, stdout: '' });
    expect(applied.stderr).toMatch(/nothing to change/);
    expect((await audit()).length).toBe(before);
  });

  it('change count: plan shows the scale; apply starts the migration', async () => {
    const file = await desired([
      ['go-a', 2],
      ['go-b', 5],
    ]);
    const planned = await plan(file, '-o', 'json');
    expect(planned.code).toBe(2);
    expect(JSON.parse(planned.stdout)).toMatchObject({
      changes: [
        { action: 'scale', fromShardCount: 3, group: { streamPrefix: 'go-b', shardCount: 5 } },
      ],
    });
    const applied = await apply(file);
    expect(applied.code).toBe(0);
    expect(applied.stdout).toMatch(
      /^scaling go-b:g from 3 to 5 shards: migration [0-9a-f-]{36}\n$/,
    );
    expect(await shardCount('go-b')).toBe(5);
    expect((await plan(file)).code).toBe(0);
  });

  it('a group missing from the file is reported and kept; only --prune deletes it', async () => {
    const file = await desired([['go-b', 5]]);
    const planned = await plan(file);
    expect(planned.code).toBe(0); // keeping it is not a change
    expect(planned.stdout).toContain(
      `! keep   go-a:g (2 shards): not in ${file}; only --prune deletes it`,
    );
    const applied = await apply(file);
    expect(applied.code).toBe(0);
    expect(applied.stderr).toContain(`kept go-a:g: not in ${file}; only --prune deletes it`);
    expect(await shardCount('go-a')).toBe(2);

    const prunePlan = await plan(file, '--prune');
    expect(prunePlan.code).toBe(2);
    expect(prunePlan.stdout).toMatch(/^- delete go-a:g \(2 shards; not in .*, --prune\)$/m);
    const pruned = await apply(file, 'admin', '--prune');
    expect(pruned).toMatchObject({ code: 0, stdout: 'deleted go-a:g\n' });
    expect(await shardCount('go-a')).toBeNull();
    const deleted = (await audit()).find((r) => r.operation === 'deleteGroup');
    expect(deleted).toMatchObject({ status: 204, requestedBy: 'platform-gitops' });
  });

  it('a WRITE-only token: apply sends the desired state of every group, idempotently; plan needs READ', async () => {
    const file = await desired([
      ['go-b', 5],
      ['go-c', 1],
    ]);
    const applied = await apply(file, 'writer');
    expect(applied.code).toBe(0);
    expect(applied.stderr).toMatch(/no READ role/);
    expect(applied.stdout).toBe('ensured go-b:g: 5 shards\nensured go-c:g: 1 shard\n');
    expect(await shardCount('go-c')).toBe(1);
    const puts = (await audit()).filter((r) => r.operation === 'putGroup').slice(0, 2);
    expect(puts.map((r) => [r.streamPrefix, r.status])).toEqual([
      ['go-c', 201],
      ['go-b', 200],
    ]);
    const prune = await apply(file, 'writer', '--prune');
    expect(prune.code).toBe(1);
    expect(prune.stderr).toMatch(/403 FORBIDDEN/);

    const planned = await coordctl(['plan', '-f', file], {
      env: { COORDCTL_URL: c.url, COORDCTL_TOKEN: c.token('writer') },
    });
    expect(planned.code).toBe(1);
    expect(planned.stderr).toMatch(
      /GET .*\/coord\/v1\/monitoring\/groups\?limit=500 failed: 403 FORBIDDEN/,
    );
  });

  it('an invalid file: exit 1 naming every problem with its path, nothing sent', async () => {
    const file = join(dir, 'bad.yaml');
    await writeFile(
      file,
      'requestedBy: x\ngroups:\n  - {streamPrefix: "bad name", consumerGroup: g, shardCount: 2}\n  - {streamPrefix: ok, consumerGroup: g, shardCount: 0}\n',
    );
    const before = (await audit()).length;
    for (const run of [plan(file), apply(file)]) {
      const { code, stderr } = await run;
      expect(code).toBe(1);
      expect(stderr).toContain(`${file} is not a valid desired-state file`);
      expect(stderr).toMatch(/reason: /);
      expect(stderr).toMatch(/groups\.0\.streamPrefix: must match/);
      expect(stderr).toMatch(/groups\.1\.shardCount: /);
    }
    expect((await audit()).length).toBe(before);
    const missing = await plan(join(dir, 'nope.yaml'));
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/cannot read .*nope\.yaml: ENOENT/);
  });
});

describe('coordctl apply -f: groups sharing a stream prefix', () => {
  let c: TestCoordinator;
  let dir: string;
  useCoordinator({ store: 'memory' }, (coordinator) => (c = coordinator));
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'coordctl-gitops-prefix-'));
  });
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  /** Writes a desired-state file with these groups (`[streamPrefix, consumerGroup, shardCount]`). */
  async function desired(groups: Array<[string, string, number]>): Promise<string> {
    const file = join(dir, 'desired.yaml');
    const lines = groups.map(
      ([sp, cg, n]) => `  - {streamPrefix: ${sp}, consumerGroup: ${cg}, shardCount: ${n}}`,
    );
    await writeFile(
      file,
      `requestedBy: platform-gitops\nreason: "capacity"\ngroups:\n${lines.join('\n')}\n`,
    );
    return file;
  }
  const env = () => ({ COORDCTL_URL: c.url, COORDCTL_TOKEN: c.token('admin') });
  const create = async (sp: string, cg: string, shardCount: number) => {
    const res = await c.call('PUT', `/coord/v1/admin/streams/${sp}/groups/${cg}`, {
      user: 'writer',
      body: { shardCount, ...CHANGE },
    });
    expect(res.status).toBe(201);
  };
  const shardCount = async (sp: string, cg: string) => {
    const res = await c.call('GET', `/coord/v1/monitoring/streams/${sp}/groups/${cg}`, {
      user: 'reader',
    });
    return res.status === 404 ? null : ((await res.json()) as { shardCount: number }).shardCount;
  };

  it('a file that scales a prefix and adds a group on it applies in one run (docs/cli.md#gitops-plan-and-apply)', async () => {
    await create('sp1', 'a', 2);
    await create('sp1', 'b', 2);
    const file = await desired([
      ['sp1', 'a', 4],
      ['sp1', 'b', 4],
      ['sp1', 'c', 4],
    ]);
    const applied = await coordctl(['apply', '-f', file], { env: env() });
    expect(applied.stderr).toBe('');
    expect(applied.code).toBe(0);
    expect(applied.stdout).toMatch(/^created sp1:c: 4 shards$/m);
    // sp1:b was moved by the scale of sp1:a: not "unchanged", as the plan said it would be scaled
    expect(applied.stdout).toMatch(
      /^scaled sp1:b from 2 to 4 shards with sp1:a \(one shard layout per stream prefix\)$/m,
    );
    expect([
      await shardCount('sp1', 'a'),
      await shardCount('sp1', 'b'),
      await shardCount('sp1', 'c'),
    ]).toEqual([4, 4, 4]);
  });
  it('a file that would move a group it does not list is refused by plan and apply; nothing changes (docs/cli.md#gitops-plan-and-apply)', async () => {
    await create('sp2', 'a', 2);
    await create('sp2', 'b', 2);
    const file = await desired([['sp2', 'a', 4]]);
    for (const command of ['plan', 'apply']) {
      const run = await coordctl([command, '-f', file], { env: env() });
      expect(run.code).toBe(1);
      expect(run.stdout).toBe('');
      expect(run.stderr).toContain(
        `sp2:b (2 shards) is not in ${file}, but sp2:a with 4 shards would move it to 4 too`,
      );
    }
    expect([await shardCount('sp2', 'a'), await shardCount('sp2', 'b')]).toEqual([2, 2]);

    const pruned = await coordctl(['plan', '-f', file, '--prune'], { env: env() });
    expect(pruned.code).toBe(2);
    expect(pruned.stdout).toMatch(/^~ scale {2}sp2:a from 2 to 4 shards$/m);
    expect(pruned.stdout).toMatch(/^- delete sp2:b /m);
  });
  it('a shard count no coordinator takes is an error in the file: exit 1, nothing sent (docs/cli.md#gitops-plan-and-apply)', async () => {
    const file = await desired([
      ['hc1', 'a', 2],
      ['hc2', 'a', 2_000_000],
    ]);
    for (const command of ['plan', 'apply']) {
      const run = await coordctl([command, '-f', file], { env: env() });
      expect(run.code).toBe(1);
      expect(run.stderr).toContain(`${file} is not a valid desired-state file`);
      expect(run.stderr).toMatch(/groups\.1\.shardCount: /);
    }
    expect(await shardCount('hc1', 'a')).toBeNull();
  });
  it('a blank requestedBy or reason is an error in the file: exit 1, nothing sent (docs/cli.md#gitops-plan-and-apply)', async () => {
    const file = join(dir, 'blank.yaml');
    await writeFile(
      file,
      'requestedBy: "  "\nreason: " "\ngroups:\n  - {streamPrefix: bl, consumerGroup: a, shardCount: 2}\n',
    );
    for (const command of ['plan', 'apply']) {
      const run = await coordctl([command, '-f', file], { env: env() });
      expect(run.code).toBe(1);
      expect(run.stderr).toContain(`${file} is not a valid desired-state file`);
      expect(run.stderr).toMatch(/requestedBy: /);
      expect(run.stderr).toMatch(/reason: /);
    }
    expect(await shardCount('bl', 'a')).toBeNull();
  });
  it('a create refused for its stream prefix’s shard count says what to do about the prefix, not the group (docs/cli.md#errors)', async () => {
    await create('sm', 'a', 4);
    const file = await desired([['sm', 'new', 6]]);
    // a WRITE-only token cannot read the prefix's groups, so the coordinator refuses the create
    const applied = await coordctl(['apply', '-f', file], {
      env: { COORDCTL_URL: c.url, COORDCTL_TOKEN: c.token('writer') },
    });
    expect(applied.code).toBe(1);
    expect(applied.stderr).toMatch(/409 SHARD_COUNT_MISMATCH/);
    expect(applied.stderr).not.toMatch(/coordctl describe sm:new/);
    expect(applied.stderr).toMatch(
      /what to do: stream prefix sm has 4 shards .*give 4 .*or scale the prefix \(`coordctl scale sm:a <count>`\)/,
    );
  });
});
