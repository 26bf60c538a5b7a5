/**
 * The context of a group actor: the persisted `GroupState` plus what lives in memory only
 * (liveness, a pending recompute, rollback signals) and the answer to the last command.
 * Everything here is a pure function of its arguments: time arrives as `now`.
 */
import type { ErrorCode } from '../errors.js';
import type { MembershipConfig } from './config.js';
import type { ChartEventName } from './events.js';
import type { MemberDeparture } from './member-machine.js';
import { memberIds, memberOf, ownedShards } from './group-state.js';
import { LivenessTable } from './liveness.js';
import { targetsAreStale } from './targets.js';
import type { FailureReason, GroupState, MemberLiveness, MigrationKind } from './types.js';

/**
 * Client-reported versions above the stored ones: evidence of a store rollback
 * (docs/operations.md#what-the-coordinator-notices).
 */
export interface RollbackSignals {
  readonly count: number;
  readonly firstAt: number;
  readonly lastAt: number;
  /** Highest `metadataVersion` any client reported; RESUME is refused below it. */
  readonly highestVersionSeen: number;
  readonly lastSource: RollbackSource;
}

/** Answer to the command an event carried; the host replies from it. */
export type CommandResult =
  | { readonly ok: true; readonly reply?: unknown }
  | {
      readonly ok: false;
      readonly code: ErrorCode;
      readonly message: string;
      readonly details?: Record<string, unknown>;
    };

export type FenceReason =
  'REBALANCE_TIMEOUT' | 'STALE_EPOCH' | 'UNKNOWN_MEMBER' | 'LIFECYCLE_MISMATCH';

/** Who reported a version above ours: a consumer's heartbeat or a producer's routing read. */
export type RollbackSource = 'heartbeat' | 'routing';

export type RollbackField = 'metadataVersion' | 'assignmentEpoch' | 'memberEpoch';

/** Something the host turns into metrics and logs; never into a store write. */
export type Effect =
  | { readonly type: 'MEMBER_JOINED'; readonly memberId: string }
  | { readonly type: 'MEMBER_LEFT'; readonly memberId: string }
  | { readonly type: 'MEMBER_EXPIRED'; readonly memberId: string }
  | { readonly type: 'MEMBER_FENCED'; readonly memberId: string; readonly reason: FenceReason }
  | {
      readonly type: 'ROLLBACK_SIGNAL';
      readonly source: RollbackSource;
      readonly field: RollbackField;
      readonly reported: number;
      readonly stored: number;
    }
  | { readonly type: 'REBALANCE_STARTED' }
  | { readonly type: 'REBALANCE_COMPLETED'; readonly durationMs: number }
  | { readonly type: 'ASSIGNMENT_RECOMPUTED'; readonly assignmentEpoch: number }
  | { readonly type: 'INVARIANT_VIOLATION'; readonly invariant: string; readonly detail: string }
  | {
      readonly type: 'MIGRATION_STARTED';
      readonly migrationId: string;
      readonly kind: MigrationKind;
    }
  | {
      readonly type: 'MIGRATION_CONVERGED';
      readonly migrationId: string;
      readonly durationMs: number;
    }
  | { readonly type: 'MIGRATION_COMPLETED'; readonly migrationId: string }
  | { readonly type: 'MIGRATION_ROLLED_BACK'; readonly migrationId: string }
  | { readonly type: 'FAILED_CLOSED'; readonly reason: FailureReason }
  | { readonly type: 'EVENT_FAILED'; readonly event: string; readonly message: string };

