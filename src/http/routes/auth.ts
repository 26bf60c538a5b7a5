import { createHmac, randomBytes } from 'node:crypto';
import { CoordinatorError } from '../../errors.js';
import { formatGroupPattern } from '../auth/group-scope.js';
import { route } from '../route.js';
import { errorSchema, loginBodySchema, loginResponseSchema } from '../schemas.js';

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
    },
    async handler({ body, req, services }) {
      const address = req.socket.remoteAddress ?? 'unknown';
      // The attempt is counted before its password is checked (one atomic step in the store):
      // logins sent at once cannot all pass a check made before any of them is counted.
      const waitMs = await services.throttle.reserve(body.username, address);
      if (waitMs > 0) {
        const retryAfterSeconds = Math.ceil(waitMs / 1000);
        throw new CoordinatorError(
          'LOGIN_THROTTLED',
          `too many failed logins; retry in ${retryAfterSeconds}s`,
          {
            details: { retryAfterSeconds },
          },
        );
      }
      const principal = await services.users.authenticate(body.username, body.password);
      if (!principal) {
        // Already counted by the reservation above.
        // Text that names no user is often a password typed one field too early: only its
        // fingerprint is logged, so repeated tries still show (docs/operations.md#logs).
        const known = services.users.has(body.username);
        services.rateLimitedLog.warn(`failed-login\u0000${address}`, 'failed login', {
          username: known ? body.username : null,
          ...(known ? {} : { usernameFingerprint: fingerprint(body.username) }),
          clientAddress: address,
        });
        throw new CoordinatorError('INVALID_CREDENTIALS', 'wrong username or password');
      }
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
