import { describe, expect, it } from 'vitest';
import { TurnBudget } from '../../src/actors/turn-budget.js';
import { nextTurn } from '../../src/actors/slices.js';
import { PacedWrites } from '../../src/http/paced-writes.js';

/** A budget on a manual clock. */
function budgetOf(ms: number) {
  let now = 0;
  const clock = () => now;
  return { budget: new TurnBudget(ms, clock), spend: (d: number) => (now += d) };
}

describe('one budget per turn of the event loop', () => {
  it('is spent once work that began this turn has run for the budget, and fresh in the next turn', async () => {
    const { budget, spend } = budgetOf(1);
    expect(budget.spent()).toBe(false);
    budget.begin();
    spend(0.6);
    expect(budget.spent()).toBe(false);
    // Other work this turn draws on the same clock: it does not start its own.
    budget.begin();
    spend(0.6);
    expect(budget.spent()).toBe(true);
    await nextTurn();
    expect(budget.spent()).toBe(false);
    budget.begin();
    spend(0.5);
    expect(budget.spent()).toBe(false);
  });

  it('is shared by a batch and the answers: once the steps spent it, answers wait for the next turn', async () => {
    const { budget, spend } = budgetOf(1);
    const paced = new PacedWrites(budget);
    const written: number[] = [];
    // A batch's steps ran for 1.5 ms this turn.
    budget.begin();
    spend(1.5);
    paced.write(() => written.push(1));
    expect(written).toEqual([]);
    await paced.flushed();
    expect(written).toEqual([1]);
  });

  it('gives answers alone on the loop the whole budget in every turn, not every other one', async () => {
    const { budget, spend } = budgetOf(1);
    const paced = new PacedWrites(budget);
    let written = 0;
    for (let i = 0; i < 200; i++)
      paced.write(() => {
        spend(0.25);
        written++;
      });
    const perTurn: number[] = [written];
    for (let turn = 0; turn < 8; turn++) {
      const before = written;
      await nextTurn();
      perTurn.push(written - before);
    }
    // 1 ms of answers of 0.25 ms each, turn after turn.
    expect(perTurn).toEqual([4, 4, 4, 4, 4, 4, 4, 4, 4]);
  });
});
