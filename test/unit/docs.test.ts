import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parseDuration } from '../../src/config/duration.js';
import { envName, loadSettings, SETTING_NAMES } from '../../src/config/load.js';
import { heartbeatBodySchema, heartbeatReplySchema } from '../../src/http/routes/consumer.js';
import { allRoutes } from '../../src/http/routes/index.js';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
const docs = readdirSync(new URL('../../docs/', import.meta.url))
  .filter((name) => name.endsWith('.md'))
  .map((name) => `docs/${name}`);
/** Every Markdown page a reader of the repository starts from. */
const pages = ['README.md', 'CONTRIBUTING.md', ...docs];

/** The README and docs/ are read by people who cloned only this repository. */
describe('docs stand alone', () => {
  it.each(pages)('%s sends no reader outside the repository', (path) => {
    expect(read(path)).not.toMatch(/\.\.\/shared|DESIGN\.md/);
  });

  it('the README documents every setting with its environment name', () => {
    const readme = read('README.md');
    for (const name of SETTING_NAMES) {
      expect(readme, name).toContain(`\`coordinator.${name}\``);
      expect(readme, name).toContain(`\`${envName(name)}\``);
    }
  });

  it.each(pages)('%s states the defaults the settings have', (path) => {
    const defaults = loadSettings({ env: {} }) as unknown as Record<
      string,
      Record<string, unknown>
    >;
    const wrong: string[] = [];
    for (const { setting, stated } of statedDefaults(read(path))) {
      expect(SETTING_NAMES, setting).toContain(setting);
      const dot = setting.indexOf('.');
      const actual = defaults[setting.slice(0, dot)]![setting.slice(dot + 1)];
      const same =
        String(actual) === stated ||
        (typeof actual === 'number' && parseDuration(stated) === actual);
      if (!same)
        wrong.push(`coordinator.${setting}: ${stated}, but the default is ${String(actual)}`);
    }
    expect(wrong).toEqual([]);
  });

  it('reads the defaults the settings tables state', () => {
    const stated = statedDefaults(read('README.md'));
    expect(stated.length).toBeGreaterThan(30);
    expect(stated).toContainEqual({ setting: 'lease.ttl', stated: '10s' });
    // Placeholders (`<host>-<pid>-<random>`) and prose (`random in embedded mode`) are not values.
    expect(stated.map((s) => s.setting)).not.toContain('replica.id');
    expect(stated.map((s) => s.setting)).not.toContain('security.jwt-secret');
    expect(statedDefaults(read('docs/protocol.md')).length).toBeGreaterThan(5);
  });

  it('the README names each call with the role the route requires', () => {
    const served = new Map(
      allRoutes(loadSettings({ env: {} }), 'test').map((route) => [
        `${route.method.toUpperCase()} ${route.path}`,
        route.roles === null ? null : [...route.roles].sort(),
      ]),
    );
    const documented = documentedCalls(read('README.md'));
    expect(documented.length).toBeGreaterThan(25);
    expect(documented).toContainEqual({
      call: 'POST /coord/v1/admin/streams/:stream/groups/:group/migrations/:migrationId/rollback',
      roles: ['WRITE'],
    });
    const wrong = documented
      .filter(({ call, roles }) => !served.has(call) || !isDeepStrictEqual(served.get(call), roles))
      .map(({ call, roles }) =>
        served.has(call)
          ? `${call}: ${String(roles ?? '–')}, but the route requires ${String(served.get(call) ?? '–')}`
          : `${call}: no such route`,
      );
    expect(wrong).toEqual([]);
  });

  it('docs/protocol.md describes every heartbeat field and every outcome', () => {
    const protocol = read('docs/protocol.md');
    for (const field of Object.keys(heartbeatBodySchema.shape)) {
      expect(protocol, field).toContain(`\`${field}\``);
    }
    for (const field of Object.keys(heartbeatReplySchema.shape)) {
      expect(protocol, field).toContain(`\`${field}\``);
    }
    for (const outcome of heartbeatReplySchema.shape.outcome.options) {
      expect(protocol, outcome).toContain(`**\`${outcome}\`**`);
    }
  });

  it.each(pages)('%s links only to files that exist', (path) => {
    const base = new URL(`../../${path}`, import.meta.url);
    const targets = [...read(path).matchAll(/\]\(([^)\s]+)\)/g)]
      .map((match) => match[1]!.split('#')[0]!)
      .filter((target) => target !== '' && !/^[a-z]+:/i.test(target));
    for (const target of targets) {
      expect(existsSync(new URL(target, base)), `${path} → ${target}`).toBe(true);
    }
  });

  it('docs/protocol.md names every error code the heartbeat machine answers', () => {
    const protocol = read('docs/protocol.md');
    const source = read('src/machines/heartbeat.ts');
    // INTERNAL is a bug's answer, not part of the protocol.
    const codes = [...source.matchAll(/fail\(\s*\w+,\s*'([A-Z_]+)'/g)]
      .map((m) => m[1]!)
      .filter((code) => code !== 'INTERNAL');
    expect(codes).toContain('GROUP_FULL');
    for (const code of codes) expect(protocol, code).toContain(`\`${code}\``);
  });

  it('the README names every COORDCTL_ environment variable coordctl reads', () => {
    const readme = read('README.md');
    const names = new Set<string>();
    for (const file of ['src/cli', 'src/cli/commands'].flatMap((dir) =>
      readdirSync(new URL(`../../${dir}/`, import.meta.url))
        .filter((name) => name.endsWith('.ts'))
        .map((name) => `${dir}/${name}`),
    )) {
      for (const match of read(file).matchAll(/COORDCTL_[A-Z_]+/g)) names.add(match[0]);
    }
    expect(names.size).toBeGreaterThan(0);
    for (const name of names) expect(readme, name).toContain(`\`${name}\``);
  });

  it('the README imports the SDK by the name package.json exports', () => {
    const pkg = JSON.parse(read('package.json')) as { name: string; exports: object };
    expect(Object.keys(pkg.exports)).toContain('./client');
    expect(read('README.md')).toContain(`from '${pkg.name}/client'`);
  });
});

