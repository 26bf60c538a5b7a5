import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import jwt from 'jsonwebtoken';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROLES } from '../../src/http/auth/roles.js';
import { hashPassword } from '../../src/http/auth/password-hash.js';
import {
  CHANGE,
  PASSWORD,
  TEST_SECRET,
  groupView,
  startTestCoordinator,
  useCoordinator,
  type StoreKind,
  type TestCoordinator,
} from '../support/coordinator.js';

/*
 * Scoped tokens (README.md#tokens-roles-and-group-scopes): a token with a `groups` claim reaches only the groups its
 * patterns match, on every route of the OpenAPI document (read from the running server, so a
 * route added tomorrow is covered or fails the test until it is classified).
 */

const now = () => Math.floor(Date.now() / 1000);
function mint(claims: Record<string, unknown>): string {
  return jwt.sign(
    { sub: 'scoped-service', roles: [...ROLES], iat: now(), exp: now() + 600, ...claims },
    TEST_SECRET,
    { algorithm: 'HS256', issuer: 'stream-coordinator' },
  );
}
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
/** Every role, limited to the stream prefix `in`. */
const SCOPED = bearer(mint({ groups: ['in:*'] }));
/** Every role, no `groups` claim: today's meaning, every group. */
const UNSCOPED = bearer(mint({}));

/** A body every route with a body accepts (zod strips what a route does not read). */
const ANY_BODY = {
  ...CHANGE,
  shardCount: 2,
  action: 'RESUME',
  to: 'earliest',
  memberId: 'scope-member',
  memberEpoch: 0,
  assignmentEpoch: 0,
  metadataVersion: 0,
  currentAssignments: [],
};

interface Operation {
  readonly method: string;
  readonly path: string;
  readonly secured: boolean;
}

async function operationsOf(c: TestCoordinator): Promise<Operation[]> {
  const res = await c.call('GET', '/coord/v1/openapi.json');
  const doc = (await res.json()) as {
    paths: Record<string, Record<string, { security: unknown[] }>>;
  };
  return Object.entries(doc.paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, op]) => ({
      method: method.toUpperCase(),
      path,
      secured: op.security.length > 0,
    })),
  );
}

const url = (path: string, stream: string, group: string) =>
  path.replace('{stream}', stream).replace('{group}', group).replace('{migrationId}', 'current');

async function errorCode(res: Response): Promise<string | undefined> {
  const body = (await res.json().catch(() => null)) as { error?: { code?: string } } | null;
  return body?.error?.code;
}

interface Listing {
  groups: Array<{ streamPrefix: string; consumerGroup: string }>;
  nextCursor: string | null;
}
interface AuditPage {
  records: Array<{ streamPrefix: string | null; consumerGroup: string | null; status: number }>;
}

