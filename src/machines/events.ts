/**
 * Events of the group statechart. Time always arrives on the event (`now`, epoch ms): the
 * machine never reads a clock, so it is a pure function of (context, event).
 */
import type { HeartbeatRequest } from './protocol.js';
import type { FailureReason } from './types.js';

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
  PERSISTED: 'PERSISTED',
} as const;

export type GroupEventName = (typeof GroupEventType)[keyof typeof GroupEventType];

/** A consumer heartbeat (DESIGN.md §5). */
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
 * Starts a migration to `shardCount` (DESIGN.md §6). The host draws `migrationId` (a uuid), so
 * the reducer stays a pure function of (context, event).
 */
export interface ScaleEvent {
  readonly type: typeof GroupEventType.SCALE;
  readonly now: number;
  readonly shardCount: number;
  readonly requestedBy: string;
  readonly reason: string;
  readonly migrationId: string;
}

/**
 * Rolls back a migration while that is allowed (DESIGN.md §6): `migrationId` names it, or is
 * `'current'` for the active one. `newMigrationId` (drawn by the host) names the ROLLBACK
 * migration this starts.
 */
export interface RollbackEvent {
  readonly type: typeof GroupEventType.ROLLBACK;
  readonly now: number;
  readonly migrationId: string;
  readonly newMigrationId: string;
  readonly requestedBy: string;
  readonly reason: string;
}

/** The host found the stored metadata lost or rolled back (DESIGN.md §7): stop everything. */
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

/** Events that carry a command, reset `result`/`effects` and may change the group. */
export type CommandEvent =
  | HeartbeatEvent
  | TickEvent
  | AdminEvent
  | ScaleEvent
  | RollbackEvent
  | FailClosedEvent
  | ObserveVersionEvent;

export type GroupEvent = CommandEvent | PersistedEvent;
