import { readFileSync } from 'node:fs';
import { frameKey, type Profile, type ProfileNode } from './cpu-profile.js';

/*
 * `npx tsx bench/long-turns.ts <turns file> <profile.cpuprofile> [--min-ms N]`: what the long
 * turns of a coordinator's event loop were made of. The turns file is what `BENCH_LOOP_TURNS`
 * wrote (bench/loop-turns.mjs); the profile one that `--profile` wrote for the same run (a phase
 * of it). Both are on the monotonic clock, so the profile's samples are cut to the turns of at
 * least N ms (8 by default) that fell within the profile, and each such turn is put in one kind:
 *   - gc: a GC pause of over 1 ms fell in it (its kind and length are in the turns file);
 *   - off-core: the samples cover under 40 % of it: the process waited for a core;
 *   - batch steps: 40 % of it or more ran a group's batch (the committer, the chart);
 *   - other: the rest (answers written, requests parsed, timers).
 * Then the top self-time functions over the turns that are not gc. Another group's steady
 * heartbeat waits for the turn it arrives in: a window's p99 follows how many long turns of each
 * kind it held (docs/architecture.md#fairness-between-groups).
 */

interface Turn {
  readonly start: number;
  readonly end: number;
  readonly ms: number;
  readonly gc: boolean;
  sampledMs: number;
  stepsMs: number;
}

const argv = process.argv.slice(2);
const minIndex = argv.indexOf('--min-ms');
const minMs = minIndex >= 0 ? Number(argv[minIndex + 1]) : 8;
const [turnsFile, profileFile] = argv.filter(
  (a, i) => a !== '--min-ms' && argv[i - 1] !== '--min-ms',
);
if (!turnsFile || !profileFile) {
  console.error(
    'usage: npx tsx bench/long-turns.ts <turns file> <profile.cpuprofile> [--min-ms N]',
  );
  process.exit(2);
}

const profile = JSON.parse(readFileSync(profileFile, 'utf8')) as Profile;
const turnsText = readFileSync(turnsFile, 'utf8');
// Each process appends its turns of at least BENCH_LONG_TURN_MS as it was set for it: below
// the largest of those, some process's shorter turns are missing.
const listedFrom = [...turnsText.matchAll(/^turns over ([\d.]+) ms/gm)].map((m) => Number(m[1]));
const listedFromMs = listedFrom.length > 0 ? Math.max(...listedFrom) : 0;
if (minMs < listedFromMs)
  console.error(
    `${turnsFile} lists a process's turns only from ${listedFromMs} ms: run the benchmark with ` +
      `BENCH_LONG_TURN_MS=${minMs} to see shorter ones`,
  );
// `<start µs> <end µs> <ms> cpu <ms>[ gc <kind> <ms>, ...]`, one line per long turn.
const turns: Turn[] = turnsText
  .split('\n')
  .map((line) => /^(\d+) (\d+) ([\d.]+) cpu [\d.]+( gc .*)?$/.exec(line))
  .filter((m): m is RegExpExecArray => m !== null)
  .map((m) => ({
    start: Number(m[1]),
    end: Number(m[2]),
    ms: Number(m[3]),
    gc: m[4] !== undefined,
    sampledMs: 0,
    stepsMs: 0,
  }))
  .filter((t) => t.ms >= minMs && t.start >= profile.startTime && t.end <= profile.endTime)
  .sort((a, b) => a.start - b.start);

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const node of profile.nodes)
  for (const child of node.children ?? []) parent.set(child, node.id);
const isSteps = (node: ProfileNode) =>
  node.callFrame.functionName === 'runSteps' || node.callFrame.url.includes('/actors/committer');

const self = new Map<string, number>();
let at = profile.startTime;
let next = 0;
profile.samples.forEach((id, i) => {
  at += profile.timeDeltas[i] ?? 0;
  while (next < turns.length && turns[next]!.end < at) next++;
  const turn = turns[next];
  if (!turn || at < turn.start) return;
  const ms = (profile.timeDeltas[i + 1] ?? 0) / 1000;
  const leaf = byId.get(id);
  if (!leaf || leaf.callFrame.functionName === '(idle)') return;
  turn.sampledMs += ms;
  let steps = false;
  for (let n: number | undefined = id; n !== undefined && !steps; n = parent.get(n))
    steps = isSteps(byId.get(n)!);
  if (steps) turn.stepsMs += ms;
  if (turn.gc) return;
  const key = frameKey(leaf.callFrame);
  self.set(key, (self.get(key) ?? 0) + ms);
});

const kindOf = (t: Turn) =>
  t.gc
    ? 'gc'
    : t.sampledMs < 0.4 * t.ms
      ? 'off-core'
      : t.stepsMs >= 0.4 * t.ms
        ? 'batch steps'
        : 'other';
const kinds = new Map<string, { n: number; ms: number }>();
for (const turn of turns) {
  const name = kindOf(turn);
  const kind = kinds.get(name) ?? { n: 0, ms: 0 };
  kind.n++;
  kind.ms += turn.ms;
  kinds.set(name, kind);
}
const spanS = (profile.endTime - profile.startTime) / 1e6;
console.log(
  `${profileFile}: ${spanS.toFixed(1)} s profiled, ${turns.length} turns of ${minMs} ms or more (${(turns.length / spanS).toFixed(1)}/s)`,
);
for (const [kind, { n, ms }] of [...kinds].sort((a, b) => b[1].n - a[1].n))
  console.log(
    `  ${String(n).padStart(4)} ${kind.padEnd(12)} ${(n / spanS).toFixed(1)}/s, average ${(ms / n).toFixed(1)} ms`,
  );
const sampled = [...self.values()].reduce((a, b) => a + b, 0);
console.log('  top self time in the turns that are not gc:');
for (const [key, ms] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 20))
  console.log(`  ${((100 * ms) / sampled).toFixed(1).padStart(5)} %  ${key}`);
