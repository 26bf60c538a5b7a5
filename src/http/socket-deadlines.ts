import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Duplex } from 'node:stream';
import { auditCutOff } from './audit.js';
import {
  answerTimeout,
  clientErrorListener,
  connectListener,
  expectationListener,
  requestTimeoutAnswer,
  type Exchange,
} from './connection-errors.js';

/*
 * What a socket is doing, as far as its deadline is concerned:
 * - HEADERS: a request has begun (the connection opened, or bytes came after the last answer)
 *   and its headers are not complete: `headers-timeout` from `since`;
 * - BODY: the headers are in, the body is not: `request-timeout` from `since`;
 * - SERVING: the request is received; the answer may take as long as it takes (long polls,
 *   event streams);
 * - IDLE: the answer is written; Node's keep-alive timeout closes the socket unless another
 *   request begins, which `bytesRead` moving past `mark` tells.
 * `mark` is `socket.bytesRead` once the request was wholly received: at its headers for a
 * request without a body, else when its body is seen complete. Bytes read after it belong to
 * the next request, even when they came before the answer was written (a client that sends the
 * start of its next request at once).
 */
const HEADERS = 0;
const BODY = 1;
const SERVING = 2;
const IDLE = 3;

interface Tracked {
  phase: number;
  /** When the current request began (monotonic ms). */
  since: number;
  /** `socket.bytesRead` once the current request was wholly received (see above). */
  mark: number;
  /** Whether `mark` is set for the current request. */
  marked: boolean;
  req: IncomingMessage | null;
  res: ServerResponse | null;
}

const TRACKED = Symbol('coord.socketDeadline');
type TrackedSocket = Socket & { [TRACKED]?: Tracked };

/** Options of {@link SocketDeadlines}. */
export interface SocketDeadlineOptions {
  /** `coordinator.http.headers-timeout`; 0: none. */
  readonly headersTimeoutMs: number;
  /** `coordinator.http.request-timeout`; 0: none. */
  readonly requestTimeoutMs: number;
  /**
   * A socket ran out of time: answer 408 (through `res` when a request was read and nothing of
   * its answer is written yet) and close it.
   */
  readonly onTimeout: (
    socket: Socket,
    part: 'headers' | 'request',
    exchange: { readonly req: IncomingMessage; readonly res: ServerResponse } | null,
  ) => void;
  /** Monotonic milliseconds. @default performance.now */
  readonly now?: () => number;
}

/**
 * How often the deadlines are checked: a tenth of the shortest limit, between 10 ms and 250 ms,
 * so a socket is cut at most a quarter of a second (or a tenth of its limit) late.
 */
export function deadlineTickMs(headersTimeoutMs: number, requestTimeoutMs: number): number {
  const limits = [headersTimeoutMs, requestTimeoutMs].filter((ms) => ms > 0);
  if (limits.length === 0) return 250;
  return Math.min(250, Math.max(10, Math.floor(Math.min(...limits) / 10)));
}

/**
 * The slow-client limits of `coordinator.http.*`, per socket. Node 20 enforces its
 * `headersTimeout` and `requestTimeout` only in a periodic sweep of its connection list that
 * stops at the first connection not yet expired, so once any other connection is active (a
 * kept-alive client, busy) a socket stuck in its headers is never reaped; the second request on
 * a kept-alive socket is not covered either. Here every socket has one deadline of its own:
 * from the first byte of each request (the connection for the first one) its headers must be in
 * within the headers timeout and the whole request within the request timeout, else it is
 * answered 408 and closed (docs/operations.md#http-timeouts).
 *
 * Cheap on the hot path: no timer per request. The request listener records the request on its
 * socket (`request`, a few property writes, and a `finish` listener that lets go of the request
 * and its response as soon as it is answered); one coarse timer (see {@link deadlineTickMs})
 * walks the open sockets and moves each on from what it can see: the body complete
 * (`req.complete`), the answer written, bytes of a next request arrived (`socket.bytesRead`).
 * Node's own checks stay on as well.
 */
export class SocketDeadlines {
  private readonly sockets = new Set<TrackedSocket>();
  private timer: NodeJS.Timeout | null = null;
  private readonly now: () => number;
  private readonly headersMs: number;
  private readonly requestMs: number;
  /** How often the sockets are looked at. */
  readonly tickMs: number;

  constructor(private readonly options: SocketDeadlineOptions) {
    this.headersMs = options.headersTimeoutMs;
    this.requestMs = options.requestTimeoutMs;
    this.now = options.now ?? (() => performance.now());
    this.tickMs = deadlineTickMs(this.headersMs, this.requestMs);
  }

  private get enabled(): boolean {
    return this.headersMs > 0 || this.requestMs > 0;
  }

  /** The server's `connection` listener: the first request's clock starts now. */
  connected(socket: Socket): void {
    if (!this.enabled) return;
    const tracked = socket as TrackedSocket;
    tracked[TRACKED] = {
      phase: HEADERS,
      since: this.now(),
      mark: 0,
      marked: false,
      req: null,
      res: null,
    };
    this.sockets.add(tracked);
    socket.once('close', () => this.sockets.delete(tracked));
    this.timer ??= setInterval(this.tick, this.tickMs).unref();
  }