/**
 * The defaults a page's settings tables state: each row of a table with a `default` column whose
 * first cell is a setting, when the default is one literal value (`10s`, `0.15`, `memory`).
 */
export function statedDefaults(markdown: string): { setting: string; stated: string }[] {
  const found: { setting: string; stated: string }[] = [];
  let column = -1;
  let inTable = false;
  for (const line of markdown.split('\n')) {
    if (!line.startsWith('|')) {
      inTable = false;
      continue;
    }
    const cells = line
      .slice(1, line.endsWith('|') ? -1 : undefined)
      .split('|')
      .map((cell) => cell.trim());
    if (!inTable) {
      inTable = true;
      column = cells.indexOf('default');
      continue;
    }
    const setting = /^`coordinator\.([a-z.-]+)`$/.exec(cells[0] ?? '')?.[1];
    const stated = /^`([^`<]+)`$/.exec(cells[column] ?? '')?.[1];
    if (column > 0 && setting !== undefined && stated !== undefined)
      found.push({ setting, stated });
  }
  return found;
}

/**
 * The calls of the README's API table (`| call | role | what |`) as `METHOD /coord/v1/path` with
 * route parameters, and the roles named beside them (`–`: none). A path starting `…` is a
 * group's: the monitoring one for a GET, the admin one otherwise; a method alone (`PUT`/`DELETE
 * /path`) shares the path that follows it, and a path alone the methods before it.
 */
export function documentedCalls(markdown: string): { call: string; roles: string[] | null }[] {
  const found: { call: string; roles: string[] | null }[] = [];
  let inTable = false;
  for (const line of markdown.split('\n')) {
    if (/^\| call \| role \|/.test(line)) inTable = true;
    else if (!line.startsWith('|')) inTable = false;
    if (!inTable) continue;
    const [calls = '', role = ''] = line
      .split('|')
      .slice(1, 3)
      .map((cell) => cell.trim());
    const roles = role === '–' ? null : role.split(' or ').sort();
    let methods: string[] = [];
    let pending: string[] = [];
    for (const [, item] of calls.matchAll(/`([^`]+)`/g)) {
      const [, method, path] = /^(?:([A-Z]+)\b ?)?(.*)$/.exec(item!)!;
      if (method && !path) {
        pending.push(method);
        continue;
      }
      if (method) {
        methods = [...pending, method];
        pending = [];
      }
      if (!path) continue;
      for (const m of methods) {
        const group =
          m === 'GET' ? '/monitoring/streams/{s}/groups/{g}' : '/admin/streams/{s}/groups/{g}';
        const route = path
          .replace(/\?.*$/, '')
          .replace(/^…/, group)
          .replace('{s}', ':stream')
          .replace('{g}', ':group')
          .replace('{id or current}', ':migrationId');
        found.push({ call: `${m} /coord/v1${route}`, roles });
      }
    }
  }
  return found;
}

