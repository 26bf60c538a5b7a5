import { randomUUID } from 'node:crypto';
import express, { type NextFunction, type Request, type Response } from 'express';
import { CoordinatorError } from '../errors.js';
import { OWNER_HEADER, OWNER_URL_HEADER, REPLICA_HEADER } from '../actors/ownership/forwarder.js';
import { isAdminPath } from './admin-path.js';
import { auditedOperation, onCutOff, type CutOffAnswer } from './audit.js';
import { acceptForwarded, lateForwardError, ownerShownTo, setOwnerHeader } from './forwarding.js';
import { toErrorResponse } from './errors.js';
import { logRequestFailure, type FailedRequest } from './failure-log.js';
import { requestContext, type RequestContext } from './request-context.js';
import { isEncoded, parseJsonBody, readRawBody } from './request-body.js';
import type { HandlerResult } from './route.js';
import { principalOfRequest } from './auth/passport.js';
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
    res.setHeader(REPLICA_HEADER, services.replicaId);
    const accepted = acceptForwarded(services, req);
    if (accepted === 'late') {
      const { status, body } = toErrorResponse(lateForwardError(), requestId);
      res.status(status).set('Retry-After', '1').json(body);
      return;
    }
    const forwarded = accepted;
    const ctx: RequestContext = {
      requestId,
      startedAt: services.clock.now(),
      rawBody: null,
      body: undefined,
      principal: null,
      // Decided on the normalised path, not by route matching: no spelling escapes the audit.
      // A request another replica forwarded was audited there, with the answer given here.
      audited: !forwarded && isAdminPath(req.path),
      forwarded,
      auditWritten: false,
      streamPrefix: null,
      consumerGroup: null,
      operation: null,
    };
    res.locals.coord = ctx;
    // Cut off (408) before its body is in, an admin request is audited before the 408 is sent.
    if (!forwarded) onCutOff(res, (answer) => auditCutOffRequest(services, req, res, answer));
    next();
  };
}

/**
 * Reads the raw body (bounded: 413 past `max-body-bytes`) with the reader the heartbeat fast
 * path uses, keeps its bytes for the audit fingerprint, then parses JSON: 415 for another media
 * type, 400 for bad JSON. An encoded body (`Content-Encoding`) is inflated by `express.raw`,
 * its limit applying to the inflated bytes.
 */
