import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Heartbeats handed to their metrics at once (see `Metrics.recordHeartbeat`). */
const HEARTBEAT_BATCH = 512;

/**
 * The `coord_` metrics, on a registry of their own so several coordinators can live in one
 * process (tests) without sharing counters.
 */
export class Metrics {
  readonly registry = new Registry();

  readonly memberExpiry = new Counter({
    name: 'coord_member_expiry_total',
    help: 'Members expired after their session timeout',
    registers: [this.registry],
  });
  readonly rebalanceDuration = new Histogram({
    name: 'coord_rebalance_duration_seconds',
    help: 'Time from the start of a rebalance until the group is stable again',
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
    registers: [this.registry],
  });
  readonly revokePending = new Gauge({
    name: 'coord_revoke_pending',
    help: 'Shards currently revoking or retiring, over all owned groups',
    registers: [this.registry],
  });
  readonly invariantViolations = new Counter({
    name: 'coord_invariant_violations_total',
    help: 'Group invariant violations detected on a state change',
    labelNames: ['invariant'] as const,
    registers: [this.registry],
  });
  readonly metadataVersionRegression = new Counter({
    name: 'coord_metadata_version_regression_total',
    help: 'Clients reporting a metadata version, assignment epoch or member epoch higher than stored',
    labelNames: ['source'] as const,
    registers: [this.registry],
  });
  readonly storeRevisionRegression = new Counter({
    name: 'coord_store_revision_regression_total',
    help: 'Owner reads that found a store revision lower than one already seen',
    registers: [this.registry],
  });
  readonly heartbeats = new Counter({
    name: 'coord_heartbeats_total',
    help: 'Consumer heartbeats by outcome (or error code)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
    collect: () => this.flushHeartbeats(),
  });
  readonly heartbeatsRepeated = new Counter({
    name: 'coord_heartbeats_repeated_total',
    help:
      "Steady heartbeats answered again from the fast path's memory (a member's last steady " +
      'heartbeat, the same text, while its decision holds); also counted in coord_heartbeats_total',
    registers: [this.registry],
    collect: () => this.flushRepeated(),
  });
  readonly heartbeatDuration = new Histogram({
    name: 'coord_heartbeat_duration_seconds',
    help: 'Time to answer a heartbeat, including any store write',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
    collect: () => this.flushHeartbeats(),
  });
  readonly fencedMembers = new Counter({
    name: 'coord_fenced_members_total',
    help: 'Members fenced (stale epoch, rebalance timeout, lifecycle mismatch)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly groupsOwned = new Gauge({
    name: 'coord_groups_owned',
    help: 'Groups whose actor runs on this replica',
    registers: [this.registry],
  });
  readonly pausedShards = new Gauge({
    name: 'coord_paused_shards',
    help: 'Shards paused by an operator or held by a position reset, over all owned groups',
    registers: [this.registry],
  });
  readonly members = new Gauge({
    name: 'coord_members',
    help: 'Live members over all owned groups',
    registers: [this.registry],
  });
  readonly leaseChanges = new Counter({
    name: 'coord_lease_changes_total',
    help: 'Group lease events: acquired, renewed-failed, lost, released',
    labelNames: ['event'] as const,
    registers: [this.registry],
  });
  readonly forwardedRequests = new Counter({
    name: 'coord_forwarded_requests_total',
    help: 'Requests forwarded to the owning replica, by outcome',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly deferredHeartbeats = new Counter({
    name: 'coord_heartbeats_deferred_total',
    help: 'Heartbeats that waited in the intake for a later turn of the event loop: the turn budget was spent, or an earlier heartbeat of their member waited there',
    registers: [this.registry],
  });
  readonly deferredRest = new Counter({
    name: 'coord_deferred_work_rest_seconds_total',
    help:
      "Time the work that may wait (busy groups' batches, their answers, heartbeats in the " +
      'intake) rested between its turns so that steady heartbeats were answered in between ' +
      '(counted when each rest begins)',
    registers: [this.registry],
    collect: () => this.flushRests(),
  });
  readonly adminRequests = new Counter({
    name: 'coord_admin_requests_total',
    help: 'Admin API requests by operation and status',
    labelNames: ['operation', 'status'] as const,
    registers: [this.registry],
  });
  readonly auditDeniedDropped = new Counter({
    name: 'coord_audit_denied_dropped_total',
    help:
      'Audit records of denied admin requests (401, 403, or refused without a valid token) left ' +
      'out past coordinator.audit.denied-per-minute; the next record written carries how many',
    registers: [this.registry],
  });
  readonly loginChecksRefused = new Counter({
    name: 'coord_login_checks_refused_total',
    help:
      'Logins answered 503 LOGIN_BUSY: coordinator.security.login-max-concurrent-checks ' +
      'password checks were running and login-max-queued-checks waiting',
    registers: [this.registry],
  });
  readonly storeErrors = new Counter({
    name: 'coord_store_errors_total',
    help: 'Store operations that failed',
    registers: [this.registry],
  });
  readonly migrationsStarted = new Counter({
    name: 'coord_migrations_started_total',
    help: 'Migrations started',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly migrationsCompleted = new Counter({
    name: 'coord_migrations_completed_total',
    help: 'Migrations completed',
    registers: [this.registry],
  });
  readonly migrationsRolledBack = new Counter({
    name: 'coord_migrations_rolled_back_total',
    help: 'Migrations rolled back',
    registers: [this.registry],
  });
  readonly migrationDuration = new Histogram({
    name: 'coord_migration_duration_seconds',
    help: 'Time from the start of a migration until it converged',
    buckets: [1, 5, 15, 30, 60, 120, 300, 600, 1800],
    registers: [this.registry],
  });
  readonly routingLongPolls = new Gauge({
    name: 'coord_routing_long_polls',
    help: 'Routing long polls waiting for a newer metadata version',
    registers: [this.registry],
  });
  readonly eventStreamsCut = new Counter({
    name: 'coord_event_streams_cut_total',
    help: 'Event streams closed because their client read so slowly that their backlog passed the bound',
    registers: [this.registry],
  });
  readonly heldHeartbeats = new Gauge({
    name: 'coord_held_heartbeats',
    help: 'Heartbeats held open (waitMs) until their wait is up or their member must act',
    registers: [this.registry],
  });
  readonly groupsFailedClosed = new Counter({
    name: 'coord_groups_failed_closed_total',
    help: 'Groups that failed closed',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  /**
   * A group's metadata key found missing by something that remembers the group
   * (docs/operations.md#lost-metadata): a replica that held it (`replica`), the registry
   * (`registry`), or a client that reported its lifecycle or a version above 0 (`heartbeat`,
   * `routing`).
   */
  readonly metadataLost = new Counter({
    name: 'coord_metadata_lost_total',
    help:
      'Groups whose metadata key was found missing while something remembered them (by who: ' +
      'replica, registry, heartbeat, routing, admin); each fails closed with METADATA_LOST',
    labelNames: ['source'] as const,
    registers: [this.registry],
  });
  /** Lag of each owned group, refreshed every `coordinator.streams.lag-interval` (docs/operations.md#lag). */
  readonly groupLagEntries = this.groupGauge(
    'coord_group_lag_entries',
    'Entries not yet delivered to the group, summed over its shards',
  );
  readonly groupLagSeconds = this.groupGauge(
    'coord_group_lag_seconds',
    'Age of the oldest entry not yet delivered to the group (max over its shards; 0 when caught up)',
  );
  readonly groupPendingEntries = this.groupGauge(
    'coord_group_pending_entries',
    'Entries delivered to the group but not acknowledged, summed over its shards',
  );
  readonly groupLagUnreadableShards = this.groupGauge(
    'coord_group_lag_unreadable_shards',
    'Shards of the group whose stream or dead-letter key Redis answered with an error about the key (WRONGTYPE): their lag counts as 0 in the other gauges',
  );
  readonly groupLagMeasuredAge = this.groupGauge(
    'coord_group_lag_measured_age_seconds',
    'Seconds since the lag metrics of the group were last measured (they keep their last value while the streams cannot be read)',
  );
  readonly shardLagEntries = new Gauge({
    name: 'coord_shard_lag_entries',
    help: 'Entries not yet delivered to the group on one shard (only with coordinator.streams.lag-shard-metrics)',
    labelNames: ['stream_prefix', 'consumer_group', 'shard'] as const,
    registers: [this.registry],
  });
  /**
   * 1 when this replica started against a store that holds no group although it had seen groups
   * there before (docs/operations.md#lost-metadata); 0 otherwise.
   */
  readonly storeEmptied = new Gauge({
    name: 'coord_store_emptied',
    help:
      '1 when the store held no group at startup although this replica had seen groups in it ' +
      'before (its state file says so): the store lost its data',
    registers: [this.registry],
  });

  /** The milliseconds rested so far, and how many of them `deferred_work_rest` counts. */
  private restedMs: () => number = () => 0;
  private restedCounted = 0;

  /** Children of `heartbeats_total` by outcome, bound on first use. */
  private readonly heartbeatOutcomes = new Map<string, { inc(value?: number): void }>();

  /** Repeated heartbeats not yet added to `heartbeats_repeated_total` (see {@link recordRepeated}). */
  private pendingRepeated = 0;

  /** Heartbeats answered and not yet handed to their metrics (see {@link recordHeartbeat}). */
  private readonly pendingOutcomes: string[] = [];
  private readonly pendingSeconds = new Float64Array(HEARTBEAT_BATCH);

  /**
   * Counts one heartbeat in `heartbeats_total{outcome}` (an outcome or an error code) and its
   * time in `heartbeat_duration_seconds`. The heartbeat is the hot path, and prom-client's
   * `inc` and `observe` cost several times more one at a time between requests than in a run,
   * so heartbeats are handed over in runs of {@link HEARTBEAT_BATCH}, and always before either
   * metric is read (their `collect`): what is read is never behind.
   */
  recordHeartbeat(outcome: string, seconds: number): void {
    const next = this.pendingOutcomes.length;
    this.pendingSeconds[next] = seconds;
    this.pendingOutcomes.push(outcome);
    if (next + 1 >= HEARTBEAT_BATCH) this.flushHeartbeats();
  }

  /**
   * Counts one heartbeat answered again from the fast path's memory, besides its
   * {@link recordHeartbeat}: a number added up here and handed over when the metric is read.
   */
  recordRepeated(): void {
    this.pendingRepeated++;
  }

  /**
   * Where `deferred_work_rest_seconds_total` reads the milliseconds rested so far (the replica's
   * turn budget): read when the metric is, nothing added on the hot path.
   */
  watchRests(restedMs: () => number): void {
    this.restedMs = restedMs;
    this.restedCounted = restedMs();
  }

  private flushRests(): void {
    const rested = this.restedMs();
    if (rested > this.restedCounted) this.deferredRest.inc((rested - this.restedCounted) / 1000);
    this.restedCounted = rested;
  }

  private flushRepeated(): void {
    if (this.pendingRepeated === 0) return;
    this.heartbeatsRepeated.inc(this.pendingRepeated);
    this.pendingRepeated = 0;
  }

  private flushHeartbeats(): void {
    const outcomes = this.pendingOutcomes;
    if (outcomes.length === 0) return;
    const counts = new Map<string, number>();
    for (let i = 0; i < outcomes.length; i++) {
      const outcome = outcomes[i] as string;
      counts.set(outcome, (counts.get(outcome) ?? 0) + 1);
      this.heartbeatDuration.observe(this.pendingSeconds[i] as number);
    }
    outcomes.length = 0;
    for (const [outcome, count] of counts) {
      let child = this.heartbeatOutcomes.get(outcome);
      if (!child) {
        // Outcomes and error codes are closed sets, so the map stays small.
        child = this.heartbeats.labels(outcome);
        this.heartbeatOutcomes.set(outcome, child);
      }
      child.inc(count);
    }
  }

  constructor(options: { defaultMetrics?: boolean } = {}) {
    if (options.defaultMetrics)
      collectDefaultMetrics({ register: this.registry, prefix: 'coord_process_' });
  }

  /** A gauge per group (labels `stream_prefix`, `consumer_group`) on this registry. */
  private groupGauge(name: string, help: string) {
    return new Gauge({
      name,
      help,
      labelNames: ['stream_prefix', 'consumer_group'] as const,
      registers: [this.registry],
    });
  }
}