/**
 * GitHub's anchor of a heading: lower case, everything but letters, digits, spaces, `-` and `_`
 * dropped, each space a `-`.
 */
export function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors of a Markdown file's headings (fenced code left out; repeats get `-1`, `-2`, …). */
export function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fence: string | null = null;
  for (const line of markdown.split('\n')) {
    const marker = /^\s*(```|~~~)/.exec(line)?.[1];
    if (marker) {
      if (fence === null) fence = marker;
      else if (marker === fence) fence = null;
      continue;
    }
    if (fence !== null) continue;
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const base = slug(heading);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

/** Text files of the sources, tests, tools, deployment files and docs, from the root. */
function repositoryFiles(): string[] {
  const text = /\.(?:[cm]?[jt]s|lua|md|json|ya?ml|html|css|sh|txt|conf)$/;
  const files = ['src', 'test', 'bench', 'scripts', 'examples', 'docs', 'deploy', 'bin'].flatMap(
    (dir) =>
      existsSync(new URL(`../../${dir}/`, import.meta.url))
        ? readdirSync(new URL(`../../${dir}/`, import.meta.url), { recursive: true })
            .map((name) => `${dir}/${String(name).replaceAll('\\', '/')}`)
            .filter((path) => text.test(path) && !path.includes('node_modules/'))
        : [],
  );
  const root = [
    'README.md',
    'CONTRIBUTING.md',
    'Dockerfile',
    'docker-compose.yml',
    'package.json',
    'eslint.config.js',
    'vitest.config.ts',
  ];
  return [...root, ...files.sort()];
}

/*
 * What sends a reader to a document the repository does not hold: the design notes and the
 * product specification it was built from (by name or by section number), the directory they
 * sit in beside the clone, and tracker numbers. Built from pieces so this file does not match.
 */
const OUTSIDE: readonly { readonly what: string; readonly pattern: RegExp }[] = [
  { what: 'the design notes', pattern: new RegExp(['DESIGN', '(?:\\.md|\\s*§)'].join('')) },
  { what: 'the specification', pattern: new RegExp(['\\bspec', '\\s*§'].join(''), 'i') },
  { what: 'a section number', pattern: new RegExp(['(?<!RFC \\d+ )', '§\\s*\\d'].join('')) },
  { what: 'a directory beside the clone', pattern: new RegExp(['\\.\\.', '/shared'].join('')) },
  { what: 'an issue number', pattern: new RegExp(['\\bissues?', '\\s+#?\\d+'].join(''), 'i') },
];
/** `#` and a number as a tracker number: not an HTML entity, an anchor or a CSS colour. */
const ISSUE_HASH = new RegExp(['(?<![\\w&#/]|:\\s*)', '#\\d+(?![\\w-])'].join(''));

/** The lines of `text` that cite a document outside the repository, as `line: text`. */
export function outsideReferences(path: string, text: string): string[] {
  const styles = /\.(?:css|html)$/.test(path);
  return text.split('\n').flatMap((line, index) => {
    const found = OUTSIDE.filter(({ pattern }) => pattern.test(line)).map(({ what }) => what);
    if (!styles && ISSUE_HASH.test(line)) found.push('an issue number');
    return found.length === 0 ? [] : [`${index + 1}: ${line.trim()} (${found.join(', ')})`];
  });
}

describe('the repository stands alone', () => {
  const files = repositoryFiles();

  it('finds the files to check', () => {
    expect(files).toContain('src/machines/heartbeat.ts');
    expect(files).toContain('test/unit/docs.test.ts');
    expect(files).toContain('docs/protocol.md');
    expect(files).toContain('deploy/nginx.conf');
    expect(files).toContain('deploy/kubernetes/deployment.yaml');
    expect(files).toContain('Dockerfile');
  });

  it('recognises what it must refuse, and only that', () => {
    const cited = [
      ['DESIGN', '.md'].join(''),
      ['DESIGN', ' §', '5'].join(''),
      ['spec', ' §', '4 rule 2'].join(''),
      ['Spec', ' §', '7.3'].join(''),
      ['(§', '8)'].join(''),
      ['../', 'shared/spec.md'].join(''),
      ['issue', ' 10'].join(''),
      ['see #', '12'].join(''),
    ];
    for (const line of cited) expect(outsideReferences('a.ts', line), line).not.toEqual([]);
    const fine = [
      'RFC 9110 §7.6.1',
      'color: #888;',
      '[the call](#the-call)',
      '&#8212;',
      'docs/protocol.md#the-order-of-the-checks',
      'an issue with the lease',
    ];
    for (const line of fine) expect(outsideReferences('a.ts', line), line).toEqual([]);
  });

  it.each(files)('%s cites only documents of the repository', (path) => {
    expect(outsideReferences(path, read(path))).toEqual([]);
  });
});

describe('anchors point to headings that exist', () => {
  const anchors = new Map<string, Set<string>>();
  const anchorsIn = (path: string): Set<string> => {
    let known = anchors.get(path);
    if (!known) {
      known = existsSync(new URL(`../../${path}`, import.meta.url))
        ? anchorsOf(read(path))
        : new Set();
      anchors.set(path, known);
    }
    return known;
  };

  it('slugs headings as GitHub does', () => {
    expect(slug('Reply (200)')).toBe('reply-200');
    expect(slug("Who may release a member's shards")).toBe('who-may-release-a-members-shards');
    expect(slug('Replicas: handover, failover and a paused owner')).toBe(
      'replicas-handover-failover-and-a-paused-owner',
    );
    expect(slug('The coordinator runs with `--max-semi-space-size=64`')).toBe(
      'the-coordinator-runs-with---max-semi-space-size64',
    );
    expect([...anchorsOf('# A\n```\n# not a heading\n```\n## A\n')]).toEqual(['a', 'a-1']);
  });

  /** `docs/<page>.md#<anchor>` (or the README's, or this guide's) as code and tests cite it. */
  const CITATION = /(?<![\w/.-])((?:docs\/[\w.-]+|README|CONTRIBUTING)\.md)#([\w-]+)/g;
  const citing = repositoryFiles().filter((path) => /^(?:src|test|bench)\//.test(path));

  it('finds citations to check', () => {
    const all = citing.flatMap((path) => [...read(path).matchAll(CITATION)]);
    expect(all.length).toBeGreaterThan(10);
  });

  it.each(citing)('%s cites only headings that exist', (path) => {
    const missing = [...read(path).matchAll(CITATION)]
      .filter(([, file, anchor]) => !anchorsIn(file!).has(anchor!))
      .map(([citation]) => citation);
    expect(missing).toEqual([]);
  });

  it.each(pages)('%s links only to headings that exist', (path) => {
    const missing = [...read(path).matchAll(/\]\(([^)\s#]*)#([^)\s]+)\)/g)]
      .filter(([, target]) => target === '' || target!.endsWith('.md'))
      .filter(([, target, anchor]) => {
        const file = target === '' ? path : normalize(join(dirname(path), target!));
        return !anchorsIn(file.replaceAll('\\', '/')).has(anchor!);
      })
      .map(([link]) => link);
    expect(missing).toEqual([]);
  });
});
