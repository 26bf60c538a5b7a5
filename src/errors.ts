/**
 * Domain errors. Every error the coordinator raises on purpose is a `CoordinatorError` with a
 * stable UPPER_SNAKE `code`; `src/http/errors.ts` is the one place that maps codes to HTTP
 * statuses, and `src/client/errors.ts` the one place that maps them back.
 */
export const ERROR_CODES = [
  // 400
  'VALIDATION_FAILED',
  'INVALID_JSON',
  'UNSUPPORTED_COORDINATION_VERSION',
  'SHARD_COUNT_UNCHANGED',
  // 401 / 403
  'UNAUTHENTICATED',
  'INVALID_TOKEN',
  'TOKEN_EXPIRED',
  'INVALID_CREDENTIALS',
  'FORBIDDEN',
  // 404
  'NOT_FOUND',
  'GROUP_NOT_FOUND',
  'MIGRATION_NOT_FOUND',
  // 409
  'GROUP_EXISTS',
  'GROUP_FROZEN',
  'GROUP_HAS_MEMBERS',
  'GROUP_NOT_FAILED_CLOSED',
  'GROUP_NOT_FROZEN',
  'GROUP_FAILED_CLOSED_ADMIN',
  'MIGRATION_IN_PROGRESS',
  'ROLLBACK_NOT_ALLOWED',
  'RESUME_REFUSED',
  'STALE_REVISION',
  'FENCED_WRITE',
  // 413 / 415 / 429
  'PAYLOAD_TOO_LARGE',
  'UNSUPPORTED_MEDIA_TYPE',
  'LOGIN_THROTTLED',
  // 503
  'STORE_UNAVAILABLE',
  'GROUP_FAILED_CLOSED',
  'AUDIT_UNAVAILABLE',
  'METADATA_CORRUPT',
  // 500
  'INTERNAL',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

export interface CoordinatorErrorOptions {
  readonly cause?: unknown;
  /** Structured, safe-to-return details (never secrets). */
  readonly details?: Readonly<Record<string, unknown>>;
}

export class CoordinatorError extends Error {
  override readonly name: string = 'CoordinatorError';
  readonly code: ErrorCode;
  readonly details: Readonly<Record<string, unknown>> | undefined;

  constructor(code: ErrorCode, message: string, options: CoordinatorErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.details = options.details;
  }
}

/** The store could not be reached or answered with an error; nothing was written. */
export class StoreUnavailableError extends CoordinatorError {
  override readonly name = 'StoreUnavailableError';
  constructor(message: string, options: CoordinatorErrorOptions = {}) {
    super('STORE_UNAVAILABLE', message, options);
  }
}

/** A fenced write carried a fence token that is no longer the group's. */
export class FenceMismatchError extends CoordinatorError {
  override readonly name = 'FenceMismatchError';
  constructor(message = 'the fence token is no longer the owner of this group') {
    super('FENCED_WRITE', message);
  }
}

/** A write expected a store revision other than the stored one. */
export class RevisionMismatchError extends CoordinatorError {
  override readonly name = 'RevisionMismatchError';
  constructor(
    readonly expected: number,
    readonly actual: number,
  ) {
    super('STALE_REVISION', `expected store revision ${expected}, found ${actual}`, {
      details: { expected, actual },
    });
  }
}
