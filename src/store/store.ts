import type { FailureReason, GroupRef, GroupState } from '../machines/types.js';
import type { FieldPatch, GroupFields } from './codec.js';
import type { LayoutRequest, PrefixLayout } from './prefix-layout.js';

/** A group as read from the store: its state plus the store-owned fields. */
export interface StoredGroup {
  readonly state: GroupState;
  /** +1 on every write (docs/architecture.md#the-metadata-hash). */
  readonly revision: number;
  /**
   * Fencing token of the owner allowed to write: an integer counter in the metadata hash,
   * incremented by every claim (docs/architecture.md#replicas-leases-and-fences). Every write must carry it.
   */
  readonly fence: number;
}

/** What the verify loop reads for each owned group (docs/architecture.md#failure-detection). */
export interface GroupRevision {
  readonly revision: number;
  readonly lifecycleId: string;
}

/**
 * A fail-closed decision (docs/operations.md#fail-closed-behaviour), kept in its own key `kp:G:failure` so it survives a
 * coordinator restart without touching the metadata key it is about.
 */
export interface FailureRecord {
  readonly reason: FailureReason;
  /** Epoch ms of the decision. */
  readonly at: number;
  /** Store revision the owner had seen when it failed the group closed. */
  readonly knownRevision: number;
  /** Revision found in the store (null when the key was missing). */
  readonly storeRevision: number | null;
  readonly lifecycleId: string;
  readonly metadataVersion: number;
  /** Highest metadataVersion any client (or this coordinator) had seen: RESUME needs at least it. */
  readonly highestVersionSeen: number;
  /** Highest assignment epoch and member epoch issued: recovery continues above them. */
  readonly assignmentEpoch: number;
  readonly memberEpochSeq: number;
}

export type AuditOutcome = 'SUCCEEDED' | 'REJECTED' | 'DENIED' | 'FAILED';

/** One audit record (docs/decisions.md#audit-record-and-admin-mutation-are-two-writes). Never holds passwords or tokens. */
export interface AuditRecord {
  readonly timestamp: string;
  readonly method: string;
  /** The path as sent, cut to 1,024 characters (docs/operations.md#the-audit-log). */
  readonly path: string;
  /** The length of the path as sent, when `path` was cut. */
  readonly pathLength?: number;
  readonly operation: string;
  readonly outcome: AuditOutcome;
  readonly status: number;
  readonly principal: string | null;
  readonly roles: readonly string[];
  readonly requestId: string;
  readonly bodySha256: string | null;
  readonly clientAddress: string | null;
  readonly durationMs: number;
  readonly streamPrefix: string | null;
  readonly consumerGroup: string | null;
  readonly requestedBy: string | null;
  readonly reason: string | null;
  /** Records of denied requests this replica left out since its previous record, if any. */
  readonly deniedDropped?: number;
}

export interface AuditQuery {
  readonly streamPrefix?: string;
  readonly consumerGroup?: string;
  /**
   * Only records about a group this accepts; records that name no group are left out too
   * (a scoped token's query, README.md#tokens-roles-and-group-scopes).
   */
  readonly permits?: (streamPrefix: string, consumerGroup: string) => boolean;
  /** At most this many records, newest first. */
  readonly limit: number;
}

export interface GroupPage {
  readonly groups: readonly GroupRef[];
  /** Opaque cursor of the next page; null on the last page. */
  readonly nextCursor: string | null;
}

export type StoreHealth = 'UP' | 'DOWN' | 'NOT_CONFIGURED';

/** A live coordinator replica as registered in `kp:replicas` (docs/architecture.md#replicas-leases-and-fences). */
export interface ReplicaRecord {
  /** `coordinator.replica.id`. */
  readonly id: string;
  /** `coordinator.http.advertised-url`: where other replicas forward its groups' requests. */
  readonly url: string;
  /** Groups it owned at its last refresh (what the replica listing shows). */
  readonly groupsOwned?: number;
  /** When it last refreshed its entry (ISO 8601). */
  readonly heartbeatAt?: string;
  /** Its oldest leases at its last refresh (at most a few dozen). */
  readonly leases?: readonly ReplicaLease[];
}

