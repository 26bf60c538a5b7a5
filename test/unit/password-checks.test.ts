import { randomBytes, scrypt as scryptCallback, type ScryptOptions } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { ScryptFunction } from '../../src/http/auth/password-hash.js';
import { UserDirectory } from '../../src/http/auth/users.js';

/*
 * Every failed login does the work of a check against a real user's hash: one scrypt run with
 * the parameters of the users file's hashes, whether the user exists, has a malformed hash, or
 * a hash with parameters scrypt refuses. Counted, not timed.
 */

interface Run {
  readonly N: number | undefined;
  readonly r: number | undefined;
  readonly p: number | undefined;
  readonly keylen: number;
  readonly saltBytes: number;
}

function scrypt(password: string, salt: Buffer, keylen: number, options: ScryptOptions) {
  return new Promise<Buffer>((resolve, reject) =>
    scryptCallback(password, salt, keylen, { ...options, maxmem: 64 << 20 }, (err, key) =>
      err ? reject(err) : resolve(key),
    ),
  );
}

/** The real scrypt, recording each run that derived a key. */
function recordingScrypt(): { runs: Run[]; derive: ScryptFunction } {
  const runs: Run[] = [];
  return {
    runs,
    derive: async (password, salt, keylen, options) => {
      const key = await scrypt(password, salt, keylen, options);
      runs.push({ N: options.N, r: options.r, p: options.p, keylen, saltBytes: salt.length });
      return key;
    },
  };
}

async function hashWith(password: string, N: number, r = 8, p = 1): Promise<string> {
  const salt = randomBytes(16);
  const key = await scrypt(password, salt, 64, { N, r, p });
  return ['scrypt', N, r, p, salt.toString('base64'), key.toString('base64')].join('$');
}

const RAISED = { N: 32768, r: 8, p: 1, keylen: 64, saltBytes: 16 };

describe('failed logins and the work they cost', () => {
  it('checks an unknown user, a wrong password and a broken hash with the same parameters', async () => {
    const [alice, bob] = await Promise.all([
      hashWith('alice-pw', RAISED.N),
      hashWith('bob-pw', RAISED.N),
    ]);
    const { runs, derive } = recordingScrypt();
    const users = new UserDirectory(
      [
        { username: 'alice', passwordHash: alice, roles: ['READ'] },
        { username: 'bob', passwordHash: bob, roles: ['READ'] },
        { username: 'malformed', passwordHash: 'scrypt$not-a-hash', roles: ['READ'] },
        { username: 'refused', passwordHash: 'scrypt$3000$8$1$c2FsdA==$a2V5', roles: ['READ'] },
      ],
      { scrypt: derive },
    );

    for (const username of ['nobody', 'alice', 'malformed', 'refused']) {
      runs.length = 0;
      expect(await users.authenticate(username, 'wrong')).toBeNull();
      expect({ username, runs }).toEqual({ username, runs: [RAISED] });
    }

    runs.length = 0;
    expect(await users.authenticate('alice', 'alice-pw')).toMatchObject({ name: 'alice' });
    expect(runs).toEqual([RAISED]);
  });

  it('gives the decoy the parameters most users have, the costlier on a tie', async () => {
    const hashes = await Promise.all([
      hashWith('a', 4096),
      hashWith('b', 4096),
      hashWith('c', 2048),
      hashWith('d', 1024, 8, 2),
    ]);
    const mostly = recordingScrypt();
    const users = new UserDirectory(
      hashes.map((passwordHash, i) => ({ username: `u${i}`, passwordHash, roles: ['READ'] })),
      { scrypt: mostly.derive },
    );
    expect(await users.authenticate('nobody', 'x')).toBeNull();
    expect(mostly.runs.map((run) => run.N)).toEqual([4096]);

    // One user each: the costliest parameters.
    const tie = recordingScrypt();
    const tied = new UserDirectory(
      [hashes[0], hashes[2], hashes[3]].map((passwordHash, i) => ({
        username: `u${i}`,
        passwordHash,
        roles: ['READ'],
      })),
      { scrypt: tie.derive },
    );
    expect(await tied.authenticate('nobody', 'x')).toBeNull();
    expect(tie.runs.map((run) => run.N)).toEqual([4096]);
  });
});
