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
  'TIMESTAMP_IN_FUTURE',
  'INVALID_STREAM_ID',
  'SHARD_OUT_OF_RANGE',
  // 401 / 403
  'UNAUTHENTICATED',
  'INVALID_TOKEN',
  'TOKEN_EXPIRED',
  'INVALID_CREDENTIALS',
  'FORBIDDEN',
  'MEMBER_ID_IN_USE',
  'GROUP_NOT_PERMITTED',
  // 404
  'NOT_FOUND',
  'GROUP_NOT_FOUND',
  'MIGRATION_NOT_FOUND',
  // 409
  'GROUP_EXISTS',
  'GROUP_FROZEN',
  'GROUP_HAS_MEMBERS',
  'GROUP_FULL',
  'GROUP_NOT_FAILED_CLOSED',
  'GROUP_NOT_FROZEN',
  'GROUP_FAILED_CLOSED_ADMIN',
  'MIGRATION_IN_PROGRESS',
  'SHARD_COUNT_MISMATCH',
  'ROLLBACK_NOT_ALLOWED',
  'RESUME_REFUSED',
  'CONSUMPTION_PAUSED',
  'RESET_IN_PROGRESS',
  'NO_RESET_IN_PROGRESS',
  'SHARD_STREAM_BROKEN',
  'STALE_REVISION',
  'FENCED_WRITE',
  // 413 / 415 / 429
  'PAYLOAD_TOO_LARGE',
  'UNSUPPORTED_MEDIA_TYPE',
  'LOGIN_THROTTLED',
  // 503
  'LOGIN_BUSY',
  'STORE_UNAVAILABLE',
  'GROUP_FAILED_CLOSED',
  'AUDIT_UNAVAILABLE',
  'METADATA_CORRUPT',
  'GROUP_MOVED',
  'LEASE_NOT_HELD',
  'OWNER_UNAVAILABLE',
  'OWNER_MOVING',
  'STREAMS_UNAVAILABLE',
  'FORWARDED_PLAN_TOO_SLOW',
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

/**
 * This replica does not serve the group now: another replica owns it (`owner`), or it is
 * moving (`owner` null: being released, lease not yet held or past its deadline). The caller
 * forwards to the owner or retries later; nothing was changed.
 */
export class GroupMovedError extends CoordinatorError {
  override readonly name = 'GroupMovedError';
  constructor(
    readonly owner: string | null,
    message = owner === null
      ? 'the group is moving between replicas; try again'
      : `the group is owned by replica ${owner}`,
  ) {
    // Moving (no owner known): the caller retries after a second (`Retry-After`).
    super('GROUP_MOVED', message, {
      details: owner === null ? { owner, retryAfterSeconds: 1 } : { owner },
    });
  }
}

/**
 * The group's entry was dropped here (lease lost, written by another owner, deleted) while a
 * batch of its events was running, before their write: nothing was written or answered, and
 * the caller looks the group up again (runs it where it is now served, or forwards).
 */
export class EntryDroppedError extends GroupMovedError {
  constructor() {
    super(null, 'the group left this replica while its events ran; nothing was changed');
  }
}

/** A fenced write carried a fence token that is no longer the group's. */
export class FenceMismatchError extends CoordinatorError {
  override readonly name = 'FenceMismatchError';
  constructor(message = 'the fence token is no longer the owner of this group') {
    super('FENCED_WRITE', message);
  }
}

/** A claim by a replica that does not hold the group's lease (docs/architecture.md#replicas-leases-and-fences); nothing written. */
export class LeaseNotHeldError extends CoordinatorError {
  override readonly name = 'LeaseNotHeldError';
  constructor(message = 'this replica does not hold the lease of this group') {
    super('LEASE_NOT_HELD', message);
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