export interface GroupContext {
  /** The persisted state; the host writes exactly what changed in it. */
  readonly group: GroupState;
  /**
   * In-memory liveness of every member of `group` (never persisted,
   * docs/architecture.md#the-metadata-hash): one mutable table per group, shared by the contexts of
   * its events (see `liveness.ts`).
   */
  readonly liveness: LivenessTable;
  readonly config: MembershipConfig;
  /** Store revision of the last committed write (or of the load). */
  readonly storeRevision: number;
  /** When a debounced target recompute falls due; null when none is pending. */
  readonly recomputeAt: number | null;
  /**
   * The latest `recomputeAt` may move to while joins keep coming (the debounce's cap, fixed by
   * the join that started the wait); null when no recompute is pending.
   */
  readonly recomputeBy: number | null;
  /** When the current rebalance started; null while not rebalancing. */
  readonly rebalanceStartedAt: number | null;
  readonly signals: RollbackSignals | null;
  /** Answer to the last command event; null before the first. */
  readonly result: CommandResult | null;
  /** Effects of the last command event, in order. */
  readonly effects: readonly Effect[];
  /** Chart events the last step called for; the chart raises them to itself. */
  readonly raised: readonly ChartEventName[];
  /** Members that left, expired or were fenced lately, newest first (monitoring only). */
  readonly departures: readonly MemberDeparture[];
  /**
   * Time of the last command event. Entry and exit actions of derived states run on eventless
   * transitions, which carry no time of their own.
   */
  readonly lastEventAt: number;
  /** `updatedAt` of the last committed write, as reported by PERSISTED. */
  readonly lastPersistedAt: number | null;
}

/** Input of {@link createGroupContext}. */
export interface CreateGroupContextInput {
  readonly group: GroupState;
  readonly config: MembershipConfig;
  readonly now: number;
  readonly storeRevision: number;
  /** Liveness to keep (an actor rebuilt in-process); omitted after a load from the store. */
  readonly liveness?: LivenessTable;
}

/**
 * Context of a group actor built from persisted state. Without `liveness`, every member gets a
 * full session timeout of grace from `now` (and a full rebalance timeout if it is revoking):
 * heartbeat times are not persisted, so a coordinator restart or failover must not read as
 * every member having gone silent.
 */
export function createGroupContext(input: CreateGroupContextInput): GroupContext {
  const { group, now } = input;
  const liveness = new LivenessTable();
  for (const memberId of memberIds(group)) {
    const kept = input.liveness?.get(memberId);
    liveness.set(memberId, kept ?? graceLiveness(group, memberId, now));
  }
  return {
    group,
    liveness,
    config: input.config,
    storeRevision: input.storeRevision,
    recomputeAt: targetsAreStale(group) ? now : null,
    recomputeBy: targetsAreStale(group) ? now : null,
    rebalanceStartedAt: null,
    signals: null,
    result: null,
    effects: [],
    raised: [],
    departures: [],
    lastEventAt: now,
    lastPersistedAt: null,
  };
}

function graceLiveness(group: GroupState, memberId: string, now: number): MemberLiveness {
  const member = memberOf(group, memberId);
  const sessionTimeoutMs = member?.sessionTimeoutMs ?? 0;
  const revoking = ownedShards(group, memberId, 'revoking').length > 0;
  return {
    lastHeartbeatAt: now,
    sessionExpiresAt: now + sessionTimeoutMs,
    revokeDeadline: revoking && member ? now + member.rebalanceTimeoutMs : null,
    // Unknown until the member's first heartbeat after the restart.
    reportedMetadataVersion: 0,
    reportedAssignmentEpoch: 0,
    currentAssignments: [],
    revokeProgress: [],
  };
}

/**
 * The earliest time at which a TICK would change something: a session expiry, a revoke
 * deadline, a due recompute, or the end of a converged migration's rollback window (it then
 * becomes COMPLETED). Null when nothing is scheduled, and for a failed-closed group (nothing
 * may change until it is recovered).
 */
export function nextDeadline(ctx: GroupContext): number | null {
  return deadlineWithin(ctx, earliestMemberDeadline(ctx));
}

/**
 * The earliest session expiry or revoke deadline of the group's members (O(members)); Infinity
 * when none has one.
 */
