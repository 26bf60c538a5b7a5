import type { GroupContext } from '../machines/context.js';
import type { HeartbeatReply, HeartbeatRequest } from '../machines/protocol.js';
import type { GroupRef, LayoutRef, PositionReset, StartAt } from '../machines/types.js';
import type { PositionsRequest, PositionsView } from './position-resets.js';
import type {
  DeadLetterSelection,
  DeadLettersView,
  PurgeView,
  ReplayView,
} from './dead-letters.js';
import type { LagView } from './group-lag.js';
import type { StatechartView } from './statechart-view.js';
import type {
  AssignmentsView,
  GroupSummaryView,
  GroupView,
  MembersView,
  MigrationsView,
  MigrationView,
  RoutingView,
} from './views.js';

/**
 * A read of one group's actor: its context and where the statechart is. Internal to
 * `src/actors/`: `http/` gets the view objects of `views.ts` built from it.
 */
export interface GroupSnapshot {
  readonly context: GroupContext;
  /** XState state value, e.g. `{ lifecycle: 'active', membership: 'stable' }`. */
  readonly stateValue: unknown;
  /** Replica that owns the group. */
  readonly owner: string;
  /**
   * Highest metadataVersion seen by anyone (stored, reported by clients, or recorded when the
   * group failed closed): RESUME needs the stored version to be at least this.
   */
  readonly highestVersionSeen: number;
}

/**
 * Who or what caused a transition: a member's heartbeat, an admin request, the timer of a
 * deadline (session expiry, debounce, revoke timeout, rollback window), a producer's routing
 * read, or the replica itself (it loaded the group, found it failed, followed its prefix).
 */
export type TransitionCause =
  | { readonly kind: 'member'; readonly memberId: string | null }
  | {
      readonly kind: 'admin';
      /** `X-Request-Id` of the admin request; null when not known. */
      readonly requestId: string | null;
      /** The token's subject; null when not known. */
      readonly principal: string | null;
      /** `requestedBy` of the request (scale, rollback, recovery). */
      readonly requestedBy: string | null;
    }
  | { readonly kind: 'timer' }
  | { readonly kind: 'producer' }
  | { readonly kind: 'replica'; readonly detail: string };

/** The HTTP request behind an admin command, kept with the transitions it causes. */
export interface CommandOrigin {
  readonly requestId: string;
  readonly principal: string | null;
  /** The request's `requestedBy`, for commands that do not carry it themselves (FREEZE, ...). */
  readonly requestedBy?: string | undefined;
}

/** A region of the chart whose state a transition changed, e.g. membership empty → stable. */
export interface RegionChange {
  readonly region: string;
  /** Null when the group was loaded by this transition. */
  readonly from: string | null;
  readonly to: string;
}

/** One entry of a group's events stream (monitoring `…/events`) and of its recent transitions. */
export interface GroupTransition {
  readonly at: string;
  readonly state: unknown;
  /** False when only effects happened (e.g. a member joined without a change of state). */
  readonly stateChanged: boolean;
  readonly effects: readonly unknown[];
  readonly metadataVersion: number;
  readonly assignmentEpoch: number;
  readonly status: string;
  /** Grows with each transition kept by this replica: the same transition seen twice has one. */
  readonly seq: number;
  /**
   * The command that moved the group (HEARTBEAT, TICK, SCALE, FREEZE, ...), or LOADED when
   * this replica took the group, CREATE when it was created here.
   */
  readonly event: string;
  /** The chart events the command raised (MEMBER_JOINED, TARGETS_RECOMPUTED, ...). */
  readonly raised: readonly string[];
  /** The state value before; null for LOADED and CREATE. */
  readonly from: unknown;
  /** The regions whose state changed. */
  readonly changes: readonly RegionChange[];
  readonly cause: TransitionCause;
}

/** A group's recent transitions as its owner keeps them (monitoring `…/transitions`). */
export interface TransitionsView {
  /** The replica that kept them: a group that moved starts a new list on its new owner. */
  readonly owner: string;
  /** How many the owner keeps per group. */
  readonly capacity: number;
  /** Newest first. */
  readonly transitions: readonly GroupTransition[];
}

/** Who asked for a change and why (audited, and kept on migrations). */
export interface ChangeRequest {
  readonly requestedBy: string;
  readonly reason: string;
}

/** Admin commands that go through the group's actor. */
export type AdminCommand =
  | { readonly type: 'FREEZE' }
  | { readonly type: 'UNFREEZE' }
  | { readonly type: 'PAUSE_PRODUCERS' }
  | { readonly type: 'RESUME_PRODUCERS' }
  | ({
      readonly type: 'SCALE';
      readonly shardCount: number;
      /** The prefix's layout the migration follows (set by the layout, never by a caller). */
      readonly layout?: LayoutRef;
    } & ChangeRequest)
  | ({
      readonly type: 'ROLLBACK';
      readonly migrationId: string;
      readonly layout?: LayoutRef;
    } & ChangeRequest)
  | { readonly type: 'ADOPT_LAYOUT'; readonly layout: LayoutRef }
  | {
      readonly type: 'PAUSE_CONSUMPTION' | 'RESUME_CONSUMPTION';
      /** Null: every shard of the group. */
      readonly shards: readonly number[] | null;
    }
  | { readonly type: 'RESET_POSITIONS'; readonly reset: PositionReset }
  | { readonly type: 'CANCEL_RESET' };

