import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { frameKey, type Profile, type ProfileNode } from './cpu-profile.js';

/*
 * `npx tsx bench/profile-summary.ts <dir|file.cpuprofile>... [--top N]`: the top self-time
 * functions of `node --cpu-prof` profiles (as `npm run bench -- --profile <dir>` writes them for
 * the coordinator processes), as a share of busy time (idle left out), and the share per area
 * (src/ folders, node_modules packages, node internals).
 */

const argv = process.argv.slice(2);
const topIndex = argv.indexOf('--top');
const top = topIndex >= 0 ? Number(argv[topIndex + 1]) : 20;
const inputs = argv.filter((a, i) => a !== '--top' && argv[i - 1] !== '--top');

const files = inputs.flatMap((input) =>
  statSync(input).isDirectory()
    ? readdirSync(input)
        .filter((f) => f.endsWith('.cpuprofile'))
        .map((f) => join(input, f))
    : [input],
);

function area(url: string): string {
  if (!url) return '(native / vm)';
  if (url.startsWith('node:')) return 'node internals';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1];
  if (pkg) return pkg;
  const src = /\/dist\/([^/]+)\//.exec(url)?.[1] ?? /\/src\/([^/]+)\//.exec(url)?.[1];
  return src ? `src/${src}` : relative(process.cwd(), url.replace('file://', ''));
}

for (const file of files) {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  // The profiler's own work (a phase profile's start and stop through node:inspector) is left out.
  const profiler = new Set<number>();
  const markProfiler = (node: ProfileNode, inside: boolean) => {
    const now = inside || node.callFrame.url === 'node:inspector';
    if (now) profiler.add(node.id);
    for (const child of node.children ?? []) {
      const next = byId.get(child);
      if (next) markProfiler(next, now);
    }
  };
  if (profile.nodes[0]) markProfiler(profile.nodes[0], false);
  const self = new Map<string, number>();
  const areas = new Map<string, number>();
  let busy = 0;
  profile.samples.forEach((id, i) => {
    const node = byId.get(id);
    const us = profile.timeDeltas[i] ?? 0;
    if (!node || node.callFrame.functionName === '(idle)' || profiler.has(id)) return;
    busy += us;
    const key = frameKey(node.callFrame);
    self.set(key, (self.get(key) ?? 0) + us);
    const { url } = node.callFrame;
    areas.set(area(url), (areas.get(area(url)) ?? 0) + us);
  });
  const pct = (us: number) => `${((100 * us) / busy).toFixed(1).padStart(5)} %`;
  console.log(`${file}: ${(busy / 1e6).toFixed(1)} s busy`);
  console.log('  top self time:');
  for (const [key, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(`  ${pct(us)}  ${key}`);
  console.log('  by area:');
  for (const [key, us] of [...areas].sort((a, b) => b[1] - a[1]).slice(0, 12))
    console.log(`  ${pct(us)}  ${key}`);
}
