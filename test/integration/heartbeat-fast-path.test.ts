import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import jwt from 'jsonwebtoken';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { RecentMap } from '../../src/collections/recent-map.js';
import { loadSettings } from '../../src/config/load.js';
import { HEARTBEAT_PATH } from '../../src/http/routes/consumer.js';
import type { GroupRef } from '../../src/machines/types.js';
import { createLogger } from '../../src/observability/logger.js';
import { startCoordinator, type RunningCoordinator } from '../../src/server.js';
import { CHANGE, TEST_SECRET } from '../support/coordinator.js';
import { canonicalPath, pathSpelling, spelt } from '../support/path-spellings.js';
import { forcedGc } from '../support/gc.js';

/*
 * The heartbeat fast path (src/http/heartbeat-fast-path.ts) against express: every request is
 * sent to two coordinators with the same settings, one with the fast path (the default) and
 * one without it (`heartbeatFastPath: false`, i.e. express only, as before), and both must
 * answer alike. The fast path marks what it serves with `X-Coord-Path: fast`.
 */

const HB = '/coord/v1/consumer/streams/fp/groups/g/heartbeat';
const JOIN = {
  memberId: 'm-1',
  memberEpoch: 0,
  assignmentEpoch: 0,
  metadataVersion: 0,
  currentAssignments: [],
};

function token(
  roles: string[],
  options: { secret?: string; expSeconds?: number; sub?: string } = {},
): string {
  const now = Math.floor(Date.now() / 1000);
  return jwt.sign(
    { sub: options.sub ?? 'someone', roles, iat: now, exp: now + (options.expSeconds ?? 3600) },
    options.secret ?? TEST_SECRET,
    { algorithm: 'HS256', issuer: 'stream-coordinator' },
  );
}
const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
const CONSUMER = bearer(token(['CONSUMER']));
const JSON_TYPE = { 'content-type': 'application/json' };

/** Creates group `fp/<group>` on `c`; returns its heartbeat path. */
async function createGroup(c: RunningCoordinator, group: string, shardCount = 2): Promise<string> {
  const res = await fetch(`${c.url}/coord/v1/admin/groups`, {
    method: 'POST',
    headers: { ...JSON_TYPE, ...bearer(token(['WRITE'])) },
    body: JSON.stringify({ streamPrefix: 'fp', consumerGroup: group, shardCount, ...CHANGE }),
  });
  expect(res.status).toBe(201);
  return `/coord/v1/consumer/streams/fp/groups/${group}/heartbeat`;
}

async function start(heartbeatFastPath: boolean): Promise<RunningCoordinator> {
  const settings = loadSettings({
    env: {},
    overrides: {
      'http.port': 0,
      'http.host': '127.0.0.1',
      'store.type': 'memory',
      'security.jwt-secret': TEST_SECRET,
      'security.bootstrap-admin-password': 'not-used-by-these-tests',
      'membership.assignment-debounce': '0ms',
    },
  });
  const c = await startCoordinator(settings, {
    heartbeatFastPath,
    logger: createLogger({ level: 'error', format: 'text', silent: true }),
  });
  await createGroup(c, 'g');
  return c;
}

interface Answer {
  status: number;
  path: string | null;
  requestIdHeader: string | null;
  retryAfter: string | null;
  contentType: string | null;
  body: unknown;
}

type Init = {
  method?: string;
  headers?: Record<string, string>;
  body?: () => string | Blob | ReadableStream<Uint8Array>;
};

async function ask(c: RunningCoordinator, path: string, init: Init): Promise<Answer> {
  const res = await fetch(`${c.url}${path}`, {
    method: init.method ?? 'POST',
    headers: init.headers ?? {},
    ...(init.body ? { body: init.body(), duplex: 'half' } : {}),
  });
  const text = await res.text();
  return {
    status: res.status,
    path: res.headers.get('x-coord-path'),
    requestIdHeader: res.headers.get('x-request-id'),
    retryAfter: res.headers.get('retry-after'),
    contentType: res.headers.get('content-type'),
    body: text.length > 0 ? (JSON.parse(text) as unknown) : undefined,
  };
}

function errorOf(answer: Answer): { code: string; message: string; requestId: string } {
  return (answer.body as { error: { code: string; message: string; requestId: string } }).error;
}

