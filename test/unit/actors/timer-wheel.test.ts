import { describe, expect, it } from 'vitest';
import { TimerWheel } from '../../../src/actors/timer-wheel.js';
import { ManualClock } from '../../../src/machines/clock.js';

const T0 = Date.UTC(2026, 0, 1);

function wheel(resolutionMs: number) {
  const clock = new ManualClock(T0);
  const fired: Array<{ at: number; items: string[] }> = [];
  const timers = new TimerWheel<string>(clock, resolutionMs, (items) =>
    fired.push({ at: clock.now(), items }),
  );
  return { clock, fired, timers };
}

describe('timer wheel: many timers on one clock timer', () => {
  it('fires each item when its time has come, never early, in due order', () => {
    const { clock, fired, timers } = wheel(1);
    timers.add(T0 + 300, 'c');
    timers.add(T0 + 100, 'a');
    timers.add(T0 + 200, 'b');
    clock.advance(99);
    expect(fired).toEqual([]);
    clock.advance(1);
    expect(fired).toEqual([{ at: T0 + 100, items: ['a'] }]);
    clock.advance(200);
    expect(fired.map((f) => [f.at - T0, f.items])).toEqual([
      [100, ['a']],
      [200, ['b']],
      [300, ['c']],
    ]);
    expect(timers.size).toBe(0);
  });

  it('items of one slot fire together, at the end of the slot (at most one resolution late)', () => {
    const { clock, fired, timers } = wheel(10);
    timers.add(T0 + 101, 'x');
    timers.add(T0 + 109, 'y');
    timers.add(T0 + 110, 'z');
    clock.advance(109);
    expect(fired).toEqual([]);
    clock.advance(1);
    expect(fired).toEqual([{ at: T0 + 110, items: ['x', 'y', 'z'] }]);
  });

  it('a removed item does not fire; an earlier item added later re-arms the timer', () => {
    const { clock, fired, timers } = wheel(1);
    const slot = timers.add(T0 + 500, 'late');
    timers.add(T0 + 50, 'early');
    expect(timers.remove(slot, 'late')).toBe(true);
    expect(timers.remove(slot, 'late')).toBe(false);
    clock.advance(1_000);
    expect(fired).toEqual([{ at: T0 + 50, items: ['early'] }]);
  });

  it('an item due already fires on the next turn of the clock; clear drops everything', () => {
    const { clock, fired, timers } = wheel(1);
    timers.add(T0 - 5, 'overdue');
    clock.advance(0);
    expect(fired).toEqual([{ at: T0, items: ['overdue'] }]);
    timers.add(T0 + 10, 'dropped');
    timers.clear();
    clock.advance(100);
    expect(fired).toHaveLength(1);
    expect(timers.size).toBe(0);
  });

  it('a slot emptied and opened again fires once', () => {
    const { clock, fired, timers } = wheel(1);
    const slot = timers.add(T0 + 20, 'a');
    timers.remove(slot, 'a');
    timers.add(T0 + 20, 'b');
    clock.advance(50);
    expect(fired).toEqual([{ at: T0 + 20, items: ['b'] }]);
  });
});
