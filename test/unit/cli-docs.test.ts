import { readFileSync } from 'node:fs';
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