/** What a new group is created with. */
export interface CreateGroupOptions {
  /** Omitted: the prefix's count (400 when the prefix has no group yet). */
  readonly shardCount?: number | undefined;
  /** @default 'latest' */
  readonly startAt?: StartAt | undefined;
  /** Where `latest` starts (a stream id's time); set by the coordinator, not by callers. */
  readonly startFrom?: number | undefined;
}

/** Recovery of a failed-closed group (docs/operations.md#recovery-procedure). */
export type RecoveryRequest =
  | ({ readonly action: 'RESUME' } & ChangeRequest)
  | ({ readonly action: 'RECREATE'; readonly shardCount: number } & ChangeRequest);

/** What an admin command (or a desired-state PUT) gives back: the group, and a started migration. */
export interface CommandOutcome {
  readonly group: GroupView;
  /** The migration a SCALE or ROLLBACK started; null for other commands. */
  readonly migration: MigrationView | null;
}

/** A heartbeat's request to be held (`waitMs`, docs/protocol.md "Held heartbeats"). */
export interface HeartbeatHold {
  /** How long the reply may be held (validated; the host clamps it, see `holdLimitMs`). */
  readonly waitMs: number;
  /** Aborted when the caller went away: the hold ends and nothing more is decided for it. */
  readonly signal?: AbortSignal;
  /** Called when the reply is held: the heartbeat is decided, what follows is waiting. */
  readonly onHeld?: () => void;
}

/**
 * A steady heartbeat's reply, kept by the HTTP layer with the request it answered, to answer
 * that request again through {@link GroupCoordinator.steadyAgain} (what else it holds is the
 * coordinator's). The coordinator keeps a ticket alive while it may still answer (its group
 * served here, on the context it was decided on): hold it weakly.
 */
export interface SteadyTicket {
  readonly reply: HeartbeatReply;
  /** `reply.outcome`, without building the reply (a repeat reads only this). */
  readonly outcome: HeartbeatReply['outcome'];
  /** How many members the group had when it was decided. */
  readonly groupSize: number;
}

