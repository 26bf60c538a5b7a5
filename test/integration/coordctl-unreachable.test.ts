import { createServer, type Server, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { coordctl } from '../support/cli.js';
import { freePort } from '../support/redis-server.js';

describe('coordctl says which URL it could not reach and why', () => {
  it('a coordinator that does not answer: names its URL and ECONNREFUSED, no stack', async () => {
    const port = await freePort();
    const { code, stderr } = await coordctl([
      'scale',
      'orders:billing',
      '4',
      '--requested-by',
      'test',
      '--reason',
      'unreachable',
      '--coordinator',
      `http://127.0.0.1:${port}`,
      '--token',
      'not-used',
    ]);
    expect(code).toBe(1);
    expect(stderr).toMatch(
      new RegExp(
        `^coordctl: cannot reach the coordinator at http://127\\.0\\.0\\.1:${port}/\\S*: ECONNREFUSED\\n  what to do: check that the coordinator runs and that --coordinator \\(or COORDCTL_URL\\) points at it\\n$`,
      ),
    );
  });

  it('a store that does not answer (backup): names host:port and ECONNREFUSED', async () => {
    const port = await freePort();
    const { code, stderr } = await coordctl(['backup', '--url', `redis://127.0.0.1:${port}`]);
    expect(code).toBe(1);
    expect(stderr).toContain(`Redis at 127.0.0.1:${port} unreachable (ECONNREFUSED)`);
    expect(stderr).not.toMatch(/maxRetriesPerRequest|\n\s+at /);
  });

  it('a coordinator that takes connections and never answers: gives up after 30 s, not 5 times that', async () => {
    // A hung replica (stopped, or stuck): the connection is taken, no answer ever comes.
    const sockets = new Set<Socket>();
    const server: Server = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    try {
      const started = Date.now();
      const { code, stderr } = await coordctl([
        'groups',
        '--coordinator',
        `http://127.0.0.1:${port}`,
        '--token',
        'not-used',
      ]);
      const seconds = (Date.now() - started) / 1000;
      expect(code).toBe(1);
      expect(stderr).toContain(
        `coordctl: cannot reach the coordinator at http://127.0.0.1:${port}/coord/v1/monitoring/groups: no answer within 30000 ms`,
      );
      // What it says is what it did: one wait of 30 s, not one per attempt.
      expect(seconds).toBeLessThan(45);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  }, 200_000);
});
