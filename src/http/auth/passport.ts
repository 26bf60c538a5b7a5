import { createSecretKey } from 'node:crypto';
import passport from 'passport';
import { ExtractJwt, Strategy as JwtStrategy, type VerifiedCallback } from 'passport-jwt';
import type { Request, Response } from 'express';
import jwt from 'jsonwebtoken';
import { CoordinatorError } from '../../errors.js';
import { TOKEN_ISSUER, principalFromClaims } from './tokens.js';
import type { Principal } from './roles.js';

/** Where a request's token is: `Authorization: Bearer <token>` (shared with the heartbeat fast path). */
export const bearerToken = ExtractJwt.fromAuthHeaderAsBearerToken();

/** A passport instance of our own (not the global one), with the JWT strategy of DESIGN.md §9. */
export function createPassport(secret: string): passport.PassportStatic {
  const instance = new passport.Passport() as unknown as passport.PassportStatic;
  instance.use(
    new JwtStrategy(
      {
        jwtFromRequest: bearerToken,
        // A KeyObject made once: given a string, jsonwebtoken rebuilds a key on every verify.
        // (passport-jwt hands it to jsonwebtoken untouched; its typings predate KeyObject.)
        secretOrKey: createSecretKey(Buffer.from(secret, 'utf8')) as unknown as Buffer,
        issuer: TOKEN_ISSUER,
        algorithms: ['HS256'],
      },
      (claims: jwt.JwtPayload, done: VerifiedCallback) => {
        try {
          done(null, principalFromClaims(claims));
        } catch (error) {
          done(null, false, error);
        }
      },
    ),
  );
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
