import { performance } from 'node:perf_hooks';
import { StoreUnavailableError } from '../errors.js';
import type { Store } from '../store/store.js';

/**
 * How long a request may wait on a store that is down (beyond the wait it asked for: a held
 * heartbeat's or a long poll's `waitMs`) before it is answered 503 `STORE_UNAVAILABLE`
 * (docs/operations.md#when-the-store-is-down).
 */
export const STORE_OUTAGE_ANSWER_MS = 2_000;

/** How often waiting requests are looked at while the store is down. */
const TICK_MS = 250;

/**
 * How much sooner a request another replica forwarded here is answered: the forwarding replica
 * gives the owner `coordinator.forwarding.answer-timeout` (2 s by default) to start its answer,
 * so the owner says `STORE_UNAVAILABLE` before the other gives up on it (and takes the owner
 * for a paused one).
 */
export const FORWARDED_HEADROOM_MS = 500;

/** One request being waited on (see {@link StoreOutageBound.watch}). */
export interface OutageWatch {
  /** The request asked to be held this long (a long poll, a held heartbeat): its bound moves. */
  wait(ms: number): void;
  /** The request is answered, or handed on (forwarded): no longer watched. */
  done(): void;
}

interface Watched extends OutageWatch {
  readonly since: number;
  readonly boundMs: number;
  waitMs: number;
  readonly answer: (error: StoreUnavailableError) => void;
}

/**
 * Answers requests that wait on a store that is down. Whatever a request waits for while Redis
 * is unreachable (a command in ioredis' offline queue, a lease being taken again, a group being
 * loaded), once it has waited {@link STORE_OUTAGE_ANSWER_MS} beyond its own `waitMs` and the
 * store is known to be down (`Store.outage`), it is answered 503 `STORE_UNAVAILABLE` naming the
 * store and the cause, with `Retry-After`. Requests are answered one by one as their own bound
 * passes, not in a burst when the store comes back.
 *
 * Costs nothing per request beyond a set entry: one coarse timer runs while requests are
 * watched, and looks at them only while the store is down. The work behind an answered request
 * is not cancelled: a read finishes unseen; an admin change that was still waiting for its
 * group may be carried out if the store comes back before that work gives up, which is why
 * docs/operations.md says to look before repeating one.
 */
export class StoreOutageBound {
  private readonly watched = new Set<Watched>();
  private timer: NodeJS.Timeout | null = null;
  private readonly boundMs: number;
  private readonly now: () => number;

  constructor(
    private readonly store: Pick<Store, 'outage'>,
    options: { readonly boundMs?: number; readonly now?: () => number } = {},
  ) {
    this.boundMs = options.boundMs ?? STORE_OUTAGE_ANSWER_MS;
    this.now = options.now ?? (() => performance.now());
  }

  /**
   * Watches a request from now; `answer` is called at most once, with the error to answer, if
   * the store is down when its bound has passed. A request `forwarded` by another replica is
   * answered {@link FORWARDED_HEADROOM_MS} sooner.
   */
  watch(
    answer: (error: StoreUnavailableError) => void,
    waitMs = 0,
    forwarded = false,
  ): OutageWatch {
    const watched = this.watched;
    const entry: Watched = {
      since: this.now(),
      boundMs: forwarded ? Math.max(0, this.boundMs - FORWARDED_HEADROOM_MS) : this.boundMs,
      waitMs,
      answer,
      wait(ms) {
        entry.waitMs = ms;
      },
      done() {
        watched.delete(entry);
      },
    };
    watched.add(entry);
    this.timer ??= setInterval(this.tick, TICK_MS).unref();
    return entry;
  }

  /** How many requests are watched (tests). */
  get size(): number {
    return this.watched.size;
  }

  /** Stops the timer (the server closes). */
  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.watched.clear();
  }

  private readonly tick = (): void => {
    if (this.watched.size === 0) {
      if (this.timer !== null) clearInterval(this.timer);
      this.timer = null;
      return;
    }
    const outage = this.store.outage();
    if (outage === null) return;
    const now = this.now();
    for (const entry of this.watched) {
      if (now - entry.since < entry.waitMs + entry.boundMs) continue;
      this.watched.delete(entry);
      entry.answer(
        new StoreUnavailableError(
          `the store did not answer within ${entry.boundMs / 1000} s: Redis at ${outage.store} unreachable (${outage.cause})`,
          { details: { store: outage.store, cause: outage.cause } },
        ),
      );
    }
  };
}

/** The `waitMs` a request asked for in its query or body (a long poll, a held heartbeat), or 0. */
export function requestedWaitMs(input: {
  readonly query: unknown;
  readonly body: unknown;
}): number {
  for (const part of [input.query, input.body]) {
    const waitMs = (part as { waitMs?: unknown } | null | undefined)?.waitMs;
    if (typeof waitMs === 'number' && Number.isFinite(waitMs) && waitMs > 0) return waitMs;
  }
  return 0;
}
