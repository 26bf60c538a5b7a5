import type { Cluster, Redis } from 'ioredis';
import type { Clock } from '../../machines/clock.js';
import { groupId, type GroupRef } from '../../machines/types.js';
import type { Logger } from '../../observability/logger.js';
import { groupLogFields } from '../../observability/logger.js';
import type { Metrics } from '../../observability/metrics.js';
import type { ReplicaLease, ReplicaRecord, Store } from '../../store/store.js';
import { LeaseManager } from './lease.js';
import { LeaseOwnership } from './lease-ownership.js';
import { ReplicaRegistry } from './registry.js';

/** Leases a registry entry lists at most (the oldest first). */
const LISTED_LEASES = 50;

/** What replication needs of the actor host: which groups it holds and how to hand one over. */
export interface HandoverTarget {
  /** The groups this replica has entries for. */
  heldGroups(): GroupRef[];
  /** Drains the group's mailbox, drops its entry and gives its lease up. */
  release(ref: GroupRef): Promise<void>;
}

/** Options of {@link Replication}. */
export interface ReplicationOptions {
  readonly store: Pick<
    Store,
    'claimGroup' | 'ping' | 'registerReplica' | 'listReplicas' | 'deregisterReplica'
  >;
  /** This replica: `coordinator.replica.id`, `coordinator.http.advertised-url`. */
  readonly self: ReplicaRecord;
  /** The Redis client(s) the leases are taken on. */
  readonly clients: ReadonlyArray<Redis | Cluster>;
  readonly leaseKey: (ref: GroupRef) => string;
  /** `coordinator.lease.ttl` in ms. */
  readonly leaseTtlMs: number;
  readonly metrics: Metrics;
  readonly logger: Logger;
  readonly clock?: Clock;
  /**
   * Registry entry TTL and refresh interval; the TTL may not exceed the lease TTL.
   * @default {@link registryTiming}(leaseTtlMs)
   */
  readonly registryRefreshMs?: number;
  readonly registryTtlMs?: number;
}

/**
 * The registry entry's TTL and refresh interval for a lease TTL: half the lease TTL (at most
 * 5 s), refreshed three times per TTL. A replica that stops (killed, or paused: a GC pause,
 * SIGSTOP) drops out of every other replica's live set at most TTL + one refresh later, that is
 * within 2/3 of the lease TTL, and its leases last at least that long after its last renewal
 * (renewed every TTL/4 to TTL/3). So by the time its leases expire the rendezvous choice has
 * moved to a live replica, which takes the group at once (docs/operations.md#a-paused-owner).
 */
export function registryTiming(leaseTtlMs: number): { ttlMs: number; refreshMs: number } {
  const ttlMs = Math.max(3, Math.min(5_000, Math.floor(leaseTtlMs / 2)));
  return { ttlMs, refreshMs: Math.max(1, Math.floor(ttlMs / 3)) };
}

/** One replica as `GET /coord/v1/monitoring/replicas` shows it. */
export interface ReplicaView {
  readonly replicaId: string;
  readonly advertisedUrl: string;
  readonly groupsOwned: number;
  readonly lastHeartbeatAt: string | null;
  readonly leases?: readonly ReplicaLease[];
}

/**
 * The replicas of a deployment on one store (README.md, "Running several replicas"), wired
 * together: this replica's registry entry, the lease manager, and the {@link LeaseOwnership}
 * the host asks. When the live set changes, the groups whose rendezvous owner is now another
 * replica are handed over (mailbox drained, lease released); their new owner takes them on the
 * next request, so a joining replica takes its share without a stampede. {@link leave} hands
 * every group over and deregisters (SIGTERM).
 */
export class Replication {
  readonly ownership: LeaseOwnership;
  readonly leases: LeaseManager;
  readonly registry: ReplicaRegistry;
  readonly replicaId: string;
  readonly advertisedUrl: string;
  private target: HandoverTarget | null = null;
  private leaving = false;
  private handingOver: Promise<void> = Promise.resolve();
  /** The handover pass queued and not begun yet (see {@link handOver}). */
  private nextHandOver: Promise<void> | null = null;

  constructor(private readonly options: ReplicationOptions) {
    const { metrics, logger } = options;
    const timing = registryTiming(options.leaseTtlMs);
    const registryTtlMs = options.registryTtlMs ?? timing.ttlMs;
    if (registryTtlMs > options.leaseTtlMs) {
      // Else a paused owner would stay the rendezvous choice after its leases expired: its
      // groups unserved until its entry expires too.
      throw new RangeError('the registry TTL must not exceed the lease TTL');
    }
    this.replicaId = options.self.id;
    this.advertisedUrl = options.self.url;
    this.leases = new LeaseManager({
      clients: options.clients,
      leaseKey: options.leaseKey,
      ttlMs: options.leaseTtlMs,
      metrics,
      ...(options.clock ? { clock: options.clock } : {}),
      // The host drops the group and says what it was: moved to another owner ("dropped
      // here"), or lost with its metadata key (METADATA_LOST, docs/operations.md#lost-metadata).
      onLost: (ref, cause) => this.ownership.lost(ref, cause),
    });
    this.ownership = new LeaseOwnership({
      replicaId: this.replicaId,
      store: options.store,
      live: () => this.live(),
      leases: this.leases,
    });
    this.registry = new ReplicaRegistry({
      store: options.store,
      self: options.self,
      ...(options.clock ? { clock: options.clock } : {}),
      refreshIntervalMs: options.registryRefreshMs ?? timing.refreshMs,
      ttlMs: registryTtlMs,
      describe: () => this.describeSelf(),
      onChange: (live) => {
        logger.info('replica set changed', { replicas: live.map((r) => r.id).join(',') });
        void this.handOver();
      },
      // And at every refresh: a group whose load or create was under way while the set changed
      // was not held yet when that pass looked, and would stay here, its rendezvous owner
      // refused the lease, until the set changed again.
      onRefreshed: () => void this.handOver(),
      onError: (error) =>
        logger.warn('replica registry refresh failed', {
          error: error instanceof Error ? error.message : String(error),
        }),
    });
  }

