import { randomUUID } from 'node:crypto';
import express, { type NextFunction, type Request, type Response } from 'express';
import { CoordinatorError } from '../errors.js';
import { toErrorResponse } from './errors.js';
import { requestContext, type RequestContext } from './request-context.js';
import type { HandlerResult } from './route.js';
import type { Principal } from './auth/roles.js';
import type { Services } from './services.js';

const REQUEST_ID = /^[\x21-\x7e]{1,128}$/;

/** The caller's `X-Request-Id` when sane, a new UUID otherwise. */
export function requestIdOf(given: string | undefined): string {
  return given && REQUEST_ID.test(given) ? given : randomUUID();
}

/** Gives every request an id (the caller's `X-Request-Id` when sane) and a context. */
export function requestIdMiddleware(services: Services) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const requestId = requestIdOf(req.get('x-request-id'));
    res.setHeader('X-Request-Id', requestId);
    const ctx: RequestContext = {
      requestId,
      startedAt: services.clock.now(),
      rawBody: null,
      body: undefined,
      principal: null,
      audited: req.path.startsWith('/coord/v1/admin/') || req.path === '/coord/v1/admin',
      streamPrefix: null,
      consumerGroup: null,
      operation: null,
    };
    res.locals.coord = ctx;
    next();
  };
}

function isJson(contentType: string | undefined): boolean {
  const type = (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}

/**
 * Parses a non-empty request body: 415 for another media type, 400 for bad JSON. Shared by
 * the express pipeline and the heartbeat fast path.
 */
export function parseJsonBody(bytes: Buffer, contentType: string | undefined): unknown {
  if (!isJson(contentType)) {
    throw new CoordinatorError('UNSUPPORTED_MEDIA_TYPE', 'request bodies must be application/json');
  }
  try {
    return JSON.parse(bytes.toString('utf8')) as unknown;
  } catch {
    throw new CoordinatorError('INVALID_JSON', 'request body is not valid JSON');
  }
}

/**
 * Reads the raw body (bounded: 413 past `max-body-bytes`), keeps its bytes for the audit
 * fingerprint, then parses JSON: 415 for another media type, 400 for bad JSON.
 */
export function bodyMiddleware(maxBytes: number) {
  const raw = express.raw({ type: () => true, limit: maxBytes });
  return [
    raw,
    (req: Request, res: Response, next: NextFunction): void => {
      const ctx = requestContext(res);
      const bytes = Buffer.isBuffer(req.body) ? req.body : null;
      req.body = undefined;
      if (!bytes || bytes.length === 0) return next();
      ctx.rawBody = bytes;
      try {
        ctx.body = parseJsonBody(bytes, req.get('content-type'));
      } catch (error) {
        return next(error);
      }
      next();
    },
  ];
}

/** The caller of a request rejected before authentication ran (e.g. bad JSON), if its token is valid. */
function principalOfHeader(services: Services, req: Request): Principal | null {
  const match = /^Bearer\s+(\S+)$/i.exec(req.get('authorization') ?? '');
  if (!match?.[1]) return null;
  try {
    return services.tokens.verify(match[1]);
  } catch {
    return null;
  }
}

/**
 * Sends a response. On admin requests the audit record is written first; if it cannot be
 * written the caller gets 503 AUDIT_UNAVAILABLE instead.
 */
export async function send(
  services: Services,
  req: Request,
  res: Response,
  result: HandlerResult,
): Promise<void> {
  const ctx = requestContext(res);
  let { status, body } = result;
  if (ctx.audited) {
    ctx.principal ??= principalOfHeader(services, req);
    try {
      await services.audit.write(services.audit.build(req, ctx, status));
    } catch (error) {
      services.logger.error('audit record could not be written', {
        requestId: ctx.requestId,
        error: String(error),
      });
      ({ status, body } = toErrorResponse(
        new CoordinatorError('AUDIT_UNAVAILABLE', 'the audit record could not be written'),
        ctx.requestId,
      ));
    }
    services.metrics.adminRequests.inc({
      operation: ctx.operation ?? 'unknown',
      status: String(status),
    });
  }
  if (res.headersSent) return;
  for (const [name, value] of Object.entries(result.headers ?? {})) res.setHeader(name, value);
  if (body === undefined) res.status(status).end();
  else res.status(status).json(body);
}

/**
 * The response to a failed request: status, error body and `Retry-After` when the error says
 * when to retry; 5xx are logged. Shared by express and the heartbeat fast path.
 */
export function errorResult(
  services: Services,
  request: { readonly method: string; readonly path: string; readonly requestId: string },
  error: unknown,
): HandlerResult {
  const { status, body } = toErrorResponse(error, request.requestId);
  if (status >= 500) {
    const log = status === 500 ? 'error' : 'warn';
    services.logger[log]('request failed', {
      requestId: request.requestId,
      method: request.method,
      path: request.path,
      code: body.error.code,
      error: error instanceof Error ? (error.stack ?? error.message) : String(error),
    });
  }
  const headers: Record<string, string> = {};
  const retryAfter = (body.error.details as { retryAfterSeconds?: number } | undefined)
    ?.retryAfterSeconds;
  if (retryAfter !== undefined) headers['Retry-After'] = String(retryAfter);
  return { status, body, headers };
}

export async function sendError(
  services: Services,
  req: Request,
  res: Response,
  error: unknown,
): Promise<void> {
  const { requestId } = requestContext(res);
  await send(
    services,
    req,
    res,
    errorResult(services, { method: req.method, path: req.path, requestId }, error),
  );
}
