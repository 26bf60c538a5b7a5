import { readFileSync } from 'node:fs';
import { frameKey, type ProfileNode } from './cpu-profile.js';

/*
 * `npx tsx bench/heap-profile-summary.ts <file.heapprofile> [--top N]`: where the bytes of a
 * sampling heap profile were allocated (as `BENCH_HEAP_SAMPLING` makes the coordinator write
 * them beside a phase's CPU profile): the functions that allocated most themselves, and the
 * coordinator's own functions (dist/, src/) by what was allocated under them. With
 * `BENCH_HEAP_SAMPLING=major`, what a phase allocated that outlived the young generation: what
 * fills the old generation until a full GC, and the resident memory with it.
 */

interface HeapNode {
  readonly callFrame: ProfileNode['callFrame'];
  readonly selfSize: number;
  readonly children: HeapNode[];
}

const argv = process.argv.slice(2);
const topIndex = argv.indexOf('--top');
const top = topIndex >= 0 ? Number(argv[topIndex + 1]) : 20;
const [file] = argv.filter((a, i) => a !== '--top' && argv[i - 1] !== '--top');
if (!file) {
  console.error('usage: npx tsx bench/heap-profile-summary.ts <file.heapprofile> [--top N]');
  process.exit(2);
}

const { head } = JSON.parse(readFileSync(file, 'utf8')) as { head: HeapNode };
const self = new Map<string, number>();
const under = new Map<string, number>();
let total = 0;

/** Bytes at and below `node`; each frame is credited once per stack, however often it recurs. */
function walk(node: HeapNode, onStack: ReadonlySet<string>): number {
  const key = frameKey(node.callFrame);
  total += node.selfSize;
  self.set(key, (self.get(key) ?? 0) + node.selfSize);
  const stack = new Set(onStack).add(key);
  const below = node.children.reduce((sum, child) => sum + walk(child, stack), node.selfSize);
  if (!onStack.has(key)) under.set(key, (under.get(key) ?? 0) + below);
  return below;
}
walk(head, new Set());

const print = (title: string, bytes: Map<string, number>) => {
  console.log(title);
  for (const [key, size] of [...bytes].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(
      `${(size / 1_048_576).toFixed(2).padStart(8)} MiB ${((size / total) * 100).toFixed(0).padStart(3)} %  ${key}`,
    );
};
console.log(`${file}: ${(total / 1_048_576).toFixed(1)} MiB sampled`);
print('  allocated by the function itself:', self);
print(
  "  allocated under the coordinator's functions:",
  new Map([...under].filter(([key]) => / (dist|src)\//.test(key))),
);