describe.each<StoreKind>(['memory', 'redis'])('scoped tokens (%s store)', (store) => {
  let c: TestCoordinator;
  useCoordinator({ store }, (coordinator) => {
    c = coordinator;
  });
  let fresh = 0;
  const ghost = () => `ghost-${++fresh}`;

  beforeAll(async () => {
    for (const [streamPrefix, consumerGroup] of [
      ['in', 'g'],
      ['out', 'g'],
    ]) {
      const res = await c.call('POST', '/coord/v1/admin/groups', {
        user: 'writer',
        body: { streamPrefix, consumerGroup, shardCount: 2, ...CHANGE },
      });
      expect(res.status).toBe(201);
    }
  });

  /** The routes that name no group in their path, and what a scoped token gets there. */
  const groupless: Record<string, () => Promise<void>> = {
    'GET /coord/v1/monitoring/info': async () => {
      expect((await c.call('GET', '/coord/v1/monitoring/info', { headers: SCOPED })).status).toBe(
        200,
      );
    },
    'GET /coord/v1/monitoring/replicas': async () => {
      const res = await c.call('GET', '/coord/v1/monitoring/replicas', { headers: SCOPED });
      expect(res.status).toBe(200);
      const { replicas } = (await res.json()) as {
        replicas: Array<{ leases?: Array<{ streamPrefix: string }> }>;
      };
      for (const replica of replicas) {
        expect((replica.leases ?? []).every((l) => l.streamPrefix === 'in')).toBe(true);
      }
    },
    'GET /coord/v1/monitoring/groups': async () => {
      const res = await c.call('GET', '/coord/v1/monitoring/groups', { headers: SCOPED });
      const { groups } = (await res.json()) as Listing;
      expect(groups.length).toBeGreaterThan(0);
      expect(groups.every((g) => g.streamPrefix === 'in')).toBe(true);
    },
    'GET /coord/v1/monitoring/audit': async () => {
      const res = await c.call('GET', '/coord/v1/monitoring/audit', { headers: SCOPED });
      const { records } = (await res.json()) as AuditPage;
      expect(records.every((r) => r.streamPrefix === 'in')).toBe(true);
    },
    'POST /coord/v1/admin/groups': async () => {
      const create = (streamPrefix: string, consumerGroup: string) =>
        c.call('POST', '/coord/v1/admin/groups', {
          headers: SCOPED,
          body: { ...ANY_BODY, streamPrefix, consumerGroup },
        });
      const outside = await create('out', ghost());
      expect(outside.status).toBe(403);
      expect(await errorCode(outside)).toBe('GROUP_NOT_PERMITTED');
      // The existing group outside the scope: 403 too, not 409 GROUP_EXISTS.
      expect(await errorCode(await create('out', 'g'))).toBe('GROUP_NOT_PERMITTED');
      expect((await create('in', ghost())).status).toBe(201);
    },
  };

  it('every route of the OpenAPI document keeps a scoped token to its groups', async () => {
    const before = await groupView(c, 'out');
    const operations = (await operationsOf(c)).filter((op) => op.secured);
    expect(operations.length).toBeGreaterThanOrEqual(20);
    let groupRoutes = 0;
    for (const { method, path } of operations) {
      const name = `${method} ${path}`;
      if (!path.includes('{stream}') && !path.includes('{group}')) {
        const check = groupless[name];
        expect(check, `${name} names no group: classify it in this test`).toBeDefined();
        await check?.();
        continue;
      }
      expect(path, name).toContain('{stream}');
      expect(path, name).toContain('{group}');
      groupRoutes++;
      const send = (stream: string, group: string, headers: Record<string, string>) =>
        c.call(method, url(path, stream, group), {
          headers,
          ...(method === 'GET' ? {} : { body: ANY_BODY }),
        });
      // Outside the scope: 403 whether the group exists or not, so existence cannot be probed.
      for (const [stream, group] of [
        ['out', 'g'],
        ['out', ghost()],
        ['nowhere', 'g'],
      ] as const) {
        const res = await send(stream, group, SCOPED);
        expect(res.status, `${name} on ${stream}/${group}`).toBe(403);
        expect(await errorCode(res), `${name} on ${stream}/${group}`).toBe('GROUP_NOT_PERMITTED');
      }
      // Inside the scope: answered exactly as a token without groups is answered.
      const scoped = await send('in', ghost(), SCOPED);
      const unscoped = await send('in', ghost(), UNSCOPED);
      expect(scoped.status, name).not.toBe(403);
      expect(scoped.status, name).toBe(unscoped.status);
      expect(await errorCode(scoped), name).toBe(await errorCode(unscoped));
    }
    expect(groupRoutes).toBeGreaterThanOrEqual(15);
    expect(Object.keys(groupless).sort()).toEqual(
      operations
        .map((op) => `${op.method} ${op.path}`)
        .filter((name) => !name.includes('{'))
        .sort(),
    );
    // Nothing reached the group outside the scope.
    expect(await groupView(c, 'out')).toEqual(before);
  });

  it('decides 401, then 403 role, then 403 group, before 404', async () => {
    const hb = '/coord/v1/consumer/streams/out/groups/missing/heartbeat';
    expect(await errorCode(await c.call('POST', hb, { body: ANY_BODY }))).toBe('UNAUTHENTICATED');
    const readOnly = bearer(mint({ roles: ['READ'], groups: ['in:*'] }));
    expect(await errorCode(await c.call('POST', hb, { body: ANY_BODY, headers: readOnly }))).toBe(
      'FORBIDDEN',
    );
    expect(await errorCode(await c.call('POST', hb, { body: ANY_BODY, headers: SCOPED }))).toBe(
      'GROUP_NOT_PERMITTED',
    );
    expect(await errorCode(await c.call('POST', hb, { body: ANY_BODY, headers: UNSCOPED }))).toBe(
      'GROUP_NOT_FOUND',
    );
  });

  it('the heartbeat fast path and express refuse alike', async () => {
    const hb = '/coord/v1/consumer/streams/out/groups/g/heartbeat';
    const fast = await c.call('POST', hb, { body: ANY_BODY, headers: SCOPED });
    expect(fast.headers.get('x-coord-path')).toBe('fast');
    // A compressed body is left to express (paths are strict, so only the canonical one routes).
    const viaExpress = await fetch(`${c.url}${hb}`, {
      method: 'POST',
      headers: { ...SCOPED, 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: new Blob([gzipSync(JSON.stringify(ANY_BODY))]),
    });
    expect(viaExpress.headers.get('x-coord-path')).toBeNull();
    for (const res of [fast, viaExpress]) {
      expect(res.status).toBe(403);
      expect(await errorCode(res)).toBe('GROUP_NOT_PERMITTED');
    }
    const inside = await c.call('POST', '/coord/v1/consumer/streams/in/groups/g/heartbeat', {
      body: ANY_BODY,
      headers: SCOPED,
    });
    expect(inside.status).toBe(200);
    expect(inside.headers.get('x-coord-path')).toBe('fast');
  });

  it('a malformed groups claim is 401 INVALID_TOKEN, on express and the fast path', async () => {
    for (const groups of ['in:*', ['in'], ['in.*:*'], [':g'], [42], null]) {
      const headers = bearer(mint({ groups }));
      const routing = await c.call('GET', '/coord/v1/routing/streams/in/groups/g', { headers });
      const heartbeat = await c.call('POST', '/coord/v1/consumer/streams/in/groups/g/heartbeat', {
        body: ANY_BODY,
        headers,
      });
      for (const res of [routing, heartbeat]) {
        expect(res.status, JSON.stringify(groups)).toBe(401);
        expect(await errorCode(res)).toBe('INVALID_TOKEN');
      }
    }
  });

  it('the group listing holds only permitted groups, page by page', async () => {
    for (const [streamPrefix, consumerGroup] of [
      ['in', 'list-a'],
      ['out', 'list-b'],
      ['in', 'list-c'],
      ['out', 'list-d'],
      ['in', 'list-e'],
    ]) {
      // The count of the prefix's groups: every group on a prefix has the same.
      await c.call('PUT', `/coord/v1/admin/streams/${streamPrefix}/groups/${consumerGroup}`, {
        user: 'writer',
        body: { shardCount: 2, ...CHANGE },
      });
    }
    const all = async (headers: Record<string, string>, limit: number) => {
      const names: string[] = [];
      let cursor: string | null = null;
      do {
        const query: string = `limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`;
        const res = await c.call('GET', `/coord/v1/monitoring/groups?${query}`, { headers });
        expect(res.status).toBe(200);
        const page = (await res.json()) as Listing;
        expect(page.groups.length).toBeLessThanOrEqual(limit);
        names.push(...page.groups.map((g) => `${g.streamPrefix}/${g.consumerGroup}`));
        cursor = page.nextCursor;
      } while (cursor);
      return names;
    };
    const everything = await all(UNSCOPED, 1000);
    const permitted = everything.filter((name) => name.startsWith('in/'));
    expect(permitted).toEqual(expect.arrayContaining(['in/list-a', 'in/list-c', 'in/list-e']));
    expect(everything).toEqual(expect.arrayContaining(['out/list-b', 'out/list-d']));
    for (const limit of [1, 2, 1000]) expect(await all(SCOPED, limit)).toEqual(permitted);
    const none = bearer(mint({ groups: [] }));
    expect(await all(none, 1000)).toEqual([]);
  });

  it('the audit query returns only records of permitted groups, none without a group', async () => {
    await c.call('POST', '/coord/v1/admin/streams/in/groups/g/freeze', {
      user: 'writer',
      body: CHANGE,
    });
    await c.call('POST', '/coord/v1/admin/streams/out/groups/g/freeze', {
      user: 'writer',
      body: CHANGE,
    });
    // Audited, but about no group.
    await c.call('POST', '/coord/v1/admin/no-such-thing', { user: 'writer', body: CHANGE });
    const query = async (headers: Record<string, string>, filter = '') => {
      const res = await c.call('GET', `/coord/v1/monitoring/audit?limit=1000${filter}`, {
        headers,
      });
      expect(res.status).toBe(200);
      return ((await res.json()) as AuditPage).records;
    };
    const everything = await query(UNSCOPED);
    expect(everything.some((r) => r.streamPrefix === 'out')).toBe(true);
    expect(everything.some((r) => r.streamPrefix === null)).toBe(true);
    const scoped = await query(SCOPED);
    expect(scoped.length).toBeGreaterThan(0);
    expect(scoped).toEqual(everything.filter((r) => r.streamPrefix === 'in'));
    expect(await query(SCOPED, '&streamPrefix=out')).toEqual([]);
    const oneGroup = bearer(mint({ groups: ['*:g'] }));
    expect(await query(oneGroup)).toEqual(everything.filter((r) => r.consumerGroup === 'g'));
  });
});

describe('login issues a token carrying the user groups of the users file', () => {
  let c: TestCoordinator;
  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'coord-scoped-users-'));
    const file = join(dir, 'users.yaml');
    const hash = await hashPassword(PASSWORD);
    writeFileSync(
      file,
      [
        'users:',
        '  - username: billing-consumer',
        `    passwordHash: "${hash}"`,
        '    roles: [CONSUMER, READ]',
        '    groups: ["orders:billing"]',
      ].join('\n') + '\n',
    );
    c = await startTestCoordinator({ store: 'memory', overrides: { 'security.users-file': file } });
    for (const consumerGroup of ['billing', 'shipping']) {
      await c.call('POST', '/coord/v1/admin/groups', {
        user: 'writer',
        body: { streamPrefix: 'orders', consumerGroup, shardCount: 1, ...CHANGE },
      });
    }
  });
  afterAll(async () => c?.close());

  it('the token reaches orders/billing and nothing else', async () => {
    const login = await c.call('POST', '/coord/v1/auth/login', {
      body: { username: 'billing-consumer', password: PASSWORD },
    });
    expect(login.status).toBe(200);
    const body = (await login.json()) as { accessToken: string; groups: string[] };
    expect(body.groups).toEqual(['orders:billing']);
    expect(jwt.decode(body.accessToken)).toMatchObject({ groups: ['orders:billing'] });
    const headers = bearer(body.accessToken);
    const get = (group: string) =>
      c.call('GET', `/coord/v1/monitoring/streams/orders/groups/${group}`, { headers });
    expect((await get('billing')).status).toBe(200);
    const other = await get('shipping');
    expect(other.status).toBe(403);
    expect(await errorCode(other)).toBe('GROUP_NOT_PERMITTED');
  });
});
