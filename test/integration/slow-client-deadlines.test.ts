import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { onCutOff } from '../../src/http/audit.js';
import { guardConnections, type SocketDeadlines } from '../../src/http/socket-deadlines.js';
import {
  startTestCoordinator,
  useCoordinator,
  type TestCoordinator,
} from '../support/coordinator.js';
import { captureLogs } from '../support/logs.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';
import {
  completeResponses,
  firstResponse,
  rawConnect,
  SteadyClient,
  type RawConnection,
} from '../support/raw-http.js';

/*
 * Node 20 reaps sockets past its headersTimeout / requestTimeout in a periodic sweep that stops
 * at the first connection not yet expired: with a kept-alive client busy next to them, sockets
 * stuck in their headers were never closed. The coordinator keeps a deadline per socket
 * (src/http/socket-deadlines.ts); these tests put a steady kept-alive client next to every slow
 * one.
 */
const HEADERS_TIMEOUT_MS = 1_000;
const REQUEST_TIMEOUT_MS = 2_000;
/** What "within the limit" allows on a busy 2-core machine: the limit + 1 s. */
const SLACK_MS = 1_000;
const HEARTBEAT = '/coord/v1/consumer/streams/slow/groups/g/heartbeat';
const STEADY_PATH = '/coord/v1/monitoring/health';

function expect408(connection: RawConnection): void {
  const { status, body } = firstResponse(connection.received());
  expect(status).toBe(408);
  expect(body).toMatchObject({ error: { code: 'REQUEST_TIMEOUT' } });
}

async function hundredHalfSentHeaders(port: number, steady: SteadyClient, path: string) {
  const before = steady.count(200);
  const clients = await Promise.all(
    Array.from({ length: 100 }, (_, i) =>
      rawConnect(
        port,
        i % 2 === 0
          ? `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Ty`
          : 'GET /coord/v1/monitoring/groups HTTP/1.1\r\nHost: x\r\n',
      ),
    ),
  );
  const times = await Promise.all(
    clients.map((client) => closedWithin(client, HEADERS_TIMEOUT_MS + SLACK_MS + 2_000)),
  );
  for (const client of clients) client.socket.destroy();
  console.log(
    `[slow-clients] 100 half-sent headers closed ${Math.round(Math.min(...times))}–` +
      `${Math.round(Math.max(...times))} ms after connecting (headers timeout ${HEADERS_TIMEOUT_MS} ms); ` +
      `${steady.count(200) - before} steady requests answered meanwhile`,
  );
  expect(Math.max(...times)).toBeLessThanOrEqual(HEADERS_TIMEOUT_MS + SLACK_MS);
  expect(Math.min(...times)).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 50);
  for (const client of clients) expect408(client);
  // Meanwhile the kept-alive client was answered, again and again, and never refused.
  expect(steady.count(200) - before).toBeGreaterThan(20);
  expect(steady.failures).toBe(0);
}

/** When the server closed the socket (ms since connecting), or Infinity if not within `ms`. */
function closedWithin(client: RawConnection, ms: number): Promise<number> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    client.closed,
    new Promise<number>((resolve) => (timer = setTimeout(() => resolve(Infinity), ms))),
  ]).finally(() => clearTimeout(timer));
}

/**
 * Sends one byte every 50 ms (a 200-byte body would take 10 s, five times the request timeout)
 * until the server closes the socket; resolves with when it did (Infinity after 8 s).
 */
async function trickleUntilClosed(client: RawConnection): Promise<number> {
  const trickle = setInterval(() => {
    if (!client.isClosed()) client.socket.write(' ');
  }, 50);
  const closedAt = await closedWithin(client, 8_000);
  clearInterval(trickle);
  client.socket.destroy();
  return closedAt;
}

