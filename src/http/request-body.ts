import type { IncomingMessage } from 'node:http';
import { CoordinatorError } from '../errors.js';

/*
 * The body rules of the request pipeline (docs/architecture.md#the-request-pipeline), one
 * implementation each, called by the express body middleware and the heartbeat fast path:
 * the bounded raw read (413), the media type (415) and the JSON (400). The zod schemas come
 * after, in `request-checks.ts`.
 */

/** An error of reading the body, shaped like body-parser's (see `toErrorResponse`). */
function bodyError(message: string, type: string, status: number): Error {
  return Object.assign(new Error(message), { type, status });
}

const EMPTY = Buffer.alloc(0);

/** Whether the request carries a body that is not `identity`-encoded (express inflates those). */
export function isEncoded(req: IncomingMessage): boolean {
  const encoding = req.headers['content-encoding'];
  return encoding !== undefined && encoding.toLowerCase() !== 'identity';
}

/**
 * Reads the whole (unencoded) body, bounded like `express.raw({ limit })`: past the limit
 * (declared or received) the rest is drained and `done` gets the error body-parser raises, so
 * `toErrorResponse` maps it to the same 413 PAYLOAD_TOO_LARGE. A request stream that fails or
 * closes early (the client went away) gets body-parser's 400-class abort. Called back once, in
 * the turn the body ends (no promise: a steady heartbeat is answered in that same turn).
 */
export function readRawBody(
  req: IncomingMessage,
  maxBytes: number,
  done: (error: Error | null, bytes: Buffer) => void,
): void {
  let tooLarge = Number(req.headers['content-length']) > maxBytes;
  let size = 0;
  let chunks: Buffer[] = [];
  let finished = false;
  req.on('data', (chunk: Buffer) => {
    if (tooLarge) return;
    size += chunk.length;
    if (size > maxBytes) {
      tooLarge = true;
      chunks = [];
    } else {
      chunks.push(chunk);
    }
  });
  req.on('end', () => {
    finished = true;
    if (tooLarge) {
      done(bodyError('request entity too large', 'entity.too.large', 413), EMPTY);
    } else {
      done(null, chunks.length === 1 && chunks[0] ? chunks[0] : Buffer.concat(chunks, size));
    }
  });
  // A request stream fails or closes early only when the client went away (node reports it
  // as an `aborted` ECONNRESET error): as raw-body does, a 400-class abort, not a failure.
  const aborted = () => {
    if (finished) return;
    finished = true;
    done(bodyError('request aborted', 'request.aborted', 400), EMPTY);
  };
  req.on('error', aborted);
  req.on('close', aborted);
}

function isJson(contentType: string | undefined): boolean {
  const [media, ...params] = (contentType ?? '').split(';');
  const type = media?.trim().toLowerCase() ?? '';
  if (!(type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'))))
    return false;
  // JSON is UTF-8 (RFC 8259): a body that says it is in another charset would be misread.
  return params.every((param) => {
    const [name, value] = param.split('=');
    return name?.trim().toLowerCase() !== 'charset' || /^"?utf-?8"?$/i.test(value?.trim() ?? '');
  });
}

/**
 * The content type last found to be JSON: clients send the same one request after request, and
 * comparing it costs less than taking it apart again.
 */
let lastJsonType: string | undefined;

/**
 * 415 UNSUPPORTED_MEDIA_TYPE unless the content type is JSON (`application/json`,
 * `application/*+json`) in UTF-8 (no charset, or `charset=utf-8`).
 */
export function assertJsonContentType(contentType: string | undefined): void {
  if (contentType !== undefined && contentType === lastJsonType) return;
  if (!isJson(contentType)) {
    throw new CoordinatorError(
      'UNSUPPORTED_MEDIA_TYPE',
      'request bodies must be application/json in UTF-8',
    );
  }
  lastJsonType = contentType;
}

/** The JSON of a request body's text; 400 INVALID_JSON when it is not JSON. */
export function parseJsonText(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new CoordinatorError('INVALID_JSON', 'request body is not valid JSON');
  }
}

/**
 * Parses a non-empty request body: 415 for another media type, 400 for bad JSON. The heartbeat
 * fast path takes its two steps apart (a remembered body text skips the parse).
 */
export function parseJsonBody(bytes: Buffer, contentType: string | undefined): unknown {
  assertJsonContentType(contentType);
  return parseJsonText(bytes.toString('utf8'));
}
