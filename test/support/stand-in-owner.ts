/**
 * A stand-in for a group's owner replica as a child process (started with tsx by
 * {@link startStandInOwner}): a plain HTTP server on `STAND_IN_PORT` whose answers a test can
 * predict, so that it can be SIGSTOPped like a paused replica (it keeps its listening socket, the
 * kernel accepts connections, nothing answers) and SIGCONTed.
 *
 * - `GET /coord/v1/monitoring/health`: 200 (what a forwarder's probe asks for).
 * - `GET /stats`: 200 `{requests: {path: count}}`, every request counted by path (stats excluded).
 * - `GET /events`: an event stream, a `: keep-alive` comment every `STAND_IN_KEEPALIVE_MS`.
 * - `GET /hold?waitMs=N`: 200 after N ms (a long poll).
 * - `… /close`: the connection is closed without an answer.
 * - anything else: 200 `{method, url, body}` at once.
 */
import { createServer } from 'node:http';

const port = Number(process.env['STAND_IN_PORT']);
const keepAliveMs = Number(process.env['STAND_IN_KEEPALIVE_MS'] ?? 100);
const counts: Record<string, number> = {};

const server = createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://stand-in');
  if (url.pathname === '/stats') {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ counts }));
    return;
  }
  counts[url.pathname] = (counts[url.pathname] ?? 0) + 1;
  if (url.pathname === '/coord/v1/monitoring/health') {
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"UP"}');
    return;
  }
  if (url.pathname === '/events') {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write('event: snapshot\ndata: {}\n\n');
    const timer = setInterval(() => res.write(': keep-alive\n\n'), keepAliveMs);
    res.on('close', () => clearInterval(timer));
    return;
  }
  if (url.pathname.endsWith('/close')) {
    req.socket.destroy();
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const answer = () =>
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          method: req.method,
          url: req.url,
          body: Buffer.concat(chunks).toString('utf8'),
        }),
      );
    if (url.pathname === '/hold') setTimeout(answer, Number(url.searchParams.get('waitMs') ?? 0));
    else answer();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(port, '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
