import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { yamlErrorText } from '../../config/yaml-error.js';
import { groupPatternsSchema } from './group-scope.js';
import { ROLES, type GroupPattern, type Principal, type Role } from './roles.js';
import { hashPassword, verifyPassword } from './password-hash.js';

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

/** Who may log in. */
export class UserDirectory {
  private readonly users: Map<string, UserRecord>;
  // A hash to verify against when the user is unknown, so timing does not reveal who exists.
  private readonly decoy: Promise<string>;

  constructor(users: readonly UserRecord[]) {
    this.users = new Map(users.map((u) => [u.username, u]));
    this.decoy = hashPassword('decoy-password-for-unknown-users');
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
    const ok = await verifyPassword(password, user?.passwordHash ?? (await this.decoy));
    if (!ok || !user) return null;
    return user.groups === undefined
      ? { name: user.username, roles: user.roles }
      : { name: user.username, roles: user.roles, groups: user.groups };
  }
}