/** One lease a replica holds, as its registry entry shows it. */
export interface ReplicaLease {
  readonly streamPrefix: string;
  readonly consumerGroup: string;
  readonly ageMs: number;
}

/**
 * The store contract: domain verbs only. Every group write is fenced and revision-checked:
 * it fails with `FenceMismatchError` / `RevisionMismatchError` and changes nothing when the
 * caller's fence or expected revision is stale, and with `StoreUnavailableError` when the
 * store cannot be reached. `CoordinatorError('GROUP_NOT_FOUND')` when the metadata key is gone.
 */
export interface Store {
  readonly kind: 'memory' | 'redis' | 'redis-cluster';

  /**
   * Creates the metadata key and registers the group; `GROUP_EXISTS` if either exists. The
   * store starts the fence, above every fence an earlier lifecycle of the group can have held.
   */
  createGroup(state: GroupState): Promise<StoredGroup>;
  /** The group's metadata, or null when the metadata key does not exist. */
  loadGroup(ref: GroupRef): Promise<StoredGroup | null>;
  /** Applies `patch` if fence and revision match; returns the new revision. */
  commitGroup(
    ref: GroupRef,
    fence: number,
    expectedRevision: number,
    patch: FieldPatch,
  ): Promise<number>;
  /** Removes metadata key and registry entry if fence and revision match. */
  deleteGroup(ref: GroupRef, fence: number, expectedRevision: number): Promise<void>;
  /**
   * A new owner claims an existing group: atomically checks that `kp:G:lease` holds `lease`,
   * increments the fence and bumps the revision, and returns the group as now stored (its new
   * fence included). `LeaseNotHeldError` if the lease holds another value (or, for
   * `lease === null`, any value: an unleased claim never takes a group from a lease holder);
   * `GROUP_NOT_FOUND` if the key is missing. MemoryStore (one replica, no leases) ignores `lease`.
   */
  claimGroup(ref: GroupRef, lease: string | null): Promise<StoredGroup>;
  /** Whether the registry lists the group (it may exist there while its metadata key is lost). */
  isRegistered(ref: GroupRef): Promise<boolean>;
  /** Registry listing in a stable order. */
  listGroups(options: { cursor?: string | undefined; limit: number }): Promise<GroupPage>;
  /** One round trip for many groups: revision and lifecycle, or null where the key is missing. */
  readRevisions(refs: readonly GroupRef[]): Promise<Array<GroupRevision | null>>;

  /**
   * `ref` joins the shard layout of its stream prefix (docs/protocol.md#one-shard-layout-per-stream-prefix):
   * a new layout when the prefix has none, the count set again when `ref` is alone on it, else
   * the prefix's layout; `SHARD_COUNT_MISMATCH` for an exact count other groups do not have.
   */
  adoptLayout(ref: GroupRef, request: LayoutRequest): Promise<PrefixLayout>;
  /**
   * Moves a prefix's layout to `shardCount` if it is still at `expectedVersion`;
   * `STALE_REVISION` when it moved on, `GROUP_NOT_FOUND` when the prefix has no layout.
   */
  changeLayout(
    streamPrefix: string,
    expectedVersion: number,
    shardCount: number,
    now: number,
  ): Promise<PrefixLayout>;
  /** `ref` leaves its prefix's layout (deleted); a prefix with no group left has none. */
  releaseLayout(ref: GroupRef): Promise<void>;
  /** The layouts of the given prefixes in one round trip, null where a prefix has none. */
  readLayouts(streamPrefixes: readonly string[]): Promise<Array<PrefixLayout | null>>;

  /** Raw metadata fields for backups (including store-owned fields); null when missing. */
  exportGroup(ref: GroupRef): Promise<GroupFields | null>;
  /** Writes raw metadata fields back (restore) and registers the group. Not fenced: disaster recovery only. */
  importGroup(ref: GroupRef, fields: GroupFields): Promise<void>;

