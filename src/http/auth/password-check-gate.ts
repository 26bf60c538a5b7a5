import { CoordinatorError } from '../../errors.js';

/**
 * Bounds the password checks of one replica (docs/operations.md#password-checks-in-flight).
 * scrypt runs on libuv's thread pool (4 threads unless `UV_THREADPOOL_SIZE` says otherwise),
 * which DNS lookups, file reads and zlib share: without a bound, a flood of logins that the
 * throttle never refuses (each with another username or address) queues every check, real
 * logins included, behind all of it.
 *
 * At most `maxInFlight` checks run at once and `maxQueued` wait, in arrival order; a check
 * beyond both is refused at once with 503 `LOGIN_BUSY` and `Retry-After`, having cost nothing.
 * So a flood costs at most `maxInFlight` threads of scrypt, and a login that is let in waits for
 * at most `maxQueued / maxInFlight` checks before its own.
 */
export class PasswordCheckGate {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(
    private readonly maxInFlight: number,
    private readonly maxQueued: number,
    /** Called for each check refused. */
    private readonly onRefused: () => void = () => undefined,
  ) {}

  /** Checks running now. */
  get inFlight(): number {
    return this.running;
  }

  /** Checks waiting for a turn now. */
  get queued(): number {
    return this.waiting.length;
  }

  /** Runs `check` when a turn is free; rejects with `LOGIN_BUSY` when none is and the queue is full. */
  async run<T>(check: () => Promise<T>): Promise<T> {
    if (this.running >= this.maxInFlight) {
      if (this.waiting.length >= this.maxQueued) {
        this.onRefused();
        throw new CoordinatorError('LOGIN_BUSY', 'too many logins are being checked; retry in 1s', {
          details: { retryAfterSeconds: 1 },
        });
      }
      // The turn is handed over by the check that ends, so `running` never drops in between.
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else {
      this.running += 1;
    }
    try {
      return await check();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.running -= 1;
    }
  }
}
