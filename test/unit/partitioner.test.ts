import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { fnv1a32, partitionerName, shardForKey, streamNames } from '../../src/machines/routing.js';

const doc = readFileSync(new URL('../../docs/partitioner.md', import.meta.url), 'utf8');
const rows = [
  ...doc.matchAll(/^\| `(".*")` \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|$/gm),
].map((m) => ({
  key: JSON.parse(m[1] as string) as string,
  hash: Number(m[2]),
  shards: [1, 4, 8, 16, 1024].map((count, i) => [count, Number(m[i + 3])] as const),
}));

describe('the partitioner documented in docs/partitioner.md', () => {
  it('has test vectors', () => {
    expect(rows.length).toBeGreaterThanOrEqual(7);
    expect(doc).toContain(`"${partitionerName}"`);
  });
  it.each(rows.map((r) => [r.key, r] as const))('maps %j as documented', (_key, row) => {
    expect(fnv1a32(row.key)).toBe(row.hash);
    for (const [count, shard] of row.shards) expect(shardForKey(row.key, count)).toBe(shard);
  });
  it('names shard i the stream <streamPrefix>:<i>', () => {
    expect(streamNames('orders', 3)).toEqual(['orders:0', 'orders:1', 'orders:2']);
  });
});
