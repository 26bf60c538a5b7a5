import { createHmac, randomBytes } from 'node:crypto';
import { CoordinatorError } from '../../errors.js';
import { formatGroupPattern } from '../auth/group-scope.js';
import type { Principal } from '../auth/roles.js';
import { route } from '../route.js';
import { errorSchema, loginBodySchema, loginResponseSchema } from '../schemas.js';
import type { Services } from '../services.js';

export const authRoutes = [
  route({
    method: 'post',
    path: '/coord/v1/auth/login',
    summary: 'Exchange a username and password for a bearer token',
    tag: 'auth',
    roles: null,
    body: loginBodySchema,
    responses: {
      200: { description: 'Token issued', schema: loginResponseSchema },
      401: { description: 'Wrong username or password', schema: errorSchema },
      429: { description: 'Too many failed logins', schema: errorSchema },
      503: {
        description: 'Too many password checks under way on this replica (LOGIN_BUSY)',
        schema: errorSchema,
      },
    },
    async handler({ body, req, services }) {
      const address = req.socket.remoteAddress ?? 'unknown';
      // A turn among the replica's password checks comes first: a login refused for want of one
      // (503 LOGIN_BUSY) costs nothing and is not counted as a failure
      // (docs/operations.md#password-checks-in-flight).
      const principal = await services.passwordChecks.run(() =>
        checkLogin(services, body.username, body.password, address),
      );
      // The caller proved its password: a count that cannot be cleared now expires by itself.
      await services.throttle.recordSuccess(body.username, address).catch(() => undefined);
      const { accessToken, expiresIn } = services.tokens.sign(principal);
      const { roles, groups } = principal;
      return {
        status: 200,
        body: {
          accessToken,
          tokenType: 'Bearer',
          expiresIn,
          roles,
          ...(groups ? { groups: groups.map(formatGroupPattern) } : {}),
        },
      };
    },
  }),
];

/**
 * Checks one login: counts it with the throttle (429 `LOGIN_THROTTLED` when the window is full),
 * then checks its password (401 `INVALID_CREDENTIALS`, logged, when wrong).
 */
async function checkLogin(
  services: Services,
  username: string,
  password: string,
  address: string,
): Promise<Principal> {
  // The attempt is counted before its password is checked (one atomic step in the store):
  // logins sent at once cannot all pass a check made before any of them is counted.
  const waitMs = await services.throttle.reserve(username, address);
  if (waitMs > 0) {
    const retryAfterSeconds = Math.ceil(waitMs / 1000);
    throw new CoordinatorError(
      'LOGIN_THROTTLED',
      `too many failed logins; retry in ${retryAfterSeconds}s`,
      { details: { retryAfterSeconds } },
    );
  }
  const principal = await services.users.authenticate(username, password);
  if (!principal) {
    // Already counted by the reservation above.
    // Text that names no user is often a password typed one field too early: only its
    // fingerprint is logged, so repeated tries still show (docs/operations.md#logs).
    const known = services.users.has(username);
    services.rateLimitedLog.warn(`failed-login\u0000${address}`, 'failed login', {
      username: known ? username : null,
      ...(known ? {} : { usernameFingerprint: fingerprint(username) }),
      clientAddress: address,
    });
    throw new CoordinatorError('INVALID_CREDENTIALS', 'wrong username or password');
  }
  return principal;
}

/** The key of {@link fingerprint}: the process's own, never shown. */
const FINGERPRINT_KEY = randomBytes(32);

/**
 * 16 hex digits of an HMAC-SHA-256 of `text` under a key of this process: the same text gives
 * the same fingerprint until the replica restarts, and a weak password cannot be found from it
 * by trying a dictionary, as it could from a plain hash.
 */
function fingerprint(text: string): string {
  return createHmac('sha256', FINGERPRINT_KEY).update(text).digest('hex').slice(0, 16);
}
