import jwt from 'jsonwebtoken';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSettings } from '../../src/config/load.js';
import { ROLES } from '../../src/http/auth/roles.js';
import { allRoutes } from '../../src/http/routes/index.js';
import {
  CHANGE,
  TEST_SECRET,
  startTestCoordinator,
  type TestCoordinator,
} from '../support/coordinator.js';

/**
 * Every route of the route list (the same list that mounts express and the OpenAPI document):
 * without a token, with a forged or an expired one → 401; with a token lacking every role the
 * route accepts → 403. A new route is covered the day it is added.
 */
const routes = allRoutes(loadSettings({ env: {} }), 'test').filter((r) => r.roles !== null);
const concrete = (path: string) =>
  path.replace(':stream', 'auth').replace(':group', 'g').replace(':migrationId', 'current');

describe('authentication and roles on every protected route', () => {
  let c: TestCoordinator;
  beforeAll(async () => {
    c = await startTestCoordinator({ store: 'memory' });
    await c.call('PUT', '/coord/v1/admin/streams/auth/groups/g', {
      user: 'writer',
      body: { shardCount: 1, ...CHANGE },
    });
  });
  afterAll(async () => c?.close());

  const sign = (claims: Record<string, unknown>, secret = TEST_SECRET) =>
    jwt.sign({ sub: 'someone', iss: 'stream-coordinator', ...claims }, secret, {
      algorithm: 'HS256',
    });
  const now = () => Math.floor(Date.now() / 1000);

  it('covers the routes of every area', () => {
    const areas = new Set(routes.map((r) => r.path.split('/')[3]));
    expect([...areas].sort()).toEqual(['admin', 'consumer', 'monitoring', 'routing']);
    expect(routes.length).toBeGreaterThanOrEqual(20);
  });

  it.each(routes.map((r) => [r.method.toUpperCase(), r.path, r] as const))(
    '%s %s',
    async (method, path, spec) => {
      const url = concrete(path);
      const body = method === 'GET' ? undefined : CHANGE;
      const expectCode = async (res: Response, status: number, code: string) => {
        expect(res.status, `${method} ${url}`).toBe(status);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe(code);
      };
      await expectCode(await c.call(method, url, { body }), 401, 'UNAUTHENTICATED');
      const forged = sign(
        { roles: [...ROLES], exp: now() + 60 },
        'not-the-secret-not-the-secret-not-the-secret',
      );
      await expectCode(
        await c.call(method, url, { body, headers: { authorization: `Bearer ${forged}` } }),
        401,
        'INVALID_TOKEN',
      );
      const expired = sign({ roles: [...ROLES], iat: now() - 120, exp: now() - 60 });
      await expectCode(
        await c.call(method, url, { body, headers: { authorization: `Bearer ${expired}` } }),
        401,
        'TOKEN_EXPIRED',
      );
      const others = ROLES.filter((role) => !spec.roles?.includes(role));
      const lacking = sign({ roles: others, exp: now() + 60 });
      await expectCode(
        await c.call(method, url, { body, headers: { authorization: `Bearer ${lacking}` } }),
        403,
        'FORBIDDEN',
      );
    },
  );

  const adminRoutes = routes.filter((r) => r.path.includes('/admin/'));
  it.each(adminRoutes.map((r) => [r.method.toUpperCase(), r.path] as const))(
    '%s %s refuses a body without requestedBy or reason (400)',
    async (method, path) => {
      const url = concrete(path);
      for (const body of [{ reason: 'why' }, { requestedBy: 'me' }, {}]) {
        const res = await c.call(method, url, {
          user: 'admin',
          body: { shardCount: 2, streamPrefix: 'x', consumerGroup: 'y', action: 'RESUME', ...body },
        });
        expect(res.status, `${method} ${url} ${JSON.stringify(body)}`).toBe(400);
        expect(
          ((await res.json()) as { error: { code: string; message: string } }).error,
        ).toMatchObject({
          code: 'VALIDATION_FAILED',
          message: expect.stringMatching(/requestedBy|reason/) as unknown,
        });
      }
    },
  );
});