/**
 * What must be equal: an error body without its request id (one per request), a reply
 * without its lifecycle id, layout id, creation time and start (each coordinator has its own
 * group).
 */
function comparable(answer: Answer): unknown {
  const body = answer.body as { error?: Record<string, unknown>; lifecycleId?: string } | undefined;
  if (body?.error) {
    const { requestId: _requestId, ...rest } = body.error;
    return rest;
  }
  if (body?.lifecycleId !== undefined) {
    return ownGroupFieldsLeftOut(body);
  }
  return body;
}

/** A reply without what differs between two coordinators' groups of the same name. */
function ownGroupFieldsLeftOut(body: Record<string, unknown>): Record<string, unknown> {
  const {
    lifecycleId: _lifecycleId,
    layoutId: _layoutId,
    createdAt: _createdAt,
    startFromMs: _startFromMs,
    ...rest
  } = body;
  return rest;
}

/** What the retention test reaches inside the host (its group table). */
interface HostInternals {
  readonly parts: { readonly table: { get(ref: GroupRef): object | undefined } };
}

/** The host's entry of `ref`, held weakly (no strong reference is left in the caller). */
function weakEntryOf(c: RunningCoordinator, ref: GroupRef): WeakRef<object> {
  const held = (c.host as unknown as HostInternals).parts.table.get(ref);
  if (held === undefined) throw new Error(`no entry for ${ref.consumerGroup}`);
  return new WeakRef(held);
}

