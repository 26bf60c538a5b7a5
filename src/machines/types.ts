/**
 * Domain types of a coordinated group. Pure data: no I/O, no Redis types.
 * The persisted shape (what goes into the metadata hash) is `GroupState`; liveness, which is
 * kept out of the store (docs/architecture.md#the-metadata-hash), lives in `MemberLiveness`.
 */
import type { PersistentMap } from '../collections/persistent-map.js';

/** Lifecycle status of a group, persisted in the metadata hash. */
export type GroupStatus = 'ACTIVE' | 'FROZEN' | 'FAILED_CLOSED';

/** Why a group failed closed (docs/operations.md#fail-closed-behaviour). */
export type FailureReason = 'METADATA_LOST' | 'STORE_REVISION_REGRESSION' | 'METADATA_CORRUPT';

/**
 * Shard states (docs/architecture.md#shard-states):
 * - `assigned`: owned by `owner`;
 * - `revoking`: `owner` must stop and drain, `target` waits for it;
 * - `released`: free (may carry the `target` it will be granted to);
 * - `retiring`: removed by a scale-in, `owner` consumes it to the end, then it disappears.
 */
export type ShardState = 'assigned' | 'revoking' | 'released' | 'retiring';

export interface ShardRecord {
  readonly shard: number;
  readonly state: ShardState;
  /** Member that owns the shard (assigned, revoking, retiring); null when released. */
  readonly owner: string | null;
  /** Member epoch at which `owner` was given the shard. */
  readonly ownerEpoch: number | null;
  /** Member the target assignment gives the shard to; null when no member exists (or retiring). */
  readonly target: string | null;
  /** Epoch ms of the last state change. */
  readonly since: number;
}

export interface MemberRecord {
  readonly memberId: string;
  /**
   * The principal (`sub`) that joined the member: only it may heartbeat, leave or rejoin as this
   * member while it is live (docs/protocol.md#who-may-release-a-members-shards). Null on records
   * written before members were bound, and for callers that do not authenticate; such a member is
   * bound by its next join.
   */
  readonly principal: string | null;
  readonly clientId: string | null;
  /** Current epoch; the member must report it (or, after a lost response, `previousEpoch`). */
  readonly memberEpoch: number;
  readonly previousEpoch: number | null;
  /** Effective (clamped) timeouts of this member. */
  readonly sessionTimeoutMs: number;
  readonly rebalanceTimeoutMs: number;
  readonly joinedAt: number;
}

export type MigrationKind = 'SCALE' | 'ROLLBACK';
export type MigrationState = 'IN_PROGRESS' | 'CONVERGED' | 'COMPLETED' | 'ROLLED_BACK';

export interface MigrationRecord {
  readonly migrationId: string;
  readonly kind: MigrationKind;
  readonly fromShardCount: number;
  readonly toShardCount: number;
  readonly state: MigrationState;
  readonly startedAt: number;
  readonly convergedAt: number | null;
  readonly completedAt: number | null;
  /** Set when the migration converges: convergedAt + rollback window. */
  readonly rollbackAllowedUntil: number | null;
  readonly requestedBy: string;
  readonly reason: string;
  /** For a ROLLBACK migration: the migration it rolls back. */
  readonly rollbackOf: string | null;
}

/**
 * Where a shard's Redis consumer group starts when a member creates it: at the stream's end
 * (`latest`, Redis `$`) or at its beginning (`earliest`, Redis `0`). See docs/protocol.md#start-position.
 */
export type StartAt = 'earliest' | 'latest';

export const START_AT_VALUES: readonly StartAt[] = ['earliest', 'latest'];

/**
 * The shard layout of a stream prefix as one group last followed it: every group on a prefix
 * reads the same shards, and seals of retiring shards name the layout, not one group
 * (docs/protocol.md#one-shard-layout-per-stream-prefix). `id` is empty for a group that has
 * not followed a layout yet.
 */
export interface LayoutRef {
  readonly id: string;
  readonly version: number;
}

