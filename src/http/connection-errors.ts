import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { requestIdOf } from './pipeline.js';

/**
 * Answers given on a connection before (or instead of) a request the API could route: a
 * request line or header block Node's parser refused, headers too large, a request not
 * received in time. They carry the API's error shape (`{"error": {code, message, requestId}}`),
 * with `requestId` only when the caller's `X-Request-Id` could be read, and close the
 * connection. See docs/operations.md#http-timeouts.
 */
export interface ConnectionAnswer {
  readonly status: number;
  readonly code: string;
  readonly message: string;
}

/** Status text of the answers this module writes. */
const REASON: Readonly<Record<number, string>> = {
  400: 'Bad Request',
  404: 'Not Found',
  408: 'Request Timeout',
  413: 'Payload Too Large',
  417: 'Expectation Failed',
  431: 'Request Header Fields Too Large',
};

/** Longest part of a parser's reason quoted back (it may quote the request). */
const MAX_REASON_CHARS = 200;

/**
 * The answer to a `clientError` of Node's HTTP server: 431 for headers too large, 408 for Node's
 * own request timeout, 413 for chunk extensions too large, 400 for anything else the parser
 * refused (a malformed request line, an invalid header, `Content-Length` together with
 * `Transfer-Encoding`, two different `Content-Length`s: the spellings of request smuggling).
 */
export function clientErrorAnswer(error: { code?: unknown; reason?: unknown }): ConnectionAnswer {
  switch (error.code) {
    case 'HPE_HEADER_OVERFLOW':
      return {
        status: 431,
        code: 'HEADERS_TOO_LARGE',
        message: 'the request headers are too large',
      };
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return {
        status: 413,
        code: 'PAYLOAD_TOO_LARGE',
        message: 'the chunk extensions of the request body are too large',
      };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return requestTimeoutAnswer('request');
    default: {
      const reason = typeof error.reason === 'string' ? error.reason : null;
      const code = typeof error.code === 'string' ? error.code : 'unknown';
      return {
        status: 400,
        code: 'VALIDATION_FAILED',
        message: `malformed request: ${(reason ?? code).slice(0, MAX_REASON_CHARS)}`,
      };
    }
  }
}

/** 408 for a request whose headers (or whole request) did not arrive in time. */
export function requestTimeoutAnswer(part: 'headers' | 'request'): ConnectionAnswer {
  return {
    status: 408,
    code: 'REQUEST_TIMEOUT',
    message:
      part === 'headers'
        ? 'the request headers were not received in time (coordinator.http.headers-timeout)'
        : 'the request was not received in time (coordinator.http.request-timeout)',
  };
}

const REQUEST_ID_HEADER = /\r?\nx-request-id[ \t]*:[ \t]*([^\r\n]*)/i;

/**
 * The caller's `X-Request-Id` from the bytes received so far (a refused request's raw packet),
 * when it is there and sane; null otherwise (a new id is not made up for a request that never
 * was one).
 */
export function requestIdInRaw(raw: Buffer | undefined): string | null {
  if (raw === undefined || raw.length === 0) return null;
  const match = REQUEST_ID_HEADER.exec(raw.toString('latin1'));
  const given = match?.[1]?.trim();
  if (!given) return null;
  return requestIdOf(given) === given ? given : null;
}

/** The whole HTTP/1.1 response of an answer: JSON error body, `Connection: close`. */
export function connectionResponse(answer: ConnectionAnswer, requestId: string | null): string {
  const body = JSON.stringify({
    error: {
      code: answer.code,
      message: answer.message,
      ...(requestId === null ? {} : { requestId }),
    },
  });
  return (
    `HTTP/1.1 ${answer.status} ${REASON[answer.status] ?? 'Error'}\r\n` +
    'Content-Type: application/json; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    (requestId === null ? '' : `X-Request-Id: ${requestId}\r\n`) +
    'Connection: close\r\n\r\n' +
    body
  );
}

/**
 * Writes `answer` on the socket when nothing of a response was written on it yet, then closes
 * it (at once when the answer cannot be written: a response is half sent, or the socket is
 * gone). The socket is destroyed once the bytes are handed to the kernel, so a client that
 * never reads cannot keep it open.
 */
