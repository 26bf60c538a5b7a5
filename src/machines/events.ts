/**
 * Events of the group statechart. Time always arrives on the event (`now`, epoch ms): the
 * machine never reads a clock, so it is a pure function of (context, event).
 */
import type { HeartbeatRequest } from './protocol.js';

/** Event names, as constants. */
export const GroupEventType = {
  HEARTBEAT: 'HEARTBEAT',
  TICK: 'TICK',
  FREEZE: 'FREEZE',
  UNFREEZE: 'UNFREEZE',
  PAUSE_PRODUCERS: 'PAUSE_PRODUCERS',
  RESUME_PRODUCERS: 'RESUME_PRODUCERS',
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
 * The host committed the group as it stands in the context. Bookkeeping only: it leaves the
 * group, `result` and `effects` untouched, so the host can reply after sending it.
 */
export interface PersistedEvent {
  readonly type: typeof GroupEventType.PERSISTED;
  readonly revision: number;
  readonly updatedAt: number;
}

export type GroupEvent = HeartbeatEvent | TickEvent | AdminEvent | PersistedEvent;

/** Events that carry a command, reset `result`/`effects` and may change the group. */
export type CommandEvent = HeartbeatEvent | TickEvent | AdminEvent;