describe('the per-socket deadlines on their own (Node’s own timeouts off)', () => {
  let server: Server;
  let deadlines: SocketDeadlines;
  let steady: SteadyClient;
  let port: number;
  beforeAll(async () => {
    // headersTimeout and requestTimeout 0: Node checks nothing, so only the deadlines can act.
    server = createServer({ headersTimeout: 0, requestTimeout: 0 });
    server.keepAliveTimeout = 60_000;
    deadlines = guardConnections(server, {
      headersTimeoutMs: HEADERS_TIMEOUT_MS,
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
    });
    server.on('request', (req, res) => {
      deadlines.request(req, res);
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
    steady = new SteadyClient(port, '/');
    await waitFor(() => steady.count(200) >= 5, { what: 'the steady client to be answered' });
  });
  afterAll(async () => {
    await steady?.stop();
    deadlines?.stop();
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
  });

  it('100 sockets that never finish their headers are each answered 408 and closed within headers-timeout + 1 s', async () => {
    await hundredHalfSentHeaders(port, steady, '/');
  });

  it('a kept-alive socket whose next request stops halfway through its headers is closed', async () => {
    const client = await rawConnect(port, 'GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    await client.until((text) => completeResponses(text, 1), 5_000);
    const answered = client.received().length;
    const sentAt = client.elapsed();
    client.socket.write('GET / HTTP/1.1\r\nHost: x\r\nX-Half: ');
    const closedAt = await closedWithin(client, HEADERS_TIMEOUT_MS + SLACK_MS + 2_000);
    expect(closedAt - sentAt).toBeLessThanOrEqual(HEADERS_TIMEOUT_MS + SLACK_MS);
    expect(closedAt - sentAt).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 50);
    expect(firstResponse(client.received().slice(answered)).status).toBe(408);
  });

  it('a body trickled slower than request-timeout allows is answered 408 and cut off', async () => {
    const client = await rawConnect(
      port,
      'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 200\r\n\r\n',
    );
    const closedAt = await trickleUntilClosed(client);
    expect(closedAt).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 50);
    expect(closedAt).toBeLessThanOrEqual(REQUEST_TIMEOUT_MS + SLACK_MS);
    expect(firstResponse(client.received()).status).toBe(408);
    expect(steady.failures).toBe(0);
  });
});

describe('an answered request on a watched socket', () => {
  it('is let go at once, not at the next look of the deadlines', async () => {
    const server = createServer();
    // Long limits: the deadlines look at the sockets every 250 ms.
    const deadlines = guardConnections(server, {
      headersTimeoutMs: 60_000,
      requestTimeoutMs: 60_000,
    });
    expect(deadlines.tickMs).toBe(250);
    server.on('request', (req, res) => {
      deadlines.request(req, res);
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server.address() as AddressInfo).port;
      const client = await rawConnect(port, 'GET / HTTP/1.1\r\nHost: x\r\n\r\n');
      await client.until((text) => completeResponses(text, 1), 5_000);
      // The answer is on the wire: the socket holds neither the request nor its response (held
      // until the next looks, they outlived the young generation of a busy replica).
      await waitFor(() => deadlines.holding === 0, {
        what: 'the exchange let go',
        timeoutMs: 150,
        intervalMs: 5,
      });
      expect(deadlines.size).toBe(1);
      client.socket.destroy();
    } finally {
      deadlines.stop();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('a request cut off while its audit record is written', () => {
  let server: Server;
  let deadlines: SocketDeadlines;
  let port: number;
  /** Per request path: the hook was called, and releases it. */
  const cutOff = new Map<string, { called: Promise<void>; release: () => void }>();
  const served: string[] = [];
  beforeAll(async () => {
    server = createServer({ headersTimeout: 0, requestTimeout: 0 });
    deadlines = guardConnections(server, {
      headersTimeoutMs: HEADERS_TIMEOUT_MS,
      requestTimeoutMs: 500,
    });
    server.on('request', (req, res) => {
      deadlines.request(req, res);
      const path = req.url ?? '';
      // The audit record of the request, held until the test releases it.
      let release: () => void = () => undefined;
      const held = new Promise<void>((resolve) => (release = resolve));
      const called = new Promise<void>((resolve) =>
        onCutOff(res, async () => {
          resolve();
          await held;
        }),
      );
      cutOff.set(path, { called, release: () => release() });
      req.resume();
      req.on('end', () => {
        served.push(path);
        res.end('served');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    deadlines?.stop();
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
  });

  it('is answered 408 once the record is written, and the rest of its body sent meanwhile is never read', async () => {
    const client = await rawConnect(
      port,
      'POST /held HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nab',
    );
    await waitFor(() => cutOff.has('/held'), { what: 'the request to arrive' });
    const held = cutOff.get('/held')!;
    await held.called;
    // The rest of the body, while the record is being written.
    await new Promise<void>((resolve) => client.socket.write('cde', () => resolve()));
    // A whole exchange on another connection: the server has had its turns to read those bytes.
    const other = await rawConnect(
      port,
      'POST /other HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok',
    );
    await other.until((text) => completeResponses(text, 1), 5_000);
    other.socket.destroy();
    expect(client.received()).toBe('');
    held.release();
    await client.closed;
    expect(firstResponse(client.received()).status).toBe(408);
    expect(served).toEqual(['/other']);
  });
});

describe('slow clients are cut off per socket, whatever else is connected', () => {
  let c: TestCoordinator;
  let steady: SteadyClient;
  useCoordinator(
    {
      store: 'memory',
      overrides: {
        'http.headers-timeout': `${HEADERS_TIMEOUT_MS}ms`,
        'http.request-timeout': `${REQUEST_TIMEOUT_MS}ms`,
        // Longer than the test: an idle kept-alive socket is not what closes anything here.
        'http.keep-alive-timeout': '60s',
      },
    },
    (coordinator) => (c = coordinator),
  );
  beforeAll(async () => {
    steady = new SteadyClient(c.port, STEADY_PATH);
    // The steady client is under way (its kept-alive connection open and busy) before any test.
    await waitFor(() => steady.count(200) >= 5, { what: 'the steady client to be answered' });
  });
  afterAll(async () => steady?.stop());

  it('100 sockets that never finish their headers are each answered 408 and closed within headers-timeout + 1 s', async () => {
    await hundredHalfSentHeaders(c.port, steady, HEARTBEAT);
  });

  it('the 2nd and the 3rd request on a kept-alive socket have the same headers deadline', async () => {
    const get = `GET ${STEADY_PATH} HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n`;
    for (const served of [1, 2]) {
      const client = await rawConnect(c.port);
      for (let i = 0; i < served; i++) {
        client.socket.write(get);
        await client.until((text) => completeResponses(text, i + 1), 5_000);
      }
      const answered = client.received().length;
      const sentAt = client.elapsed();
      client.socket.write(`GET ${STEADY_PATH} HTTP/1.1\r\nHost: x\r\nX-Half: `);
      const closedAt = await closedWithin(client, HEADERS_TIMEOUT_MS + SLACK_MS + 5_000);
      expect(closedAt - sentAt, `request ${served + 1}`).toBeLessThanOrEqual(
        HEADERS_TIMEOUT_MS + SLACK_MS,
      );
      const { status, body } = firstResponse(client.received().slice(answered));
      expect(status, `request ${served + 1}`).toBe(408);
      expect(body).toMatchObject({ error: { code: 'REQUEST_TIMEOUT' } });
    }
    expect(steady.failures).toBe(0);
  });

  it.each([
    ['the heartbeat fast path', HEARTBEAT],
    ['an express route', '/coord/v1/admin/groups'],
  ])(
    'a body trickled slower than request-timeout allows on %s is answered 408 and cut off',
    async (_name, path) => {
      const client = await rawConnect(
        c.port,
        `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
          'X-Request-Id: trickle-1\r\nContent-Length: 200\r\n\r\n{',
      );
      const closedAt = await trickleUntilClosed(client);
      expect(closedAt).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 50);
      expect(closedAt).toBeLessThanOrEqual(REQUEST_TIMEOUT_MS + SLACK_MS);
      const { status, body } = firstResponse(client.received());
      expect(status).toBe(408);
      expect(body).toMatchObject({
        error: { code: 'REQUEST_TIMEOUT', requestId: 'trickle-1' },
      });
      expect(steady.failures).toBe(0);
    },
  );

  it('a request sent at a normal pace on a long-lived kept-alive socket is not cut', async () => {
    // Three requests spread over more than the request timeout on one socket: each is timed
    // from its own first byte, not from the connection.
    const client = await rawConnect(c.port);
    const get = `GET ${STEADY_PATH} HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n`;
    for (let i = 0; i < 3; i++) {
      client.socket.write(get);
      await client.until((text) => completeResponses(text, i + 1), 5_000);
      // Idle on the kept-alive socket for longer than a headers timeout: the idle time is what
      // this test is about, so it is waited out.
      await new Promise((resolve) => setTimeout(resolve, HEADERS_TIMEOUT_MS + 200));
    }
    expect(client.isClosed()).toBe(false);
    expect(firstResponse(client.received()).status).toBe(200);
    client.socket.destroy();
  });
});

describe('an admin request cut off because its body trickles is audited once', () => {
  let redis: RedisServerHandle;
  let c: TestCoordinator;
  let logs: ReturnType<typeof captureLogs>;
  beforeAll(async () => {
    redis = await startRedisServer();
    logs = captureLogs('info');
    c = await startTestCoordinator({
      store: 'redis',
      redisUrl: redis.url,
      logger: logs.logger,
      overrides: {
        'http.headers-timeout': `${HEADERS_TIMEOUT_MS}ms`,
        'http.request-timeout': `${REQUEST_TIMEOUT_MS}ms`,
      },
    });
  });
  afterAll(async () => {
    await c?.close();
    await redis?.stop();
  });

  it('a trickled admin POST gets 408, one audit record (REJECTED, 408) written before the answer, and an info line', async () => {
    const requestId = 'trickle-admin-1';
    const client = await rawConnect(
      c.port,
      'POST /coord/v1/admin/groups HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
        `Authorization: Bearer ${c.token('writer')}\r\n` +
        `X-Request-Id: ${requestId}\r\nContent-Length: 200\r\n\r\n{`,
    );
    await trickleUntilClosed(client);
    const { status, body } = firstResponse(client.received());
    expect(status).toBe(408);
    expect(body).toMatchObject({ error: { code: 'REQUEST_TIMEOUT', requestId } });

    // Written before the 408 was sent: there as soon as the answer is.
    const res = await c.call('GET', '/coord/v1/monitoring/audit?limit=100', { user: 'reader' });
    const { records } = (await res.json()) as { records: Array<Record<string, unknown>> };
    const mine = records.filter((record) => record.requestId === requestId);
    expect(mine).toHaveLength(1);
    expect(mine[0]).toMatchObject({
      method: 'POST',
      path: '/coord/v1/admin/groups',
      operation: 'createGroup',
      outcome: 'REJECTED',
      status: 408,
      principal: 'writer',
    });
    const { values } = await c.services.metrics.adminRequests.get();
    expect(values.filter(({ labels }) => labels.status === '408')).toMatchObject([{ value: 1 }]);

    const lines = logs.lines.filter((line) => line.requestId === requestId);
    expect(lines).toMatchObject([
      {
        level: 'info',
        message: 'request refused',
        code: 'REQUEST_TIMEOUT',
        status: 408,
        method: 'POST',
        path: '/coord/v1/admin/groups',
      },
    ]);
  });
});
