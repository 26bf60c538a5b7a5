import http from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  FORWARDED_BY_HEADER,
  Forwarder,
  OWNER_HEADER,
} from '../../src/actors/ownership/forwarder.js';
import type { ForwardOutcome, ForwardTarget } from '../../src/actors/ownership/forwarder.js';
import { toErrorResponse } from '../../src/http/errors.js';
import { Metrics } from '../../src/observability/metrics.js';
import { freePort, waitFor } from '../support/redis-server.js';

/** Starts a real HTTP server on a free port of 127.0.0.1. */
async function listen(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ server: Server; url: string }> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

async function close(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

describe('forwarding a request to the owning replica (docs/architecture.md#replicas-leases-and-fences)', () => {
  /** What the owner saw, per request. */
  const seen: Array<{ path: string; forwardedBy: string | undefined; remotePort: number }> = [];
  let sseClosed = false;
  let sendSecondEvent: () => void = () => undefined;
  let owner: { server: Server; url: string };
  let receiver: { server: Server; url: string };
  let ownerTarget: ForwardTarget;
  let target: ForwardTarget;
  const outcomes: ForwardOutcome[] = [];
  const metrics = new Metrics();
  const forwarder = new Forwarder({
    replicaId: 'replica-receiver',
    connectTimeoutMs: 500,
    metrics,
    writeError: (res, error) => {
      const { status, body } = toErrorResponse(error, 'req-test');
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    },
  });

  beforeAll(async () => {
    owner = await listen((req, res) => {
      seen.push({
        path: req.url ?? '',
        forwardedBy: req.headers[FORWARDED_BY_HEADER] as string | undefined,
        remotePort: req.socket.remotePort ?? 0,
      });
      if (req.url === '/coord/v1/events') {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        res.write('data: one\n\n');
        sendSecondEvent = () => res.write('data: two\n\n');
        req.on('close', () => {
          sseClosed = true;
        });
        return;
      }
      void readBody(req).then((body) => {
        res.writeHead(201, { 'content-type': 'application/json', 'x-owner-extra': 'kept' });
        res.end(
          JSON.stringify({
            method: req.method,
            raw: body.toString('utf8'),
            contentType: req.headers['content-type'],
            authorization: req.headers.authorization,
          }),
        );
      });
    });
    ownerTarget = { id: 'replica-owner', url: owner.url };
    target = ownerTarget;
    receiver = await listen((req, res) => {
      void forwarder.forward(req, res, target).then((outcome) => outcomes.push(outcome));
    });
  });

  afterAll(async () => {
    forwarder.close();
    await close(receiver.server);
    await close(owner.server);
  });

  it('passes a JSON request and its body through as received, and names the owner', async () => {
    target = ownerTarget;
    const raw = '{ "shardCount" :  4,\n  "reason": "ünïcode" }';
    const response = await fetch(`${receiver.url}/coord/v1/admin/groups?x=1`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer token-1' },
      body: raw,
    });
    expect(response.status).toBe(201);
    expect(response.headers.get(OWNER_HEADER)).toBe('replica-owner');
    expect(response.headers.get('x-owner-extra')).toBe('kept');
    expect(await response.json()).toEqual({
      method: 'POST',
      raw,
      contentType: 'application/json',
      authorization: 'Bearer token-1',
    });
    const last = seen[seen.length - 1];
    expect(last).toMatchObject({
      path: '/coord/v1/admin/groups?x=1',
      forwardedBy: 'replica-receiver',
    });
  });

  it('reuses one kept-alive connection between replicas for consecutive requests', async () => {
    target = ownerTarget;
    const before = seen.length;
    for (let i = 0; i < 3; i++) {
      const response = await fetch(`${receiver.url}/coord/v1/ping-${i}`, {
        method: 'POST',
        body: '{}',
      });
      await response.arrayBuffer();
    }
    const ports = new Set(seen.slice(before).map((request) => request.remotePort));
    expect(ports.size).toBe(1);
  });

  it('streams an SSE response through event by event, and closes the owner side when the client leaves', async () => {
    target = ownerTarget;
    sseClosed = false;
    const received: string[] = [];
    const request = http.get(`${receiver.url}/coord/v1/events`);
    const response = await new Promise<IncomingMessage>((resolve) =>
      request.on('response', resolve),
    );
    expect(response.headers['content-type']).toBe('text/event-stream');
    expect(response.headers[OWNER_HEADER]).toBe('replica-owner');
    response.setEncoding('utf8');
    response.on('data', (chunk: string) => received.push(chunk));
    response.on('error', () => undefined);

    // The first event arrives while the owner still holds the stream open: nothing is buffered.
    await waitFor(() => received.join('') === 'data: one\n\n', { what: 'the first event' });
    sendSecondEvent();
    await waitFor(() => received.join('') === 'data: one\n\ndata: two\n\n', {
      what: 'the second event',
    });

    request.destroy();
    await waitFor(() => sseClosed, { what: 'the owner to see the stream closed' });
  });

  it('never forwards a request that was already forwarded: 503 OWNER_MOVING with Retry-After', async () => {
    target = ownerTarget;
    const before = seen.length;
    const response = await fetch(`${receiver.url}/coord/v1/consumer/heartbeat`, {
      method: 'POST',
      headers: { [FORWARDED_BY_HEADER]: 'replica-elsewhere' },
      body: '{}',
    });
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('1');
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe(
      'OWNER_MOVING',
    );
    expect(seen.length).toBe(before);
  });

  it('answers 503 OWNER_UNAVAILABLE with Retry-After when the owner cannot be reached', async () => {
    target = { id: 'replica-gone', url: `http://127.0.0.1:${await freePort()}` };
    const response = await fetch(`${receiver.url}/coord/v1/consumer/heartbeat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"memberId":"m-1"}',
    });
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('1');
    expect(response.headers.get(OWNER_HEADER)).toBe('replica-gone');
    const body = (await response.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('OWNER_UNAVAILABLE');
    expect(body.error.message).not.toMatch(/ECONNREFUSED|at /);
  });

  it('counts every outcome in coord_forwarded_requests_total', async () => {
    await waitFor(() => outcomes.length >= 7, { what: 'every forward to settle' });
    const counted: Record<string, number> = {};
    for (const { labels, value } of (await metrics.forwardedRequests.get()).values) {
      counted[String(labels.outcome)] = value;
    }
    expect(counted).toEqual({
      forwarded: 4,
      client_closed: 1,
      loop_refused: 1,
      owner_unavailable: 1,
    });
  });
});

describe('an owner that closes an idle kept-alive connection as a request goes out on it', () => {
  it('sends the request again on a fresh connection instead of answering 503', async () => {
    // The owner answers the first request of a connection and resets the connection when a
    // second one arrives on it: the race with an idle keep-alive timeout, made certain.
    const served: string[] = [];
    const owner = await listen((req, res) => {
      const socket = req.socket as typeof req.socket & { served?: number };
      socket.served = (socket.served ?? 0) + 1;
      if (socket.served > 1) {
        socket.resetAndDestroy();
        return;
      }
      void readBody(req).then((body) => {
        served.push(`${req.method} ${req.url} ${body.toString('utf8')}`);
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      });
    });
    const metrics = new Metrics();
    const forwarder = new Forwarder({
      replicaId: 'replica-receiver',
      metrics,
      writeError: (res, error) => {
        const { status, body } = toErrorResponse(error, 'req-test');
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      },
    });
    const receiver = await listen((req, res) => {
      // Heartbeats reach the forwarder with their body already read (the fast path).
      void readBody(req).then((raw) =>
        forwarder.forward(req, res, { id: 'replica-owner', url: owner.url }, raw),
      );
    });
    try {
      for (const n of [1, 2, 3]) {
        const response = await fetch(`${receiver.url}/coord/v1/heartbeat-${n}`, {
          method: 'POST',
          body: `{"n":${n}}`,
        });
        expect(response.status).toBe(200);
        await response.arrayBuffer();
      }
      // Each request was served exactly once, the stale ones after one retry each.
      expect(served).toEqual([
        'POST /coord/v1/heartbeat-1 {"n":1}',
        'POST /coord/v1/heartbeat-2 {"n":2}',
        'POST /coord/v1/heartbeat-3 {"n":3}',
      ]);
      const retried = (await metrics.forwardedRequests.get()).values.find(
        (v) => v.labels.outcome === 'retried',
      );
      expect(retried?.value).toBeGreaterThanOrEqual(1);
    } finally {
      forwarder.close();
      await close(receiver.server);
      await close(owner.server);
    }
  });
});
