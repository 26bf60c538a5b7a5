import type { GroupContext } from '../machines/context.js';
import type { HeartbeatReply, HeartbeatRequest } from '../machines/protocol.js';
import type { GroupRef, LayoutRef, StartAt } from '../machines/types.js';
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

/** One entry of a group's events stream (monitoring `…/events`). */
export interface GroupTransition {
  readonly at: string;
  readonly state: unknown;
  /** False when only effects happened (e.g. a member joined without a change of state). */
  readonly stateChanged: boolean;
  readonly effects: readonly unknown[];
  readonly metadataVersion: number;
  readonly assignmentEpoch: number;
  readonly status: string;
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
  | { readonly type: 'ADOPT_LAYOUT'; readonly layout: LayoutRef };

/** What a new group is created with. */
export interface CreateGroupOptions {
  /** Omitted: the prefix's count (400 when the prefix has no group yet). */
  readonly shardCount?: number | undefined;
  /** @default 'latest' */
  readonly startAt?: StartAt | undefined;
}

/** Recovery of a failed-closed group (DESIGN.md §7). */
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
  createGroup(ref: GroupRef, options: CreateGroupOptions): Promise<GroupView>;
  /** The group's view; `GROUP_NOT_FOUND` when it does not exist. */
  getGroup(ref: GroupRef): Promise<GroupView>;
  getMembers(ref: GroupRef): Promise<MembersView>;
  getAssignments(ref: GroupRef): Promise<AssignmentsView>;
  getMigrations(ref: GroupRef): Promise<MigrationsView>;
  getStatechart(ref: GroupRef): Promise<StatechartView>;
  /**
   * Producer routing metadata; `GROUP_FAILED_CLOSED` when the group failed closed. With
   * `wait`, resolves once the metadataVersion exceeds `afterVersion` (or it failed closed), or
   * after `waitMs` with the group as it is: the routing long poll.
   */
  getRouting(
    ref: GroupRef,
    wait?: { readonly afterVersion: number; readonly waitMs: number },
  ): Promise<RoutingView>;
  listGroups(options: { cursor?: string | undefined; limit: number }): Promise<{
    groups: GroupSummaryView[];
    nextCursor: string | null;
  }>;
  /** Desired state: create the group, leave it (same shard count) or start a migration. */
  putGroup(
    ref: GroupRef,
    shardCount: number,
    change: ChangeRequest,
  ): Promise<{ outcome: 'CREATED' | 'UNCHANGED' | 'MIGRATION_STARTED' } & CommandOutcome>;
  deleteGroup(ref: GroupRef, options: { force: boolean }): Promise<void>;
  /** Runs an admin command; resolves with the group after it, or throws the machine's error. */
  command(ref: GroupRef, command: AdminCommand): Promise<CommandOutcome>;
  /**
   * The reply to a steady heartbeat (DESIGN.md §12) given at once, without a turn of the
   * group's mailbox, when that is what {@link heartbeat} would answer next, as the `reply` of a
   * ticket that answers the very same heartbeat again ({@link steadyAgain}); null otherwise
   * (not steady, not served from memory here, work queued, or a heartbeat of the member held):
   * then ask {@link heartbeat}.
   */
  steadyTicket(ref: GroupRef, request: HeartbeatRequest): SteadyTicket | null;
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
  /** Brings a failed-closed group back: RESUME the stored metadata or RECREATE a new lifecycle. */
  recover(ref: GroupRef, request: RecoveryRequest): Promise<GroupView>;
  /** Follows a group's transitions; resolves with the unsubscribe function. */
  subscribe(ref: GroupRef, listener: (transition: GroupTransition) => void): Promise<() => void>;
  /** A producer reported the metadata version it has seen (header X-Observed-Metadata-Version). */
  observeVersion(ref: GroupRef, version: number, source: 'routing'): Promise<void>;
  /** Throws `STORE_UNAVAILABLE` when writes cannot be made now (checked before admin mutations). */
  assertWritable(): Promise<void>;
  close(): Promise<void>;
}
