import { describe, expect, it } from 'vitest';
import { CoordinatorError } from '../../src/errors.js';
import { PasswordCheckGate } from '../../src/http/auth/password-check-gate.js';

/** A check that ends when told to. */
function pendingCheck() {
  let finish!: () => void;
  const done = new Promise<void>((resolve) => (finish = resolve));
  return { finish, check: () => done.then(() => 'checked') };
}

/** Lets every settled promise run its continuations. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('the password check gate', () => {
  it('runs at most its limit, queues up to its queue, and refuses the rest with LOGIN_BUSY', async () => {
    let refused = 0;
    const gate = new PasswordCheckGate(2, 3, () => (refused += 1));
    let running = 0;
    let most = 0;
    const checks = Array.from({ length: 20 }, () => pendingCheck());
    const outcomes = checks.map(({ check }) =>
      gate
        .run(async () => {
          running += 1;
          most = Math.max(most, running);
          try {
            return await check();
          } finally {
            running -= 1;
          }
        })
        .then(
          (value) => value,
          (error: unknown) => error,
        ),
    );
    await settle();
    expect([gate.inFlight, gate.queued, running, refused]).toEqual([2, 3, 2, 15]);

    for (const { finish } of checks) finish();
    const results = await Promise.all(outcomes);
    expect(most).toBe(2);
    expect(results.filter((r) => r === 'checked')).toHaveLength(5);
    const errors = results.filter((r) => r instanceof CoordinatorError);
    expect(errors).toHaveLength(15);
    expect(errors[0]).toMatchObject({ code: 'LOGIN_BUSY', details: { retryAfterSeconds: 1 } });
    expect([gate.inFlight, gate.queued]).toEqual([0, 0]);
  });

  it('hands a finished turn to the next waiting check, in arrival order, also after a failure', async () => {
    const gate = new PasswordCheckGate(1, 2);
    const order: string[] = [];
    const first = pendingCheck();
    const a = gate.run(async () => {
      await first.check();
      throw new Error('scrypt failed');
    });
    const b = gate.run(async () => void order.push('b'));
    const c = gate.run(async () => void order.push('c'));
    await settle();
    expect([gate.inFlight, gate.queued, order]).toEqual([1, 2, []]);
    // Full: a fourth is refused at once and does not disturb the queue.
    await expect(gate.run(async () => 'd')).rejects.toMatchObject({ code: 'LOGIN_BUSY' });

    first.finish();
    await expect(a).rejects.toThrow('scrypt failed');
    await Promise.all([b, c]);
    expect(order).toEqual(['b', 'c']);
    expect([gate.inFlight, gate.queued]).toEqual([0, 0]);
    // Free again: the next check runs at once.
    expect(await gate.run(async () => 'e')).toBe('e');
  });
});
