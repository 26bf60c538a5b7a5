import { connect, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { CHANGE, useCoordinator, type TestCoordinator } from '../support/coordinator.js';

const HEADERS_TIMEOUT_MS = 300;
const REQUEST_TIMEOUT_MS = 600;
const KEEP_ALIVE_TIMEOUT_MS = 300;
const HEARTBEAT = '/coord/v1/consumer/streams/slow/groups/g/heartbeat';

interface RawConnection {
  readonly socket: Socket;
  /** Everything the server sent. */
  received(): string;
  /** Resolves with the milliseconds from connecting to the server closing the socket. */
  readonly closed: Promise<number>;
}

/** A raw TCP client that writes `text` and then does nothing more (no fixed sleeps: we wait for close). */
async function rawClient(c: TestCoordinator, text: string): Promise<RawConnection> {
  const socket = connect(c.port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const started = performance.now();
  let data = '';
  socket.on('data', (chunk: Buffer) => (data += chunk.toString('latin1')));
  socket.on('error', () => {});
  const closed = new Promise<number>((resolve) =>
    socket.once('close', () => resolve(performance.now() - started)),
  );
  socket.write(text);
  return { socket, received: () => data, closed };
}

describe('slow clients are cut off (coordinator.http.*-timeout)', () => {
  let c: TestCoordinator;
  useCoordinator(
    {
      store: 'memory',
      overrides: {
        'http.headers-timeout': `${HEADERS_TIMEOUT_MS}ms`,
        'http.request-timeout': `${REQUEST_TIMEOUT_MS}ms`,
        'http.keep-alive-timeout': `${KEEP_ALIVE_TIMEOUT_MS}ms`,
      },
    },
    (coordinator) => (c = coordinator),
  );

  it('a client that never finishes its headers is disconnected after the headers timeout', async () => {
    const client = await rawClient(c, `POST ${HEARTBEAT} HTTP/1.1\r\nHost: x\r\nContent-Ty`);
    const ms = await client.closed;
    expect(ms).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 50);
    expect(ms).toBeLessThan(REQUEST_TIMEOUT_MS * 4);
    expect(client.received()).toMatch(/^HTTP\/1\.1 408 /);
  });

  it.each([
    ['the heartbeat fast path', HEARTBEAT],
    ['an express route', '/coord/v1/admin/groups'],
  ])(
    'a client that never finishes its body on %s is disconnected after the request timeout',
    async (_name, path) => {
      const client = await rawClient(
        c,
        `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
          `Content-Length: 100\r\n\r\n{"memberId":`,
      );
      const ms = await client.closed;
      expect(ms).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 50);
      expect(ms).toBeLessThan(REQUEST_TIMEOUT_MS * 4);
    },
  );

  it('forty half-sent requests do not keep forty sockets open', async () => {
    const clients = await Promise.all(
      Array.from({ length: 40 }, () =>
        rawClient(c, `POST ${HEARTBEAT} HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{`),
      ),
    );
    const times = await Promise.all(clients.map((client) => client.closed));
    expect(Math.max(...times)).toBeLessThan(REQUEST_TIMEOUT_MS * 4);
  });

  it('an idle keep-alive connection is closed after the keep-alive timeout', async () => {
    const client = await rawClient(
      c,
      'GET /coord/v1/monitoring/health HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n',
    );
    const ms = await client.closed;
    expect(client.received()).toMatch(/^HTTP\/1\.1 200 /);
    expect(ms).toBeGreaterThanOrEqual(KEEP_ALIVE_TIMEOUT_MS - 50);
    expect(ms).toBeLessThan(REQUEST_TIMEOUT_MS * 4);
  });

  it('a routing long poll longer than the request timeout still gets its answer', async () => {
    // Node's request timeout covers receiving the request; the long poll's GET is received at once.
    const create = await c.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: 'slow', consumerGroup: 'poll', shardCount: 1, ...CHANGE },
    });
    expect(create.status).toBe(201);
    const { metadataVersion } = (await (
      await c.call('GET', '/coord/v1/routing/streams/slow/groups/poll', { user: 'producer' })
    ).json()) as { metadataVersion: number };
    const waitMs = REQUEST_TIMEOUT_MS * 3;
    const started = performance.now();
    const res = await c.call(
      'GET',
      `/coord/v1/routing/streams/slow/groups/poll?afterVersion=${metadataVersion}&waitMs=${waitMs}`,
      { user: 'producer' },
    );
    expect(res.status).toBe(200);
    expect(performance.now() - started).toBeGreaterThanOrEqual(waitMs - 50);
    expect(await res.json()).toMatchObject({ metadataVersion });
  });
});
