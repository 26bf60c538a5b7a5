/**
 * Retry and backoff of the SDK, in one place: exponential backoff with full jitter (each delay
 * drawn uniformly from `[0, min(maxMs, baseMs · 2^attempt)]`, so a crowd of clients that failed
 * together does not retry together), never sooner than the server's `Retry-After`.
 */

/** How often and how patiently to retry. */
export interface RetryOptions {
  /**
   * Attempts in all, the first included.
   * @default 5
   */
  readonly maxAttempts?: number;
  /**
   * Ceiling of the first retry's delay, in milliseconds; it doubles per attempt.
   * @default 100
   */
  readonly baseDelayMs?: number;
  /**
   * Ceiling of any delay, in milliseconds.
   * @default 5000
   */
  readonly maxDelayMs?: number;
}

/** {@link RetryOptions} with every default filled in. */
export type RetryPolicy = Required<RetryOptions>;

export const DEFAULT_RETRY: RetryPolicy = { maxAttempts: 5, baseDelayMs: 100, maxDelayMs: 5_000 };

/** The options with the defaults filled in. */
export function retryPolicy(options: RetryOptions = {}): RetryPolicy {
  return { ...DEFAULT_RETRY, ...options };
}

/**
 * Delay before retry number `attempt` (0 = the first retry): full jitter under an exponential
 * ceiling, raised to `retryAfterMs` when the server asked for it.
 */
export function backoffDelay(
  attempt: number,
  policy: Pick<RetryPolicy, 'baseDelayMs' | 'maxDelayMs'>,
  retryAfterMs: number | null = null,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.min(attempt, 30));
  const jittered = Math.floor(random() * ceiling);
  return Math.max(jittered, retryAfterMs ?? 0);
}

/** What a retried operation says about one failure. */
export interface RetryDecision {
  readonly retry: boolean;
  /** The server's `Retry-After`, in milliseconds. */
  readonly retryAfterMs?: number | null;
}

/**
 * Runs `operation` until it succeeds, `classify` says a failure is final, or the attempts run
 * out; the last error is rethrown. Once `signal` aborts (the caller gave the operation up), no
 * attempt follows: a backoff under way ends at once and the last error is rethrown.
 */
export async function withRetry<T>(
  operation: () => Promise<T>,
  classify: (error: unknown) => RetryDecision,
  policy: RetryPolicy,
  sleep: (ms: number, signal?: AbortSignal) => Promise<void> = delay,
  signal?: AbortSignal,
): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await operation();
    } catch (error) {
      const decision = classify(error);
      if (!decision.retry || attempt + 1 >= policy.maxAttempts || signal?.aborted) throw error;
      await sleep(backoffDelay(attempt, policy, decision.retryAfterMs ?? null), signal);
      if (signal?.aborted) throw error;
    }
  }
}

/** A promise resolved after `ms` milliseconds, or as soon as `signal` aborts. */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve();
      return;
    }
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * Waits for `work` to settle, but not past `deadline` (ms since epoch); resolves either way
 * (a rejection of `work` is swallowed: what is waited for here is the end, not the result).
 */
export async function settledBy(work: Promise<unknown>, deadline: number): Promise<void> {
  const settled = work.then(
    () => undefined,
    () => undefined,
  );
  if (!Number.isFinite(deadline)) return settled;
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, Math.max(0, deadline - Date.now()));
  });
  await Promise.race([settled, expired]);
  clearTimeout(timer);
}