describe('heartbeat fast path', () => {
  let fast: RunningCoordinator;
  let plain: RunningCoordinator;

  beforeAll(async () => {
    [fast, plain] = await Promise.all([start(true), start(false)]);
  });
  afterAll(async () => {
    await Promise.all([fast?.close(), plain?.close()]);
  });

  /** The body of `memberId`'s next heartbeat, once it joined and beat `rounds` times on `fast`. */
  async function beaten(path: string, memberId: string, rounds: number): Promise<unknown> {
    let body: unknown = { ...JOIN, memberId };
    for (let i = 0; i < rounds; i++) {
      const answer = await ask(fast, path, consumerInit(body));
      body = nextOf(memberId, answer.body as Record<string, unknown>);
    }
    return body;
  }

  /** Sends the same request to both; checks that only the fast one went the fast path. */
  async function both(path: string, init: Init, served: 'fast' | 'express' = 'fast') {
    const [viaFast, viaExpress] = await Promise.all([
      ask(fast, path, init),
      ask(plain, path, init),
    ]);
    expect(viaFast.path).toBe(served === 'fast' ? 'fast' : null);
    expect(viaExpress.path).toBeNull();
    for (const answer of [viaFast, viaExpress]) {
      if (answer.status >= 400) expect(errorOf(answer).requestId).toBe(answer.requestIdHeader);
      if (answer.body !== undefined)
        expect(answer.contentType).toBe('application/json; charset=utf-8');
    }
    expect(viaFast.status).toBe(viaExpress.status);
    expect(comparable(viaFast)).toEqual(comparable(viaExpress));
    expect(viaFast.retryAfter).toBe(viaExpress.retryAfter);
    return viaFast;
  }

  const errorCases: Array<[string, Init, number, string]> = [
    [
      'no Authorization header',
      { headers: JSON_TYPE, body: () => JSON.stringify(JOIN) },
      401,
      'UNAUTHENTICATED',
    ],
    [
      'an empty Authorization header',
      { headers: { ...JSON_TYPE, authorization: '' }, body: () => JSON.stringify(JOIN) },
      401,
      'UNAUTHENTICATED',
    ],
    [
      'a token signed with another secret',
      {
        headers: { ...JSON_TYPE, ...bearer(token(['CONSUMER'], { secret: 'x'.repeat(40) })) },
        body: () => JSON.stringify(JOIN),
      },
      401,
      'INVALID_TOKEN',
    ],
    [
      'an expired token',
      {
        headers: { ...JSON_TYPE, ...bearer(token(['CONSUMER'], { expSeconds: -60 })) },
        body: () => JSON.stringify(JOIN),
      },
      401,
      'TOKEN_EXPIRED',
    ],
    [
      'a token without roles',
      {
        headers: {
          ...JSON_TYPE,
          ...bearer(
            jwt.sign({ sub: 'x' }, TEST_SECRET, { issuer: 'stream-coordinator', expiresIn: 60 }),
          ),
        },
        body: () => JSON.stringify(JOIN),
      },
      401,
      'INVALID_TOKEN',
    ],
    [
      'a Basic Authorization header',
      {
        headers: { ...JSON_TYPE, authorization: 'Basic dXNlcjpwYXNz' },
        body: () => JSON.stringify(JOIN),
      },
      401,
      'INVALID_TOKEN',
    ],
    [
      'a bare "Bearer"',
      { headers: { ...JSON_TYPE, authorization: 'Bearer' }, body: () => JSON.stringify(JOIN) },
      401,
      'INVALID_TOKEN',
    ],
    [
      'a garbage token',
      {
        headers: { ...JSON_TYPE, authorization: 'Bearer not.a.jwt' },
        body: () => JSON.stringify(JOIN),
      },
      401,
      'INVALID_TOKEN',
    ],
    [
      'a PRODUCER token',
      {
        headers: { ...JSON_TYPE, ...bearer(token(['PRODUCER', 'READ'])) },
        body: () => JSON.stringify(JOIN),
      },
      403,
      'FORBIDDEN',
    ],
    [
      'a body over the limit (Content-Length)',
      {
        headers: { ...JSON_TYPE, ...CONSUMER },
        body: () => JSON.stringify({ ...JOIN, clientId: 'x'.repeat(100_000) }),
      },
      413,
      'PAYLOAD_TOO_LARGE',
    ],
    [
      'a chunked body over the limit',
      {
        headers: { ...JSON_TYPE, ...CONSUMER },
        body: () =>
          new ReadableStream({
            start(controller) {
              for (let i = 0; i < 10; i++)
                controller.enqueue(new TextEncoder().encode(' '.repeat(10_000)));
              controller.close();
            },
          }),
      },
      413,
      'PAYLOAD_TOO_LARGE',
    ],
    [
      'a body over the limit without a token (checked before auth)',
      { headers: JSON_TYPE, body: () => 'x'.repeat(70_000) },
      413,
      'PAYLOAD_TOO_LARGE',
    ],
    [
      'a text/plain body',
      { headers: { 'content-type': 'text/plain', ...CONSUMER }, body: () => JSON.stringify(JOIN) },
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    ],
    [
      'a JSON body that says it is UTF-16',
      {
        headers: { 'content-type': 'application/json; charset=utf-16', ...CONSUMER },
        body: () => JSON.stringify(JOIN),
      },
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    ],
    [
      'a body without a Content-Type',
      { headers: CONSUMER, body: () => new Blob([JSON.stringify(JOIN)]) },
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    ],
    [
      'broken JSON',
      { headers: { ...JSON_TYPE, ...CONSUMER }, body: () => '{"memberId":' },
      400,
      'INVALID_JSON',
    ],
    [
      'broken JSON without a token (checked before auth)',
      { headers: JSON_TYPE, body: () => '{"memberId":' },
      400,
      'INVALID_JSON',
    ],
    ['no body', { headers: CONSUMER }, 400, 'VALIDATION_FAILED'],
    [
      'an empty body',
      { headers: { ...JSON_TYPE, ...CONSUMER }, body: () => '' },
      400,
      'VALIDATION_FAILED',
    ],
    [
      'a body missing memberId',
      {
        headers: { ...JSON_TYPE, ...CONSUMER },
        body: () => JSON.stringify({ ...JOIN, memberId: undefined }),
      },
      400,
      'VALIDATION_FAILED',
    ],
    [
      'a body with wrong types',
      {
        headers: { ...JSON_TYPE, ...CONSUMER },
        body: () =>
          JSON.stringify({
            ...JOIN,
            memberEpoch: -2,
            currentAssignments: ['a'],
            revokeProgress: [{ shard: 0, state: 'NOPE' }],
          }),
      },
      400,
      'VALIDATION_FAILED',
    ],
    [
      'a JSON array body',
      { headers: { ...JSON_TYPE, ...CONSUMER }, body: () => '[1,2]' },
      400,
      'VALIDATION_FAILED',
    ],
    [
      'an unsupported coordinationVersion',
      {
        headers: { ...JSON_TYPE, ...CONSUMER },
        body: () => JSON.stringify({ ...JOIN, coordinationVersion: 7 }),
      },
      400,
      'UNSUPPORTED_COORDINATION_VERSION',
    ],
  ];

  it.each(errorCases)(
    '%s: the same status and code as express',
    async (_name, init, status, code) => {
      const answer = await both(HB, init);
      expect(answer.status).toBe(status);
      expect(errorOf(answer).code).toBe(code);
    },
  );

  it('invalid path names: the same 400 VALIDATION_FAILED, details included', async () => {
    const init = { headers: { ...JSON_TYPE, ...CONSUMER }, body: () => JSON.stringify(JOIN) };
    for (const path of [
      '/coord/v1/consumer/streams/bad!name/groups/g/heartbeat',
      '/coord/v1/consumer/streams/fp/groups/a:b/heartbeat',
      '/coord/v1/consumer/streams/%2Fx/groups/g/heartbeat',
      `/coord/v1/consumer/streams/${'s'.repeat(300)}/groups/g/heartbeat`,
    ]) {
      const answer = await both(path, init);
      expect(answer.status).toBe(400);
      expect(errorOf(answer).code).toBe('VALIDATION_FAILED');
    }
  });

  it('an unknown group: the same 404 GROUP_NOT_FOUND', async () => {
    const answer = await both('/coord/v1/consumer/streams/nope/groups/g/heartbeat', {
      headers: { ...JSON_TYPE, ...CONSUMER },
      body: () => JSON.stringify(JOIN),
    });
    expect(answer.status).toBe(404);
    expect(errorOf(answer).code).toBe('GROUP_NOT_FOUND');
  });

  it('a member id held by another principal: the same 403 MEMBER_ID_IN_USE', async () => {
    const body = () => JSON.stringify({ ...JOIN, memberId: 'bound' });
    const joined = await both(HB, { headers: { ...JSON_TYPE, ...CONSUMER }, body });
    expect(joined.status).toBe(200);
    const other = bearer(token(['CONSUMER'], { sub: 'someone-else' }));
    const answer = await both(HB, { headers: { ...JSON_TYPE, ...other }, body });
    expect(answer.status).toBe(403);
    expect(errorOf(answer).code).toBe('MEMBER_ID_IN_USE');
    const leave = () => JSON.stringify({ ...JOIN, memberId: 'bound', memberEpoch: -1 });
    expect((await both(HB, { headers: { ...JSON_TYPE, ...CONSUMER }, body: leave })).status).toBe(
      200,
    );
  });

  it('joins and steady-state heartbeats: the same 200 answers', async () => {
    const send = (c: RunningCoordinator, body: unknown) =>
      ask(c, HB, { headers: { ...JSON_TYPE, ...CONSUMER }, body: () => JSON.stringify(body) });
    let request: Record<string, unknown> = { ...JOIN, memberId: 'steady' };
    for (let i = 0; i < 3; i++) {
      const [a, b] = await Promise.all([send(fast, request), send(plain, request)]);
      expect([a.status, b.status, a.path, b.path]).toEqual([200, 200, 'fast', null]);
      // Each coordinator has its own group, so only the lifecycle ids differ.
      const replyA = ownGroupFieldsLeftOut(a.body as Record<string, unknown>);
      const replyB = ownGroupFieldsLeftOut(b.body as Record<string, unknown>);
      expect(replyA).toEqual(replyB);
      expect(a.contentType).toBe('application/json; charset=utf-8');
      request = {
        ...request,
        memberEpoch: replyA.memberEpoch,
        assignmentEpoch: replyA.assignmentEpoch,
        metadataVersion: replyA.metadataVersion,
        currentAssignments: replyA.assignedShards,
      };
    }
    const last = await send(fast, request);
    expect(last.body).toMatchObject({ outcome: 'OK', assignedShards: [0, 1] });
  });

  /** A member's next heartbeat after `reply`, as an honest member sends it (revokes done at once). */
  const nextOf = (memberId: string, reply: Record<string, unknown>) => ({
    memberId,
    memberEpoch: reply.memberEpoch,
    assignmentEpoch: reply.assignmentEpoch,
    metadataVersion: reply.metadataVersion,
    currentAssignments: reply.assignedShards,
    revokeProgress: (reply.revokeShards as number[]).map((shard) => ({ shard, state: 'DONE' })),
  });
  const consumerInit = (body: unknown, headers: Record<string, string> = CONSUMER) => ({
    headers: { ...JSON_TYPE, ...headers },
    body: () => JSON.stringify(body),
  });

  it('through a rebalance: the same answers as express at every step, never a remembered one that changed', async () => {
    const [path] = await Promise.all([
      createGroup(fast, 'rebalance'),
      createGroup(plain, 'rebalance'),
    ]);
    const replies = new Map<string, Record<string, unknown>>();
    const beat = async (memberId: string) => {
      const last = replies.get(memberId);
      const body = last ? nextOf(memberId, last) : { ...JOIN, memberId };
      const answer = await both(path, consumerInit(body));
      expect(answer.status).toBe(200);
      replies.set(memberId, answer.body as Record<string, unknown>);
      return answer.body as Record<string, unknown>;
    };
    for (let i = 0; i < 4; i++) await beat('rb-1');
    const alone = await beat('rb-1');
    expect(alone).toMatchObject({ outcome: 'OK', assignedShards: [0, 1] });
    for (let round = 0; round < 6; round++) {
      await beat('rb-2');
      await beat('rb-1');
    }
    const [one, two] = [await beat('rb-1'), await beat('rb-2')];
    expect([one.outcome, two.outcome]).toEqual(['OK', 'OK']);
    expect(
      [...(one.assignedShards as number[]), ...(two.assignedShards as number[])].sort(),
    ).toEqual([0, 1]);
    expect((one.assignedShards as number[]).length).toBe(1);
  });

  it('a steady reply has the very bytes express gives the same heartbeat', async () => {
    const path = await createGroup(fast, 'bytes');
    const send = (body: unknown, gzip: boolean) =>
      fetch(`${fast.url}${path}`, {
        method: 'POST',
        headers: { ...JSON_TYPE, ...CONSUMER, ...(gzip ? { 'content-encoding': 'gzip' } : {}) },
        body: gzip ? gzipSync(JSON.stringify(body)) : JSON.stringify(body),
      });
    let body: unknown = { ...JOIN, memberId: 'bytes' };
    for (let i = 0; i < 4; i++) {
      const reply = (await (await send(body, false)).json()) as Record<string, unknown>;
      body = nextOf('bytes', reply);
    }
    for (let i = 0; i < 3; i++) {
      const viaFast = await send(body, false);
      const viaExpress = await send(body, true);
      expect([viaFast.headers.get('x-coord-path'), viaExpress.headers.get('x-coord-path')]).toEqual(
        ['fast', null],
      );
      const [a, b] = [
        Buffer.from(await viaFast.arrayBuffer()),
        Buffer.from(await viaExpress.arrayBuffer()),
      ];
      expect(JSON.parse(a.toString())).toMatchObject({ outcome: 'OK', memberId: 'bytes' });
      expect(a.equals(b)).toBe(true);
      expect(viaFast.headers.get('content-length')).toBe(String(b.length));
    }
  });

  it('a steady heartbeat is answered again from memory, never once the group changed or from another principal', async () => {
    const [path] = await Promise.all([createGroup(fast, 'memo'), createGroup(plain, 'memo')]);
    let body: unknown = { ...JOIN, memberId: 'memo-1' };
    for (let i = 0; i < 4; i++) {
      body = nextOf(
        'memo-1',
        (await both(path, consumerInit(body))).body as Record<string, unknown>,
      );
    }
    const again = vi.spyOn(fast.host, 'steadyAgain');
    const repeatedMetric = async () => {
      const text = await (await fetch(`${fast.url}/metrics`)).text();
      return Number(/^coord_heartbeats_repeated_total (\d+)$/m.exec(text)?.[1]);
    };
    try {
      const repeatedBefore = await repeatedMetric();
      for (let i = 0; i < 3; i++) {
        const answer = await both(path, consumerInit(body));
        expect(answer.body).toMatchObject({ outcome: 'OK', assignedShards: [0, 1] });
      }
      // The same text answered again from its memo (told the same twice in a row first).
      const repeats = again.mock.results.filter((r) => (r.value as boolean) === true).length;
      expect(repeats).toBeGreaterThan(0);
      // Each counted in coord_heartbeats_repeated_total, and nothing else.
      expect((await repeatedMetric()) - repeatedBefore).toBe(repeats);
      const intruder = bearer(token(['CONSUMER'], { sub: 'someone-else' }));
      const refused = await both(path, consumerInit(body, intruder));
      expect(errorOf(refused).code).toBe('MEMBER_ID_IN_USE');
      // Another member joins (no debounce): the same text now gets the changed answer.
      await both(path, consumerInit({ ...JOIN, memberId: 'memo-2' }));
      again.mockClear();
      const repeatedBeforeChange = await repeatedMetric();
      const changed = await both(path, consumerInit(body));
      expect(again.mock.results.map((r) => r.value as boolean)).toEqual([false]);
      expect(await repeatedMetric()).toBe(repeatedBeforeChange);
      expect((changed.body as { revokeShards: number[] }).revokeShards).toHaveLength(1);
    } finally {
      again.mockRestore();
    }
  });

  it('a remembered steady heartbeat keeps no deleted group in memory', async () => {
    const path = await createGroup(fast, 'gone');
    const body = await beaten(path, 'gone-1', 6);
    const again = vi.spyOn(fast.host, 'steadyAgain');
    await ask(fast, path, consumerInit(body));
    expect(again.mock.results.map((r) => r.value as boolean)).toEqual([true]);
    // The spy keeps the ticket it was called with: forgotten before the group goes.
    again.mockReset();
    again.mockRestore();
    const entry = weakEntryOf(fast, { streamPrefix: 'fp', consumerGroup: 'gone' });
    expect(entry.deref()).toBeDefined();
    const deleted = await fetch(`${fast.url}/coord/v1/admin/streams/fp/groups/gone?force=true`, {
      method: 'DELETE',
      headers: { ...JSON_TYPE, ...bearer(token(['WRITE'])) },
      body: JSON.stringify(CHANGE),
    });
    expect(deleted.status).toBe(204);
    // Collected on a turn of its own: a `deref` keeps its target alive until its turn ends.
    const gc = forcedGc();
    let collected = false;
    for (let i = 0; i < 20 && !collected; i++) {
      await new Promise((resolve) => setImmediate(resolve));
      gc();
      await new Promise((resolve) => setImmediate(resolve));
      collected = entry.deref() === undefined;
    }
    expect(collected).toBe(true);
  });

  it("remembers a member's validated body, never a join's or a leave's (each is sent once)", async () => {
    const path = await createGroup(fast, 'bodies');
    // Every key a memo takes; a body's key is its text.
    const set = vi.spyOn(RecentMap.prototype, 'set');
    const kept = () => set.mock.calls.map(([key]) => key).filter((key) => key.startsWith('{'));
    try {
      let body: Record<string, unknown> = { ...JOIN, memberId: 'once' };
      const sent: string[] = [];
      for (let i = 0; i < 3; i++) {
        sent.push(JSON.stringify(body));
        const answer = await ask(fast, path, consumerInit(body));
        body = nextOf('once', answer.body as Record<string, unknown>);
      }
      sent.push(JSON.stringify({ ...body, memberEpoch: -1 }));
      await ask(fast, path, consumerInit({ ...body, memberEpoch: -1 }));
      // A heartbeat of the member, in the group, decided anew (the next one is answered from
      // the steady memo); not the join, not the leave.
      expect(kept()).toContain(sent[1]);
      expect(kept()).not.toContain(sent[0]);
      expect(kept()).not.toContain(sent[3]);
    } finally {
      vi.restoreAllMocks();
    }
  });

  it('what the fast path remembers (a body, a URL, a token) changes no answer', async () => {
    const [path] = await Promise.all([
      createGroup(fast, 'remember'),
      createGroup(plain, 'remember'),
    ]);
    let reply: Record<string, unknown> = {};
    let body: unknown = { ...JOIN, memberId: 'remembered' };
    for (let i = 0; i < 4; i++) {
      reply = (await both(path, consumerInit(body))).body as Record<string, unknown>;
      body = nextOf('remembered', reply);
    }
    expect(reply).toMatchObject({ outcome: 'OK' });
    const scoped = bearer(
      jwt.sign({ sub: 'someone', roles: ['CONSUMER'], groups: ['other:*'] }, TEST_SECRET, {
        algorithm: 'HS256',
        issuer: 'stream-coordinator',
        expiresIn: 60,
      }),
    );
    const cases: Array<[Init, number, string | null]> = [
      [consumerInit(body), 200, null],
      [{ headers: JSON_TYPE, body: () => JSON.stringify(body) }, 401, 'UNAUTHENTICATED'],
      [consumerInit(body, bearer(token(['PRODUCER']))), 403, 'FORBIDDEN'],
      [consumerInit(body, scoped), 403, 'GROUP_NOT_PERMITTED'],
      [
        {
          headers: { 'content-type': 'text/plain', ...CONSUMER },
          body: () => JSON.stringify(body),
        },
        415,
        'UNSUPPORTED_MEDIA_TYPE',
      ],
      [consumerInit(body), 200, null],
    ];
    for (const [init, status, code] of cases) {
      const answer = await both(path, init);
      expect(answer.status).toBe(status);
      if (code) expect(errorOf(answer).code).toBe(code);
    }
    // A URL with invalid parameters is refused every time, also once it is known.
    const badPath = '/coord/v1/consumer/streams/bad!name/groups/g/heartbeat';
    for (let i = 0; i < 2; i++) {
      const answer = await both(badPath, consumerInit(body));
      expect(errorOf(answer).code).toBe('VALIDATION_FAILED');
    }
  });

  it(
    'a held heartbeat (waitMs): both hold it and answer it alike when another member joins',
    {
      timeout: 15_000,
    },
    async () => {
      const [held] = await Promise.all([createGroup(fast, 'held'), createGroup(plain, 'held')]);
      const send = (c: RunningCoordinator, body: unknown) =>
        ask(c, held, { headers: { ...JSON_TYPE, ...CONSUMER }, body: () => JSON.stringify(body) });
      const heldNow = async (c: RunningCoordinator) =>
        (await c.services.metrics.heldHeartbeats.get()).values[0]?.value ?? 0;
      const requests = await Promise.all(
        [fast, plain].map(async (c) => {
          const joined = (await send(c, { ...JOIN, memberId: 'held' })).body as Record<
            string,
            number
          >;
          return {
            ...JOIN,
            memberId: 'held',
            memberEpoch: joined.memberEpoch,
            assignmentEpoch: joined.assignmentEpoch,
            metadataVersion: joined.metadataVersion,
            currentAssignments: [0, 1],
            // Longer than the test may take: only the join below can end the hold in time.
            waitMs: 20_000,
          };
        }),
      );
      const answers = Promise.all([send(fast, requests[0]), send(plain, requests[1])]);
      for (const c of [fast, plain]) {
        await vi.waitFor(async () => expect(await heldNow(c)).toBe(1), { timeout: 5_000 });
      }
      await Promise.all([fast, plain].map((c) => send(c, { ...JOIN, memberId: 'joiner' })));
      const [a, b] = await answers;
      expect([a.status, b.status, a.path, b.path]).toEqual([200, 200, 'fast', null]);
      expect(comparable(a)).toEqual(comparable(b));
      expect(a.body).toMatchObject({ outcome: 'REVOKE_PENDING', revokeShards: [1] });
    },
  );

  it('application/*+json with a charset and a query string are served by the fast path', async () => {
    const answer = await both(`${HB}?ignored=1`, {
      headers: { 'content-type': 'application/vnd.coord+json; charset=utf-8', ...CONSUMER },
      body: () => JSON.stringify({ ...JOIN, memberId: 'plus-json' }),
    });
    expect(answer.status).toBe(200);
  });

  it('X-Request-Id: a sane caller id is echoed, another is replaced by a UUID', async () => {
    const init = (id: string) => ({
      headers: { ...JSON_TYPE, 'x-request-id': id },
      body: () => JSON.stringify(JOIN),
    });
    const [givenFast, givenPlain] = await Promise.all([
      ask(fast, HB, init('req-42')),
      ask(plain, HB, init('req-42')),
    ]);
    expect([givenFast.path, givenFast.requestIdHeader, errorOf(givenFast).requestId]).toEqual([
      'fast',
      'req-42',
      'req-42',
    ]);
    expect(givenPlain.requestIdHeader).toBe('req-42');
    for (const bad of ['has space', 'x'.repeat(129)]) {
      const answer = await both(HB, init(bad));
      expect(answer.requestIdHeader).toMatch(/^[0-9a-f-]{36}$/);
    }
  });

  it('leaves everything else to express', async () => {
    const init = { headers: { ...JSON_TYPE, ...CONSUMER }, body: () => JSON.stringify(JOIN) };
    // Other spellings match no route, on express as on the fast path (docs/decisions.md#one-spelling-per-path).
    for (const spelling of [`${HB}/`, HB.replace('heartbeat', 'Heartbeat'), `/${HB}`]) {
      expect(errorOf(await both(spelling, init, 'express')).code, spelling).toBe('NOT_FOUND');
    }
    // Not valid percent-encoding: express's own 400.
    const badEncoding = await both(
      '/coord/v1/consumer/streams/%E0%A4%A/groups/g/heartbeat',
      init,
      'express',
    );
    expect(errorOf(badEncoding).code).toBe('VALIDATION_FAILED');
    // Another method on the heartbeat URL, and another route.
    expect(errorOf(await both(HB, { method: 'GET', headers: CONSUMER }, 'express')).code).toBe(
      'NOT_FOUND',
    );
    const health = await ask(fast, '/coord/v1/monitoring/health', { method: 'GET' });
    expect([health.status, health.path]).toEqual([200, null]);
    // A compressed body: express inflates it.
    const gzipped = await both(
      HB,
      {
        headers: { ...JSON_TYPE, ...CONSUMER, 'content-encoding': 'gzip' },
        body: () => new Blob([gzipSync(JSON.stringify({ ...JOIN, memberId: 'gz' }))]),
      },
      'express',
    );
    expect(gzipped.status).toBe(200);
  });

  it('serves exactly what express routes: the canonical spelling; any other is 404 on both', async () => {
    const params = { stream: 'fp', group: 'g' };
    expect(canonicalPath(HEARTBEAT_PATH, params)).toBe(HB);
    const init = {
      headers: { ...JSON_TYPE, ...CONSUMER },
      body: () => JSON.stringify({ ...JOIN, memberId: 'spelling' }),
    };
    const paths = fc.oneof(
      fc.constant(HB),
      pathSpelling.map((spelling) => spelt(HEARTBEAT_PATH, params, spelling)),
    );
    await fc.assert(
      fc.asyncProperty(paths, async (path) => {
        const answer = await both(path, init, path === HB ? 'fast' : 'express');
        if (path === HB) expect(answer.status).toBe(200);
        else {
          expect(answer.status, path).toBe(404);
          expect(errorOf(answer).code, path).toBe('NOT_FOUND');
        }
      }),
      { numRuns: 40 },
    );
  });

  it('counts heartbeats_total{outcome} and heartbeat_duration_seconds like the express route', async () => {
    const metric = async (c: RunningCoordinator, pattern: RegExp) => {
      const text = await (await fetch(`${c.url}/metrics`)).text();
      return Number(pattern.exec(text)?.[1] ?? 0);
    };
    const ok = /^coord_heartbeats_total\{outcome="OK"\} (\d+)$/m;
    const notFound = /^coord_heartbeats_total\{outcome="GROUP_NOT_FOUND"\} (\d+)$/m;
    const durations = /^coord_heartbeat_duration_seconds_count (\d+)$/m;
    const before = await Promise.all([
      metric(fast, ok),
      metric(fast, notFound),
      metric(fast, durations),
    ]);
    const init = {
      headers: { ...JSON_TYPE, ...CONSUMER },
      body: () => JSON.stringify({ ...JOIN, memberId: 'metrics' }),
    };
    for (let i = 0; i < 5; i++) expect((await ask(fast, HB, init)).path).toBe('fast');
    expect(
      (await ask(fast, '/coord/v1/consumer/streams/nope/groups/g/heartbeat', init)).status,
    ).toBe(404);
    // Rejected before the heartbeat (auth): not a heartbeat, as on the express route.
    expect((await ask(fast, HB, { headers: JSON_TYPE, body: init.body })).status).toBe(401);
    const after = await Promise.all([
      metric(fast, ok),
      metric(fast, notFound),
      metric(fast, durations),
    ]);
    expect(after[0] - before[0]).toBe(5);
    expect(after[1] - before[1]).toBe(1);
    expect(after[2] - before[2]).toBe(6);
  });
});
