import type { IncomingMessage } from 'node:http';
import passport from 'passport';
import { ExtractJwt } from 'passport-jwt';
import type { Request, Response } from 'express';
import jwt from 'jsonwebtoken';
import { CoordinatorError } from '../../errors.js';
import type { TokenService } from './tokens.js';
import type { Principal } from './roles.js';

/** Where a request's token is: `Authorization: Bearer <token>` (shared with the heartbeat fast path). */
export const bearerToken = ExtractJwt.fromAuthHeaderAsBearerToken();

/**
 * The one way a request's bearer token becomes a principal, shared by the express pipeline
 * (through passport, {@link createPassport}) and the heartbeat fast path: the token from
 * `Authorization: Bearer`, verified by the `TokenService` (and its verified-token cache).
 * Throws UNAUTHENTICATED, INVALID_TOKEN or TOKEN_EXPIRED.
 */
export function principalOfRequest(
  tokens: Pick<TokenService, 'verify' | 'remembered'>,
  req: IncomingMessage,
): Principal {
  assertOneAuthorization(req);
  const header = req.headers.authorization;
  // A consumer sends the same header heartbeat after heartbeat: what its token verified to is
  // remembered by the header's text, so the header is not parsed again either.
  const known = header === undefined ? undefined : tokens.remembered(header);
  if (known) return known;
  const token = bearerToken(req as Request);
  if (!token) throw noBearerTokenError(header);
  return tokens.verify(token, header);
}

/**
 * Node keeps the first of several `Authorization` headers and drops the others, while a proxy
 * in front may act on another one: credentials sent twice are ambiguous, and refused (400)
 * rather than guessed at. One pass over the raw header names, no allocation.
 */
export function assertOneAuthorization(req: IncomingMessage): void {
  if (authorizationCount(req) > 1) {
    throw new CoordinatorError(
      'VALIDATION_FAILED',
      'ambiguous credentials: the request has more than one Authorization header',
    );
  }
}

/** How many `Authorization` headers the request carried. */
export function authorizationCount(req: IncomingMessage): number {
  const raw = req.rawHeaders;
  let count = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    if (name.length === 13 && name.toLowerCase() === 'authorization') count++;
  }
  return count;
}

/** The passport strategy (README.md#tokens-roles-and-group-scopes): a bearer JWT, verified by {@link principalOfRequest}. */
class BearerTokenStrategy extends passport.Strategy {
  override name = 'jwt';

  constructor(private readonly tokens: Pick<TokenService, 'verify' | 'remembered'>) {
    super();
  }

  override authenticate(req: Request): void {
    let principal: Principal;
    try {
      principal = principalOfRequest(this.tokens, req);
    } catch (error) {
      this.error(error);
      return;
    }
    this.success(principal);
  }
}

/** A passport instance of our own (not the global one), with the bearer strategy. */
export function createPassport(
  tokens: Pick<TokenService, 'verify' | 'remembered'>,
): passport.PassportStatic {
  const instance = new passport.Passport() as unknown as passport.PassportStatic;
  instance.use(new BearerTokenStrategy(tokens));
  return instance;
}

/** Authenticates the request's bearer token; resolves the principal or throws a 401 error. */
export function authenticate(
  instance: passport.PassportStatic,
  req: Request,
  res: Response,
): Promise<Principal> {
  return new Promise((resolve, reject) => {
    const middleware = instance.authenticate(
      'jwt',
      { session: false },
      (err: unknown, principal: Principal | false, info: unknown) => {
        if (err)
          return reject(
            err instanceof CoordinatorError
              ? err
              : new CoordinatorError('INVALID_TOKEN', 'the access token is invalid'),
          );
        if (principal) return resolve(principal);
        reject(toAuthError(req, info));
      },
    ) as (req: Request, res: Response, next: (err?: unknown) => void) => void;
    middleware(req, res, reject);
  });
}

function toAuthError(req: Request, info: unknown): CoordinatorError {
  if (info instanceof CoordinatorError) return info;
  if (info instanceof jwt.TokenExpiredError)
    return new CoordinatorError('TOKEN_EXPIRED', 'the access token has expired');
  return noBearerTokenError(req.headers.authorization);
}

/** The 401 of a request without a usable bearer token: none at all, or not a valid one. */
export function noBearerTokenError(authorization: string | undefined): CoordinatorError {
  if (!authorization) return new CoordinatorError('UNAUTHENTICATED', 'a bearer token is required');
  return new CoordinatorError('INVALID_TOKEN', 'the access token is invalid');
}
