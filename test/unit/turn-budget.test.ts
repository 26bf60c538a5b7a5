import { describe, expect, it } from 'vitest';
import { BUSY_SHARE, MAX_REST_MS, TurnBudget } from '../../src/actors/turn-budget.js';
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

/** A budget on a manual clock whose rests wait for a manual timer. */
function restingBudgetOf(ms: number, share: number) {
  let now = 0;
  const timers: Array<{ fn: () => void; ms: number }> = [];
  const budget = new TurnBudget(ms, () => now, {
    share,
    wait: (fn, wait) => timers.push({ fn, ms: wait }),
  });
  return { budget, timers, spend: (d: number) => (now += d) };
}

describe('a share of the loop while steady heartbeats are answered', () => {
  it('rests deferrable work for three times its turn once a heartbeat was answered at once', async () => {
    const { budget, timers, spend } = restingBudgetOf(1, 0.25);
    budget.begin();
    spend(1.2);
    budget.servedAtOnce();
    let ran = false;
    budget.after(() => (ran = true), 0);
    // 1.2 ms of work at a quarter of the loop: 3.6 ms of rest, on a timer, not the next turn.
    expect(timers).toHaveLength(1);
    expect(timers[0]!.ms).toBeCloseTo(3.6);
    expect(budget.restedMs).toBeCloseTo(3.6);
    await nextTurn();
    await nextTurn();
    expect(ran).toBe(false);
    // The rest counts as a spent budget for work that could start meanwhile.
    expect(budget.spent()).toBe(true);
    spend(3.5);
    expect(budget.spent()).toBe(true);
    spend(0.2);
    expect(budget.spent()).toBe(false);
    timers[0]!.fn();
    expect(ran).toBe(true);
  });

  it('never rests while no heartbeat is answered at once: a flood alone goes at full speed', async () => {
    const { budget, timers, spend } = restingBudgetOf(1, 0.25);
    budget.begin();
    spend(1.2);
    let ran = false;
    budget.after(() => (ran = true), 0);
    expect(budget.spent()).toBe(true);
    await nextTurn();
    expect(ran).toBe(true);
    expect(timers).toEqual([]);
    // The next turn's budget is fresh: no rest was earned.
    expect(budget.spent()).toBe(false);
  });

  it('bills a rest only to the work that stops, not to what ran before it in the turn', async () => {
    const { budget, timers, spend } = restingBudgetOf(1, 0.25);
    // 10 ms of other things this turn (steady answers, another piece), then 0.5 ms of this one.
    budget.begin();
    spend(10);
    budget.servedAtOnce();
    const since = 10;
    spend(0.5);
    budget.after(() => {}, since);
    expect(timers).toHaveLength(1);
    expect(timers[0]!.ms).toBeCloseTo(1.5);
    // Work that only queued (it has not run) waits out the rest and earns none.
    budget.after(() => {});
    expect(timers[1]!.ms).toBeCloseTo(1.5);
    expect(budget.restedMs).toBeCloseTo(1.5);
  });

  it('lengthens a rest by the work done during it, and caps a rest', async () => {
    const { budget, timers, spend } = restingBudgetOf(1, 0.25);
    budget.begin();
    spend(1);
    budget.servedAtOnce();
    budget.after(() => {}, 0);
    // Rest until 4 ms.
    expect(timers.at(-1)!.ms).toBeCloseTo(3);
    // A second piece of work stops in the same turn: its 0.5 ms earn 1.5 ms more.
    spend(0.5);
    budget.after(() => {}, 1);
    expect(timers.at(-1)!.ms).toBeCloseTo(3 - 0.5 + 1.5);
    await nextTurn();
    // Work that had to run during the rest (a batch's first step) earns rest of its own, with
    // no further heartbeat answered: at 2 ms, 0.5 ms of it move the end from 5.5 to 7 ms.
    spend(0.5);
    budget.begin();
    spend(0.5);
    budget.after(() => {}, 2);
    expect(timers.at(-1)!.ms).toBeCloseTo(7 - 2.5);
    expect(budget.restedMs).toBeCloseTo(3 + 1.5 + 1.5);
    await nextTurn();
    // A single step of 40 ms rests 50 ms, not 120.
    spend(10);
    budget.begin();
    spend(40);
    budget.servedAtOnce();
    budget.after(() => {}, 12.5);
    expect(timers.at(-1)!.ms).toBe(MAX_REST_MS);
  });

  it('rests nothing while held (a replica shutting down), and ends a rest under way', async () => {
    const { budget, timers, spend } = restingBudgetOf(2, 0.25);
    budget.begin();
    spend(1);
    budget.servedAtOnce();
    budget.after(() => {}, 0);
    expect(timers).toHaveLength(1);
    expect(budget.spent()).toBe(true);
    const release = budget.holdRests();
    expect(budget.spent()).toBe(false);
    budget.servedAtOnce();
    spend(0.5);
    let ran = false;
    budget.after(() => (ran = true), 1);
    await nextTurn();
    expect(ran).toBe(true);
    expect(timers).toHaveLength(1);
    release();
    budget.begin();
    spend(1);
    budget.servedAtOnce();
    budget.after(() => {}, 1.5);
    expect(timers).toHaveLength(2);
  });

  it('rests every turn of paced answers and keeps their order', async () => {
    const { budget, timers, spend } = restingBudgetOf(1, 0.25);
    const paced = new PacedWrites(budget);
    const written: number[] = [];
    budget.servedAtOnce();
    for (let i = 0; i < 9; i++)
      paced.write(() => {
        spend(0.4);
        written.push(i);
      });
    // The first three were written as they came; the next turn wrote three more and rested.
    await nextTurn();
    await nextTurn();
    expect(written).toEqual([0, 1, 2, 3, 4, 5]);
    expect(timers).toHaveLength(1);
    expect(timers[0]!.ms).toBeCloseTo(3.6);
    // Steady heartbeats keep coming: the turn after the rest rests again.
    budget.servedAtOnce();
    spend(timers[0]!.ms);
    timers.shift()!.fn();
    expect(written).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect(timers).toHaveLength(1);
    expect(timers[0]!.ms).toBeCloseTo(3.6);
    spend(timers[0]!.ms);
    timers.shift()!.fn();
    await paced.flushed();
    expect(written).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it('rests (1 / share − 1) times its turn at the default share, and as the share set at startup says', async () => {
    let now = 0;
    const timers: number[] = [];
    const budget = new TurnBudget(1, () => now, { wait: (_fn, ms) => timers.push(ms) });
    expect(budget.busyShare).toBe(BUSY_SHARE);
    const stopAfter = (worked: number) => {
      budget.begin();
      const since = now;
      now += worked;
      budget.servedAtOnce();
      budget.after(() => {}, since);
      now += timers.at(-1)!;
    };
    stopAfter(1);
    expect(timers.at(-1)).toBeCloseTo(1 / 0.15 - 1);
    budget.setShare(0.5);
    expect(budget.busyShare).toBe(0.5);
    stopAfter(2);
    expect(timers.at(-1)).toBeCloseTo(2);
    // A share of the whole loop never rests.
    budget.setShare(1);
    budget.begin();
    now += 1;
    budget.servedAtOnce();
    budget.after(() => {}, now - 1);
    expect(timers).toHaveLength(2);
  });

  it.each([0, -0.1, 0.01, 1.5, Number.NaN])('refuses a share of %s', (share) => {
    const budget = new TurnBudget(1, () => 0);
    expect(() => budget.setShare(share)).toThrow(RangeError);
    expect(() => new TurnBudget(1, () => 0, { share })).toThrow(RangeError);
    expect(budget.busyShare).toBe(BUSY_SHARE);
  });

  it('keeps the end of a rest under way when the share changes', async () => {
    let now = 0;
    const budget = new TurnBudget(1, () => now, { share: 0.1, wait: () => {} });
    budget.begin();
    now += 1;
    budget.servedAtOnce();
    budget.after(() => {}, 0);
    // 9 ms of rest earned at a tenth; a share of the whole loop from now on does not end it.
    budget.setShare(1);
    now += 8.9;
    expect(budget.spent()).toBe(true);
    now += 0.2;
    await nextTurn();
    expect(budget.spent()).toBe(false);
  });
});
