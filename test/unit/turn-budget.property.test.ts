import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nextTurn } from '../../src/actors/slices.js';
import {
  BUSY_SHARE,
  MAX_REST_MS,
  MIN_BUSY_SHARE,
  TurnBudget,
} from '../../src/actors/turn-budget.js';

/**
 * Random sequences of what the replica does to its turn budget (docs/architecture.md#fairness-between-groups):
 * time passing, work beginning and stopping for later (with or without having run), steady
 * heartbeats answered at once, turns of the event loop, rests held at shutdown, rest timers
 * firing, at a share drawn from MIN_BUSY_SHARE to 1. Whatever the order: no rest is longer than
 * MAX_REST_MS; the rests add up to at most (1 / share − 1) times the time that passed (no work is billed twice); nothing rests while held; and
 * every piece of work that stopped runs again.
 */
type Op =
  | { readonly op: 'spend'; readonly ms: number }
  | { readonly op: 'begin' }
  | { readonly op: 'served' }
  | { readonly op: 'after'; readonly piece: number; readonly ran: boolean }
  | { readonly op: 'turn' }
  | { readonly op: 'hold' }
  | { readonly op: 'release' }
  | { readonly op: 'fire' };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    op: fc.constant('spend' as const),
    ms: fc.oneof(
      fc.double({ min: 0, max: 2, noNaN: true }),
      fc.double({ min: 10, max: 25, noNaN: true }),
    ),
  }),
  fc.constant({ op: 'begin' as const }),
  fc.constant({ op: 'served' as const }),
  fc.record({ op: fc.constant('after' as const), piece: fc.nat(3), ran: fc.boolean() }),
  fc.constant({ op: 'turn' as const }),
  fc.constant({ op: 'hold' as const }),
  fc.constant({ op: 'release' as const }),
  fc.constant({ op: 'fire' as const }),
);

/** Shares of the loop: the bounds, the default and any between. */
const shareArb = fc.oneof(
  fc.constantFrom(MIN_BUSY_SHARE, BUSY_SHARE, 1),
  fc.double({ min: MIN_BUSY_SHARE, max: 1, noNaN: true }),
);

describe('turn budget rests, random sequences', () => {
  it('bounds every rest, bills no work twice, rests nothing while held, loses no work', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(opArb, { minLength: 5, maxLength: 60, size: 'max' }),
        shareArb,
        async (ops, share) => {
          /** The rest each millisecond of work earns. */
          const restsPerMs = 1 / share - 1;
          let now = 0;
          const timers: Array<() => void> = [];
          const waits: number[] = [];
          const budget = new TurnBudget(1, () => now, {
            share,
            wait: (fn, ms) => {
              waits.push(ms);
              timers.push(fn);
            },
          });
          let stopped = 0;
          let resumed = 0;
          let rested = 0;
          /** When each piece of work under way began (the budget's clock), oldest first. */
          const pieces: number[] = [];
          const releases: Array<() => void> = [];
          for (const step of ops) {
            const timersBefore = waits.length;
            switch (step.op) {
              case 'spend':
                now += step.ms;
                break;
              case 'begin':
                budget.begin();
                pieces.push(now);
                break;
              case 'served':
                budget.servedAtOnce();
                break;
              case 'after': {
                // A piece that ran stops (any of those under way, the oldest began before the
                // others ran), or work that only queued.
                const since =
                  step.ran && pieces.length > 0
                    ? pieces.splice(step.piece % pieces.length, 1)[0]
                    : undefined;
                stopped++;
                budget.after(() => resumed++, since);
                if (releases.length > 0) expect(waits.length).toBe(timersBefore);
                break;
              }
              case 'turn':
                await nextTurn();
                break;
              case 'hold':
                releases.push(budget.holdRests());
                break;
              case 'release':
                releases.pop()?.();
                break;
              case 'fire':
                timers.shift()?.();
                break;
            }
            for (const ms of waits.slice(timersBefore)) {
              expect(ms).toBeGreaterThan(0);
              expect(ms).toBeLessThanOrEqual(MAX_REST_MS + 1e-9);
            }
            expect(budget.restedMs).toBeGreaterThanOrEqual(rested);
            rested = budget.restedMs;
            // Rests are earned by time that passed, each moment once: at most (1 / share − 1) ×
            // all of it.
            expect(budget.restedMs).toBeLessThanOrEqual(restsPerMs * now * (1 + 1e-12) + 1e-9);
          }
          // Every piece of work that stopped for later runs again, rest or no rest.
          for (let i = 0; i < 4 * ops.length + 4 && resumed < stopped; i++) {
            timers.shift()?.();
            await nextTurn();
          }
          expect(resumed).toBe(stopped);
        },
      ),
      { numRuns: 150 },
    );
  });
});
