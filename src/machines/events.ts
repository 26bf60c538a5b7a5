/**
 * Events of the group statechart. Time always arrives on the event (`now`, epoch ms): the
 * machine never reads a clock, so it is a pure function of (context, event).
 */
import type { HeartbeatRequest } from './protocol.js';
import type { FailureReason, GroupState, LayoutRef, PositionReset } from './types.js';

/** Event names, as constants. */
export const GroupEventType = {
  HEARTBEAT: 'HEARTBEAT',
  TICK: 'TICK',
  FREEZE: 'FREEZE',
  UNFREEZE: 'UNFREEZE',
  PAUSE_PRODUCERS: 'PAUSE_PRODUCERS',
  RESUME_PRODUCERS: 'RESUME_PRODUCERS',
  SCALE: 'SCALE',
  ROLLBACK: 'ROLLBACK',
  FAIL_CLOSED: 'FAIL_CLOSED',
  OBSERVE_VERSION: 'OBSERVE_VERSION',
  ADOPT_LAYOUT: 'ADOPT_LAYOUT',
  RETIRED_SHARDS_DRAINED: 'RETIRED_SHARDS_DRAINED',
  PERSISTED: 'PERSISTED',
  RECOVER: 'RECOVER',
  PAUSE_CONSUMPTION: 'PAUSE_CONSUMPTION',
  RESUME_CONSUMPTION: 'RESUME_CONSUMPTION',
  RESET_POSITIONS: 'RESET_POSITIONS',
  SHARD_POSITIONS_MOVED: 'SHARD_POSITIONS_MOVED',
  CANCEL_RESET: 'CANCEL_RESET',
} as const;

/**
 * Events the chart raises to itself after a command changed the group, so that each region's
 * transitions name what moved them (docs/architecture.md#the-statechart). They carry no data: the
 * region's guards read the context the command left.
 */
export const ChartEventType = {
  MEMBER_JOINED: 'MEMBER_JOINED',
  MEMBER_LEFT: 'MEMBER_LEFT',
  MEMBER_EXPIRED: 'MEMBER_EXPIRED',
  MEMBER_FENCED: 'MEMBER_FENCED',
  TARGETS_RECOMPUTED: 'TARGETS_RECOMPUTED',
  REVOKE_REQUESTED: 'REVOKE_REQUESTED',
  SHARDS_RELEASED: 'SHARDS_RELEASED',
  SHARDS_GRANTED: 'SHARDS_GRANTED',
  MIGRATION_CONVERGED: 'MIGRATION_CONVERGED',
  ROLLBACK_WINDOW_ELAPSED: 'ROLLBACK_WINDOW_ELAPSED',
  /** The paused shards or the position reset changed (docs/operations.md#pausing-consumption). */
  CONSUMPTION_CHANGED: 'CONSUMPTION_CHANGED',
  /** After RECOVER: the membership region takes the state of the recovered group. */
  MEMBERSHIP_RESTORED: 'MEMBERSHIP_RESTORED',
} as const;

export type ChartEventName = (typeof ChartEventType)[keyof typeof ChartEventType];

/** A raised event of the chart (see {@link ChartEventType}). */
export interface ChartEvent {
  readonly type: ChartEventName;
}

export type GroupEventName = (typeof GroupEventType)[keyof typeof GroupEventType];

/** A consumer heartbeat (docs/protocol.md). */
export interface HeartbeatEvent {
  readonly type: typeof GroupEventType.HEARTBEAT;
  readonly now: number;
  readonly request: HeartbeatRequest;
}

/** The host's deadline sweep: sent when `nextDeadline(context)` has passed. */
export interface TickEvent {
  readonly type: typeof GroupEventType.TICK;
  readonly now: number;
}

/** Admin commands that go through the actor. */
export interface AdminEvent {
  readonly type:
    | typeof GroupEventType.FREEZE
    | typeof GroupEventType.UNFREEZE
    | typeof GroupEventType.PAUSE_PRODUCERS
    | typeof GroupEventType.RESUME_PRODUCERS;
  readonly now: number;
}

/**
 * Starts a migration to `shardCount` (docs/architecture.md#migrations). The host draws
 * `migrationId` (a uuid), so the reducer stays a pure function of (context, event).
 */
export interface ScaleEvent {
  readonly type: typeof GroupEventType.SCALE;
  readonly now: number;
  readonly shardCount: number;
  readonly requestedBy: string;
  readonly reason: string;
  readonly migrationId: string;
  /**
   * The stream prefix's layout this migration follows; absent in tests of one group alone
   * (docs/protocol.md#one-shard-layout-per-stream-prefix).
   */
  readonly layout?: LayoutRef;
}

