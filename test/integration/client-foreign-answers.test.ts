/**
 * Answers that are not the coordinator's: a reverse proxy in front of a real coordinator that
 * serves it under a path prefix and answers anything else, or an upstream it cannot reach,
 * with its own HTML error page.
 */
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { CoordinatorClient, NotFoundError, UnavailableError } from '../../src/client/index.js';
import { CHANGE, useCoordinator, type TestCoordinator } from '../support/coordinator.js';

let coordinator: TestCoordinator;
const servers: Server[] = [];

useCoordinator({ store: 'memory' }, (c) => {
  coordinator = c;
});
afterEach(async () => {
  for (const server of servers.splice(0)) {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

const PAGE = (status: string) =>
  `<html>\r\n<head><title>${status}</title></head>\r\n<body>\r\n<center><h1>${status}</h1></center>\r\n<hr><center>nginx/1.25.3</center>\r\n</body>\r\n</html>\r\n`;

/**
 * A proxy that passes `/coordinator/…` on to `upstream` (without the prefix) and answers other
 * paths with an HTML 404 page, and a request it cannot pass on with an HTML 502 page.
 */
async function prefixProxy(upstream: string): Promise<string> {
  const target = new URL(upstream);
  const server = createServer((req, res) => {
    const foreign = (status: number, text: string) => {
      req.resume();
      res.writeHead(status, { 'content-type': 'text/html' });
      res.end(PAGE(text));
    };
    if (!req.url?.startsWith('/coordinator/')) return foreign(404, '404 Not Found');
    const upstreamReq = request(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url.slice('/coordinator'.length),
        headers: { ...req.headers, host: target.host },
      },
      (upstreamRes) => {
        res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.headers);
        upstreamRes.pipe(res);
      },
    );
    upstreamReq.on('error', () => foreign(502, '502 Bad Gateway'));
    req.pipe(upstreamReq);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe("a proxy's own error page", () => {
  it('is a typed error whose message names the URL and quotes the page', async () => {
    const proxy = await prefixProxy(coordinator.url);
    const sp = `orders-${Date.now()}`;
    const through = new CoordinatorClient({
      baseUrl: `${proxy}/coordinator/`,
      token: coordinator.token('admin'),
    });
    await through.createGroup(sp, 'billing', 2, CHANGE);
    expect((await through.routing(sp, 'billing')).shardCount).toBe(2);

    // The prefix left out: the proxy's page, not the coordinator's.
    const wrong = new CoordinatorClient({ baseUrl: proxy, token: coordinator.token('admin') });
    const missed = await wrong.routing(sp, 'billing').catch((error: unknown) => error);
    expect(missed).toBeInstanceOf(NotFoundError);
    expect((missed as NotFoundError).code).toBe('HTTP_404');
    expect((missed as NotFoundError).message).toBe(
      `HTTP 404 from ${proxy}/coord/v1/routing/streams/${sp}/groups/billing: 404 Not Found 404 Not Found nginx/1.25.3`,
    );
  });

  it('a 502 from a proxy whose upstream is gone says so', async () => {
    const proxy = await prefixProxy('http://127.0.0.1:1');
    const client = new CoordinatorClient({
      baseUrl: `${proxy}/coordinator`,
      token: coordinator.token('admin'),
      retry: { maxAttempts: 1 },
    });
    const failed = await client.routing('orders', 'billing').catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(UnavailableError);
    expect((failed as UnavailableError).code).toBe('HTTP_502');
    expect((failed as UnavailableError).message).toBe(
      `HTTP 502 from ${proxy}/coordinator/coord/v1/routing/streams/orders/groups/billing: 502 Bad Gateway 502 Bad Gateway nginx/1.25.3`,
    );
  });
});
