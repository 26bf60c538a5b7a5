import type { ErrorCode } from '../errors.js';
import type { Services } from './services.js';

/** What the log says about a failed request; the group when the route names one. */
export interface FailedRequest {
  readonly method: string;
  readonly path: string;
  readonly requestId: string;
  readonly streamPrefix?: string | null | undefined;
  readonly consumerGroup?: string | null | undefined;
}

/**
 * Refusals a client or an outage can cause at will: logged at warn, without a stack,
 * rate-limited per code and group (DESIGN.md §9: 503 store down or failed closed, 429).
 */
const EXPECTED_REFUSALS: ReadonlySet<string> = new Set<ErrorCode>([
  'STORE_UNAVAILABLE',
  'GROUP_FAILED_CLOSED',
  'FENCED_WRITE',
  'STALE_REVISION',
  'AUDIT_UNAVAILABLE',
  'METADATA_CORRUPT',
  'LOGIN_THROTTLED',
]);

/** The client went away before its request was read (body-parser and the fast path say so). */
export function isClientAbort(error: unknown): boolean {
  return (error as { type?: unknown } | null)?.type === 'request.aborted';
}

/**
 * Logs a failed request by what it means to an operator: a client abort at debug; an expected
 * refusal at warn, rate-limited, no stack; an unexpected 5xx at error with its stack; other
 * 4xx not at all (the client has its answer).
 */
export function logRequestFailure(
  services: Services,
  request: FailedRequest,
  status: number,
  code: string,
  error: unknown,
): void {
  const fields = {
    requestId: request.requestId,
    method: request.method,
    path: request.path,
    ...(request.streamPrefix ? { streamPrefix: request.streamPrefix } : {}),
    ...(request.consumerGroup ? { consumerGroup: request.consumerGroup } : {}),
    code,
  };
  if (isClientAbort(error)) {
    services.logger.debug('request aborted by the client', fields);
  } else if (EXPECTED_REFUSALS.has(code)) {
    services.rateLimitedLog.warn(
      [code, request.streamPrefix ?? '', request.consumerGroup ?? ''].join('\u0000'),
      'request refused',
      { ...fields, status, reason: error instanceof Error ? error.message : String(error) },
    );
  } else if (status >= 500) {
    services.logger.error('request failed', {
      ...fields,
      status,
      error: error instanceof Error ? (error.stack ?? error.message) : String(error),
    });
  }
}
