import type { Response } from 'express';
import type { Principal } from './auth/roles.js';

/** What the pipeline learns about a request, kept on `res.locals.coord`. */
export interface RequestContext {
  readonly requestId: string;
  readonly startedAt: number;
  /** The exact bytes of the body, for the audit fingerprint. */
  rawBody: Buffer | null;
  /** The parsed JSON body, if any. */
  body: unknown;
  principal: Principal | null;
  /** Set on /coord/v1/admin/ requests, however spelt: the response waits for the audit record. */
  audited: boolean;
  /** The audit record has been written (or tried): one record per request. */
  auditWritten: boolean;
  /** Forwarded by another replica (signed): the receiving replica audits it, not this one. */
  forwarded: boolean;
  /** Path parameters once known, for the audit record. */
  streamPrefix: string | null;
  consumerGroup: string | null;
  operation: string | null;
}

export function requestContext(res: Response): RequestContext {
  return (res.locals as { coord: RequestContext }).coord;
}
