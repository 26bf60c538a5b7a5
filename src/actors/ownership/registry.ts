import { performance } from 'node:perf_hooks';
import type { Clock } from '../../machines/clock.js';
import { systemClock } from '../../machines/clock.js';
import type { ReplicaRecord, Store } from '../../store/store.js';

/** The store verbs the registry needs (`kp:replicas`, `kp:replica:<id>`). */
export type ReplicaDirectory = Pick<
  Store,
  'registerReplica' | 'listReplicas' | 'deregisterReplica'
>;

/** Options of {@link ReplicaRegistry}. */
export interface ReplicaRegistryOptions {
  readonly store: ReplicaDirectory;
  /** This replica: `coordinator.replica.id` and `coordinator.http.advertised-url`. */
  readonly self: ReplicaRecord;
  /** Time between two refreshes. @default 1000 */
  readonly refreshIntervalMs?: number;
  /** How long an entry lives without a refresh: a killed replica is gone after it. @default 5000 */
  readonly ttlMs?: number;
  /** @default systemClock */
  readonly clock?: Clock;
  /** Called with the live replicas whenever the set of ids (or a URL) changes. */
  readonly onChange?: (live: readonly ReplicaRecord[]) => void;
  /** Called after every refresh that read the live list, changed or not. */
  readonly onRefreshed?: (live: readonly ReplicaRecord[]) => void;
  /** What this replica reports with each refresh (groups owned, leases); read at each refresh. */
  readonly describe?: () => Omit<ReplicaRecord, 'id' | 'url'>;
  /** A refresh failed (store down); the registry keeps trying on its interval. */
  readonly onError?: (error: unknown) => void;
  /** Monotonic ms, for how long ago the entry was last written. @default performance.now */
  readonly monotonicNow?: () => number;
}

/**
 * This replica's entry in the replica registry: registered on start, refreshed on an interval
 * (the entry expires `ttlMs` after the last refresh, so a killed replica drops out by itself),
 * removed on stop. Each refresh also reads the live list, which callers get from {@link live}
 * without a round trip and through `onChange` when it changes.
 */
export class ReplicaRegistry {
  private readonly store: ReplicaDirectory;
  private readonly self: ReplicaRecord;
  private readonly refreshIntervalMs: number;
  private readonly ttlMs: number;
  private readonly clock: Clock;
  private cancelTimer: (() => void) | null = null;
  private lastLive: readonly ReplicaRecord[] = [];
  /** Monotonic ms when the last registration that succeeded was sent; null before one. */
  private registeredAt: number | null = null;
  private readonly now: () => number;
  private stopped = false;
  /** The refresh in flight, so stop() deregisters only after it (never re-registered after). */
  private inFlight: Promise<void> = Promise.resolve();

  constructor(private readonly options: ReplicaRegistryOptions) {
    this.store = options.store;
    this.self = options.self;
    this.refreshIntervalMs = options.refreshIntervalMs ?? 1_000;
    this.ttlMs = options.ttlMs ?? 5_000;
    this.clock = options.clock ?? systemClock;
    this.now = options.monotonicNow ?? (() => performance.now());
    if (this.ttlMs <= this.refreshIntervalMs) {
      throw new RangeError('the registry TTL must be longer than its refresh interval');
    }
  }

  /**
   * Registers this replica and starts refreshing; rejects if the store cannot be reached (the
   * refreshes go on and register it once the store answers).
   */
  async start(): Promise<void> {
    this.stopped = false;
    this.inFlight = this.refresh();
    try {
      await this.inFlight;
    } finally {
      // Refreshing goes on even if the first registration failed (the store comes back).
      this.schedule();
    }
  }

  /** The live replicas as of the last refresh, ordered by id. */
  live(): readonly ReplicaRecord[] {
    return this.lastLive;
  }

  /**
   * Whether this replica's entry is in the registry as far as it can tell: the last registration
   * that succeeded was sent less than the entry's TTL ago. Refreshes that keep failing (Redis
   * unreachable, or answering but refusing writes: read-only after a failover, out of memory)
   * let the entry expire, and the other replicas stop sending it anything, while {@link live}
   * still shows the list as last read.
   */
  registered(): boolean {
    return (
      !this.stopped && this.registeredAt !== null && this.now() - this.registeredAt < this.ttlMs
    );
  }

  /** Stops refreshing and removes this replica from the registry at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.cancelTimer?.();
    this.cancelTimer = null;
    await this.inFlight.catch(() => undefined);
    await this.store.deregisterReplica(this.self.id);
  }

  private schedule(): void {
    if (this.stopped) return;
    this.cancelTimer = this.clock.after(this.refreshIntervalMs, () => {
      this.inFlight = this.refresh().catch((error: unknown) => this.options.onError?.(error));
      void this.inFlight.then(() => this.schedule());
    });
  }

  private async refresh(): Promise<void> {
    const record: ReplicaRecord = {
      ...(this.options.describe?.() ?? {}),
      heartbeatAt: new Date(this.clock.now()).toISOString(),
      id: this.self.id,
      url: this.self.url,
    };
    // The entry's TTL starts no earlier than the request leaves: measuring from here is safe.
    const sentAt = this.now();
    await this.store.registerReplica(record, this.ttlMs);
    this.registeredAt = sentAt;
    const live = await this.store.listReplicas();
    if (this.stopped) return;
    const changed =
      live.length !== this.lastLive.length ||
      live.some((replica, i) => {
        const before = this.lastLive[i];
        return before?.id !== replica.id || before.url !== replica.url;
      });
    this.lastLive = live;
    if (changed) this.options.onChange?.(live);
    this.options.onRefreshed?.(live);
  }
}
