import { createSecretKey, type KeyObject } from 'node:crypto';
import jwt from 'jsonwebtoken';
import { CoordinatorError } from '../../errors.js';
import type { Clock } from '../../machines/clock.js';
import { formatGroupPattern, groupsFromClaim } from './group-scope.js';
import { ROLES, type Principal, type Role } from './roles.js';

export const TOKEN_ISSUER = 'stream-coordinator';

interface CachedToken {
  readonly principal: Principal;
  readonly expiresAt: number;
}

/**
 * Signs and verifies HS256 JWTs with the claims of README.md#tokens-roles-and-group-scopes. Verified tokens are cached
 * (bounded) so the heartbeat path does not pay an HMAC per request.
 */
export class TokenService {
  /**
   * Memo, one job: a verified token's principal by the text it came in (the token, or the whole
   * `Authorization` header, see {@link remembered}), until the token expires, so a consumer's
   * heartbeats (express or fast path) pay one HMAC and one header parse, not one each. Bounded:
   * emptied when full.
   */
  private readonly cache = new Map<string, CachedToken>();
  private static readonly CACHE_MAX = 10_000;
  /** The cache's entry last found, and its key (see {@link rememberedAt}). */
  private lastKey: string | null = null;
  private lastEntry: CachedToken | undefined;

  private readonly key: KeyObject;

  constructor(
    secret: string,
    private readonly ttlMs: number,
    private readonly clock: Clock,
  ) {
    // Made once: given a string, jsonwebtoken rebuilds a key object on every sign and verify.
    this.key = createSecretKey(Buffer.from(secret, 'utf8'));
  }

  sign(principal: Principal): { accessToken: string; expiresIn: number } {
    const nowSeconds = Math.floor(this.clock.now() / 1000);
    const expiresIn = Math.floor(this.ttlMs / 1000);
    const accessToken = jwt.sign(
      {
        sub: principal.name,
        roles: principal.roles,
        ...(principal.groups ? { groups: principal.groups.map(formatGroupPattern) } : {}),
        iat: nowSeconds,
        exp: nowSeconds + expiresIn,
        iss: TOKEN_ISSUER,
      },
      this.key,
      { algorithm: 'HS256' },
    );
    return { accessToken, expiresIn };
  }

  /**
   * Returns the principal of a valid token or throws INVALID_TOKEN / TOKEN_EXPIRED; remembered
   * under `key` (the token itself, or the header it came in).
   */
  verify(token: string, key: string = token): Principal {
    const now = this.clock.now();
    const known = this.rememberedAt(key, now);
    if (known) return known;
    let claims: jwt.JwtPayload;
    try {
      claims = jwt.verify(token, this.key, {
        algorithms: ['HS256'],
        issuer: TOKEN_ISSUER,
        clockTimestamp: Math.floor(now / 1000),
      }) as jwt.JwtPayload;
    } catch (error) {
      if (error instanceof jwt.TokenExpiredError)
        throw new CoordinatorError('TOKEN_EXPIRED', 'the access token has expired');
      throw new CoordinatorError('INVALID_TOKEN', 'the access token is invalid');
    }
    const principal = principalFromClaims(claims);
    if (this.cache.size >= TokenService.CACHE_MAX) {
      this.cache.clear();
      this.forgetLast();
    }
    this.cache.set(key, { principal, expiresAt: (claims.exp ?? 0) * 1000 });
    return principal;
  }

  /**
   * The principal a token verified under `key` (by {@link verify}) stands for while the token is
   * valid; undefined when none is remembered. Throws TOKEN_EXPIRED once the token expired.
   */
  remembered(key: string): Principal | undefined {
    return this.rememberedAt(key, this.clock.now());
  }

  private rememberedAt(key: string, now: number): Principal | undefined {
    // The entry last found is compared first by its text: a header that arrives again is a new
    // string, which a Map lookup would hash anew.
    if (key !== this.lastKey) {
      const found = this.cache.get(key);
      if (found === undefined) return undefined;
      this.lastKey = key;
      this.lastEntry = found;
    }
    const cached = this.lastEntry!;
    if (cached.expiresAt > now) return cached.principal;
    this.cache.delete(key);
    this.forgetLast();
    throw new CoordinatorError('TOKEN_EXPIRED', 'the access token has expired');
  }

  private forgetLast(): void {
    this.lastKey = null;
    this.lastEntry = undefined;
  }
}

/** Validates the claims of a verified token (any issuer of ours may mint service tokens). */
export function principalFromClaims(claims: jwt.JwtPayload): Principal {
  const roles = claims.roles as unknown;
  if (
    typeof claims.sub !== 'string' ||
    claims.sub.length === 0 ||
    !Array.isArray(roles) ||
    typeof claims.exp !== 'number'
  ) {
    throw new CoordinatorError(
      'INVALID_TOKEN',
      'the access token lacks the sub, roles or exp claim',
    );
  }
  const known = roles.filter((r): r is Role => (ROLES as readonly unknown[]).includes(r));
  const groups = groupsFromClaim((claims as { groups?: unknown }).groups);
  return groups === undefined
    ? { name: claims.sub, roles: known }
    : { name: claims.sub, roles: known, groups };
}