  /** Called first in the request listener: the headers are in; now the body. O(1). */
  request(req: IncomingMessage, res: ServerResponse): void {
    const state = (req.socket as TrackedSocket)[TRACKED];
    if (state === undefined) return;
    // Headers that came whole between two looks at the socket: their request starts now.
    if (state.phase !== HEADERS) state.since = this.now();
    state.phase = BODY;
    state.req = req;
    state.res = res;
    // Let go of the exchange the moment it is answered, not at the next looks: a socket's last
    // request and response held for two ticks (up to 500 ms) outlived the young generation at
    // thousands of requests a second and were promoted, which is most of what a busy replica's
    // old generation grew by.
    const socket = req.socket as TrackedSocket;
    res.once('finish', () => this.answered(socket, state, res));
    // Without a body the request ends with its headers: what the socket read so far is its.
    const headers = req.headers;
    state.marked =
      headers['transfer-encoding'] === undefined &&
      (headers['content-length'] === undefined || headers['content-length'] === '0');
    if (state.marked) state.mark = req.socket.bytesRead;
  }

  /**
   * The request being received on `socket` (its headers read, its body not yet complete) and
   * its response; null when none is.
   */
  exchangeOf(socket: Duplex): { req: IncomingMessage; res: ServerResponse } | null {
    const state = (socket as TrackedSocket)[TRACKED];
    if (state?.phase !== BODY || state.req === null || state.res === null) return null;
    return { req: state.req, res: state.res };
  }

  /** Stops the timer (the server closes). */
  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.sockets.clear();
  }

  /** How many sockets are watched (tests, metrics). */
  get size(): number {
    return this.sockets.size;
  }

  /** How many watched sockets still hold a request and its response (tests). */
  get holding(): number {
    let n = 0;
    for (const socket of this.sockets) if (socket[TRACKED]?.res) n++;
    return n;
  }

  private readonly tick = (): void => {
    const now = this.now();
    for (const socket of this.sockets) {
      const state = socket[TRACKED];
      if (state === undefined || socket.destroyed) continue;
      switch (state.phase) {
        case HEADERS:
          if (this.headersMs > 0 && now - state.since >= this.headersMs) {
            this.expire(socket, state, 'headers');
          }
          break;
        case BODY:
          if (state.req?.complete === true) {
            state.phase = SERVING;
            if (!state.marked) {
              state.mark = socket.bytesRead;
              state.marked = true;
            }
          } else if (this.requestMs > 0 && now - state.since >= this.requestMs) {
            this.expire(socket, state, 'request');
          }
          break;
        case SERVING:
          if (state.res?.writableFinished === true) this.answered(socket, state, state.res);
          break;
        default:
          // A next request has begun on the kept-alive socket: its clock starts now (at most one
          // look late, so it is never cut early).
          if (socket.bytesRead !== state.mark) {
            state.phase = HEADERS;
            state.since = now;
          }
      }
    }
  };

  /**
   * The answer to `res` is written: the socket waits for its next request (IDLE), or that one
   * began meanwhile (HEADERS, its clock from now), as the tick would find at its next looks.
   */
  private answered(socket: TrackedSocket, state: Tracked, res: ServerResponse): void {
    if (state.res !== res || socket[TRACKED] !== state) return;
    state.req = null;
    state.res = null;
    if (!state.marked) {
      state.mark = socket.bytesRead;
      state.marked = true;
    }
    if (socket.bytesRead === state.mark) {
      state.phase = IDLE;
    } else {
      // The next request began while this one was answered.
      state.phase = HEADERS;
      state.since = this.now();
    }
  }

  private expire(socket: TrackedSocket, state: Tracked, part: 'headers' | 'request'): void {
    this.sockets.delete(socket);
    const { req, res } = state;
    socket[TRACKED] = undefined;
    this.options.onTimeout(socket, part, req !== null && res !== null ? { req, res } : null);
  }
}

/** Sockets whose request was cut off and whose 408 waits for the request's audit record. */
const auditing = new WeakSet<Duplex>();

/**
 * The answer to a request not received in time ({@link answerTimeout}: 408, the socket closed).
 * A request whose headers were read and that keeps an audit record for this case (an admin
 * request, see `auditCutOff`) has it written first, as every other refusal is audited before
 * it is answered; meanwhile the socket reads nothing more, so the request cannot complete and
 * be served after all. A second timeout of the same request (Node's own check as well as the
 * per-socket deadline) is left to the first.
 */
function answerTimeoutAudited(
  socket: Duplex,
  part: 'headers' | 'request',
  exchange: Exchange,
): void {
  if (auditing.has(socket)) return;
  const written =
    exchange === null || exchange.res.headersSent
      ? null
      : auditCutOff(exchange.res, requestTimeoutAnswer(part));
  if (written === null) {
    answerTimeout(socket, part, exchange);
    return;
  }
  auditing.add(socket);
  socket.pause();
  void written.then(() => answerTimeout(socket, part, exchange));
}

/**
 * Puts the per-socket slow-client deadlines and the JSON answers to what Node's parser refuses
 * on `server` (its `connection` and `clientError` listeners). The request listener must call
 * {@link SocketDeadlines.request} first with each request.
 */
export function guardConnections(
  server: Server,
  limits: { readonly headersTimeoutMs: number; readonly requestTimeoutMs: number },
): SocketDeadlines {
  const deadlines = new SocketDeadlines({ ...limits, onTimeout: answerTimeoutAudited });
  const exchangeOf = (socket: Duplex) => deadlines.exchangeOf(socket);
  const onClientError = clientErrorListener(exchangeOf);
  server.on('connection', (socket: Socket) => deadlines.connected(socket));
  server.on('connect', connectListener);
  server.on('checkExpectation', expectationListener);
  server.on('clientError', (error: Error & { code?: string }, socket: Duplex) => {
    // Node's own request timeout: answered (and audited) as the per-socket deadlines do.
    if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      const exchange = exchangeOf(socket);
      answerTimeoutAudited(socket, exchange === null ? 'headers' : 'request', exchange);
      return;
    }
    onClientError(error, socket);
  });
  return deadlines;
}
