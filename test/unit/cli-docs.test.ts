import { readdirSync, readFileSync } from 'node:fs';
import { type Command, CommanderError } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/program.js';
import { EXIT } from '../../src/cli/cli-error.js';

const doc = readFileSync(new URL('../../docs/cli.md', import.meta.url), 'utf8');

describe('docs/cli.md documents coordctl', () => {
  const commands = buildProgram().commands.flatMap((c) =>
    c.commands.length ? c.commands.map((sub) => `${c.name()} ${sub.name()}`) : [c.name()],
  );

  it.each(commands)('coordctl %s', (name) => {
    expect(doc).toContain(`coordctl ${name}`);
  });

  it('every option of every command', () => {
    const missing = buildProgram()
      .commands.flatMap((c) => [c, ...c.commands])
      .flatMap((command) => command.options.map((o) => o.long ?? ''))
      .filter((long) => !new RegExp(`${long}\\b`).test(doc));
    expect(missing).toEqual([]);
  });

  it('every exit code', () => {
    for (const code of Object.values(EXIT))
      expect(doc).toMatch(new RegExp(`^\\| ${code} \\|`, 'm'));
  });
});

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
/** The pages that show coordctl command lines. */
const pages = [
  'README.md',
  ...readdirSync(new URL('../../docs/', import.meta.url))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];

/** The `coordctl` command lines of a page's fenced code blocks, continuation lines joined. */
function examples(markdown: string): string[] {
  const found: string[] = [];
  let fenced = false;
  let pending = '';
  for (const raw of markdown.split('\n')) {
    if (/^\s*```/.test(raw)) {
      fenced = !fenced;
      continue;
    }
    if (!fenced) continue;
    const line = pending + raw.trim();
    pending = line.endsWith('\\') ? line.slice(0, -1) + ' ' : '';
    if (pending) continue;
    const at = /(?:^|[|(]\s*|npx\s+)coordctl\s+(.*)$/.exec(line);
    // `coordctl:` starts an error message; `…` stands for arguments left out.
    if (at && !line.startsWith('coordctl:') && !line.includes('…'))
      found.push(at[1]!.replace(/\s+#\s.*$/, ''));
  }
  return found;
}

/** Shell words up to the first comment, pipe, redirection or list operator; quotes removed. */
function words(command: string): string[] {
  const out: string[] = [];
  for (const m of command.matchAll(/"([^"]*)"|'([^']*)'|([^\s"']+)/g)) {
    const bare = m[3];
    if (bare !== undefined && /^(?:#|\||\|\||&&|;|>|\))/.test(bare)) break;
    out.push(m[1] ?? m[2] ?? bare!);
  }
  return out;
}

/** A synopsis's placeholders as values, its optional parts as given. */
function instantiate(args: string[]): string[] {
  return args
    .filter((arg) => arg !== '[migrationId]')
    .map((arg) =>
      arg
        .replace(/^\[+|\]+$/g, '')
        .replace('<sp:cg>', 'orders:billing')
        .replace('<shardCount>', '8')
        .replaceAll('<id>', '1700000000000-0'),
    );
}

/** Parses `args` as coordctl would, stopping before any command runs. */
function parse(args: string[]): string | null {
  const program = buildProgram();
  const silence = (command: Command) => {
    command.configureOutput({ writeOut: () => {}, writeErr: () => {} });
    command.hook('preAction', () => {
      throw new Error('parsed');
    });
    command.commands.forEach(silence);
  };
  silence(program);
  try {
    program.parse(args, { from: 'user' });
  } catch (error) {
    if (error instanceof CommanderError) {
      return error.code === 'commander.helpDisplayed' ? null : error.message;
    }
    if (error instanceof Error && error.message === 'parsed') return null;
    return String(error);
  }
  return null;
}

/**
 * Every coordctl line a reader may copy parses: its options exist and take the values shown, and
 * no mandatory option is missing (COORDCTL_REQUESTED_BY unset, as on a fresh shell).
 */
describe('coordctl examples in the docs run as written', () => {
  const cases = pages.flatMap((page) => examples(read(page)).map((line) => [page, line] as const));

  it('finds the examples', () => {
    expect(cases.length).toBeGreaterThan(30);
  });

  it.each(cases)('%s: coordctl %s', (_, line) => {
    const saved = process.env.COORDCTL_REQUESTED_BY;
    delete process.env.COORDCTL_REQUESTED_BY;
    try {
      expect(parse(instantiate(words(line)))).toBeNull();
    } finally {
      if (saved !== undefined) process.env.COORDCTL_REQUESTED_BY = saved;
    }
  });
});
