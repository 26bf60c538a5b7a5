import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Row } from './support.js';

/** What bench/run.ts hands each benchmark. */
export interface BenchContext {
  /** Fewer rounds (`--quick`), for trying the bench out; the figures of record use the default. */
  readonly quick: boolean;
  log(line: string): void;
  /**
   * Node flags for a coordinator process: `--cpu-prof` into `<profile dir>/<bench>` when the run
   * was started with `--profile <dir>`, else none.
   */
  profileFlags(bench: string): string[];
  /** The directory for the profiles of `bench` (created), or null without `--profile`. */
  profileDir(bench: string): string | null;
}

export type Benchmark = (ctx: BenchContext) => Promise<Row[]>;

export function benchContext(options: { quick: boolean; profileDir: string | null }): BenchContext {
  return {
    quick: options.quick,
    log: (line) => console.log(line),
    profileFlags(bench) {
      const dir = this.profileDir(bench);
      return dir ? ['--cpu-prof', '--cpu-prof-dir', dir] : [];
    },
    profileDir(bench) {
      if (!options.profileDir) return null;
      const dir = join(options.profileDir, bench);
      mkdirSync(dir, { recursive: true });
      return dir;
    },
  };
}
