import { describe, expect, it } from 'vitest';
import { forEachSlice } from '../../../src/actors/slices.js';

describe('periodic work in slices', () => {
  it('visits every item in order, letting the event loop turn between slices', async () => {
    const seen: number[] = [];
    const turns: number[] = [];
    // An immediate queued now runs between two slices, not after the whole run.
    const items = Array.from({ length: 25 }, (_, i) => i);
    const interleaved = new Promise<void>((resolve) =>
      setImmediate(() => {
        turns.push(seen.length);
        resolve();
      }),
    );
    await forEachSlice(items, 10, (item) => seen.push(item));
    await interleaved;
    expect(seen).toEqual(items);
    expect(turns).toEqual([10]);
  });

  it('a run that fits one slice completes within the current turn', async () => {
    const seen: number[] = [];
    const running = forEachSlice([1, 2, 3], 10, (item) => seen.push(item));
    expect(seen).toEqual([1, 2, 3]);
    await running;
  });
});
