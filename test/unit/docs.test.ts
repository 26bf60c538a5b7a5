import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { envName, SETTING_NAMES } from '../../src/config/load.js';
import { heartbeatBodySchema, heartbeatReplySchema } from '../../src/http/routes/consumer.js';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
const docs = readdirSync(new URL('../../docs/', import.meta.url))
  .filter((name) => name.endsWith('.md'))
  .map((name) => `docs/${name}`);

/** The README and docs/ are read by people who cloned only this repository. */
describe('docs stand alone', () => {
  it.each(['README.md', ...docs])('%s sends no reader outside the repository', (path) => {
    expect(read(path)).not.toMatch(/\.\.\/shared|DESIGN\.md/);
  });

  it('the README documents every setting with its environment name', () => {
    const readme = read('README.md');
    for (const name of SETTING_NAMES) {
      expect(readme, name).toContain(`\`coordinator.${name}\``);
      expect(readme, name).toContain(`\`${envName(name)}\``);
    }
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

  it.each(['README.md', ...docs])('%s links only to files that exist', (path) => {
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
