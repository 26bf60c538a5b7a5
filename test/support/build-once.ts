/**
 * Vitest global setup: makes sure dist/ is built from the current src/ before any test runs, so
 * tests can start the compiled coordctl (about a third of the start-up cost of running it from
 * source through tsx, which adds up over the CLI tests on a busy machine). Rebuilds only when a
 * file under src/ is newer than the last build's stamp (`dist/.built-at`, written by the build).
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    const mtime = entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs;
    newest = Math.max(newest, mtime);
  }
  return newest;
}

function builtAt(): number {
  try {
    return statSync('dist/.built-at').mtimeMs;
  } catch {
    return 0;
  }
}

export default function setup(): void {
  if (newestMtime('src') <= builtAt()) return;
  execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json'], {
    stdio: 'inherit',
  });
  execFileSync(process.execPath, ['scripts/copy-assets.js'], { stdio: 'inherit' });
}
