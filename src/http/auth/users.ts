import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { yamlErrorText } from '../../config/yaml-error.js';
import { groupPatternsSchema } from './group-scope.js';
import { ROLES, type GroupPattern, type Principal, type Role } from './roles.js';
import {
  checkPassword,
  decoyHash,
  parseHash,
  scrypt,
  usableParams,
  type ParsedHash,
  type ScryptFunction,
} from './password-hash.js';

const usersFileSchema = z.object({
  users: z.array(
    z.object({
      username: z.string().min(1).max(128),
      passwordHash: z.string().startsWith('scrypt$'),
      roles: z.array(z.enum(ROLES)).min(1),
      /** Patterns the user's tokens are limited to; absent: every group. */
      groups: groupPatternsSchema.optional(),
    }),
  ),
});

export interface UserRecord {
  readonly username: string;
  readonly passwordHash: string;
  readonly roles: readonly Role[];
  readonly groups?: readonly GroupPattern[] | undefined;
}

export interface UserDirectoryOptions {
  /** Derives the keys checked (`node:crypto`'s scrypt unless given). */
  readonly scrypt?: ScryptFunction;
}

/**
 * Who may log in. Every failed login costs one scrypt run with the parameters of the users'
 * hashes, so its timing does not tell which usernames exist: an unknown user, or a user whose
 * stored hash is malformed or has parameters scrypt refuses, is checked against a decoy with the
 * parameters most of the users' hashes have (docs/operations.md#login-throttling).
 */
export class UserDirectory {
  private readonly users: Map<string, UserRecord>;
  private readonly hashes: Map<string, ParsedHash | null>;
  /** The hash checked when there is no usable one of the user's own; no password matches it. */
  private readonly decoy: ParsedHash;
  private readonly derive: ScryptFunction;

  constructor(users: readonly UserRecord[], options: UserDirectoryOptions = {}) {
    this.users = new Map(users.map((u) => [u.username, u]));
    this.hashes = new Map(users.map((u) => [u.username, parseHash(u.passwordHash)]));
    this.decoy = decoyHash(commonest([...this.hashes.values()]));
    this.derive = options.scrypt ?? scrypt;
  }

  /** Reads a users file (`users: [{username, passwordHash, roles, groups?}]`); throws with the file name on error. */
  static fromFile(file: string): UserDirectory {
    let doc: unknown;
    try {
      doc = parseYaml(readFileSync(file, 'utf8'));
    } catch (error) {
      throw new Error(`cannot read users file ${file}: ${yamlErrorText(error)}`, {
        cause: error,
      });
    }
    const parsed = usersFileSchema.safeParse(doc);
    if (!parsed.success) {
      throw new Error(
        `users file ${file} is invalid: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
      );
    }
    return new UserDirectory(parsed.data.users);
  }

  get size(): number {
    return this.users.size;
  }

  /** Whether `username` names a user (for the log only: a caller is never told). */
  has(username: string): boolean {
    return this.users.has(username);
  }

  /** The principal a token is issued to (roles and, if any, groups) when the password matches, else null. */
  async authenticate(username: string, password: string): Promise<Principal | null> {
    const user = this.users.get(username);
    const own = this.hashes.get(username);
    let ok = own ? await checkPassword(password, own, this.derive) : null;
    if (ok === null) {
      // Unknown user, or a stored hash that cannot be checked: the same work, then a refusal.
      await checkPassword(password, this.decoy, this.derive);
      ok = false;
    }
    if (!ok || !user) return null;
    return user.groups === undefined
      ? { name: user.username, roles: user.roles }
      : { name: user.username, roles: user.roles, groups: user.groups };
  }
}

/**
 * The usable hash parameters (cost, salt and key length) most of `hashes` share, the costlier on
 * a tie; undefined when none is usable.
 */
function commonest(hashes: readonly (ParsedHash | null)[]): ParsedHash | undefined {
  const counts = new Map<string, { hash: ParsedHash; count: number }>();
  for (const hash of hashes) {
    if (!hash || !usableParams(hash)) continue;
    const key = [hash.N, hash.r, hash.p, hash.salt.length, hash.key.length].join('/');
    const entry = counts.get(key);
    if (entry) entry.count += 1;
    else counts.set(key, { hash, count: 1 });
  }
  const cost = (h: ParsedHash) => h.N * h.r * h.p;
  let best: { hash: ParsedHash; count: number } | undefined;
  for (const entry of counts.values()) {
    if (
      !best ||
      entry.count > best.count ||
      (entry.count === best.count && cost(entry.hash) > cost(best.hash))
    )
      best = entry;
  }
  return best?.hash;
}