/** The actor system as the HTTP layer sees it: plain view objects, never the machine context. */
export interface GroupCoordinator {
  /** How many groups this replica holds now. */
  groupsOwned(): number;
  /**
   * Creates a group on its stream prefix's shard layout: `shardCount` may be omitted to adopt
   * the prefix's; a different one is refused (`SHARD_COUNT_MISMATCH`) while other groups are on it.
   */
  createGroup(
    ref: GroupRef,
    options: CreateGroupOptions,
    origin?: CommandOrigin,
    requestedBy?: string | null,
  ): Promise<GroupView>;
  /** The group's view; `GROUP_NOT_FOUND` when it does not exist. */
  getGroup(ref: GroupRef): Promise<GroupView>;
  getMembers(ref: GroupRef): Promise<MembersView>;
  getAssignments(ref: GroupRef): Promise<AssignmentsView>;
  getMigrations(ref: GroupRef): Promise<MigrationsView>;
  getStatechart(ref: GroupRef): Promise<StatechartView>;
  /** The group's recent transitions (newest first), kept by its owner; `GROUP_MOVED` elsewhere. */
  getTransitions(ref: GroupRef): Promise<TransitionsView>;
  /** The group's lag on its streams, per shard (docs/operations.md#lag); `STREAMS_UNAVAILABLE`. */
  getLag(ref: GroupRef): Promise<LagView>;
  /**
   * The group's dead letters (docs/protocol.md#dead-letters): 400 `VALIDATION_FAILED` for a
   * shard the group does not have, `STREAMS_UNAVAILABLE` when the streams cannot be read.
   */
  listDeadLetters(ref: GroupRef, select: DeadLetterSelection): Promise<DeadLettersView>;
  /**
   * Sends the chosen dead letters back through the group's routing (each appended to the shard
   * its key routes to and deleted in one step), or with `dryRun` says which and where; 409
   * `GROUP_FROZEN` / `GROUP_FAILED_CLOSED_ADMIN`.
   */
  replayDeadLetters(
    ref: GroupRef,
    select: DeadLetterSelection & { readonly dryRun: boolean },
  ): Promise<ReplayView>;
  /** Deletes the chosen dead letters (of `ids`, or all of the chosen shards); 409 as replay. */
  purgeDeadLetters(
    ref: GroupRef,
    select: { readonly shards?: readonly number[] | undefined; readonly ids?: readonly string[] },
  ): Promise<PurgeView>;
  /**
   * Plans a position reset of the group and, unless `dryRun`, starts it
   * (docs/operations.md#replay-or-skip); refused like a reset the chart refuses.
   */
  resetPositions(
    ref: GroupRef,
    request: PositionsRequest,
    origin: CommandOrigin,
  ): Promise<PositionsView>;
  /**
   * Producer routing metadata; `GROUP_FAILED_CLOSED` when the group failed closed. With
   * `wait`, resolves once the metadataVersion exceeds `afterVersion` (or it failed closed), or
   * after `waitMs` with the group as it is: the routing long poll. `wait.signal` aborts the
   * wait (its client went away).
   */
  getRouting(
    ref: GroupRef,
    wait?: {
      readonly afterVersion: number;
      readonly waitMs: number;
      readonly signal?: AbortSignal;
    },
  ): Promise<RoutingView>;
  listGroups(options: { cursor?: string | undefined; limit: number }): Promise<{
    groups: GroupSummaryView[];
    nextCursor: string | null;
  }>;
  /** Desired state: create the group, leave it (same shard count) or start a migration. */
  putGroup(
    ref: GroupRef,
    shardCount: number,
    /** `startAt` applies when the PUT creates the group (docs/protocol.md#start-position). */
    change: ChangeRequest & { readonly startAt?: StartAt | undefined },
    origin?: CommandOrigin,
  ): Promise<{ outcome: 'CREATED' | 'UNCHANGED' | 'MIGRATION_STARTED' } & CommandOutcome>;
  deleteGroup(ref: GroupRef, options: { force: boolean }): Promise<void>;
  /**
   * Runs an admin command; resolves with the group after it, or throws the machine's error.
   * `origin` (the admin request) is kept with the transitions the command causes.
   */
  command(ref: GroupRef, command: AdminCommand, origin?: CommandOrigin): Promise<CommandOutcome>;
  /**
   * The reply to a steady heartbeat given at once, without a turn of the
   * group's mailbox, when that is what {@link heartbeat} would answer next, as the `reply` of a
   * ticket that answers the very same heartbeat again ({@link steadyAgain}); null otherwise
   * (not steady, not served from memory here, work queued, or a heartbeat of the member held):
   * then ask {@link heartbeat}.
   */
  steadyTicket(ref: GroupRef, request: HeartbeatRequest): SteadyTicket | null;
  /**
   * The other replica that serves the group, when a request for it would be refused here with
   * 503 `GROUP_MOVED` naming that replica: this one holds no entry for the group and another owns
   * it. Null when it is decided here (served, moving, shutting down). O(1), touches nothing.
   */
  servedElsewhere(ref: GroupRef): string | null;
  /**
   * The ticket's heartbeat again (the same request from the same principal): true when the
   * group is served here, nothing is queued or held for the member, and the decision still
   * holds on the group as it is now, the member's liveness then refreshed as
   * {@link steadyTicket} refreshes it and `ticket.reply` the answer; false, nothing touched,
   * otherwise (ask {@link steadyTicket} or {@link heartbeat}). O(1), no lookup by name.
   */
  steadyAgain(ticket: SteadyTicket): boolean;
  /**
   * One heartbeat. With `hold`, a reply that would tell the member nothing new is held until
   * something changes for the member or the wait is up (docs/protocol.md "Held heartbeats").
   */
  heartbeat(
    ref: GroupRef,
    request: HeartbeatRequest,
    hold?: HeartbeatHold,
  ): Promise<HeartbeatReply>;
  /**
   * An admin request reported a lifecycle or metadata version of the group: a group whose
   * metadata is missing is then failed closed (lost), never read as unknown. Never throws.
   */
  reportObserved(
    ref: GroupRef,
    claim: { readonly lifecycleId?: string; readonly metadataVersion?: number },
  ): Promise<void>;
  /** Brings a failed-closed group back: RESUME the stored metadata or RECREATE a new lifecycle. */
  recover(ref: GroupRef, request: RecoveryRequest, origin?: CommandOrigin): Promise<GroupView>;
  /**
   * Follows a group's transitions; resolves with the unsubscribe function. `onEnd` is called
   * when the group leaves this replica (deleted, moved, released, shut down).
   */
  subscribe(
    ref: GroupRef,
    listener: (transition: GroupTransition) => void,
    onEnd?: () => void,
  ): Promise<() => void>;
  /**
   * A producer reported the metadata version it has seen (header X-Observed-Metadata-Version),
   * and maybe the lifecycle it saw it in (X-Observed-Lifecycle-Id): a version of another
   * lifecycle than the group's is no rollback signal. Older producers send the version alone.
   */
  observeVersion(
    ref: GroupRef,
    version: number,
    source: 'routing',
    lifecycleId?: string,
  ): Promise<void>;
  /** Throws `STORE_UNAVAILABLE` when writes cannot be made now (checked before admin mutations). */
  assertWritable(): Promise<void>;
  close(): Promise<void>;
}
