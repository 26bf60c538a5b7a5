import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { MAX_REPORTED_ISSUES } from '../../src/http/route.js';
import { CHANGE, useCoordinator, type TestCoordinator } from '../support/coordinator.js';
import { completeResponses, firstResponse, rawConnect } from '../support/raw-http.js';

const HEARTBEAT = '/coord/v1/consumer/streams/hostile/groups/g/heartbeat';
/** What "a few KB" allows for an error answer. */
const SMALL_ANSWER_BYTES = 4_096;

/** A heartbeat body of about 60 KB whose revokeProgress has 2,500 bad entries (5,000 issues). */
function hugeRevokeProgress(): string {
  const body = JSON.stringify({
    memberId: 'm1',
    memberEpoch: 0,
    assignmentEpoch: 0,
    metadataVersion: 0,
    currentAssignments: [],
    revokeProgress: Array.from({ length: 2_500 }, () => ({ shard: -1, state: 'X' })),
  });
  expect(body.length).toBeGreaterThan(55_000);
  return body;
}

interface ErrorAnswer {
  error: {
    code: string;
    message: string;
    requestId?: string;
    details?: { issues?: unknown[]; moreIssues?: number };
  };
}

/** One raw request on its own connection; resolves with the whole answer once it is in. */
async function raw(c: TestCoordinator, text: string | Buffer) {
  const client = await rawConnect(c.port);
  client.socket.write(text);
  const received = await client.until((data) => completeResponses(data, 1), 5_000);
  client.socket.destroy();
  return firstResponse(received);
}

