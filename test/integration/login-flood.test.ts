import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PASSWORD, startTestCoordinator, type TestCoordinator } from '../support/coordinator.js';

/*
 * docs/operations.md#password-checks-in-flight: a flood of logins the throttle never refuses
 * (every one with another username) gets at most the configured number of password checks
 * running and waiting on a replica; the rest are refused at once with 503 LOGIN_BUSY and
 * Retry-After, counted in coord_login_checks_refused_total, and a real login after it is
 * answered.
 */

const FLOOD = 24;
const MAX_CHECKS = 1;
const MAX_QUEUED = 1;

describe('a flood of logins', () => {
  let c: TestCoordinator;
  beforeAll(async () => {
    c = await startTestCoordinator({
      store: 'memory',
      overrides: {
        'security.login-max-concurrent-checks': MAX_CHECKS,
        'security.login-max-queued-checks': MAX_QUEUED,
      },
    });
  });
  afterAll(() => c?.close());

  async function refusedTotal(): Promise<number> {
    const text = await (await c.call('GET', '/metrics')).text();
    const line = text.split('\n').find((l) => l.startsWith('coord_login_checks_refused_total '));
    return Number(line?.split(' ')[1]);
  }

  it('checks a bounded number of passwords at once and refuses the rest with LOGIN_BUSY', async () => {
    const before = await refusedTotal();
    const answers = await Promise.all(
      Array.from({ length: FLOOD }, async (_, i) => {
        const res = await c.call('POST', '/coord/v1/auth/login', {
          body: { username: `nobody-${i}`, password: 'guess' },
        });
        const body = (await res.json()) as { error: { code: string } };
        return {
          status: res.status,
          code: body.error.code,
          retryAfter: res.headers.get('retry-after'),
        };
      }),
    );
    const checked = answers.filter((a) => a.status === 401);
    const busy = answers.filter((a) => a.status === 503);
    expect(checked.length + busy.length).toBe(FLOOD);
    expect(checked.every((a) => a.code === 'INVALID_CREDENTIALS')).toBe(true);
    expect(busy.every((a) => a.code === 'LOGIN_BUSY' && a.retryAfter === '1')).toBe(true);
    // Sent at once, they cannot all have been let in: one running and one waiting at a time.
    expect(busy.length).toBeGreaterThan(0);
    expect(checked.length).toBeGreaterThanOrEqual(MAX_CHECKS + MAX_QUEUED);
    expect((await refusedTotal()) - before).toBe(busy.length);
    expect([c.services.passwordChecks.inFlight, c.services.passwordChecks.queued]).toEqual([0, 0]);

    // The flood did not count against a real user, who logs in.
    const real = await c.call('POST', '/coord/v1/auth/login', {
      body: { username: 'reader', password: PASSWORD },
    });
    expect(real.status).toBe(200);
  });
});
