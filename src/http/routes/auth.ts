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
        services.rateLimitedLog.warn(`failed-login\u0000${address}`, 'failed login', {
          username: body.username,
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
