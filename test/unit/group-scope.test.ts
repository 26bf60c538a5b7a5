import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  assertGroupPermitted,
  groupsFromClaim,
  permitsGroup,
} from '../../src/http/auth/group-scope.js';
import type { Principal } from '../../src/http/auth/roles.js';
import { ManualClock } from '../../src/machines/clock.js';
import { TokenService } from '../../src/http/auth/tokens.js';
import { UserDirectory } from '../../src/http/auth/users.js';
import { hashPassword } from '../../src/http/auth/password-hash.js';

const scoped = (...claim: string[]): Principal => ({
  name: 'svc',
  roles: ['READ'],
  groups: groupsFromClaim(claim),
});

describe('a groups pattern is <streamPrefix>:<consumerGroup>, names or *, matched exactly', () => {
  it('a token without groups reaches every group', () => {
    expect(permitsGroup({ name: 'svc', roles: ['READ'] }, 'orders', 'billing')).toBe(true);
    expect(groupsFromClaim(undefined)).toBeUndefined();
  });

  it('names match by equality; * stands for a whole part', () => {
    const p = scoped('orders:billing', 'audit:*', '*:reports');
    expect(permitsGroup(p, 'orders', 'billing')).toBe(true);
    expect(permitsGroup(p, 'orders', 'shipping')).toBe(false);
    expect(permitsGroup(p, 'orders2', 'billing')).toBe(false);
    expect(permitsGroup(p, 'audit', 'anything')).toBe(true);
    expect(permitsGroup(p, 'whatever', 'reports')).toBe(true);
    expect(permitsGroup(scoped('*:*'), 'x', 'y')).toBe(true);
  });

  it('an empty list reaches no group', () => {
    expect(permitsGroup(scoped(), 'orders', 'billing')).toBe(false);
  });

  it('a stream prefix may hold ":" (the pattern splits at its last ":")', () => {
    const p = scoped('eu:orders:billing');
    expect(permitsGroup(p, 'eu:orders', 'billing')).toBe(true);
    expect(permitsGroup(p, 'eu', 'orders:billing')).toBe(false);
  });

  it('"." and other characters are literal, never a regular expression', () => {
    const p = scoped('o.ders:b-lling');
    expect(permitsGroup(p, 'orders', 'billing')).toBe(false);
    expect(permitsGroup(p, 'o.ders', 'b-lling')).toBe(true);
  });

  it.each([
    ['not a list', 'orders:billing'],
    ['a number in the list', [1]],
    ['no colon', ['orders']],
    ['an empty stream part', [':billing']],
    ['an empty group part', ['orders:']],
    ['a partial wildcard', ['ord*:billing']],
    ['a regular expression', ['.*:.*']],
    ['a group with a space', ['orders:bill ing']],
    ['null', null],
  ])('a malformed claim (%s) is 401 INVALID_TOKEN', (_what, claim) => {
    expect(() => groupsFromClaim(claim)).toThrow(
      expect.objectContaining({ code: 'INVALID_TOKEN' }),
    );
  });

  it('a group outside the scope is 403 GROUP_NOT_PERMITTED', () => {
    expect(() => assertGroupPermitted(scoped('orders:*'), 'payments', 'billing')).toThrow(
      expect.objectContaining({ code: 'GROUP_NOT_PERMITTED' }),
    );
    expect(() => assertGroupPermitted(scoped('orders:*'), 'orders', 'billing')).not.toThrow();
  });
});

describe('tokens and the users file carry groups', () => {
  const clock = new ManualClock(Date.now());

  it('a signed token keeps its groups through verify; one without keeps none', () => {
    const tokens = new TokenService('x'.repeat(40), 60_000, clock);
    const groups = groupsFromClaim(['eu:orders:billing', '*:reports']);
    const { accessToken } = tokens.sign({ name: 'svc', roles: ['CONSUMER'], groups });
    expect(tokens.verify(accessToken)).toEqual({ name: 'svc', roles: ['CONSUMER'], groups });
    const plain = tokens.sign({ name: 'svc', roles: ['CONSUMER'] }).accessToken;
    expect(tokens.verify(plain)).toEqual({ name: 'svc', roles: ['CONSUMER'] });
  });

  it('login issues the user its groups; a malformed groups field fails the file', async () => {
    const hash = await hashPassword('pw');
    const dir = mkdtempSync(join(tmpdir(), 'coord-users-'));
    const file = join(dir, 'users.yaml');
    writeFileSync(
      file,
      `users:\n  - username: svc\n    passwordHash: "${hash}"\n    roles: [READ]\n    groups: ["orders:*"]\n  - username: all\n    passwordHash: "${hash}"\n    roles: [READ]\n`,
    );
    const users = UserDirectory.fromFile(file);
    expect(await users.authenticate('svc', 'pw')).toEqual({
      name: 'svc',
      roles: ['READ'],
      groups: [{ streamPrefix: 'orders', consumerGroup: '*' }],
    });
    expect(await users.authenticate('all', 'pw')).toEqual({ name: 'all', roles: ['READ'] });
    writeFileSync(
      file,
      `users:\n  - username: svc\n    passwordHash: "${hash}"\n    roles: [READ]\n    groups: ["orders.*"]\n`,
    );
    expect(() => UserDirectory.fromFile(file)).toThrow(/users\.0\.groups\.0/);
  });
});