/** The authoritative, persisted state of one group (the metadata hash, decoded). */
export interface GroupState {
  readonly streamPrefix: string;
  readonly consumerGroup: string;
  readonly lifecycleId: string;
  readonly shardCount: number;
  readonly metadataVersion: number;
  readonly assignmentEpoch: number;
  /** Highest member epoch ever issued in this group; new epochs are drawn from it. */
  readonly memberEpochSeq: number;
  readonly status: GroupStatus;
  readonly failureReason: FailureReason | null;
  readonly producersPaused: boolean;
  readonly createdAt: number;
  readonly updatedAt: number;
  /** Keyed by shard number. Shards >= shardCount may exist only while `retiring`. */
  readonly shards: Readonly<Record<number, ShardRecord>>;
  /** Keyed by member id; a persistent map, so a membership change copies no other member. */
  readonly members: PersistentMap<MemberRecord>;
  readonly activeMigration: MigrationRecord | null;
  /** Finished migrations, newest first, capped. */
  readonly migrations: readonly MigrationRecord[];
  /** The stream prefix's layout this group follows. */
  readonly layout: LayoutRef;
  /** Where the shards' Redis consumer groups start (set at creation). */
  readonly startAt: StartAt;
  /**
   * The shard count at creation: shards below it start at `startAt`, shards a scale-out added
   * later (new and empty) at the beginning.
   */
  readonly initialShardCount: number;
  /**
   * Where `latest` starts (epoch ms, a stream id's time): the streams Redis's clock when the
   * group was created, or the coordinator's less a margin when it could not read that clock.
   */
  readonly startFrom: number;
  /**
   * Shards an operator paused, ascending (docs/operations.md#pausing-consumption): granted to
   * nobody until resumed. Absent on groups that never paused any.
   */
  readonly pausedShards?: readonly number[];
  /** The position reset under way (docs/operations.md#replay-or-skip), or null/absent. */
  readonly positionReset?: PositionReset | null;
  /** The last position reset that ended (a repeat of its request is answered with it). */
  readonly lastPositionReset?: CompletedReset | null;
}

/** Where a reset moves the group's consumer groups, as the operator asked for it. */
export type ResetTarget =
  | 'earliest'
  | 'latest'
  | { readonly timestamp: number }
  | { readonly ids: Readonly<Record<string, string>> };

/** One shard's move in a position reset, planned when the reset was asked for. */
export interface ShardMove {
  readonly shard: number;
  /** The Redis consumer group's last-delivered-id when planned; null when it had none. */
  readonly from: string | null;
  /** The new last-delivered-id. */
  readonly to: string;
  /** Entries delivered again (a replay) or skipped; `exact` false: a lower bound. */
  readonly redeliver: number;
  readonly skip: number;
  readonly exact: boolean;
  /**
   * A skip (the position moves forward): entries up to `to` still pending are acknowledged, so
   * they do not come back from the pending list.
   */
  readonly acknowledge: boolean;
}

/**
 * A position reset under way: its shards are paused (revoked from their members) until each
 * has been moved, then resumed. Persisted with the group, so a new owner finishes it.
 */
export interface PositionReset {
  /** The request's `X-Request-Id` (or a drawn id). */
  readonly resetId: string;
  readonly to: ResetTarget;
  readonly moves: readonly ShardMove[];
  /** Shards moved so far, ascending. */
  readonly moved: readonly number[];
  readonly requestedBy: string;
  readonly reason: string;
  readonly startedAt: number;
}

/** A position reset that ended, all of its shards moved. */
export interface CompletedReset extends PositionReset {
  readonly completedAt: number;
  /** True when an operator cancelled it: the shards not in `moved` kept their positions. */
  readonly cancelled?: boolean;
}

/** Identity of a group. */
export interface GroupRef {
  readonly streamPrefix: string;
  readonly consumerGroup: string;
}

export type RevokeState = 'DRAINING' | 'DONE';

export interface RevokeProgress {
  readonly shard: number;
  readonly state: RevokeState;
}

/** What a member reported last and when; kept in memory only. */
export interface MemberLiveness {
  readonly lastHeartbeatAt: number;
  readonly sessionExpiresAt: number;
  /** Set while the member has shards to revoke: it is fenced if still revoking at this time. */
  readonly revokeDeadline: number | null;
  readonly reportedMetadataVersion: number;
  readonly reportedAssignmentEpoch: number;
  readonly currentAssignments: readonly number[];
  readonly revokeProgress: readonly RevokeProgress[];
}

/** `<streamPrefix>:<consumerGroup>`, the id used in logs, registries and maps. */
export function groupId(ref: GroupRef): string {
  return `${ref.streamPrefix}:${ref.consumerGroup}`;
}