export function answerOnSocket(
  socket: Duplex,
  answer: ConnectionAnswer,
  requestId: string | null,
): void {
  // Node's own clientError handling makes the same check: bytes of a response already written
  // on this socket would be corrupted by a second status line.
  const inFlight = (socket as { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
  if (!socket.writable || inFlight?.headersSent === true) {
    socket.destroy();
    return;
  }
  socket.end(connectionResponse(answer, requestId), () => socket.destroy());
}

/** A request read on a socket and its response, as {@link SocketDeadlines} knows them. */
export type Exchange = { readonly req: IncomingMessage; readonly res: ServerResponse } | null;

/**
 * The server's `clientError` listener: the API's JSON error for what Node's parser refused
 * (instead of its bare `400 Bad Request` / `431`), and the connection closed. Node's own
 * request timeout is answered as the per-socket deadlines answer it ({@link answerTimeout}),
 * with the request id of the request in flight (`exchangeOf`). A reset by the peer is not
 * answered.
 */
export function clientErrorListener(
  exchangeOf: (socket: Duplex) => Exchange,
): (error: Error & { code?: string; reason?: string; rawPacket?: Buffer }, socket: Duplex) => void {
  return (error, socket) => {
    if (error.code === 'ECONNRESET' || error.code === 'EPIPE') {
      socket.destroy();
      return;
    }
    if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      const exchange = exchangeOf(socket);
      answerTimeout(socket, exchange === null ? 'headers' : 'request', exchange);
      return;
    }
    answerOnSocket(socket, clientErrorAnswer(error), requestIdInRaw(error.rawPacket));
  };
}

/**
 * The {@link SocketDeadlines} answer: 408 and the connection closed. A request whose headers
 * were read is answered through its response (with its request id, and nothing if its answer
 * has begun: the socket is then only closed); one still in its headers on the socket itself.
 */
export function answerTimeout(
  socket: Duplex,
  part: 'headers' | 'request',
  exchange: Exchange,
): void {
  const answer = requestTimeoutAnswer(part);
  if (exchange === null) {
    answerOnSocket(socket, answer, null);
    return;
  }
  const { req, res } = exchange;
  if (res.headersSent || res.destroyed) {
    socket.destroy();
    return;
  }
  const given = res.getHeader('X-Request-Id');
  answerOnResponse(req, res, answer, typeof given === 'string' ? given : null);
}

/**
 * Writes `answer` as the response to `req` (with the request id given, else the caller's
 * `X-Request-Id` when sane, else a new one) and closes the connection after it.
 */
function answerOnResponse(
  req: IncomingMessage,
  res: ServerResponse,
  answer: ConnectionAnswer,
  requestId: string | null,
): void {
  const id = requestId ?? requestIdOf(req.headers['x-request-id'] as string | undefined);
  const body = JSON.stringify({
    error: { code: answer.code, message: answer.message, requestId: id },
  });
  res.writeHead(answer.status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(body),
    'X-Request-Id': id,
    Connection: 'close',
  });
  // With `Connection: close` the server closes the socket once this is written; the rest of
  // the body is never read.
  res.end(body);
}

/**
 * An HTTP/1.1 request without a `Host` header is refused (HTTP/1.1 requires one): 400 in the
 * API's shape, where Node would answer a bare 400 by itself (the server is created with
 * `requireHostHeader: false` for this). Returns whether it was.
 */
export function refusedWithoutHost(req: IncomingMessage, res: ServerResponse): boolean {
  if (req.headers.host !== undefined || req.httpVersion !== '1.1') return false;
  answerOnResponse(
    req,
    res,
    {
      status: 400,
      code: 'VALIDATION_FAILED',
      message: 'malformed request: an HTTP/1.1 request needs a Host header',
    },
    null,
  );
  return true;
}

/**
 * The server's `connect` listener: a CONNECT request (a proxy's method) routes nowhere here:
 * 404 in the API's shape and the connection closed, where Node would close it without a word.
 */
export function connectListener(req: IncomingMessage, socket: Duplex): void {
  answerOnSocket(
    socket,
    {
      status: 404,
      code: 'NOT_FOUND',
      message: 'no route for CONNECT: the coordinator is no proxy',
    },
    requestIdOf(req.headers['x-request-id'] as string | undefined),
  );
}

/**
 * The server's `checkExpectation` listener: an `Expect` other than `100-continue` (the only one
 * HTTP/1.1 defines) is 417 in the API's shape, where Node would answer a bare 417 with no body.
 */
export function expectationListener(req: IncomingMessage, res: ServerResponse): void {
  answerOnResponse(
    req,
    res,
    {
      status: 417,
      code: 'EXPECTATION_FAILED',
      message: 'the only Expect the coordinator knows is 100-continue',
    },
    null,
  );
}
