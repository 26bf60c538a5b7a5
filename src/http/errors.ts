import { CoordinatorError, type ErrorCode } from '../errors.js';

/** The one mapping from error codes to HTTP statuses (README.md#api-at-a-glance). */
const STATUS: Record<ErrorCode, number> = {
  VALIDATION_FAILED: 400,
  INVALID_JSON: 400,
  UNSUPPORTED_COORDINATION_VERSION: 400,
  SHARD_COUNT_UNCHANGED: 400,
  TIMESTAMP_IN_FUTURE: 400,
  INVALID_STREAM_ID: 400,
  SHARD_OUT_OF_RANGE: 400,
  UNAUTHENTICATED: 401,
  INVALID_TOKEN: 401,
  TOKEN_EXPIRED: 401,
  INVALID_CREDENTIALS: 401,
  FORBIDDEN: 403,
  MEMBER_ID_IN_USE: 403,
  GROUP_NOT_PERMITTED: 403,
  NOT_FOUND: 404,
  GROUP_NOT_FOUND: 404,
  MIGRATION_NOT_FOUND: 404,
  GROUP_EXISTS: 409,
  GROUP_FROZEN: 409,
  GROUP_HAS_MEMBERS: 409,
  GROUP_FULL: 409,
  GROUP_NOT_FAILED_CLOSED: 409,
  GROUP_NOT_FROZEN: 409,
  GROUP_FAILED_CLOSED_ADMIN: 409,
  MIGRATION_IN_PROGRESS: 409,
  SHARD_COUNT_MISMATCH: 409,
  ROLLBACK_NOT_ALLOWED: 409,
  RESUME_REFUSED: 409,
  CONSUMPTION_PAUSED: 409,
  RESET_IN_PROGRESS: 409,
  NO_RESET_IN_PROGRESS: 409,
  SHARD_STREAM_BROKEN: 409,
  STALE_REVISION: 503,
  FENCED_WRITE: 503,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  LOGIN_THROTTLED: 429,
  LOGIN_BUSY: 503,
  STORE_UNAVAILABLE: 503,
  GROUP_FAILED_CLOSED: 503,
  AUDIT_UNAVAILABLE: 503,
  METADATA_CORRUPT: 503,
  GROUP_MOVED: 503,
  LEASE_NOT_HELD: 503,
  OWNER_UNAVAILABLE: 503,
  OWNER_MOVING: 503,
  STREAMS_UNAVAILABLE: 503,
  FORWARDED_PLAN_TOO_SLOW: 503,
  INTERNAL: 500,
};

export function statusOf(code: ErrorCode): number {
  return STATUS[code];
}

export interface ErrorBody {
  readonly error: {
    readonly code: string;
    readonly message: string;
    readonly requestId: string;
    readonly details?: Readonly<Record<string, unknown>>;
  };
}

/**
 * Longest error message sent: messages may quote what the client sent (a path, a name), and
 * an answer to hostile input stays small.
 */
export const MAX_MESSAGE_CHARS = 1_000;

/** Turns anything thrown into a status and the wire error shape; unknown errors become 500 INTERNAL. */
export function toErrorResponse(
  error: unknown,
  requestId: string,
): { status: number; body: ErrorBody } {
  const known = asCoordinatorError(error);
  const details = known.details;
  return {
    status: statusOf(known.code),
    body: {
      error: {
        code: known.code,
        message:
          known.message.length > MAX_MESSAGE_CHARS
            ? `${known.message.slice(0, MAX_MESSAGE_CHARS - 1)}…`
            : known.message,
        requestId,
        ...(details ? { details } : {}),
      },
    },
  };
}

/** Body-parser and other library errors carry a status and type; map the ones we expect. */
export function asCoordinatorError(error: unknown): CoordinatorError {
  if (error instanceof CoordinatorError) return error;
  const e = error as { type?: string; status?: number; statusCode?: number; message?: string };
  if (e && typeof e === 'object') {
    if (e.type === 'entity.too.large')
      return new CoordinatorError('PAYLOAD_TOO_LARGE', 'request body is too large');
    if (e.type === 'entity.parse.failed')
      return new CoordinatorError('INVALID_JSON', 'request body is not valid JSON');
    if (e.type === 'request.aborted')
      return new CoordinatorError('VALIDATION_FAILED', 'the client aborted the request');
    if (e.type === 'encoding.unsupported' || e.type === 'charset.unsupported')
      return new CoordinatorError('UNSUPPORTED_MEDIA_TYPE', 'unsupported body encoding');
    const status = e.status ?? e.statusCode;
    if (typeof status === 'number' && status >= 400 && status < 500)
      return new CoordinatorError('VALIDATION_FAILED', 'malformed request');
  }
  return new CoordinatorError('INTERNAL', 'internal error', { cause: error });
}
