import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PASSWORD, startTestCoordinator, type TestCoordinator } from '../support/coordinator.js';
import { captureLogs } from '../support/logs.js';

/*
 * docs/operations.md#logs: a failed login names the user it was for, but text typed into the
 * username field that names no user (often a password typed one field too early) never reaches
 * a log line: only its fingerprint does, so repeated tries still show.
 */

describe('failed logins in the log', () => {
  const logs = captureLogs('warn');
  let c: TestCoordinator;
  beforeAll(async () => {
    c = await startTestCoordinator({ store: 'memory', logger: logs.logger });
  });
  afterAll(() => c?.close());

  async function login(username: string, password: string) {
    const res = await c.call('POST', '/coord/v1/auth/login', { body: { username, password } });
    return { status: res.status, body: (await res.json()) as { error: { message: string } } };
  }

  it('names a known user, and only fingerprints text that names nobody', async () => {
    const typedTooEarly = 'Tr0ub4dor&3-typed-in-the-wrong-field';
    const unknown = await login(typedTooEarly, PASSWORD);
    const wrong = await login('reader', 'not the password');
    // The caller cannot tell a wrong username from a wrong password.
    expect([unknown.status, wrong.status]).toEqual([401, 401]);
    expect(unknown.body.error.message).toBe(wrong.body.error.message);

    const failed = logs.lines.filter((line) => line.message === 'failed login');
    expect(failed).toHaveLength(2);
    expect(logs.text()).not.toContain(typedTooEarly);
    expect(logs.text()).not.toContain('not the password');
    expect(failed[0]?.username).toBeNull();
    expect(failed[0]?.usernameFingerprint).toMatch(/^[0-9a-f]{16}$/);
    expect(failed[1]).toMatchObject({ username: 'reader' });
    expect(failed[1]).not.toHaveProperty('usernameFingerprint');
  });
});
