/**
 * The wire error of the coordinator as a class: the one place the client maps the HTTP error
 * body (`{"error": {code, message, requestId, details}}`) back to a typed error.
 */
export class CoordinatorApiError extends Error {
  override readonly name = 'CoordinatorApiError';

  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly requestId: string | null,
    readonly details?: Readonly<Record<string, unknown>>,
  ) {
    super(message);
  }

  /** Builds the error from a non-2xx response body (any shape). */
  static fromResponse(
    status: number,
    body: unknown,
    requestId: string | null,
  ): CoordinatorApiError {
    const error = (
      body as { error?: { code?: unknown; message?: unknown; details?: unknown } } | null
    )?.error;
    const code = typeof error?.code === 'string' ? error.code : `HTTP_${status}`;
    const message = typeof error?.message === 'string' ? error.message : `HTTP ${status}`;
    const details =
      error?.details && typeof error.details === 'object'
        ? (error.details as Record<string, unknown>)
        : undefined;
    return new CoordinatorApiError(status, code, message, requestId, details);
  }
}
