import { createHash } from 'node:crypto';
import jwt from 'jsonwebtoken';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CHANGE,
  PASSWORD,
  TEST_SECRET,
  startTestCoordinator,
  type TestCoordinator,
} from '../support/coordinator.js';
import { startRedisServer, type RedisServerHandle } from '../support/redis-server.js';

const group = (sp: string, cg: string) => `/coord/v1/admin/streams/${sp}/groups/${cg}`;
const monitor = (sp: string, cg: string) => `/coord/v1/monitoring/streams/${sp}/groups/${cg}`;

describe.each(['memory', 'redis'] as const)('HTTP API on the %s store', (storeKind) => {
  let redis: RedisServerHandle | null = null;
  let c: TestCoordinator;

  beforeAll(async () => {
    if (storeKind === 'redis') redis = await startRedisServer();
    c = await startTestCoordinator({
      store: storeKind,
      ...(redis ? { redisUrl: redis.url } : {}),
      // The role tests deny dozens of admin requests a minute; the audit tests read every record.
      overrides: { 'audit.denied-per-minute': 10_000 },
    });
  });
  afterAll(async () => {
    await c?.close();
    await redis?.stop();
  });

  async function expectError(res: Response, status: number, code?: string) {
    expect(res.status).toBe(status);
    const body = (await res.json()) as {
      error: { code: string; message: string; requestId: string };
    };
    expect(body.error.code).toMatch(/^[A-Z_]+$/);
    if (code) expect(body.error.code).toBe(code);
    expect(body.error.requestId).toBe(res.headers.get('x-request-id'));
    return body.error;
  }

  describe('login', () => {
    it('issues a bearer JWT with sub, roles, iat, exp and iss, valid for 7 days by default', async () => {
      const res = await c.call('POST', '/coord/v1/auth/login', {
        body: { username: 'reader', password: PASSWORD },
      });
      expect(res.status).toBe(200);
      const body = (await res.json()) as {
        accessToken: string;
        tokenType: string;
        expiresIn: number;
        roles: string[];
      };
      expect(body.tokenType).toBe('Bearer');
      expect(body.expiresIn).toBe(7 * 24 * 3600);
      expect(body.roles).toEqual(['READ']);
      const claims = jwt.verify(body.accessToken, TEST_SECRET) as jwt.JwtPayload;
      expect(claims).toMatchObject({ sub: 'reader', roles: ['READ'], iss: 'stream-coordinator' });
      expect((claims.exp ?? 0) - (claims.iat ?? 0)).toBe(7 * 24 * 3600);
      const info = await fetch(`${c.url}/coord/v1/monitoring/info`, {
        headers: { authorization: `Bearer ${body.accessToken}` },
      });
      expect(info.status).toBe(200);
    });
    it('refuses a wrong password with 401 and throttles repeated failures with 429', async () => {
      await expectError(
        await c.call('POST', '/coord/v1/auth/login', {
          body: { username: 'producer', password: 'nope-nope' },
        }),
        401,
        'INVALID_CREDENTIALS',
      );
      for (let i = 0; i < 4; i++)
        await c.call('POST', '/coord/v1/auth/login', {
          body: { username: 'producer', password: 'x' },
        });
      const res = await c.call('POST', '/coord/v1/auth/login', {
        body: { username: 'producer', password: PASSWORD },
      });
      await expectError(res, 429, 'LOGIN_THROTTLED');
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    });
    it('answers 400 for a body without username', async () => {
      await expectError(
        await c.call('POST', '/coord/v1/auth/login', { body: { password: 'x' } }),
        400,
        'VALIDATION_FAILED',
      );
    });
    it('answers 415 for a body that is not JSON and 400 for broken JSON', async () => {
      await expectError(
        await c.call('POST', '/coord/v1/auth/login', {
          body: 'username=a',
          headers: { 'content-type': 'text/plain' },
        }),
        415,
        'UNSUPPORTED_MEDIA_TYPE',
      );
      await expectError(
        await c.call('POST', '/coord/v1/auth/login', { body: '{"username":' }),
        400,
        'INVALID_JSON',
      );
    });
    it('answers 413 for a body over the size limit', async () => {
      const big = { username: 'a', password: 'x'.repeat(100_000) };
      await expectError(
        await c.call('POST', '/coord/v1/auth/login', { body: big }),
        413,
        'PAYLOAD_TOO_LARGE',
      );
    });
  });

  describe('health and info', () => {
    it('reports UP with the store status of the mode', async () => {
      const res = await c.call('GET', '/coord/v1/monitoring/health');
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({
        status: 'UP',
        store: storeKind === 'memory' ? 'NOT_CONFIGURED' : 'UP',
      });
    });
    it('gives info to READ', async () => {
      const res = await c.call('GET', '/coord/v1/monitoring/info', { user: 'reader' });
      expect(await res.json()).toMatchObject({
        name: 'stream-coordinator',
        coordinationVersion: { min: 1, max: 1 },
      });
    });
  });

  describe('X-Request-Id', () => {
    it('echoes the caller id and makes one otherwise, on every response', async () => {
      const given = await c.call('GET', '/coord/v1/monitoring/health', {
        headers: { 'x-request-id': 'abc-123' },
      });
      expect(given.headers.get('x-request-id')).toBe('abc-123');
      const made = await c.call('GET', '/nope');
      expect(made.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
      await expectError(made, 404, 'NOT_FOUND');
    });
  });

  describe('group admin and monitoring', () => {
    it('creates a group (201), reads it back, refuses a duplicate (409)', async () => {
      const res = await c.call('POST', '/coord/v1/admin/groups', {
        user: 'writer',
        body: { streamPrefix: 'orders', consumerGroup: 'billing', shardCount: 4, ...CHANGE },
      });
      expect(res.status).toBe(201);
      expect(await res.json()).toMatchObject({
        streamPrefix: 'orders',
        consumerGroup: 'billing',
        shardCount: 4,
        status: 'ACTIVE',
      });
      const read = await c.call('GET', monitor('orders', 'billing'), { user: 'reader' });
      expect(read.status).toBe(200);
      expect(await read.json()).toMatchObject({
        shardCount: 4,
        metadataVersion: 1,
        memberCount: 0,
        owner: c.services.replicaId,
      });
      await expectError(
        await c.call('POST', '/coord/v1/admin/groups', {
          user: 'writer',
          body: { streamPrefix: 'orders', consumerGroup: 'billing', shardCount: 4, ...CHANGE },
        }),
        409,
        'GROUP_EXISTS',
      );
    });
    it('PUT creates (201) then answers 200 unchanged', async () => {
      const first = await c.call('PUT', group('desired', 'g1'), {
        user: 'writer',
        body: { shardCount: 2, ...CHANGE },
      });
      expect(first.status).toBe(201);
      const again = await c.call('PUT', group('desired', 'g1'), {
        user: 'writer',
        body: { shardCount: 2, ...CHANGE },
      });
      expect(again.status).toBe(200);
    });
    it('lists groups in pages', async () => {
      for (let i = 0; i < 5; i++) {
        await c.call('PUT', group('paged', `g${i}`), {
          user: 'writer',
          body: { shardCount: 1, ...CHANGE },
        });
      }
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const query: string = cursor ? `?limit=3&cursor=${encodeURIComponent(cursor)}` : '?limit=3';
        const res = await c.call('GET', `/coord/v1/monitoring/groups${query}`, { user: 'reader' });
        const page = (await res.json()) as {
          groups: Array<{ streamPrefix: string; consumerGroup: string }>;
          nextCursor: string | null;
        };
        expect(page.groups.length).toBeLessThanOrEqual(3);
        seen.push(...page.groups.map((g) => `${g.streamPrefix}:${g.consumerGroup}`));
        cursor = page.nextCursor;
      } while (cursor);
      expect(seen.filter((id) => id.startsWith('paged:')).sort()).toEqual([
        'paged:g0',
        'paged:g1',
        'paged:g2',
        'paged:g3',
        'paged:g4',
      ]);
      expect(new Set(seen).size).toBe(seen.length);
    });
    it('freezes (then refuses delete with 409) and unfreezes', async () => {
      await c.call('PUT', group('frz', 'g'), {
        user: 'writer',
        body: { shardCount: 1, ...CHANGE },
      });
      const frozen = await c.call('POST', `${group('frz', 'g')}/freeze`, {
        user: 'writer',
        body: CHANGE,
      });
      expect(frozen.status).toBe(200);
      expect(await frozen.json()).toMatchObject({ status: 'FROZEN' });
      await expectError(
        await c.call('DELETE', group('frz', 'g'), { user: 'writer', body: CHANGE }),
        409,
        'GROUP_FROZEN',
      );
      const thawed = await c.call('POST', `${group('frz', 'g')}/unfreeze`, {
        user: 'writer',
        body: CHANGE,
      });
      expect(await thawed.json()).toMatchObject({ status: 'ACTIVE' });
    });
    it('deletes a group (204), after which it is 404', async () => {
      await c.call('PUT', group('del', 'g'), {
        user: 'writer',
        body: { shardCount: 1, ...CHANGE },
      });
      const res = await c.call('DELETE', group('del', 'g'), { user: 'writer', body: CHANGE });
      expect(res.status).toBe(204);
      await expectError(
        await c.call('GET', monitor('del', 'g'), { user: 'reader' }),
        404,
        'GROUP_NOT_FOUND',
      );
    });
    it('shows members, assignments and the statechart', async () => {
      await c.call('PUT', group('mon', 'g'), {
        user: 'writer',
        body: { shardCount: 3, ...CHANGE },
      });
      const members = await c.call('GET', `${monitor('mon', 'g')}/members`, { user: 'reader' });
      expect(await members.json()).toEqual({ members: [], departedMembers: [] });
      const assignments = await c.call('GET', `${monitor('mon', 'g')}/assignments`, {
        user: 'reader',
      });
      const body = (await assignments.json()) as {
        shards: Array<{ shard: number; state: string }>;
      };
      expect(body.shards.map((s) => [s.shard, s.state])).toEqual([
        [0, 'released'],
        [1, 'released'],
        [2, 'released'],
      ]);
      const chart = await c.call('GET', `${monitor('mon', 'g')}/statechart`, { user: 'reader' });
      const chartBody = (await chart.json()) as {
        mermaid: string;
        value: unknown;
        definition: unknown;
        members: unknown[];
        memberMachine: { mermaid: string };
      };
      expect(chartBody.mermaid).toMatch(/^stateDiagram-v2/);
      expect(chartBody.value).toMatchObject({ membership: 'empty' });
      // The group's current states are marked in the diagram.
      expect(chartBody.mermaid).toContain('class group_membership_empty current');
      expect(chartBody.mermaid).toContain('class group_lifecycle_active current');
      expect(chartBody.members).toEqual([]);
      expect(chartBody.memberMachine.mermaid).toContain(
        'member_revoking --> member_fenced : FENCED',
      );
    });
    it('serves routing metadata with an ETag and answers 304 to If-None-Match', async () => {
      await c.call('PUT', group('route', 'g'), {
        user: 'writer',
        body: { shardCount: 2, ...CHANGE },
      });
      const res = await c.call('GET', '/coord/v1/routing/streams/route/groups/g', {
        user: 'producer',
      });
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({
        shardCount: 2,
        metadataVersion: 1,
        streams: ['route:0', 'route:1'],
        producersPaused: false,
      });
      const etag = res.headers.get('etag') ?? '';
      const again = await c.call('GET', '/coord/v1/routing/streams/route/groups/g', {
        user: 'producer',
        headers: { 'if-none-match': etag },
      });
      expect(again.status).toBe(304);
      const paused = await c.call('POST', `${group('route', 'g')}/producers/pause`, {
        user: 'writer',
        body: CHANGE,
      });
      expect(paused.status).toBe(200);
      const changed = await c.call('GET', '/coord/v1/routing/streams/route/groups/g', {
        user: 'producer',
        headers: { 'if-none-match': etag },
      });
      expect(changed.status).toBe(200);
      expect(await changed.json()).toMatchObject({ producersPaused: true, metadataVersion: 2 });
    });
    it('serves Prometheus metrics and an OpenAPI document made from the schemas', async () => {
      const metrics = await (await c.call('GET', '/metrics')).text();
      expect(metrics).toContain('coord_admin_requests_total');
      const doc = (await (await c.call('GET', '/coord/v1/openapi.json')).json()) as {
        paths: Record<
          string,
          Record<
            string,
            {
              requestBody?: {
                content: { 'application/json': { schema: { required?: string[] } } };
              };
            }
          >
        >;
      };
      const create = doc.paths['/coord/v1/admin/groups']?.post;
      const createSchema = create?.requestBody?.content['application/json'].schema;
      expect(createSchema?.required).toEqual(
        expect.arrayContaining(['streamPrefix', 'consumerGroup', 'requestedBy', 'reason']),
      );
      // Optional: a group on a prefix that has groups adopts the prefix's count.
      expect(createSchema?.required).not.toContain('shardCount');
      expect(Object.keys(doc.paths)).toContain(
        '/coord/v1/consumer/streams/{stream}/groups/{group}/heartbeat',
      );
    });
  });

  describe('validation (400)', () => {
    const create = (body: Record<string, unknown>) =>
      c.call('POST', '/coord/v1/admin/groups', { user: 'writer', body });
    it.each([
      [
        'a bad stream prefix',
        { streamPrefix: '-bad', consumerGroup: 'g', shardCount: 1, ...CHANGE },
      ],
      [
        'a bad consumer group',
        { streamPrefix: 's', consumerGroup: 'a:b', shardCount: 1, ...CHANGE },
      ],
      ['shardCount 0', { streamPrefix: 's', consumerGroup: 'g', shardCount: 0, ...CHANGE }],
      [
        'shardCount above the limit',
        { streamPrefix: 's', consumerGroup: 'g', shardCount: 1025, ...CHANGE },
      ],
      [
        'a fractional shardCount',
        { streamPrefix: 's', consumerGroup: 'g', shardCount: 1.5, ...CHANGE },
      ],
      ['no requestedBy', { streamPrefix: 's', consumerGroup: 'g', shardCount: 1, reason: 'r' }],
      ['no reason', { streamPrefix: 's', consumerGroup: 'g', shardCount: 1, requestedBy: 'me' }],
    ])('refuses %s', async (_what, body) => {
      await expectError(await create(body), 400, 'VALIDATION_FAILED');
    });
    it('refuses a bad name in the path', async () => {
      await expectError(
        await c.call('GET', monitor('bad%20name', 'g'), { user: 'reader' }),
        400,
        'VALIDATION_FAILED',
      );
      await expectError(
        await c.call('POST', `${group('s', '.g')}/freeze`, { user: 'writer', body: CHANGE }),
        400,
        'VALIDATION_FAILED',
      );
    });
  });

  describe('authentication (401) and roles (403)', () => {
    const expired = () =>
      jwt.sign(
        { sub: 'writer', roles: ['WRITE'], iat: 1000, exp: 2000, iss: 'stream-coordinator' },
        TEST_SECRET,
      );
    const forged = () =>
      jwt.sign(
        {
          sub: 'writer',
          roles: ['WRITE', 'READ'],
          exp: Math.floor(Date.now() / 1000) + 60,
          iss: 'stream-coordinator',
        },
        'another-secret-another-secret-another',
      );
    const routes: Array<[string, string, unknown?]> = [
      ['GET', '/coord/v1/monitoring/info'],
      ['GET', '/coord/v1/monitoring/groups'],
      ['GET', monitor('s', 'g')],
      ['GET', '/coord/v1/monitoring/audit'],
      ['GET', '/coord/v1/routing/streams/s/groups/g'],
      [
        'POST',
        '/coord/v1/admin/groups',
        { streamPrefix: 's', consumerGroup: 'g', shardCount: 1, ...CHANGE },
      ],
      ['PUT', group('s', 'g'), { shardCount: 1, ...CHANGE }],
      ['DELETE', group('s', 'g'), CHANGE],
      ['POST', `${group('s', 'g')}/freeze`, CHANGE],
      [
        'POST',
        '/coord/v1/consumer/streams/s/groups/g/heartbeat',
        {
          memberId: 'm',
          memberEpoch: 0,
          assignmentEpoch: 0,
          metadataVersion: 0,
          currentAssignments: [],
        },
      ],
    ];
    it.each(routes)(
      '%s %s: 401 without a token, with a bad signature, with an expired token',
      async (method, path, body) => {
        await expectError(await c.call(method, path, { body }), 401, 'UNAUTHENTICATED');
        await expectError(
          await c.call(method, path, { body, headers: { authorization: `Bearer ${forged()}` } }),
          401,
          'INVALID_TOKEN',
        );
        await expectError(
          await c.call(method, path, { body, headers: { authorization: `Bearer ${expired()}` } }),
          401,
          'TOKEN_EXPIRED',
        );
      },
    );
    it.each(routes.filter(([, path]) => path.includes('/admin/')))(
      '%s %s: 403 for a READ-only user',
      async (method, path, body) => {
        await expectError(await c.call(method, path, { user: 'reader', body }), 403, 'FORBIDDEN');
      },
    );
    it.each(routes.filter(([, path]) => path.includes('/monitoring/')))(
      '%s %s: 403 for a CONSUMER-only user',
      async (method, path) => {
        await expectError(await c.call(method, path, { user: 'consumer' }), 403, 'FORBIDDEN');
      },
    );
    it('403 for a PRODUCER on the heartbeat and a CONSUMER on routing', async () => {
      await expectError(
        await c.call('GET', '/coord/v1/routing/streams/s/groups/g', { user: 'consumer' }),
        403,
        'FORBIDDEN',
      );
      await expectError(
        await c.call('POST', '/coord/v1/consumer/streams/s/groups/g/heartbeat', {
          user: 'producer',
          body: {},
        }),
        403,
        'FORBIDDEN',
      );
    });
  });

  describe('audit', () => {
    it('records exactly one record per admin request with status, principal, roles, requestId and body hash', async () => {
      const sp = `audit${storeKind}`;
      const raw = (o: unknown) => JSON.stringify(o);
      const batch: Array<{
        method: string;
        path: string;
        user?: string;
        body?: string;
        status: number;
        outcome: string;
        type?: string;
      }> = [
        {
          method: 'POST',
          path: '/coord/v1/admin/groups',
          user: 'writer',
          body: raw({ streamPrefix: sp, consumerGroup: 'g', shardCount: 2, ...CHANGE }),
          status: 201,
          outcome: 'SUCCEEDED',
        },
        {
          method: 'POST',
          path: '/coord/v1/admin/groups',
          user: 'writer',
          body: raw({ streamPrefix: sp, consumerGroup: 'g', shardCount: 2, ...CHANGE }),
          status: 409,
          outcome: 'REJECTED',
        },
        {
          method: 'POST',
          path: '/coord/v1/admin/groups',
          user: 'writer',
          body: raw({ streamPrefix: sp, consumerGroup: 'g2', shardCount: 0, ...CHANGE }),
          status: 400,
          outcome: 'REJECTED',
        },
        {
          method: 'POST',
          path: `${group(sp, 'g')}/freeze`,
          body: raw(CHANGE),
          status: 401,
          outcome: 'DENIED',
        },
        {
          method: 'POST',
          path: `${group(sp, 'g')}/freeze`,
          user: 'reader',
          body: raw(CHANGE),
          status: 403,
          outcome: 'DENIED',
        },
        {
          method: 'POST',
          path: `${group(sp, 'g')}/freeze`,
          user: 'writer',
          body: raw(CHANGE),
          status: 200,
          outcome: 'SUCCEEDED',
        },
        {
          method: 'POST',
          path: `${group(sp, 'g')}/freeze`,
          user: 'writer',
          body: '{broken',
          status: 400,
          outcome: 'REJECTED',
        },
        {
          method: 'POST',
          path: `${group(sp, 'g')}/unfreeze`,
          user: 'writer',
          body: 'plain',
          type: 'text/plain',
          status: 415,
          outcome: 'REJECTED',
        },
        {
          method: 'POST',
          path: `${group(sp, 'g')}/unfreeze`,
          user: 'writer',
          body: raw({ ...CHANGE, padding: 'x'.repeat(70_000) }),
          status: 413,
          outcome: 'REJECTED',
        },
        {
          method: 'POST',
          path: `${group(sp, 'nope')}/freeze`,
          user: 'writer',
          body: raw(CHANGE),
          status: 404,
          outcome: 'REJECTED',
        },
      ];
      const ids: string[] = [];
      for (const [i, r] of batch.entries()) {
        const requestId = `audit-${storeKind}-${i}`;
        ids.push(requestId);
        const res = await fetch(`${c.url}${r.path}`, {
          method: r.method,
          headers: {
            'content-type': r.type ?? 'application/json',
            'x-request-id': requestId,
            ...(r.user ? { authorization: `Bearer ${c.token(r.user)}` } : {}),
          },
          ...(r.body ? { body: r.body } : {}),
        });
        expect(res.status, `${r.method} ${r.path}`).toBe(r.status);
      }
      const res = await c.call('GET', '/coord/v1/monitoring/audit?limit=1000', { user: 'reader' });
      const { records } = (await res.json()) as { records: Array<Record<string, unknown>> };
      for (const [i, r] of batch.entries()) {
        const mine = records.filter((rec) => rec.requestId === ids[i]);
        expect(mine, ids[i]).toHaveLength(1);
        const rec = mine[0] as Record<string, unknown>;
        expect(rec).toMatchObject({ method: r.method, status: r.status, outcome: r.outcome });
        // A body over the limit is not read, so it has no fingerprint.
        expect(rec.bodySha256).toBe(
          r.status === 413
            ? null
            : createHash('sha256')
                .update(r.body ?? '')
                .digest('hex'),
        );
        expect(rec.principal).toBe(r.user ?? null);
        expect(rec.roles).toEqual(
          r.user === 'writer' ? ['WRITE'] : r.user === 'reader' ? ['READ'] : [],
        );
        expect(typeof rec.durationMs).toBe('number');
        expect(JSON.stringify(rec)).not.toMatch(/Bearer|eyJ/);
      }
      const created = records.find((rec) => rec.requestId === ids[0]);
      expect(created).toMatchObject({
        operation: 'createGroup',
        streamPrefix: sp,
        consumerGroup: 'g',
        requestedBy: 'test-suite',
        reason: 'integration test',
      });
      const filtered = await c.call(
        'GET',
        `/coord/v1/monitoring/audit?streamPrefix=${sp}&consumerGroup=g`,
        { user: 'reader' },
      );
      const filteredBody = (await filtered.json()) as {
        records: Array<{ streamPrefix: string; consumerGroup: string }>;
      };
      expect(filteredBody.records.length).toBeGreaterThanOrEqual(5);
      expect(
        filteredBody.records.every((rec) => rec.streamPrefix === sp && rec.consumerGroup === 'g'),
      ).toBe(true);
    });
    it('never writes an audit record for non-admin requests', async () => {
      await c.call('GET', '/coord/v1/monitoring/info', {
        user: 'reader',
        headers: { 'x-request-id': `not-audited-${storeKind}` },
      });
      const res = await c.call('GET', '/coord/v1/monitoring/audit?limit=1000', { user: 'reader' });
      const { records } = (await res.json()) as { records: Array<{ requestId: string }> };
      expect(records.some((r) => r.requestId === `not-audited-${storeKind}`)).toBe(false);
    });
  });
});
