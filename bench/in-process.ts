import type { BenchContext } from './context.js';
import { fmt, median, runToResult, verdict, type Row } from './support.js';

/*
 * The in-process benchmarks (bench/host-child.mjs: the compiled GroupHost with a MemoryStore,
 * no HTTP, in a child process of its own), each case against a small case measured in the same
 * process with interleaved rounds.
 */

/** Profiles of the measured rounds only (bench/host-child.mjs), not of building the state. */
function profileEnv(ctx: BenchContext, bench: string): Record<string, string> {
  const dir = ctx.profileDir(bench);
  return dir ? { BENCH_PROFILE_DIR: dir } : {};
}

interface Rates {
  readonly rates: { small: number[]; large: number[] };
}

/** Per-heartbeat cost at 1,024 shards / 2,000 members vs 64 shards / 32 members (goal ≤ 1.5 ×). */
export async function scaling(ctx: BenchContext): Promise<Row[]> {
  const rounds = ctx.quick ? 3 : 5;
  ctx.log(`  in-process GroupHost.heartbeat, one at a time, ${rounds} interleaved rounds of 1.5 s`);
  const result = await runToResult<Rates & { buildMs: { large: number } }>(
    'host-child.mjs',
    ['scaling', String(rounds)],
    [],
    profileEnv(ctx, 'scaling'),
  );
  const smallUs = 1e6 / median(result.rates.small);
  const largeUs = 1e6 / median(result.rates.large);
  const ratio = largeUs / smallUs;
  return [
    {
      bench: 'scaling',
      metric: 'µs per steady heartbeat, 1,024 shards / 2,000 members',
      value: fmt(largeUs, 1),
      baseline: `64/32: ${fmt(smallUs, 1)}`,
      ratio: `${ratio.toFixed(2)} x`,
      goal: '<= 1.5 x',
      verdict: verdict(ratio <= 1.5),
    },
  ];
}

/**
 * The capacity case in the embedded mode's shape (informational, no goal verdict: the goal is
 * measured on the replica as deployed, bench/capacity.ts): one GroupHost with a MemoryStore,
 * which holds every group's data in the same heap, no HTTP, heartbeats called directly. Its ratio
 * compares a heartbeat with all state in cache (10 members cycled) against one with 100,000
 * members cycled (cache misses): the cost of memory latency at that size, not of HTTP serving.
 */
export async function capacityEmbedded(ctx: BenchContext): Promise<Row[]> {
  const rounds = ctx.quick ? 3 : 5;
  const groups = ctx.quick ? 2_000 : 10_000;
  ctx.log(
    `  embedded mode, in-process (GroupHost + MemoryStore, no HTTP): ${groups.toLocaleString('en-US')} groups ` +
      `x 10 members x 16 shards vs 1 group of that shape; 64 heartbeats in flight; ${rounds} interleaved rounds of 1.5 s`,
  );
  const result = await runToResult<
    Rates & {
      rss: { start: number; small: number; large: number; end: number };
      heapUsedMiB: number;
      buildMs: number;
      members: number;
    }
  >(
    'host-child.mjs',
    ['capacity', String(rounds), String(groups)],
    ['--expose-gc'],
    profileEnv(ctx, 'capacity'),
  );
  const small = median(result.rates.small);
  const large = median(result.rates.large);
  const rssMiB = Math.max(result.rss.large, result.rss.end);
  const label = `${groups.toLocaleString('en-US')} groups / ${result.members.toLocaleString('en-US')} members`;
  return [
    {
      bench: 'capacity',
      metric: `embedded (MemoryStore, in-process): RSS MiB, ${label}`,
      value: fmt(rssMiB),
      baseline: `1 group: ${fmt(result.rss.small)}`,
      ratio: '-',
      goal: '- (info)',
      verdict: '-',
    },
    {
      bench: 'capacity',
      metric: 'embedded: heap used MiB after gc at that size',
      value: fmt(result.heapUsedMiB),
      baseline: '-',
      ratio: '-',
      goal: '- (info)',
      verdict: '-',
    },
    {
      bench: 'capacity',
      metric: 'embedded: direct heartbeats/s at that size, no HTTP',
      value: fmt(large),
      baseline: `1 group: ${fmt(small)}`,
      ratio: `${(large / small).toFixed(2)} x`,
      goal: '- (info)',
      verdict: '-',
    },
    {
      bench: 'capacity',
      metric: 'embedded: building that state in-process, s',
      value: fmt(result.buildMs / 1000, 1),
      baseline: '-',
      ratio: '-',
      goal: '-',
      verdict: '-',
    },
  ];
}