  /** Where handed-over groups are released (the actor host). */
  attach(target: HandoverTarget): void {
    this.target = target;
  }

  /** Registers this replica (rejects if the store cannot be reached). */
  start(): Promise<void> {
    return this.registry.start();
  }

  /** The live replicas; once leaving, without this one (its groups go to the others). */
  live(): readonly ReplicaRecord[] {
    const live = this.registry.live();
    return this.leaving ? live.filter((r) => r.id !== this.replicaId) : live;
  }

  /**
   * Whether this replica is in the registry now (readiness): its entry was written less than
   * the entry's TTL ago, it is in the live list as last read, and it is not leaving.
   */
  joined(): boolean {
    return (
      this.registry.registered() && this.live().some((replica) => replica.id === this.replicaId)
    );
  }

  /** The advertised URL of a live replica, or null. */
  urlOf(replicaId: string): string | null {
    return this.ownership.urlOf(replicaId);
  }

  /**
   * Hands over every group whose rendezvous owner is no longer this replica. Runs after the
   * previous handover; each group is released on its own (one slow mailbox does not hold up
   * the others).
   */
  handOver(): Promise<void> {
    // A pass that has not begun yet looks at the groups as they are when it begins: it serves
    // every caller until then.
    if (this.nextHandOver) return this.nextHandOver;
    const pass = this.handingOver.then(async () => {
      this.nextHandOver = null;
      const target = this.target;
      const seen = new Set<string>();
      const misplaced: GroupRef[] = [];
      for (const ref of [...(target?.heldGroups() ?? []), ...this.leases.heldGroups()]) {
        const id = groupId(ref);
        if (seen.has(id) || this.ownership.ownerOf(ref).self) continue;
        seen.add(id);
        misplaced.push(ref);
      }
      await Promise.all(
        misplaced.map(async (ref) => {
          try {
            if (target) await target.release(ref);
            else await this.leases.release(ref);
            this.options.logger.info('group handed over', {
              ...groupLogFields(ref),
              owner: this.ownership.ownerOf(ref).self ? this.replicaId : 'another replica',
            });
          } catch (error) {
            // Its lease expires by itself; the new owner takes it then.
            this.options.logger.warn('group handover failed', {
              ...groupLogFields(ref),
              error: error instanceof Error ? error.message : String(error),
            });
          }
        }),
      );
    });
    this.nextHandOver = pass;
    this.handingOver = pass;
    return pass;
  }

  /**
   * Leaves the deployment (SIGTERM): stops taking groups, hands every group over (mailboxes
   * drained, leases released), deregisters. Never rejects; the caller bounds it in time.
   */
  async leave(): Promise<void> {
    this.leaving = true;
    await this.handOver();
    await this.leases.releaseAll();
    await this.registry.stop().catch((error: unknown) =>
      this.options.logger.warn('could not deregister; the entry expires by itself', {
        error: error instanceof Error ? error.message : String(error),
      }),
    );
  }

  /** The live replicas with what each reported at its last refresh (this one: as of now). */
  async list(): Promise<ReplicaView[]> {
    const live = await this.options.store.listReplicas();
    return live.map((replica) => {
      if (replica.id === this.replicaId) return this.viewOfSelf(replica.heartbeatAt ?? null);
      return {
        replicaId: replica.id,
        advertisedUrl: replica.url,
        groupsOwned: replica.groupsOwned ?? 0,
        lastHeartbeatAt: replica.heartbeatAt ?? null,
        ...(replica.leases ? { leases: replica.leases } : {}),
      };
    });
  }

  private viewOfSelf(lastHeartbeatAt: string | null): ReplicaView {
    const described = this.describeSelf();
    return {
      replicaId: this.replicaId,
      advertisedUrl: this.advertisedUrl,
      groupsOwned: described.groupsOwned ?? 0,
      lastHeartbeatAt,
      leases: described.leases ?? [],
    };
  }

  private describeSelf(): { groupsOwned: number; leases: ReplicaLease[] } {
    const now = performance.now();
    const leases = this.leases.oldest(LISTED_LEASES).map(({ ref, acquiredAt }) => ({
      streamPrefix: ref.streamPrefix,
      consumerGroup: ref.consumerGroup,
      ageMs: Math.max(0, Math.round(now - acquiredAt)),
    }));
    const groupsOwned = this.target?.heldGroups().length ?? this.leases.size;
    return { groupsOwned, leases };
  }
}