/**
 * Rolls back a migration while that is allowed (docs/architecture.md#migrations): `migrationId`
 * names it, or is `'current'` for the active one. `newMigrationId` (drawn by the host) names the
 * ROLLBACK migration this starts.
 */
export interface RollbackEvent {
  readonly type: typeof GroupEventType.ROLLBACK;
  readonly now: number;
  readonly migrationId: string;
  readonly newMigrationId: string;
  readonly requestedBy: string;
  readonly reason: string;
  /** The stream prefix's layout the rollback returns to (see {@link ScaleEvent.layout}). */
  readonly layout?: LayoutRef;
}

/**
 * The stream prefix's layout moved on with the group's shard count already right (a group
 * created before layouts, or on a prefix whose layout was set again): the group follows it
 * without a migration, and routing shows the new layout.
 */
export interface AdoptLayoutEvent {
  readonly type: typeof GroupEventType.ADOPT_LAYOUT;
  readonly now: number;
  readonly layout: LayoutRef;
}

/**
 * The host sealed ownerless retiring shards (no member to read them) and found nothing unread
 * before the seal: they may leave the group (docs/architecture.md#migrations).
 */
export interface RetiredShardsDrainedEvent {
  readonly type: typeof GroupEventType.RETIRED_SHARDS_DRAINED;
  readonly now: number;
  readonly shards: readonly number[];
}

/** The host found the stored metadata lost or rolled back: stop everything. */
export interface FailClosedEvent {
  readonly type: typeof GroupEventType.FAIL_CLOSED;
  readonly now: number;
  readonly reason: FailureReason;
}

/** A producer reported the highest metadataVersion it has seen (a possible rollback signal). */
export interface ObserveVersionEvent {
  readonly type: typeof GroupEventType.OBSERVE_VERSION;
  readonly now: number;
  readonly source: 'routing';
  readonly version: number;
}

/**
 * The host committed the group as it stands in the context. Bookkeeping only: it leaves the
 * group, `result` and `effects` untouched, so the host can reply after sending it.
 */
export interface PersistedEvent {
  readonly type: typeof GroupEventType.PERSISTED;
  readonly revision: number;
  readonly updatedAt: number;
}

/**
 * Recovery of a failed-closed group (docs/operations.md#recovery-procedure): the host restored
 * (RESUME) or rewrote (RECREATE) the metadata and claimed it; the group continues from `group` as
 * stored.
 */
export interface RecoverEvent {
  readonly type: typeof GroupEventType.RECOVER;
  readonly now: number;
  readonly group: GroupState;
  readonly storeRevision: number;
}

/**
 * Pauses or resumes consumption of `shards` (null: every shard of the group)
 * (docs/operations.md#pausing-consumption).
 */
export interface ConsumptionEvent {
  readonly type: typeof GroupEventType.PAUSE_CONSUMPTION | typeof GroupEventType.RESUME_CONSUMPTION;
  readonly now: number;
  readonly shards: readonly number[] | null;
}

/**
 * Starts a position reset planned by the host (docs/operations.md#replay-or-skip): its shards
 * are paused until the host moved each one and said so with SHARD_POSITIONS_MOVED.
 */
export interface ResetPositionsEvent {
  readonly type: typeof GroupEventType.RESET_POSITIONS;
  readonly now: number;
  readonly reset: PositionReset;
}

/** The host moved these shards of reset `resetId` (the last one ends the reset). */
export interface ShardPositionsMovedEvent {
  readonly type: typeof GroupEventType.SHARD_POSITIONS_MOVED;
  readonly now: number;
  readonly resetId: string;
  readonly shards: readonly number[];
}

/**
 * Ends the position reset under way without moving the shards not moved yet, and resumes its
 * shards (docs/operations.md#replay-or-skip): the way out of a reset whose moves keep failing.
 */
export interface CancelResetEvent {
  readonly type: typeof GroupEventType.CANCEL_RESET;
  readonly now: number;
}

/** Events that carry a command, reset `result`/`effects` and may change the group. */
export type CommandEvent =
  | HeartbeatEvent
  | TickEvent
  | AdminEvent
  | ScaleEvent
  | RollbackEvent
  | FailClosedEvent
  | ObserveVersionEvent
  | AdoptLayoutEvent
  | RetiredShardsDrainedEvent
  | RecoverEvent
  | ConsumptionEvent
  | ResetPositionsEvent
  | ShardPositionsMovedEvent
  | CancelResetEvent;

export type GroupEvent = CommandEvent | PersistedEvent | ChartEvent;