export function bodyMiddleware(maxBytes: number) {
  const inflate = express.raw({ type: () => true, limit: maxBytes });
  return [
    (req: Request, res: Response, next: NextFunction): void => {
      if (isEncoded(req)) return void inflate(req, res, next);
      // No body at all (as body-parser decides it): nothing to read.
      if (
        req.headers['transfer-encoding'] === undefined &&
        req.headers['content-length'] === undefined
      )
        return next();
      readRawBody(req, maxBytes, (error, bytes) => {
        if (error) return next(error);
        req.body = bytes;
        next();
      });
    },
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

/**
 * The caller of a request rejected before authentication ran (e.g. bad JSON), if its token is
 * valid: read by the one token rule of every route, `principalOfRequest` (credentials sent twice
 * name nobody).
 */
function principalOfHeader(services: Services, req: Request): Principal | null {
  try {
    return principalOfRequest(services.tokens, req);
  } catch {
    return null;
  }
}

/**
 * Writes the one audit record of an admin request (once, whoever calls first) with the status
 * of its answer, counted in `coord_admin_requests_total`. Returns `AUDIT_UNAVAILABLE` when the
 * record of a request that was carried out (a 2xx/3xx answer) could not be written (the caller
 * answers that instead: the change is made, its record is missing), else null: a refused
 * request keeps its own answer, so one refused because the store is down says
 * `STORE_UNAVAILABLE`, which is why its record could not be written either. Also used for a
 * request forwarded to the owner: the receiving replica audits it with the owner's status.
 */
export async function auditOnce(
  services: Services,
  req: Request,
  res: Response,
  status: number,
): Promise<CoordinatorError | null> {
  const ctx = requestContext(res);
  if (!ctx.audited || ctx.auditWritten) return null;
  ctx.auditWritten = true;
  ctx.principal ??= principalOfHeader(services, req);
  const written = writeAudit(services, req, ctx, status);
  // A refusal's answer does not depend on its record. While the store is down the write may
  // take the store's own timeout on top of the outage bound, so the refusal is sent at once and
  // the record written when the store answers (or its failure logged).
  if (status >= 400 && services.store.outage() !== null) {
    void written;
    return null;
  }
  return written;
}

/** Writes the record and counts the request; see {@link auditOnce}. Never rejects. */
async function writeAudit(
  services: Services,
  req: Request,
  ctx: RequestContext,
  status: number,
): Promise<CoordinatorError | null> {
  let failed: CoordinatorError | null = null;
  try {
    const written = await services.audit.write(services.audit.build(req, ctx, status));
    if (!written) services.metrics.auditDeniedDropped.inc();
  } catch (error) {
    services.logger.error('audit record could not be written', {
      requestId: ctx.requestId,
      ...(ctx.streamPrefix ? { streamPrefix: ctx.streamPrefix } : {}),
      ...(ctx.consumerGroup ? { consumerGroup: ctx.consumerGroup } : {}),
      error: String(error),
    });
    // Nothing was done for a refused request: its own answer stands.
    if (status < 400) {
      const outage = (error as { details?: Record<string, unknown> } | null)?.details;
      failed = new CoordinatorError(
        'AUDIT_UNAVAILABLE',
        'the change was made but its audit record could not be written',
        outage ? { details: { store: outage.store, cause: outage.cause } } : {},
      );
    }
  }
  services.metrics.adminRequests.inc({
    operation: auditedOperation(ctx),
    status: String(failed ? toErrorResponse(failed, ctx.requestId).status : status),
  });
  return failed;
}

/**
 * The audit record (outcome REJECTED, the status of `answer`) and the `request refused` info
 * line of an admin request the connection deadlines cut off because its body did not arrive
 * in time: written before the 408 is sent and the socket closed (see `onCutOff`), so it too
 * has its one record. Nothing for any other request.
 */
async function auditCutOffRequest(
  services: Services,
  req: Request,
  res: Response,
  answer: CutOffAnswer,
): Promise<void> {
  const ctx = requestContext(res);
  if (!ctx.audited || ctx.auditWritten) return;
  await auditOnce(services, req, res, answer.status);
  services.rateLimitedLog.info(answer.code, 'request refused', {
    requestId: ctx.requestId,
    method: req.method,
    path: req.path,
    ...(ctx.streamPrefix ? { streamPrefix: ctx.streamPrefix } : {}),
    ...(ctx.consumerGroup ? { consumerGroup: ctx.consumerGroup } : {}),
    code: answer.code,
    status: answer.status,
    reason: answer.message,
  });
}

/**
 * Sends a response. On admin requests the audit record is written first, once per request
 * even if a failed send is followed by an error reply, and counted in
 * `coord_admin_requests_total`; if the record of a change that was made cannot be written the
 * caller gets 503 AUDIT_UNAVAILABLE (see {@link auditOnce}).
 */
export async function send(
  services: Services,
  req: Request,
  res: Response,
  result: HandlerResult,
): Promise<void> {
  const ctx = requestContext(res);
  let { status, body } = result;
  // The record says what the client got: the answer already written, if one was (an event
  // stream, a 408 for a body that never came, an answer given while the store was down).
  const failed = await auditOnce(services, req, res, res.headersSent ? res.statusCode : status);
  if (failed) ({ status, body } = toErrorResponse(failed, ctx.requestId));
  if (res.headersSent) return;
  // Who owns a group (and where it answers) is for callers the group admits: not for a 401/403,
  // nor for a body refused before the token was read unless that token reaches the group.
  const named = (ctx.body ?? {}) as { streamPrefix?: unknown; consumerGroup?: unknown };
  const text = (value: unknown) => (typeof value === 'string' ? value : null);
  const streamPrefix = ctx.streamPrefix ?? text(named.streamPrefix);
  const consumerGroup = ctx.consumerGroup ?? text(named.consumerGroup);
  if (
    !streamPrefix ||
    !consumerGroup ||
    !ownerShownTo(services, req, ctx.principal, status, streamPrefix, consumerGroup)
  ) {
    res.removeHeader(OWNER_HEADER);
    res.removeHeader(OWNER_URL_HEADER);
  } else if (!res.hasHeader(OWNER_HEADER)) {
    setOwnerHeader(services, res, streamPrefix, consumerGroup);
  }
  for (const [name, value] of Object.entries(result.headers ?? {})) res.setHeader(name, value);
  if (body === undefined) res.status(status).end();
  else res.status(status).json(body);
}

/**
 * The response to a failed request: status, error body and `Retry-After` when the error says
 * when to retry; logged as {@link logRequestFailure} decides. Shared by express and the
 * heartbeat fast path.
 */
export function errorResult(
  services: Services,
  request: FailedRequest,
  error: unknown,
): HandlerResult {
  const { status, body } = toErrorResponse(error, request.requestId);
  logRequestFailure(services, request, status, body.error.code, error);
  const headers: Record<string, string> = {};
  const retryAfter = (body.error.details as { retryAfterSeconds?: number } | undefined)
    ?.retryAfterSeconds;
  // Every 503 says when to try again: the store, the group's owner or the group itself is
  // expected back shortly (a moving group, a restart, a failover).
  if (retryAfter !== undefined) headers['Retry-After'] = String(retryAfter);
  else if (status === 503) headers['Retry-After'] = '1';
  return { status, body, headers };
}

export async function sendError(
  services: Services,
  req: Request,
  res: Response,
  error: unknown,
): Promise<void> {
  const { requestId, streamPrefix, consumerGroup } = requestContext(res);
  await send(
    services,
    req,
    res,
    errorResult(
      services,
      { method: req.method, path: req.path, requestId, streamPrefix, consumerGroup },
      error,
    ),
  );
}
