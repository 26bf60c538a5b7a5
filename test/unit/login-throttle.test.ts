import { describe, expect, it } from 'vitest';
import { LocalLoginThrottle } from '../../src/http/auth/login-throttle.js';
import { ManualClock } from '../../src/machines/clock.js';

/*
 * docs/operations.md#login-throttling: the embedded throttle keeps a bounded number of
 * (username, address) pairs; the pairs it keeps are throttled as before.
 */

const MAX_FAILURES = 2;
const WINDOW_MS = 60_000;

/** Fails `username` from `address` until the throttle refuses it; returns the failures counted. */
async function exhaust(throttle: LocalLoginThrottle, username: string, address = '10.0.0.1') {
  let counted = 0;
  while ((await throttle.reserve(username, address)) === 0) counted += 1;
  return counted;
}

describe('the embedded login throttle', () => {
  it('keeps at most its limit of pairs, dropping the oldest, and still refuses the kept ones', async () => {
    const clock = new ManualClock(0);
    const throttle = new LocalLoginThrottle(MAX_FAILURES, WINDOW_MS, clock, 3);
    for (const user of ['a', 'b', 'c']) {
      expect(await exhaust(throttle, user)).toBe(MAX_FAILURES);
      clock.advance(1);
    }

    // A fourth pair, none expired: the oldest ('a') makes room.
    expect(await throttle.reserve('d', '10.0.0.1')).toBe(0);
    expect(await throttle.reserve('b', '10.0.0.1')).toBeGreaterThan(0);
    expect(await throttle.reserve('c', '10.0.0.1')).toBeGreaterThan(0);
    expect(await throttle.reserve('d', '10.0.0.1')).toBe(0);
    expect(await throttle.reserve('d', '10.0.0.1')).toBeGreaterThan(0);
    // 'a' was forgotten: it starts a new window (and 'b', now the oldest, makes room).
    expect(await throttle.reserve('a', '10.0.0.1')).toBe(0);
    expect(throttle.size).toBe(3);
    expect(await throttle.reserve('c', '10.0.0.1')).toBeGreaterThan(0);
  });

  it('drops expired windows before any live one', async () => {
    const clock = new ManualClock(0);
    const throttle = new LocalLoginThrottle(MAX_FAILURES, WINDOW_MS, clock, 3);
    await exhaust(throttle, 'old-1');
    await exhaust(throttle, 'old-2');
    clock.advance(WINDOW_MS / 2);
    await exhaust(throttle, 'live');
    clock.advance(WINDOW_MS / 2); // the 'old' windows end, 'live' has half its window left

    expect(await throttle.reserve('new', '10.0.0.1')).toBe(0);
    expect(throttle.size).toBe(2);
    expect(await throttle.reserve('live', '10.0.0.1')).toBe(WINDOW_MS / 2);
  });

  it('stays within its limit however many pairs try', async () => {
    const clock = new ManualClock(0);
    const throttle = new LocalLoginThrottle(MAX_FAILURES, WINDOW_MS, clock, 1_000);
    for (let i = 0; i < 20_000; i += 1) {
      expect(await throttle.reserve(`user-${i}`, `10.0.${i % 256}.1`)).toBe(0);
    }
    expect(throttle.size).toBe(1_000);
    // The newest pairs are the kept ones, and each is still throttled.
    expect(await exhaust(throttle, 'user-19999', `10.0.${19_999 % 256}.1`)).toBe(MAX_FAILURES - 1);
  });
});
