import { request } from 'node:http';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { allRoutes } from '../../src/http/routes/index.js';
import { VERSION } from '../../src/version.js';
import { CHANGE, useCoordinator, type TestCoordinator } from '../support/coordinator.js';
import { canonicalPath, pathSpelling, spelt } from '../support/path-spellings.js';

/*
 * docs/decisions.md#one-spelling-per-path: paths are matched case-sensitively, and every request whose path begins with
 * `/coord/v1/admin/` in any letter case, with trailing or doubled slashes or percent-encoded
 * characters, is refused or audited: exactly one audit record and one
 * `coord_admin_requests_total` count per request, and no spelling but the canonical one reaches
 * an admin handler.
 */

const STREAM = 'spell';
const GROUP = 'g';
const PARAMS: Record<string, string> = { stream: STREAM, group: GROUP, migrationId: 'current' };

/**
 * A body and query per admin operation that the canonical spelling would accept (and so change
 * state with). A new admin route fails the test until it is listed here.
 */
const REQUESTS: Record<string, { body: Record<string, unknown>; query?: string }> = {
  createGroup: {
    body: { streamPrefix: STREAM, consumerGroup: 'created', shardCount: 2, ...CHANGE },
  },
  putGroup: { body: { shardCount: 3, ...CHANGE } },
  deleteGroup: { body: CHANGE, query: '?force=true' },
  scale: { body: { shardCount: 3, ...CHANGE } },
  rollback: { body: CHANGE },
  recovery: { body: { action: 'RECREATE', shardCount: 2, ...CHANGE } },
  freeze: { body: CHANGE },
  unfreeze: { body: CHANGE },
  pauseProducers: { body: CHANGE },
  resumeProducers: { body: CHANGE },
  replayDeadLetters: { body: { limit: 10, ...CHANGE } },
  purgeDeadLetters: { body: CHANGE },
  consumption: { body: { action: 'PAUSE', shards: [0], ...CHANGE } },
  resetPositions: { body: { to: 'earliest', dryRun: true, ...CHANGE } },
};

/**
 * Sends the path exactly as given (fetch would normalise it), with a `Content-Length`: node's
 * client sends a DELETE body unframed otherwise.
 */