describe('hostile input gets small, well-formed answers', () => {
  let c: TestCoordinator;
  useCoordinator({ store: 'memory' }, (coordinator) => (c = coordinator));

  const createGroup = async () => {
    const res = await c.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: 'hostile', consumerGroup: 'g', shardCount: 2, ...CHANGE },
    });
    expect([201, 409]).toContain(res.status);
  };

  describe('validation errors are bounded', () => {
    it('a 60 KB revokeProgress on the heartbeat fast path: the first issues and a count, in a few KB', async () => {
      await createGroup();
      const res = await c.call('POST', HEARTBEAT, { user: 'consumer', body: hugeRevokeProgress() });
      expect(res.status).toBe(400);
      expect(res.headers.get('x-coord-path')).toBe('fast');
      const text = await res.text();
      expect(text.length).toBeLessThan(SMALL_ANSWER_BYTES);
      const { error } = JSON.parse(text) as ErrorAnswer;
      expect(error.code).toBe('VALIDATION_FAILED');
      expect(error.details?.issues).toHaveLength(MAX_REPORTED_ISSUES);
      expect(error.details?.moreIssues).toBe(5_000 - MAX_REPORTED_ISSUES);
      expect(error.message).toMatch(/; and 4990 more$/);
    });

    it('the same body through express (gzip-encoded, which the fast path leaves to it)', async () => {
      await createGroup();
      const res = await fetch(`${c.url}${HEARTBEAT}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${c.token('consumer')}`,
          'content-type': 'application/json',
          'content-encoding': 'gzip',
        },
        body: gzipSync(hugeRevokeProgress()),
      });
      expect(res.status).toBe(400);
      expect(res.headers.get('x-coord-path')).toBeNull();
      const text = await res.text();
      expect(text.length).toBeLessThan(SMALL_ANSWER_BYTES);
      const { error } = JSON.parse(text) as ErrorAnswer;
      expect(error.details?.issues).toHaveLength(MAX_REPORTED_ISSUES);
      expect(error.details?.moreIssues).toBe(5_000 - MAX_REPORTED_ISSUES);
    });

    it('a long field name is clipped in the issue it causes', async () => {
      const res = await c.call('GET', `/coord/v1/monitoring/groups?limit=${'9'.repeat(5_000)}`, {
        user: 'reader',
      });
      expect(res.status).toBe(400);
      expect((await res.text()).length).toBeLessThan(SMALL_ANSWER_BYTES);
    });
  });

  describe('what Node’s parser refuses gets the API’s JSON error shape', () => {
    it.each([
      ['a malformed request line', 'GET /coord/v1 HTTP/9.9.9\r\nHost: x\r\n\r\n'],
      ['a method with a space', 'G ET / HTTP/1.1\r\nHost: x\r\n\r\n'],
      ['an invalid header name', 'GET / HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n'],
    ])('%s: 400 VALIDATION_FAILED, no request id, connection closed', async (_name, text) => {
      const { status, headers, body } = await raw(c, text);
      expect(status).toBe(400);
      expect(headers).toMatch(/\r\nconnection: close/i);
      expect(headers).toMatch(/\r\ncontent-type: application\/json/i);
      const { error } = body as ErrorAnswer;
      expect(error.code).toBe('VALIDATION_FAILED');
      expect(error.message).toMatch(/^malformed request: /);
      expect(error).not.toHaveProperty('requestId');
    });

    it.each([
      [
        'Content-Length together with Transfer-Encoding',
        'Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
      ],
      ['two different Content-Lengths', 'Content-Length: 4\r\nContent-Length: 5\r\n\r\nabcde'],
      ['an obfuscated Transfer-Encoding', 'Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n'],
    ])(
      'request smuggling (%s): 400 with the request id that could be read',
      async (_name, rest) => {
        const { status, body } = await raw(
          c,
          `POST /coord/v1/admin/groups HTTP/1.1\r\nHost: x\r\nX-Request-Id: smuggle-1\r\n${rest}`,
        );
        expect(status).toBe(400);
        const { error } = body as ErrorAnswer;
        expect(error.code).toBe('VALIDATION_FAILED');
        expect(error.requestId).toBe('smuggle-1');
      },
    );

    it('headers over the size limit: 431 HEADERS_TOO_LARGE', async () => {
      const { status, body } = await raw(
        c,
        `GET /coord/v1/monitoring/health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
      );
      expect(status).toBe(431);
      expect((body as ErrorAnswer).error.code).toBe('HEADERS_TOO_LARGE');
    });
  });

  describe('requests Node refuses before any route sees them get the JSON error shape', () => {
    it('an HTTP/1.1 request without Host: 400 VALIDATION_FAILED with a JSON body', async () => {
      const { status, headers, body } = await raw(
        c,
        'GET /coord/v1/monitoring/health HTTP/1.1\r\nX-Request-Id: no-host-1\r\n\r\n',
      );
      expect(status).toBe(400);
      expect(headers).toMatch(/\r\ncontent-type: application\/json/i);
      expect(body).toMatchObject({ error: { code: 'VALIDATION_FAILED' } });
    });

    it('an Expect other than 100-continue: 417 EXPECTATION_FAILED with a JSON body', async () => {
      const { status, headers, body } = await raw(
        c,
        'GET /coord/v1/monitoring/health HTTP/1.1\r\nHost: x\r\nX-Request-Id: expect-1\r\n' +
          'Expect: something-else\r\n\r\n',
      );
      expect(status).toBe(417);
      expect(headers).toMatch(/\r\ncontent-type: application\/json/i);
      expect(body).toMatchObject({
        error: { code: 'EXPECTATION_FAILED', requestId: 'expect-1' },
      });
    });

    it('CONNECT: a 4xx with an error code, not a connection closed without an answer', async () => {
      const client = await rawConnect(c.port, 'CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: x\r\n\r\n');
      await client.closed;
      const { status, body } = firstResponse(client.received());
      expect(status).toBeGreaterThanOrEqual(400);
      expect(status).toBeLessThan(500);
      expect(typeof (body as Partial<ErrorAnswer>).error?.code).toBe('string');
    });
  });

  describe('HEAD on the event stream', () => {
    it('gets the stream’s headers at once, and ends', async () => {
      await createGroup();
      const started = performance.now();
      const res = await fetch(`${c.url}/coord/v1/monitoring/streams/hostile/groups/g/events`, {
        method: 'HEAD',
        headers: { authorization: `Bearer ${c.token('reader')}` },
        signal: AbortSignal.timeout(3_000),
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/event-stream');
      expect(await res.text()).toBe('');
      expect(performance.now() - started).toBeLessThan(2_000);
    });

    it('of a group that does not exist: 404', async () => {
      const res = await c.call('HEAD', '/coord/v1/monitoring/streams/hostile/groups/none/events', {
        user: 'reader',
      });
      expect(res.status).toBe(404);
    });
  });

  describe('two Authorization headers are ambiguous credentials: 400', () => {
    const twice = (path: string, method = 'GET', body = '', requestId = 'twice-1') =>
      `${method} ${path} HTTP/1.1\r\nHost: x\r\nX-Request-Id: ${requestId}\r\n` +
      `Authorization: Bearer ${c.token('admin')}\r\nAuthorization: Bearer ${c.token('reader')}\r\n` +
      (body
        ? `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n`
        : '') +
      `\r\n${body}`;

    it('on an express route', async () => {
      const { status, body } = await raw(c, twice('/coord/v1/monitoring/groups'));
      expect(status).toBe(400);
      const { error } = body as ErrorAnswer;
      expect(error.code).toBe('VALIDATION_FAILED');
      expect(error.message).toMatch(/more than one Authorization header/);
    });

    it('on the heartbeat fast path', async () => {
      await createGroup();
      const heartbeat = JSON.stringify({
        memberId: 'twice',
        memberEpoch: 0,
        assignmentEpoch: 0,
        metadataVersion: 0,
        currentAssignments: [],
      });
      const { status, headers, body } = await raw(c, twice(HEARTBEAT, 'POST', heartbeat));
      expect(status).toBe(400);
      expect(headers).toMatch(/\r\nx-coord-path: fast/i);
      expect((body as ErrorAnswer).error.message).toMatch(/more than one Authorization header/);
    });

    it('on an admin route, audited exactly once and attributed to nobody', async () => {
      await createGroup();
      const { status } = await raw(
        c,
        twice(
          '/coord/v1/admin/streams/hostile/groups/g/freeze',
          'POST',
          JSON.stringify(CHANGE),
          'twice-admin',
        ),
      );
      expect(status).toBe(400);
      const audit = (await (
        await c.call('GET', '/coord/v1/monitoring/audit?limit=1000', { user: 'reader' })
      ).json()) as { records: Array<{ requestId: string; status: number; principal: unknown }> };
      const records = audit.records.filter((r) => r.requestId === 'twice-admin');
      expect(records).toHaveLength(1);
      expect(records[0]).toMatchObject({ status: 400, principal: null });
      // Not frozen: nothing was done.
      const view = (await (
        await c.call('GET', '/coord/v1/monitoring/streams/hostile/groups/g', { user: 'reader' })
      ).json()) as { status: string };
      expect(view.status).not.toBe('FROZEN');
    });
  });
});
