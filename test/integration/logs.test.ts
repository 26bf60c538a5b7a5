import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestCoordinator, type TestCoordinator } from '../support/coordinator.js';
import { captureLogs } from '../support/logs.js';
import { freePort, waitFor } from '../support/redis-server.js';

let running: TestCoordinator[] = [];
afterEach(async () => {
  await Promise.all(running.map((c) => c.close()));
  running = [];
});

async function start(options: Parameters<typeof startTestCoordinator>[0]) {
  const c = await startTestCoordinator(options);
  running.push(c);
  return c;
}

/**
 * Sends the headers and half the body of a POST on a raw socket, waits until the server has
 * the request, then resets the connection.
 */
async function abortMidBody(c: TestCoordinator, path: string, requestId: string): Promise<void> {
  const received = new Promise<void>((resolve) => c.server.once('request', () => resolve()));
  const socket = connect(c.port, '127.0.0.1');
  socket.on('error', () => {});
  socket.write(
    `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
      `X-Request-Id: ${requestId}\r\nContent-Length: 200\r\n\r\n{"memberId":"m-1",`,
  );
  await received;
  socket.resetAndDestroy();
}

describe('a client abort is a 400-class event, not an error', () => {
  it.each([
    [
      'the heartbeat fast path',
      '/coord/v1/consumer/streams/logs/groups/g/heartbeat',
      { streamPrefix: 'logs', consumerGroup: 'g' },
    ],
    ['an express route', '/coord/v1/admin/groups', {}],
  ])('aborting a request mid-body on %s logs no error-level line', async (_name, path, group) => {
    const logs = captureLogs('debug');
    const c = await start({ store: 'memory', logger: logs.logger });
    const requestId = `abort-${Math.random().toString(36).slice(2)}`;
    await abortMidBody(c, path, requestId);
    await waitFor(() => logs.lines.some((line) => line.requestId === requestId), {
      what: 'a log line about the aborted request',
    });
    const about = logs.lines.filter((line) => line.requestId === requestId);
    expect(about.map((line) => line.level)).not.toContain('error');
    expect(about.map((line) => line.level)).not.toContain('warn');
    expect(about[0]).toMatchObject({ message: 'request aborted by the client', ...group });
    expect(logs.lines.filter((line) => line.level === 'error')).toEqual([]);
    expect(logs.text()).not.toMatch(/\n\s+at |INTERNAL/);
  });
});

describe('the startup line names the real bind address', () => {
  it('with port 0 it names the port the server got', async () => {
    const logs = captureLogs('info');
    const c = await start({ store: 'memory', logger: logs.logger });
    const line = logs.lines.find((l) => l.message.includes('listening on'));
    expect(line).toBeDefined();
    expect(c.port).toBeGreaterThan(0);
    expect(line?.message).toContain(`bound to 127.0.0.1:${c.port}`);
    expect(line).toMatchObject({ bindAddress: `127.0.0.1:${c.port}`, url: c.url });
  });
});

describe('an unreachable store is named with its address and cause', () => {
  it('is logged at startup and answered 503 STORE_UNAVAILABLE naming host:port and ECONNREFUSED', async () => {
    const port = await freePort();
    const logs = captureLogs('info');
    const c = await start({
      store: 'redis',
      redisUrl: `redis://:hunter22secret@127.0.0.1:${port}`,
      logger: logs.logger,
    });
    await waitFor(() => logs.lines.some((l) => l.message.startsWith('store unreachable')), {
      what: 'the startup line about the store',
    });
    const startup = logs.lines.find((l) => l.message.startsWith('store unreachable'));
    expect(startup).toMatchObject({ store: `127.0.0.1:${port}`, cause: 'ECONNREFUSED' });
    expect(String(startup?.error)).toContain(`127.0.0.1:${port}`);

    const res = await c.call('GET', '/coord/v1/monitoring/streams/down/groups/g', {
      user: 'reader',
    });
    expect(res.status).toBe(503);
    const { error } = (await res.json()) as {
      error: { code: string; message: string; details: unknown };
    };
    expect(error.code).toBe('STORE_UNAVAILABLE');
    expect(error.message).toContain(`127.0.0.1:${port}`);
    expect(error.message).toContain('ECONNREFUSED');
    expect(error.details).toEqual({ store: `127.0.0.1:${port}`, cause: 'ECONNREFUSED' });
    expect(JSON.stringify(error)).not.toMatch(/maxRetriesPerRequest|hunter22/);
    expect(logs.text()).not.toMatch(/maxRetriesPerRequest|hunter22/);
  });

  it('logs the refusals it answers at warn, without a stack, at most 5 per group and minute', async () => {
    const port = await freePort();
    const logs = captureLogs('info');
    const c = await start({
      store: 'redis',
      redisUrl: `redis://127.0.0.1:${port}`,
      logger: logs.logger,
    });
    // Each waits for a reconnect attempt (ioredis backoff), so a few more than the 5 lines will do.
    for (let i = 0; i < 7; i++) {
      const res = await c.call('GET', '/coord/v1/monitoring/streams/down/groups/g', {
        user: 'reader',
      });
      expect(res.status).toBe(503);
    }
    const refused = logs.lines.filter((l) => l.message === 'request refused');
    expect(refused).toHaveLength(5);
    for (const line of refused) {
      expect(line).toMatchObject({
        level: 'warn',
        code: 'STORE_UNAVAILABLE',
        status: 503,
        streamPrefix: 'down',
        consumerGroup: 'g',
      });
    }
    expect(logs.text()).not.toMatch(/\n\s+at |\\n\s+at /);
    expect(logs.lines.filter((l) => l.level === 'error' && l.message === 'request failed')).toEqual(
      [],
    );
  });
});
