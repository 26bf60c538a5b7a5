/**
 * Raw TCP clients for the tests of what a coordinator does with bytes that are not a well-formed
 * request sent at a normal pace: half-sent headers, trickled bodies, malformed request lines.
 * Real sockets on the coordinator's real port; waits are on events (data, close), never sleeps.
 */
import { Agent, request } from 'node:http';
import { connect, type Socket } from 'node:net';

/** One raw connection and what the server did with it. */
export interface RawConnection {
  readonly socket: Socket;
  /** Everything the server sent so far (latin1). */
  received(): string;
  /** Milliseconds since connecting (performance.now based). */
  elapsed(): number;
  /** Resolves with the milliseconds from connecting to the server closing the socket. */
  readonly closed: Promise<number>;
  /** Whether the socket has closed. */
  isClosed(): boolean;
  /** Resolves once `received()` passes `check`, or rejects after `timeoutMs`. */
  until(check: (received: string) => boolean, timeoutMs: number): Promise<string>;
}

/** Opens a TCP connection to `port` on 127.0.0.1 and writes `text` (if any). */
export async function rawConnect(port: number, text = ''): Promise<RawConnection> {
  const socket = connect(port, '127.0.0.1');
  socket.setNoDelay(true);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const started = performance.now();
  let data = '';
  let closed = false;
  const waiters = new Set<() => void>();
  socket.on('data', (chunk: Buffer) => {
    data += chunk.toString('latin1');
    for (const wake of waiters) wake();
  });
  socket.on('error', () => undefined);
  const closedAt = new Promise<number>((resolve) =>
    socket.once('close', () => {
      closed = true;
      for (const wake of waiters) wake();
      resolve(performance.now() - started);
    }),
  );
  if (text) socket.write(text);
  return {
    socket,
    received: () => data,
    elapsed: () => performance.now() - started,
    closed: closedAt,
    isClosed: () => closed,
    until(check, timeoutMs) {
      return new Promise((resolve, reject) => {
        const wake = () => {
          if (check(data)) {
            done();
            resolve(data);
          } else if (closed) {
            done();
            reject(
              new Error(`socket closed before the expected answer; got ${data.slice(0, 300)}`),
            );
          }
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`no expected answer within ${timeoutMs} ms; got ${data.slice(0, 300)}`));
        }, timeoutMs);
        const done = () => {
          clearTimeout(timer);
          waiters.delete(wake);
        };
        waiters.add(wake);
        wake();
      });
    },
  };
}

/** Whether `text` holds `count` complete HTTP responses (each with a Content-Length). */
export function completeResponses(text: string, count: number): boolean {
  let rest = text;
  for (let i = 0; i < count; i++) {
    const end = rest.indexOf('\r\n\r\n');
    if (end === -1) return false;
    const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(rest.slice(0, end))?.[1] ?? 0);
    if (rest.length < end + 4 + length) return false;
    rest = rest.slice(end + 4 + length);
  }
  return true;
}

/** The status and JSON body of the first response in `text`. */
export function firstResponse(text: string): { status: number; headers: string; body: unknown } {
  const end = text.indexOf('\r\n\r\n');
  const head = end === -1 ? text : text.slice(0, end);
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
  const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
  const raw = end === -1 ? '' : text.slice(end + 4, end + 4 + length);
  let body: unknown = raw;
  try {
    body = JSON.parse(raw);
  } catch {
    // not JSON: returned as text
  }
  return { status, headers: head, body };
}

/**
 * A client that sends one request after another on one kept-alive connection for as long as it
 * runs, counting the answers by status: the "everything else is busy" of the slow-client tests.
 */
export class SteadyClient {
  readonly statuses = new Map<number, number>();
  failures = 0;
  private running = true;
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 1 });
  private readonly loop: Promise<void>;

  constructor(port: number, path: string) {
    this.loop = (async () => {
      while (this.running) {
        try {
          const status = await new Promise<number>((resolve, reject) => {
            const req = request(
              { host: '127.0.0.1', port, path, agent: this.agent, method: 'GET' },
              (res) => {
                res.resume();
                res.on('end', () => resolve(res.statusCode ?? 0));
                res.on('error', reject);
              },
            );
            req.on('error', reject);
            req.end();
          });
          this.statuses.set(status, (this.statuses.get(status) ?? 0) + 1);
        } catch {
          this.failures++;
        }
        // Yield to the timers between requests (a turn of the loop, not a sleep).
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();
  }

  /** Answers with this status so far. */
  count(status: number): number {
    return this.statuses.get(status) ?? 0;
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
    this.agent.destroy();
  }
}
