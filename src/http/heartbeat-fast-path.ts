import type { IncomingMessage, ServerResponse } from 'node:http';
import { assertGroupPermitted } from './auth/group-scope.js';
import { principalOfRequest } from './auth/passport.js';
import { assertAnyRole } from './auth/roles.js';
import { acceptForwarded, forwardMoved, setOwnerHeader } from './forwarding.js';
import { errorResult, parseJsonBody, requestIdOf } from './pipeline.js';
import { validate, type HandlerResult } from './route.js';
import {
  answerHeartbeat,
  HEARTBEAT_PATH,
  HEARTBEAT_ROLES,
  heartbeatBodySchema,
} from './routes/consumer.js';
import { groupParamsSchema } from './schemas.js';
import type { Services } from './services.js';

/**
 * Response header set on every response the fast path serves (`X-Coord-Path: fast`), errors
 * included; responses from express do not carry it. Documented in docs/BENCHMARKS.md.
 */
export const FAST_PATH_HEADER = 'X-Coord-Path';

/** A request listener placed in front of express on the same server (DESIGN.md §12). */
export interface HeartbeatFastPath {
  /** Serves the request and returns true when it is a heartbeat; false leaves it to express. */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
}

/** `/coord/v1/consumer/streams/:stream/groups/:group/heartbeat`, split on `/`. */
const TEMPLATE = HEARTBEAT_PATH.split('/');
/** The literal part before the first parameter: a cheap first test for every request. */
const PREFIX = HEARTBEAT_PATH.slice(0, HEARTBEAT_PATH.indexOf(':'));

/**
 * The path parameters of a heartbeat URL, or null. Express routes case-sensitively and
 * strictly (no trailing slash, DESIGN.md §9), so this matches exactly what its heartbeat route
 * matches; a parameter that is not valid percent-encoding, and an absolute-form URL, are left
 * to express, which answers them (400, or the heartbeat itself).
 */
function matchHeartbeat(url: string): Record<string, string> | null {
  const query = url.indexOf('?');
  const parts = (query === -1 ? url : url.slice(0, query)).split('/');
  if (parts.length !== TEMPLATE.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < TEMPLATE.length; i++) {
    const want = TEMPLATE[i] ?? '';
    const got = parts[i] ?? '';
    if (want.startsWith(':')) {
      if (got.length === 0) return null;
      try {
        params[want.slice(1)] = decodeURIComponent(got);
      } catch {
        return null;
      }
    } else if (want !== got) {
      return null;
    }
  }
  return params;
}

/**
 * Reads the whole body, bounded like `express.raw({ limit })`: past the limit (declared or
 * received) the rest is drained and the promise rejects with the error body-parser raises,
 * so `toErrorResponse` maps it to the same 413 PAYLOAD_TOO_LARGE.
 */
function readBody(req: IncomingMessage, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let tooLarge = Number(req.headers['content-length']) > maxBytes;
    let size = 0;
    let chunks: Buffer[] = [];
    let done = false;
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
      done = true;
      if (tooLarge) {
        reject(
          Object.assign(new Error('request entity too large'), {
            type: 'entity.too.large',
            status: 413,
          }),
        );
      } else {
        resolve(chunks.length === 1 && chunks[0] ? chunks[0] : Buffer.concat(chunks, size));
      }
    });
    // A request stream fails or closes early only when the client went away (node reports it
    // as an `aborted` ECONNRESET error): as raw-body does, a 400-class abort, not a failure.
    const aborted = () => {
      if (done) return;
      done = true;
      reject(Object.assign(new Error('request aborted'), { type: 'request.aborted', status: 400 }));
    };
    req.on('error', aborted);
    req.on('close', aborted);
  });
}

function write(res: ServerResponse, result: HandlerResult): void {
  if (res.headersSent) return;
  for (const [name, value] of Object.entries(result.headers ?? {})) res.setHeader(name, value);
  res.statusCode = result.status;
  if (result.body === undefined) {
    res.end();
    return;
  }
  const json = JSON.stringify(result.body);
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(json));
  res.end(json);
}

/**
 * The heartbeat lean path (DESIGN.md §12): serves only `POST` on the canonical heartbeat URL,
 * with the steps and answers of the express pipeline in the same order — request id, bounded
 * raw body (413), JSON (415/400), bearer token through `TokenService` and its verified-token
 * cache (401), role CONSUMER (403), the route's zod schemas (400), the token's group scope (403), then the heartbeat itself
 * through the function the express route calls ({@link answerHeartbeat}). Bodies with a
 * `Content-Encoding` (which express inflates) are left to express. The one difference: no
 * `ETag` header (express adds a weak one to every body; it means nothing on a POST answer).
 */
export function createHeartbeatFastPath(services: Services): HeartbeatFastPath {
  const maxBytes = services.settings.limits['max-body-bytes'];

  async function serve(
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    rawParams: Record<string, string>,
    requestId: string,
  ): Promise<void> {
    let result: HandlerResult;
    let bytes: Buffer | null = null;
    try {
      bytes = await readBody(req, maxBytes);
      const body =
        bytes.length === 0 ? undefined : parseJsonBody(bytes, req.headers['content-type']);
      const principal = principalOfRequest(services.tokens, req);
      assertAnyRole(principal, HEARTBEAT_ROLES);
      const params = validate(groupParamsSchema, rawParams, 'path');
      const heartbeat = validate(heartbeatBodySchema, body ?? {}, 'body');
      assertGroupPermitted(principal, params.stream, params.group);
      result = { status: 200, body: await answerHeartbeat(services, principal, params, heartbeat) };
    } catch (error) {
      // Another replica owns the group: forwarded there, its answer passed on.
      if (await forwardMoved(services, req, res, error, { requestId, body: bytes })) return;
      const group = { streamPrefix: rawParams.stream, consumerGroup: rawParams.group };
      result = errorResult(services, { method: 'POST', path, requestId, ...group }, error);
    }
    write(res, result);
  }

  return {
    handle(req, res) {
      const url = req.url;
      if (req.method !== 'POST' || url === undefined || !url.startsWith(PREFIX)) return false;
      const encoding = req.headers['content-encoding'];
      if (encoding !== undefined && encoding.toLowerCase() !== 'identity') return false;
      const params = matchHeartbeat(url);
      if (!params) return false;
      const requestId = requestIdOf(req.headers['x-request-id'] as string | undefined);
      res.setHeader('X-Request-Id', requestId);
      res.setHeader(FAST_PATH_HEADER, 'fast');
      acceptForwarded(services, req);
      setOwnerHeader(services, res, params.stream, params.group);
      const query = url.indexOf('?');
      const path = query === -1 ? url : url.slice(0, query);
      serve(req, res, path, params, requestId).catch((error: unknown) => {
        // serve answers every error itself; this is only reached if writing the answer threw.
        services.logger.error('heartbeat fast path failed', { requestId, error: String(error) });
        if (!res.headersSent) res.destroy();
      });
      return true;
    },
  };
}
