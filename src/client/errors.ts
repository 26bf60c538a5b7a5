import type { ErrorCode } from '../errors.js';

/**
 * The error codes the coordinator answers with (`src/errors.ts`), open-ended so a client older
 * than its server still carries codes it does not know yet.
 */
export type CoordinatorErrorCode = ErrorCode | (string & {});

/**
 * An error answer of the coordinator (`{"error": {code, message, requestId, details}}`) as a
 * class. {@link CoordinatorApiError.fromResponse} is the one place the client maps the wire
 * back to a class, mirroring the server's mapping in `src/http/errors.ts`.
 */
export class CoordinatorApiError extends Error {
  override readonly name: string = 'CoordinatorApiError';

  constructor(
    /** HTTP status of the answer. */
    readonly status: number,
    /** The server's UPPER_SNAKE error code, or `HTTP_<status>` for a body without one. */
    readonly code: CoordinatorErrorCode,
    message: string,
    /** The request id the server answered with (quote it when asking an operator). */
    readonly requestId: string | null,
    /** Structured details the server attached (never secrets). */
    readonly details?: Readonly<Record<string, unknown>>,
    /** What the `Retry-After` header asked for, in milliseconds, if anything. */
    readonly retryAfterMs: number | null = null,
  ) {
    super(message);
  }

  /**
   * Builds the error class matching a non-2xx answer (any body shape). An answer without the
   * coordinator's error body (a proxy's HTML error page, say) is told by its status, the URL it
   * came from and the start of its text, when `answer` gives them.
   */
  static fromResponse(
    status: number,
    body: unknown,
    requestId: string | null,
    retryAfter: string | null = null,
    answer?: { readonly url: string; readonly text: string },
  ): CoordinatorApiError {
    const error = (
      body as { error?: { code?: unknown; message?: unknown; details?: unknown } } | null
    )?.error;
    const code = typeof error?.code === 'string' ? error.code : `HTTP_${status}`;
    const message =
      typeof error?.message === 'string' ? error.message : foreignAnswer(status, answer);
    const details =
      error?.details && typeof error.details === 'object'
        ? (error.details as Record<string, unknown>)
        : undefined;
    const args = [status, code, message, requestId, details, parseRetryAfter(retryAfter)] as const;
    switch (status) {
      case 400:
      case 413:
      case 415:
        return new InvalidRequestError(...args);
      case 401:
        return new AuthenticationError(...args);
      case 403:
        return new PermissionDeniedError(...args);
      case 404:
        return new NotFoundError(...args);
      case 409:
        return new ConflictError(...args);
      case 429:
        return new RateLimitedError(...args);
      case 502:
      case 503:
      case 504:
        return new UnavailableError(...args);
      default:
        return new CoordinatorApiError(...args);
    }
  }
}

/** The base class {@link statusFamily} makes: a {@link CoordinatorApiError} named `N`. */
type StatusFamily<N extends string> = Omit<typeof CoordinatorApiError, 'prototype'> &
  (new (
    ...args: ConstructorParameters<typeof CoordinatorApiError>
  ) => CoordinatorApiError & { readonly name: N });

/**
 * The base of one status family below: a {@link CoordinatorApiError} whose `name` is the
 * family's class name (spelled out, so that it survives a bundler renaming classes).
 */
function statusFamily<const N extends string>(name: N): StatusFamily<N> {
  return class extends CoordinatorApiError {
    override readonly name: N = name;
  };
}

/** 400, 413, 415: the request itself is wrong; repeating it will not help. */
export class InvalidRequestError extends statusFamily('InvalidRequestError') {}

/** 401: no token, a bad one, an expired one, or wrong credentials. */
export class AuthenticationError extends statusFamily('AuthenticationError') {}

/** 403: the principal lacks the role or group, or (`MEMBER_ID_IN_USE`) another principal owns the member id. */
export class PermissionDeniedError extends statusFamily('PermissionDeniedError') {}

/** 404: unknown group or migration. */
export class NotFoundError extends statusFamily('NotFoundError') {}

/** 409: the group's state refuses the request (`GROUP_FULL`, `MIGRATION_IN_PROGRESS`, ...). */
export class ConflictError extends statusFamily('ConflictError') {}

/** 429: logins throttled. */
export class RateLimitedError extends statusFamily('RateLimitedError') {}

/**
 * 502/503/504: store down, group failed closed (`GROUP_FAILED_CLOSED`), or its owner replica
 * unreachable or moving. Nothing was decided; `retryAfterMs` says when to ask again.
 */
export class UnavailableError extends statusFamily('UnavailableError') {}

/**
 * The coordinator could not be reached at all (no HTTP answer): says which URL and why
 * (`ECONNREFUSED`, `ENOTFOUND`, a timeout).
 */
export class CoordinatorUnreachableError extends Error {
  override readonly name = 'CoordinatorUnreachableError';

  constructor(
    readonly url: string,
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(`cannot reach the coordinator at ${url}: ${reason}`, options);
  }

  /** Builds the error from what `fetch` rejected with. */
  static fromFetchError(
    url: string,
    error: unknown,
    timeoutMs: number,
  ): CoordinatorUnreachableError {
    return new CoordinatorUnreachableError(url, reasonOf(error, timeoutMs), { cause: error });
  }
}

function reasonOf(error: unknown, timeoutMs: number): string {
  const e = error as { name?: unknown; message?: unknown; cause?: unknown } | null;
  if (e?.name === 'TimeoutError') return `no answer within ${timeoutMs} ms`;
  // undici: TypeError('fetch failed') whose cause is the socket error (or an AggregateError
  // of one per address tried), carrying the system code.
  const cause = e?.cause as { code?: unknown; message?: unknown; errors?: unknown } | undefined;
  const first = Array.isArray(cause?.errors)
    ? (cause.errors[0] as { code?: unknown } | undefined)
    : undefined;
  const code = cause?.code ?? first?.code;
  if (typeof code === 'string') return code;
  if (typeof cause?.message === 'string' && cause.message) return cause.message;
  return typeof e?.message === 'string' ? e.message : String(error);
}

/** The longest start of a foreign answer's text an error message quotes. */
const QUOTED_CHARS = 200;

/** `HTTP 502 from <url>: <its text, tags and runs of white space taken out>`. */
function foreignAnswer(
  status: number,
  answer: { readonly url: string; readonly text: string } | undefined,
): string {
  if (!answer) return `HTTP ${status}`;
  const text = answer.text
    .slice(0, 4 * 1024)
    .replace(/<(script|style)\b[\s\S]*?<\/\1\s*>/gi, ' ')
    .replace(/<[^>]*>/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  const quoted = text.length > QUOTED_CHARS ? `${text.slice(0, QUOTED_CHARS)}…` : text;
  return `HTTP ${status} from ${answer.url}${quoted ? `: ${quoted}` : ' (no body)'}`;
}

/** `Retry-After` in seconds (or an HTTP date) as milliseconds; null when absent or unreadable. */
export function parseRetryAfter(value: string | null): number | null {
  if (value === null || value.trim() === '') return null;
  if (/^\d+(\.\d+)?$/.test(value.trim())) return Math.round(Number(value) * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
}
