import { describe, expect, it } from 'vitest';
import { TurnBudget } from '../../src/actors/turn-budget.js';
import { PacedWrites } from '../../src/http/paced-writes.js';

/** A manual clock: each write takes `costMs` of it; `busy` is other work taking time. */
function pacedWith(budgetMs: number, costMs: number) {
  let now = 0;
  const clock = () => now;
  const paced = new PacedWrites(new TurnBudget(budgetMs, clock));
  const written: number[] = [];
  const writeOf = (i: number) => () => {
    now += costMs;
    written.push(i);
  };
  const busy = (ms: number) => (now += ms);
  return { paced, written, writeOf, busy };
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('answers decided together are written a budget per turn of the event loop', () => {
  it('writes 64 answers of 0.25 ms each 4 per turn, in order, and others are served between turns', async () => {
    const { paced, written, writeOf } = pacedWith(1, 0.25);
    for (let i = 0; i < 64; i++) paced.write(writeOf(i));
    // Within this turn: as many as the budget allows.
    expect(written).toEqual([0, 1, 2, 3]);
    // Work that arrived meanwhile (another group's request) runs before the next answers.
    const between: number[] = [];
    setImmediate(() => between.push(written.length));
    await nextTurn();
    await nextTurn();
    expect(between[0]).toBeLessThan(64);
    await paced.flushed();
    expect(written).toEqual(Array.from({ length: 64 }, (_, i) => i));
  });

  it('writes an answer at once when the turn has budget left and nothing waits', async () => {
    const { paced, written, writeOf } = pacedWith(1, 0.1);
    paced.write(writeOf(0));
    expect(written).toEqual([0]);
    await paced.flushed();
    paced.write(writeOf(1));
    expect(written).toEqual([0, 1]);
  });

  it('writes at least one answer per turn, however long one takes', async () => {
    const { paced, written, writeOf } = pacedWith(1, 5);
    for (let i = 0; i < 3; i++) paced.write(writeOf(i));
    expect(written).toEqual([0]);
    await nextTurn();
    expect(written).toEqual([0, 1]);
    await paced.flushed();
    expect(written).toEqual([0, 1, 2]);
  });

  it('keeps the order when an answer comes while others wait', async () => {
    const { paced, written, writeOf } = pacedWith(1, 0.6);
    paced.write(writeOf(0));
    paced.write(writeOf(1));
    paced.write(writeOf(2));
    expect(written).toEqual([0, 1]);
    paced.write(writeOf(3));
    await paced.flushed();
    expect(written).toEqual([0, 1, 2, 3]);
  });

  it('gets a quarter of the time since its previous turn when the loop is busy with other work', async () => {
    const { paced, written, writeOf, busy } = pacedWith(1, 0.25);
    for (let i = 0; i < 200; i++) paced.write(writeOf(i));
    expect(written).toHaveLength(4);
    // Other groups' requests keep the loop busy for 40 ms before the next turn.
    busy(40);
    await nextTurn();
    // (40 ms since the answers began to wait) × 0.25 = 10 ms: 40 answers, not 4.
    expect(written).toHaveLength(4 + 40);
    await paced.flushed();
    expect(written).toEqual(Array.from({ length: 200 }, (_, i) => i));
  });

  it('flushed() resolves at once when nothing is under way', async () => {
    const { paced } = pacedWith(1, 1);
    await expect(paced.flushed()).resolves.toBeUndefined();
  });
});