  /** Records why a group failed closed (overwrites an earlier record). */
  recordFailure(ref: GroupRef, record: FailureRecord): Promise<void>;
  readFailure(ref: GroupRef): Promise<FailureRecord | null>;
  /** Removes the failure record (after recovery). */
  clearFailure(ref: GroupRef): Promise<void>;

  /**
   * Registers or refreshes a live replica for `ttlMs`: unless refreshed it drops out of
   * {@link listReplicas} after that (a killed replica deregisters itself this way).
   */
  registerReplica(replica: ReplicaRecord, ttlMs: number): Promise<void>;
  /** Live replicas ordered by id; entries whose TTL ran out are pruned on the way. */
  listReplicas(): Promise<ReplicaRecord[]>;
  /** Removes a replica at once (graceful shutdown). */
  deregisterReplica(id: string): Promise<void>;

  appendAudit(record: AuditRecord): Promise<void>;
  queryAudit(query: AuditQuery): Promise<AuditRecord[]>;

  /** Resolves when the store answers; rejects with `StoreUnavailableError` otherwise. */
  ping(): Promise<void>;
  /** Last known health, without a round trip. */
  health(): StoreHealth;
  close(): Promise<void>;

  /*
   * Lost metadata (docs/operations.md#lost-metadata): what a replica writes for a group whose
   * metadata key is gone while it or a client remembers the group, and the marks of deliberate
   * deletes that tell such a loss from a delete.
   */

  /**
   * Records that the group's metadata key is lost: writes `record` as the group's failure record
   * (merged into an earlier one: its first reason and time are kept, every number is the
   * highest of both) and registers the group, so every replica lists and refuses it. Only while
   * the metadata key is missing: `'exists'` (nothing written) when it is there.
   */
  recordLostGroup(ref: GroupRef, record: FailureRecord): Promise<'recorded' | 'exists'>;
  /** Marks lifecycle `lifecycleId` of the group as deleted on purpose (at epoch ms `at`). */
  recordDeletion(ref: GroupRef, lifecycleId: string, at: number): Promise<void>;
  /** The lifecycles of the group deleted on purpose, oldest first. */
  readDeletions(ref: GroupRef): Promise<DeletedLifecycle[]>;

  /*
   * Outages and failed logins (docs/operations.md#when-the-store-is-down,
   * docs/operations.md#login-throttling).
   */

  /**
   * Why the store cannot be reached now, as far as is known without a round trip (`store` is
   * `host:port`, never credentials); null while it answers, and always for the memory store.
   */
  outage(): StoreOutage | null;
  /**
   * Reserves one login attempt under `id` (a digest of the username and the client address),
   * checked and counted in one atomic step: while the open window holds fewer than
   * `maxAttempts`, the attempt is counted as a failure (a successful login then clears the
   * count) and `allowed`; else it is refused and nothing is counted. The first attempt opens a
   * window of `windowMs`, which later ones do not extend. Shared by every replica on the store,
   * so at most `maxAttempts` attempts are allowed per window however many arrive at once.
   */
  reserveLoginAttempt(id: string, maxAttempts: number, windowMs: number): Promise<LoginAttempt>;
  /** The failures counted under `id` in its open window (`failures: 0` when none is open). */
  readLoginFailures(id: string): Promise<LoginFailures>;
  /** Forgets the failures counted under `id` (a successful login). */
  clearLoginFailures(id: string): Promise<void>;
}

/** What {@link Store.outage} reports: the store's address and why it cannot be reached. */
export interface StoreOutage {
  readonly store: string;
  readonly cause: string;
}

/** Failed logins counted under one id (see {@link Store.reserveLoginAttempt}). */
export interface LoginFailures {
  readonly failures: number;
  /** Milliseconds until the window closes; 0 when no window is open. */
  readonly remainingMs: number;
}

/** The answer of {@link Store.reserveLoginAttempt}. */
export interface LoginAttempt extends LoginFailures {
  /** The attempt was counted and may check its password; false: refused, nothing counted. */
  readonly allowed: boolean;
}

/** One lifecycle of a group deleted on purpose (`Store.recordDeletion`). */
export interface DeletedLifecycle {
  readonly lifecycleId: string;
  /** Epoch ms of the delete. */
  readonly at: number;
}
