import { existsSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { benchContext, type Benchmark } from './context.js';
import { handoff, replicaKill } from './handoff.js';
import { capacity } from './capacity.js';
import { capacityEmbedded, scaling } from './in-process.js';
import { joins, joinsApart } from './joins.js';
import { lag } from './lag.js';
import { routing } from './routing.js';
import { cleanup, here, type Row } from './support.js';
import { throughput } from './throughput.js';

/*
 * `npm run bench [-- <name>...] [--quick] [--profile <dir>]`: the benchmarks of the performance
 * rules (docs/architecture.md#performance-rules), each against a baseline measured in the same
 * run, then one table. See docs/BENCHMARKS.md. Needs redis-server and wrk on PATH and a built dist/
 * (`npm run bench` builds first); only 127.0.0.1 is used; every child process is stopped at the
 * end.
 */

const BENCHMARKS: Record<string, Benchmark> = {
  throughput,
  scaling,
  joins,
  'joins-apart': joinsApart,
  capacity,
  'capacity-embedded': capacityEmbedded,
  handoff,
  replica: replicaKill,
  routing,
  lag,
};
/**
 * The whole run must end within this; past it everything is stopped. A full run takes 12 to 20
 * minutes on two shared cores (building 10,000 groups in-process alone took 330 to 520 s).
 */
const HARD_LIMIT_MS = 30 * 60_000;

const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: { quick: { type: 'boolean', default: false }, profile: { type: 'string' } },
});
const names = positionals.length > 0 ? positionals : Object.keys(BENCHMARKS);
for (const name of names)
  if (!(name in BENCHMARKS))
    throw new Error(`unknown benchmark ${name}; known: ${Object.keys(BENCHMARKS).join(', ')}`);

function table(rows: readonly Row[]): string {
  const head: Row = {
    bench: 'bench',
    metric: 'metric',
    value: 'value',
    baseline: 'baseline (same run)',
    ratio: 'ratio',
    goal: 'goal',
    verdict: 'verdict',
  };
  const cols = Object.keys(head) as Array<keyof Row>;
  const width = (c: keyof Row) => Math.max(...[head, ...rows].map((r) => r[c].length));
  const line = (r: Row) =>
    cols
      .map((c) =>
        c === 'value' || c === 'ratio' ? r[c].padStart(width(c)) : r[c].padEnd(width(c)),
      )
      .join('  ')
      .trimEnd();
  return [line(head), cols.map((c) => '-'.repeat(width(c))).join('  '), ...rows.map(line)].join(
    '\n',
  );
}

async function main(): Promise<number> {
  const startedAt = Date.now();
  const cpu = cpus();
  console.log('stream-coordinator benchmarks (bench/run.ts)');
  console.log(
    `machine: ${cpu.length} cores (${cpu[0]?.model.trim() ?? '?'}), load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}, Node ${process.version}; generators, servers and redis-server share these cores`,
  );
  if (!existsSync(here('../dist/server.js')))
    throw new Error('dist/ is missing: run `npm run build` first (`npm run bench` does)');
  const ctx = benchContext({ quick: args.quick, profileDir: args.profile ?? null });
  const rows: Row[] = [];
  let failed = false;
  for (const name of names) {
    const began = Date.now();
    console.log(`\n== ${name}`);
    try {
      rows.push(...(await (BENCHMARKS[name] as Benchmark)(ctx)));
    } catch (error) {
      failed = true;
      const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
      console.error(`${name} failed: ${message}`);
      rows.push({
        bench: name,
        metric: 'FAILED',
        value: '-',
        baseline: '-',
        ratio: '-',
        goal: '-',
        verdict: 'FAILED',
      });
    } finally {
      await cleanup();
    }
    console.log(`   (${name}: ${((Date.now() - began) / 1000).toFixed(0)} s)`);
  }
  console.log(
    `\nresults (load average now ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')})\n`,
  );
  console.log(table(rows));
  console.log(`\ndone in ${((Date.now() - startedAt) / 1000).toFixed(0)} s`);
  return failed ? 1 : 0;
}

const hardLimit = setTimeout(() => {
  console.error(`bench: still running after ${HARD_LIMIT_MS / 60_000} min, stopping`);
  void cleanup().finally(() => process.exit(1));
}, HARD_LIMIT_MS);
process.once('SIGINT', () => void cleanup().finally(() => process.exit(130)));
let exitCode = 1;
try {
  exitCode = await main();
} catch (error) {
  console.error(
    `bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
  );
} finally {
  clearTimeout(hardLimit);
  await cleanup();
}
process.exit(exitCode);