function send(
  c: TestCoordinator,
  method: string,
  path: string,
  headers: Record<string, string>,
  body: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: c.port,
        method,
        path,
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe.each(['memory', 'redis'] as const)('admin paths on the %s store', (store) => {
  let c: TestCoordinator;
  useCoordinator({ store }, (coordinator) => {
    c = coordinator;
  });

  beforeAll(async () => {
    const res = await c.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: STREAM, consumerGroup: GROUP, shardCount: 2, ...CHANGE },
    });
    expect(res.status).toBe(201);
  });

  /** Everything an admin call could change: the group list and the group's stored revision. */
  async function state(): Promise<unknown> {
    const list = await c.call('GET', '/coord/v1/monitoring/groups?limit=1000', { user: 'reader' });
    const one = await c.call('GET', `/coord/v1/monitoring/streams/${STREAM}/groups/${GROUP}`, {
      user: 'reader',
    });
    // A missing group is its status only: the error body carries a new request id each time.
    return { list: await list.json(), one: one.status === 200 ? await one.json() : one.status };
  }

  /** `coord_admin_requests_total` summed over its labels, as `/metrics` renders it. */
  async function adminRequestCount(): Promise<number> {
    const { values } = await c.services.metrics.adminRequests.get();
    return values.reduce((sum, { value }) => sum + value, 0);
  }

  async function auditRecordsOf(requestId: string): Promise<Array<Record<string, unknown>>> {
    const res = await c.call('GET', '/coord/v1/monitoring/audit?limit=50', { user: 'reader' });
    const { records } = (await res.json()) as { records: Array<Record<string, unknown>> };
    return records.filter((record) => record.requestId === requestId);
  }

  it('lists a request for every admin route', () => {
    const operations = allRoutes(c.services.settings, VERSION)
      .filter((spec) => spec.path.startsWith('/coord/v1/admin/'))
      .map((spec) => spec.operation);
    expect(operations.sort()).toEqual(Object.keys(REQUESTS).sort());
  });

  /** Sends one admin request as the WRITE user, with a body the canonical route accepts. */
  async function sendAdmin(
    request: { method: string; operation: string; path: string },
    requestId: string,
  ) {
    const { body, query = '' } = REQUESTS[request.operation] ?? { body: {} };
    const path = request.path + query;
    const res = await send(
      c,
      request.method,
      path,
      {
        'content-type': 'application/json',
        authorization: `Bearer ${c.token('writer')}`,
        'x-request-id': requestId,
      },
      JSON.stringify(body),
    );
    return { ...res, path };
  }

  /** Refused as no route (404), the state as `before`, one audit record, one count. */
  async function expectRefusedAndAuditedOnce(
    request: { method: string; operation: string; path: string },
    requestId: string,
    before: unknown,
  ): Promise<void> {
    const label = `${request.method} ${request.path}`;
    const count = await adminRequestCount();
    const res = await sendAdmin(request, requestId);
    expect(res.status, label).toBe(404);
    if (request.method !== 'HEAD') {
      expect((JSON.parse(res.body) as { error: { code: string } }).error.code).toBe('NOT_FOUND');
    }
    expect(await state(), `${label} changed state`).toEqual(before);
    const records = await auditRecordsOf(requestId);
    expect(records, `${label} audit records`).toHaveLength(1);
    expect(records[0]).toMatchObject({
      method: request.method,
      path: res.path,
      operation: 'unknown',
      outcome: 'REJECTED',
      status: 404,
      principal: 'writer',
    });
    expect(await adminRequestCount(), `${label} counted`).toBe(count + 1);
  }

  it('serves and audits the canonical spelling once (the control)', async () => {
    const path = `/coord/v1/admin/streams/${STREAM}/groups/${GROUP}`;
    for (const operation of ['freeze', 'unfreeze']) {
      const requestId = `canonical-${store}-${operation}`;
      const count = await adminRequestCount();
      const res = await sendAdmin(
        { method: 'POST', operation, path: `${path}/${operation}` },
        requestId,
      );
      expect(res.status, operation).toBe(200);
      expect(await auditRecordsOf(requestId)).toMatchObject([{ operation, status: 200 }]);
      expect(await adminRequestCount()).toBe(count + 1);
    }
  });

  it.each([
    ['POST', 'createGroup', '/COORD/V1/ADMIN/GROUPS'],
    ['POST', 'createGroup', '/coord/v1/Admin/groups'],
    ['DELETE', 'deleteGroup', `/COORD/V1/ADMIN/STREAMS/${STREAM}/GROUPS/${GROUP}`],
    ['POST', 'createGroup', '/coord/v1/admin/groups/'],
    ['POST', 'createGroup', '//coord/v1/admin/groups'],
    ['POST', 'createGroup', '/coord/v1//admin/groups'],
    ['POST', 'createGroup', '/coord/v1/%61dmin/groups'],
    ['POST', 'createGroup', '/coord/v1/admin%2Fgroups'],
    ['POST', 'freeze', `/coord/v1/admin/streams/${STREAM}/groups/${GROUP}/Freeze`],
    // Methods no admin route has, on canonical paths: express's own OPTIONS answer included.
    ['GET', 'freeze', `/coord/v1/admin/streams/${STREAM}/groups/${GROUP}/freeze`],
    ['HEAD', 'freeze', `/coord/v1/admin/streams/${STREAM}/groups/${GROUP}/freeze`],
    ['OPTIONS', 'createGroup', '/coord/v1/admin/groups'],
    ['PATCH', 'putGroup', `/coord/v1/admin/streams/${STREAM}/groups/${GROUP}`],
  ])('%s with a %s body to %s is refused and audited once', async (method, operation, path) => {
    const before = await state();
    await expectRefusedAndAuditedOnce(
      { method, operation, path },
      `named-${store}-${method}-${path}`,
      before,
    );
  });

  it('every other spelling of an admin route is refused, changes nothing, and is audited and counted exactly once', async () => {
    const admin = allRoutes(c.services.settings, VERSION).filter((spec) =>
      spec.path.startsWith('/coord/v1/admin/'),
    );
    // No chain: fast-check shrinks each part on its own, towards the canonical spelling.
    const cases = fc
      .tuple(fc.constantFrom(...admin), pathSpelling)
      .map(([spec, spelling]) => ({
        method: spec.method.toUpperCase(),
        operation: spec.operation ?? '',
        path: spelt(spec.path, PARAMS, spelling),
        canonical: canonicalPath(spec.path, PARAMS),
      }))
      .filter(({ path, canonical }) => path !== canonical);
    // Compared with the state before the first request, so a change by any one of them shows.
    const before = await state();
    let n = 0;
    await fc.assert(
      fc.asyncProperty(cases, async (request) => {
        await expectRefusedAndAuditedOnce(request, `spelling-${store}-${n++}`, before);
      }),
      { numRuns: 80 },
    );
  }, 120_000);
});