export function earliestMemberDeadline(ctx: GroupContext): number {
  // Every member in any order, visited where it is: no list of thousands of ids for it.
  let earliest = Infinity;
  ctx.group.members.forEach((_member, id) => {
    earliest = Math.min(earliest, memberDeadline(ctx, id));
  });
  return earliest;
}

/**
 * The earliest deadline among those an event may have moved earlier: a due recompute, the end
 * of a converged migration's rollback window, and the session and revoke deadlines of the
 * members in `changed` (the ones whose liveness the event touched). O(changed). Null when none.
 */
export function earliestDeadlineOf(ctx: GroupContext, changed: Iterable<string>): number | null {
  let earliest = Infinity;
  for (const memberId of changed) earliest = Math.min(earliest, memberDeadline(ctx, memberId));
  return deadlineWithin(ctx, earliest);
}

/**
 * As {@link nextDeadline}, with `members` standing for the members' earliest deadline: the
 * group's own deadlines (a due recompute, the end of a converged migration's rollback window)
 * are read here, in O(1). A lower bound of the members' gives a lower bound of the group's.
 */
export function deadlineWithin(ctx: GroupContext, members: number): number | null {
  if (waitsForNothing(ctx)) return null;
  let earliest = Math.min(members, ctx.recomputeAt ?? Infinity);
  const migration = ctx.group.activeMigration;
  if (migration?.state === 'CONVERGED' && migration.rollbackAllowedUntil !== null)
    earliest = Math.min(earliest, migration.rollbackAllowedUntil);
  return earliest === Infinity ? null : earliest;
}

/**
 * Whether no deadline of the group can fall due: it failed closed, and nothing may change until
 * it is recovered.
 */
export function waitsForNothing(ctx: GroupContext): boolean {
  return ctx.group.status === 'FAILED_CLOSED';
}

/** A member's earliest deadline (session expiry, revoke deadline); Infinity: none. */
function memberDeadline(ctx: GroupContext, memberId: string): number {
  const live = ctx.liveness.get(memberId);
  if (!live) return Infinity;
  return live.revokeDeadline === null
    ? live.sessionExpiresAt
    : Math.min(live.sessionExpiresAt, live.revokeDeadline);
}

/** Starts a command event: the previous result and effects are dropped. */
export function beginEvent(ctx: GroupContext, now: number): GroupContext {
  return { ...ctx, result: null, effects: [], raised: [], lastEventAt: now };
}

/**
 * Names chart events this step caused, each once, for the chart to raise to itself after the
 * step (docs/architecture.md#the-statechart): steps say what they caused, nothing is inferred.
 */
export function raise(ctx: GroupContext, ...events: ChartEventName[]): GroupContext {
  let raised: ChartEventName[] | null = null;
  for (const type of events) {
    if (ctx.raised.includes(type) || raised?.includes(type)) continue;
    (raised ??= [...ctx.raised]).push(type);
  }
  return raised === null ? ctx : { ...ctx, raised };
}

export function withEffects(ctx: GroupContext, ...effects: Effect[]): GroupContext {
  return effects.length === 0 ? ctx : { ...ctx, effects: [...ctx.effects, ...effects] };
}

export function succeed(ctx: GroupContext, reply?: unknown): GroupContext {
  return { ...ctx, result: reply === undefined ? { ok: true } : { ok: true, reply } };
}

export function fail(
  ctx: GroupContext,
  code: ErrorCode,
  message: string,
  details?: Record<string, unknown>,
): GroupContext {
  const result: CommandResult =
    details === undefined ? { ok: false, code, message } : { ok: false, code, message, details };
  return { ...ctx, result };
}

/** Stamps `updatedAt` when the event changed the persisted group, and only then. */
export function touched(before: GroupContext, after: GroupContext, now: number): GroupContext {
  if (after.group === before.group) return after;
  return { ...after, group: { ...after.group, updatedAt: now } };
}
