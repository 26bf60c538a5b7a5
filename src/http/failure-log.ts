import type { ErrorCode } from '../errors.js';
import type { RateLimitedLevel } from '../observability/rate-limited-log.js';
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
 * Refusals a client or an outage can cause at will, and the level they are logged at: without a
 * stack, rate-limited per code and group (docs/operations.md#logs). What the coordinator does
 * by design while groups move between replicas, or to keep a group safe, is `info`: the
 * metrics and the warn lines about its cause (a lost lease, an owner that does not answer, a
 * group failed closed) say what an operator needs. A store or audit outage, or a store that
 * holds something unexpected, is `warn`.
 */
const EXPECTED_REFUSALS: ReadonlyMap<string, RateLimitedLevel> = new Map<
  ErrorCode,
  RateLimitedLevel
>([
  ['GROUP_MOVED', 'info'],
  ['LEASE_NOT_HELD', 'info'],
  ['OWNER_MOVING', 'info'],
  ['OWNER_UNAVAILABLE', 'info'],
  ['FORWARDED_PLAN_TOO_SLOW', 'info'],
  ['FENCED_WRITE', 'info'],
  ['GROUP_FAILED_CLOSED', 'info'],
  ['LOGIN_THROTTLED', 'info'],
  ['LOGIN_BUSY', 'warn'],
  ['STORE_UNAVAILABLE', 'warn'],
  ['STREAMS_UNAVAILABLE', 'warn'],
  ['STALE_REVISION', 'warn'],
  ['AUDIT_UNAVAILABLE', 'warn'],
  ['METADATA_CORRUPT', 'warn'],
]);

/** The client went away before its request was read (body-parser and the fast path say so). */
export function isClientAbort(error: unknown): boolean {
  return (error as { type?: unknown } | null)?.type === 'request.aborted';
}

/**
 * Logs a failed request by what it means to an operator: a client abort at debug; an expected
 * refusal at info or warn ({@link EXPECTED_REFUSALS}), rate-limited, no stack; an unexpected
 * 5xx at error with its stack; other 4xx not at all (the client has its answer).
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
    services.rateLimitedLog.write(
      EXPECTED_REFUSALS.get(code) as RateLimitedLevel,
      // Keyed by the code alone: group names are the client's to choose, and so would be the
      // number of keys (and lines) if they counted.
      code,
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
