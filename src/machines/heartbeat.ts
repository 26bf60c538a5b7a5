/**
 * The heartbeat protocol, decided in its order (docs/protocol.md#the-order-of-the-checks): a member
 * id bound to another principal (MEMBER_ID_IN_USE), failed closed / coordination version, another
 * lifecycle (FENCED_MEMBER_EPOCH before any version is compared), SYNC_METADATA, leave, join
 * (GROUP_FULL beyond the member cap), FENCED_MEMBER_EPOCH, then the current member's step. A fenced
 * heartbeat changes nothing in the group: only the member's own leave or rejoin and the
 * coordinator's timers (session expiry, rebalance timeout) release a member's shards. Grants happen
 * only in the target member's own heartbeat and only for released shards, so within one event no
 * shard's owner changes directly from one member to another.
 */
import { effectiveRebalanceTimeout, effectiveSessionTimeout } from './config.js';
import type { FenceReason, GroupContext } from './context.js';
import { fail, raise, succeed, withEffects } from './context.js';
import { ChartEventType } from './events.js';
import type { MemberShards } from './group-state.js';
import {
  released,
  NO_SHARDS,
  isMember,
  memberCount,
  memberOf,
  memberShards,
  ownedShards,
  shardAt,
} from './group-state.js';
import { changeShards, releaseShardsOf } from './shard-changes.js';
import { haltedShards } from './halted.js';
import { recompute, removeMember } from './member-changes.js';
import type { HeartbeatOutcome, HeartbeatReply, HeartbeatRequest } from './protocol.js';
import { rollbackAllowed } from './migration-view.js';
import { retiringStep, type RetiringStep } from './retiring.js';
import type { VersionReport } from './rollback-signals.js';
import { recordRollbackSignal, versionsAhead } from './rollback-signals.js';
import type { KeptRefresh } from './liveness.js';
import type {
  GroupState,
  MemberLiveness,
  MemberRecord,
  RevokeProgress,
  ShardRecord,
  StartAt,
} from './types.js';
import { groupId } from './types.js';

/** Decides one heartbeat on a context whose event has begun (see `applyHeartbeat`). */
export function decideHeartbeat(
  ctx: GroupContext,
  request: HeartbeatRequest,
  now: number,
): GroupContext {
  const { group, config } = ctx;
  if (!belongsToCaller(group, request)) {
    return fail(
      ctx,
      'MEMBER_ID_IN_USE',
      `member id ${request.memberId} is in use by another principal`,
    );
  }
  const sameLifecycle =
    request.lifecycleId === undefined || request.lifecycleId === group.lifecycleId;
  if (group.status === 'FAILED_CLOSED') {
    // Clients keep their state while failed closed, but what they report is the evidence a
    // RESUME is checked against, so it is recorded even now; versions of another lifecycle
    // are no evidence about this one.
    const signalled = sameLifecycle
      ? recordRollbackSignal(ctx, versionsAhead(ctx, request), request.metadataVersion, now)
      : ctx;
    return fail(signalled, 'GROUP_FAILED_CLOSED', `group ${groupId(group)} is failed closed`);
  }
  if (!supportsVersion(config, request)) {
    const version = request.coordinationVersion ?? 1;
    const min = config.coordinationVersionMin;
    const max = config.coordinationVersionMax;
    return fail(
      ctx,
      'UNSUPPORTED_COORDINATION_VERSION',
      `coordination version ${version} is not supported; supported range is ${min}..${max}`,
      { min, max },
    );
  }
  // Versions of different lifecycles are not comparable: a member of a recreated group is
  // fenced and rejoins the new lifecycle, never told to "sync down" to it.
  if (!sameLifecycle) return fence(ctx, request, 'LIFECYCLE_MISMATCH', now);
  const ahead = versionsAhead(ctx, request);
  if (ahead.length > 0) return syncMetadata(ctx, request, ahead, now);
  if (request.memberEpoch === -1) return leave(ctx, request, now);
  if (request.memberEpoch === 0) {
    if (isFullFor(group, config.maxMembersPerGroup, request.memberId)) {
      return fail(
        ctx,
        'GROUP_FULL',
        `group ${groupId(group)} already has the most members it admits (${config.maxMembersPerGroup})`,
        { maxMembersPerGroup: config.maxMembersPerGroup },
      );
    }
    return serveMember(join(ctx, request, now), request, now, true);
  }
  const reason = fenceReason(group, request);
  if (reason !== null) return fence(ctx, request, reason, now);
  return serveMember(ctx, request, now, false);
}

/**
 * The reply to a heartbeat that changes nothing but its member's liveness, or
 * null when it may change anything else: then it takes the full road through the chart
 * ({@link decideHeartbeat}), which answers it the same way when it is steady after all.
 *
 * Decided in O(1) in the size of the group (the member's own shards come from the index kept
 * per group object): the checks of {@link decideHeartbeat} in its order, each one that would
 * leave the steady state sends the heartbeat down the full road; then the member's step is
 * planned with the very functions the full road uses, and only an empty plan is steady. No
 * chart event can follow: the group object stays as it is, no recompute falls due, and no
 * migration can converge (one in progress takes the full road) or end its rollback window.
 * Refreshes the member's liveness, as the full road does.
 */
export function steadyHeartbeat(
  ctx: GroupContext,
  request: HeartbeatRequest,
  now: number,
): HeartbeatReply | null {
  const member = steadyMember(ctx, request, now);
  return member && answerMember(ctx, ctx.group, member, member.memberEpoch, request, now);
}

/**
 * A steady heartbeat's decision, kept to answer the very same heartbeat again
 * ({@link repeatSteady}) without deciding it anew: while the parts of the context it read are
 * the objects it was decided on (the group, the config, the waiting recompute, the liveness
 * table) and the clock is below {@link SteadyDecision.until}, the same request gets the same
 * reply. Every check of {@link steadyMember} and the reply read only those and the request; the
 * clock only through a recompute falling due and a rollback window ending. A chart event that
 * changed none of them (a heartbeat through the chart that changed nothing) keeps it.
 */
export interface SteadyDecision extends KeptRefresh {
  readonly group: GroupContext['group'];
  readonly config: GroupContext['config'];
  readonly recomputeAt: GroupContext['recomputeAt'];
  readonly liveness: GroupContext['liveness'];
  readonly member: MemberRecord;
  readonly view: MemberShards;
  /**
   * The request's `heardAt` (a held heartbeat's arrival). The rest of the request a repeat
   * needs is kept below (`reported…`, `currentAssignments`, `revokeProgress`): a ticket lives
   * as long as its group's state, and the request object with its own lists would live with it.
   */
  readonly heardAt: number | undefined;
  /**
   * The reply, built anew on each read from the fields above (all fixed): a ticket lives as long
   * as its group's state, and the HTTP layer keeps the reply's JSON of its own, so a kept reply
   * object (about 180 bytes, one per member) would only be read by in-process callers.
   */
  readonly reply: HeartbeatReply;
  /** The reply's outcome (fixed with the decision), read without building the reply. */
  readonly outcome: HeartbeatReply['outcome'];
  /** The decision holds while the clock is below this. */
  readonly until: number;
}

/** {@link steadyHeartbeat}, with what answering the same heartbeat again needs; or null. */
export function decideSteady(
  ctx: GroupContext,
  request: HeartbeatRequest,
  now: number,
): SteadyDecision | null {
  const member = steadyMember(ctx, request, now);
  if (member === null) return null;
  const { group } = ctx;
  // answerMember's steps, keeping the view and the record it writes.
  const view = memberShards(group, member.memberId);
  const live = refreshLiveness(ctx, member, request, view, now);
  const { config, recomputeAt, liveness } = ctx;
  // The record written, to write again in place (a held heartbeat's times count from its
  // arrival: repeated the long way).
  const record = request.heardAt === undefined ? live : null;
  return new Decision(
    group,
    config,
    recomputeAt,
    liveness,
    member,
    view,
    request.heardAt,
    steadyUntil(ctx),
    record,
    liveness.version,
    view.revoking.length === 0 ? null : member.rebalanceTimeoutMs,
    record?.reportedMetadataVersion ?? request.metadataVersion,
    record?.reportedAssignmentEpoch ?? request.assignmentEpoch,
    record?.currentAssignments ?? request.currentAssignments,
    record?.revokeProgress ?? request.revokeProgress,
  );
}

/** A {@link SteadyDecision}: a class, so that its `reply` getter is one function for all. */
class Decision implements SteadyDecision {
  readonly sessionTimeoutMs: number;

  constructor(
    readonly group: GroupContext['group'],
    readonly config: GroupContext['config'],
    readonly recomputeAt: GroupContext['recomputeAt'],
    readonly liveness: GroupContext['liveness'],
    readonly member: MemberRecord,
    readonly view: MemberShards,
    readonly heardAt: number | undefined,
    readonly until: number,
    public record: MemberLiveness | null,
    public version: number,
    readonly revokeTimeoutMs: number | null,
    readonly reportedMetadataVersion: number,
    readonly reportedAssignmentEpoch: number,
    readonly currentAssignments: readonly number[],
    readonly revokeProgress: readonly RevokeProgress[],
  ) {
    this.sessionTimeoutMs = member.sessionTimeoutMs;
  }

  get outcome(): HeartbeatReply['outcome'] {
    return memberOutcome(this.view);
  }

  get reply(): HeartbeatReply {
    return replyToMember(this, this.member.memberId, this.member.memberEpoch, this.view);
  }
}

/**
 * Answers a decided steady heartbeat again at `now` (its `reply`): its member's liveness record,
 * refreshed as {@link steadyHeartbeat} refreshes it, when the decision still holds on `ctx` (the
 * group's context now); null, nothing touched, when it may not (decide it anew). The refresh
 * is written in place into the record the decision kept while that is still its member's
 * (`LivenessTable.repeat`), else the long way.
 */
export function repeatSteady(
  decision: SteadyDecision,
  ctx: GroupContext,
  now: number,
): MemberLiveness | null {
  if (
    ctx.group !== decision.group ||
    ctx.recomputeAt !== decision.recomputeAt ||
    ctx.liveness !== decision.liveness ||
    ctx.config !== decision.config ||
    now >= decision.until
  )
    return null;
  if (ctx.liveness.repeat(decision, now)) return decision.record;
  const live = refreshLiveness(ctx, decision.member, requestOf(decision), decision.view, now);
  // The record is its member's again (another was put in meanwhile): the next goes in place.
  if (decision.record !== null) {
    decision.record = live;
    decision.version = ctx.liveness.version;
  }
  return live;
}

/** What {@link refreshLiveness} reads of the request a decision was made for. */
function requestOf(decision: SteadyDecision): LivenessRequest {
  return {
    heardAt: decision.heardAt,
    metadataVersion: decision.reportedMetadataVersion,
    assignmentEpoch: decision.reportedAssignmentEpoch,
    currentAssignments: decision.currentAssignments,
    revokeProgress: decision.revokeProgress,
  };
}

/**
 * Until when a heartbeat found steady on `ctx` stays steady, the context unchanged: a
 * recompute falls due at `recomputeAt`; a converged migration (the only kind a steady
 * heartbeat passes) ends its rollback window at `rollbackAllowedUntil`.
 */
function steadyUntil(ctx: GroupContext): number {
  const migration = ctx.group.activeMigration;
  return Math.min(
    ctx.recomputeAt ?? Infinity,
    migration === null ? Infinity : (migration.rollbackAllowedUntil ?? -Infinity),
  );
}

/**
 * The checks of {@link steadyHeartbeat}, without touching liveness: the current member the
 * request speaks for when its heartbeat would change nothing but that member's liveness, else
 * null. O(the member's shards).
 */
export function steadyMember(
  ctx: GroupContext,
  request: HeartbeatRequest,
  now: number,
): MemberRecord | null {
  const { group, config } = ctx;
  if (group.status === 'FAILED_CLOSED' || request.memberEpoch <= 0) return null;
  const member = memberOf(group, request.memberId);
  if (!member || member.memberEpoch !== request.memberEpoch) return null;
  if (!belongsToCaller(group, request) || !supportsVersion(config, request)) return null;
  if (request.lifecycleId !== undefined && request.lifecycleId !== group.lifecycleId) return null;
  if (versionsAhead(ctx, request).length > 0) return null;
  if (ctx.recomputeAt !== null && now >= ctx.recomputeAt) return null;
  const migration = group.activeMigration;
  if (migration !== null && (migration.state !== 'CONVERGED' || !rollbackAllowed(migration, now)))
    return null;
  if (planMemberStep(group, member.memberId, request, now) !== null) return null;
  return member;
}

/** Whether the request's coordination version is in the supported range. */
function supportsVersion(config: GroupContext['config'], request: HeartbeatRequest): boolean {
  const version = request.coordinationVersion ?? 1;
  return version >= config.coordinationVersionMin && version <= config.coordinationVersionMax;
}

/**
 * Whether the caller may speak for `request.memberId`: a live member is bound to the principal
 * that joined it (one joined by an unauthenticated caller, or stored before members were bound,
 * to nobody); an unknown member id is free.
 */
function belongsToCaller(group: GroupState, request: HeartbeatRequest): boolean {
  const owner = memberOf(group, request.memberId)?.principal ?? null;
  return owner === null || owner === request.principal;
}

/** Whether a join of `memberId` would take the group beyond its member cap. */
function isFullFor(group: GroupState, maxMembers: number, memberId: string): boolean {
  return !isMember(group, memberId) && memberCount(group) >= maxMembers;
}

/** Step 1: answer with the stored values; nothing about the member changes (retry-safe). */
function syncMetadata(
  ctx: GroupContext,
  request: HeartbeatRequest,
  ahead: readonly VersionReport[],
  now: number,
): GroupContext {
  const next = recordRollbackSignal(ctx, ahead, request.metadataVersion, now);
  const member = memberOf(next.group, request.memberId);
  const view = member ? memberShards(next.group, member.memberId) : NO_SHARDS;
  const waiting = view.revoking.length > 0 || view.pending.length > 0 || view.retiring.length > 0;
  return succeed(
    next,
    replyOf(
      next,
      'SYNC_METADATA',
      request.memberId,
      member?.memberEpoch ?? request.memberEpoch,
      view,
      waiting,
    ),
  );
}

/** Step 2: a member leaving releases its shards; the rest of the group is rebalanced at once. */
function leave(ctx: GroupContext, request: HeartbeatRequest, now: number): GroupContext {
  let next = ctx;
  if (isMember(ctx.group, request.memberId)) {
    next = recompute(removeMember(next, { type: 'MEMBER_LEFT', memberId: request.memberId }, now));
  }
  return succeed(next, replyOf(next, 'OK', request.memberId, -1, NO_SHARDS, false));
}

/**
 * Step 3: a join from the member's own principal is always accepted, also right after a fence
 * (a new member only within the member cap). A known member joining again has lost its state,
 * so its shards are released first; membership itself is unchanged then, and its targets stay
 * valid. A new member triggers a recompute, debounced so a burst of joins costs one epoch: it
 * falls due `assignmentDebounceMs` after the latest join, but never later than
 * `assignmentDebounceMaxMs` after the join that started the wait (a sliding window with a cap,
 * like Kafka's initial rebalance delay), so a long stream of joins recomputes once per cap.
 */
function join(ctx: GroupContext, request: HeartbeatRequest, now: number): GroupContext {
  const { config } = ctx;
  const memberId = request.memberId;
  const known = memberOf(ctx.group, memberId);
  const hadMembers = memberCount(ctx.group) > 0;
  const released = known ? releaseShardsOf(ctx, memberId, now) : ctx;
  const member: MemberRecord = {
    memberId,
    principal: request.principal ?? null,
    clientId: request.clientId ?? null,
    // Both epochs are replaced when the join is served (step 5e).
    memberEpoch: known?.memberEpoch ?? 0,
    previousEpoch: null,
    sessionTimeoutMs: effectiveSessionTimeout(config, request.sessionTimeoutMs),
    rebalanceTimeoutMs: effectiveRebalanceTimeout(config, request.rebalanceTimeoutMs),
    joinedAt: now,
  };
  ctx.liveness.delete(memberId);
  const { group } = released;
  const joined = raise(
    withEffects(
      { ...released, group: { ...group, members: group.members.set(memberId, member) } },
      { type: 'MEMBER_JOINED', memberId },
    ),
    ChartEventType.MEMBER_JOINED,
  );
  if (known) return joined;
  if (!hadMembers || config.assignmentDebounceMs <= 0) return recompute(joined);
  const by =
    joined.recomputeBy ??
    joined.recomputeAt ??
    now + Math.max(config.assignmentDebounceMs, config.assignmentDebounceMaxMs);
  return {
    ...joined,
    recomputeAt: Math.min(now + config.assignmentDebounceMs, by),
    recomputeBy: by,
  };
}

/**
 * Step 4: why a non-join, non-leave heartbeat is fenced, or null when it comes from the current
 * member. The previous epoch is accepted when the member reports no shard it does not own: its
 * last response was lost, and answering it as current is what it needs.
 */
function fenceReason(group: GroupState, request: HeartbeatRequest): FenceReason | null {
  const member = memberOf(group, request.memberId);
  if (!member) return 'UNKNOWN_MEMBER';
  if (request.memberEpoch === member.memberEpoch) return null;
  if (member.previousEpoch !== null && request.memberEpoch === member.previousEpoch) {
    const owned = new Set(
      (['assigned', 'revoking', 'retiring'] as const).flatMap((state) =>
        ownedShards(group, member.memberId, state).map((r) => r.shard),
      ),
    );
    if (request.currentAssignments.every((shard) => owned.has(shard))) return null;
  }
  return 'STALE_EPOCH';
}

/**
 * Answers FENCED_MEMBER_EPOCH and changes nothing in the group (docs/protocol.md#outcomes; as Kafka
 * rejects a stale epoch before writing anything): the heartbeat may be a delayed duplicate, a
 * replay or a zombie with the live member's id, so it must not strip the live member of its shards.
 * The sender stops its local ownership and rejoins with epoch 0. An epoch above the stored one is
 * still a rollback signal (in memory); one of another lifecycle is not comparable, so it is not.
 */
function fence(
  ctx: GroupContext,
  request: HeartbeatRequest,
  reason: FenceReason,
  now: number,
): GroupContext {
  const { group } = ctx;
  let next = ctx;
  const storedEpoch = memberOf(group, request.memberId)?.memberEpoch ?? group.memberEpochSeq;
  const ahead = request.memberEpoch > group.memberEpochSeq || request.memberEpoch > storedEpoch;
  if (reason !== 'LIFECYCLE_MISMATCH' && ahead) {
    next = recordRollbackSignal(
      next,
      [{ field: 'memberEpoch', reported: request.memberEpoch, stored: storedEpoch }],
      request.metadataVersion,
      now,
    );
  }
  next = withEffects(next, { type: 'MEMBER_FENCED', memberId: request.memberId, reason });
  return succeed(
    next,
    replyOf(next, 'FENCED_MEMBER_EPOCH', request.memberId, request.memberEpoch, NO_SHARDS, false),
  );
}

/**
 * Step 5: the heartbeat of the current member. Order matters: (b) releases what it finished
 * revoking and drops the retiring shards it finished, (d) asks it to revoke what now targets
 * someone else, (c) grants it the released shards that target it (including one it just
 * released, if the target came back to it) and tells it about retiring shards it inherited,
 * then (e) issues at most one new member epoch for whatever changed.
 *
 * Retiring shards do not block handoff, so they leave the outcome alone; but a member with
 * some is told the short interval, so retirement takes round trips, not heartbeat periods.
 */
function serveMember(
  ctx: GroupContext,
  request: HeartbeatRequest,
  now: number,
  joined: boolean,
): GroupContext {
  const memberId = request.memberId;
  let next = ctx;
  if (next.recomputeAt !== null && now >= next.recomputeAt) next = recompute(next);
  const group = next.group;
  const member = memberOf(group, memberId);
  if (!member) return fail(next, 'INTERNAL', `member ${memberId} vanished while being served`);

  const plan = planMemberStep(group, memberId, request, now);
  if (plan === null && !joined) {
    return succeed(next, answerMember(next, group, member, member.memberEpoch, request, now));
  }
  const { changes, grants, retiring } = plan ?? EMPTY_PLAN;
  const epoch = group.memberEpochSeq + 1;
  const applied = new Map(changes);
  for (const record of grants) {
    applied.set(record.shard, {
      ...record,
      state: 'assigned',
      owner: memberId,
      ownerEpoch: epoch,
      since: now,
    });
  }
  for (const record of retiring.told) applied.set(record.shard, { ...record, ownerEpoch: epoch });

  const renewed: MemberRecord = {
    ...member,
    previousEpoch: joined ? null : member.memberEpoch,
    memberEpoch: epoch,
  };
  next = changeShards(next, applied, retiring.finished);
  const updated: GroupState = {
    ...next.group,
    memberEpochSeq: epoch,
    members: next.group.members.set(memberId, renewed),
  };
  next = { ...next, group: updated };
  return succeed(next, answerMember(next, updated, renewed, epoch, request, now));
}

/** What the current member's heartbeat changes in the shards (step 5 b–d); null: nothing. */
interface MemberStepPlan {
  /** Shards it released (b) and shards it must now revoke (d). */
  readonly changes: ReadonlyMap<number, ShardRecord>;
  /** Released shards that target it, as they are before the grant (c). */
  readonly grants: readonly ShardRecord[];
  readonly retiring: RetiringStep;
}

const EMPTY_PLAN: MemberStepPlan = {
  changes: new Map(),
  grants: [],
  retiring: { finished: [], told: [] },
};

/**
 * Plans step 5 b–d from the member's own shards (the index kept per shards object), never
 * from a scan of every shard: its revoking shards it finished, its assigned shards whose
 * target moved, the released shards targeting it (among its pending ones, plus any it just
 * released whose target came back to it), and its retiring shards. A steady heartbeat's plan
 * (null) allocates nothing.
 */
function planMemberStep(
  group: GroupState,
  memberId: string,
  request: HeartbeatRequest,
  now: number,
): MemberStepPlan | null {
  const view = memberShards(group, memberId);
  let changes: Map<number, ShardRecord> | null = null;
  let grants: ShardRecord[] | null = null;
  if (view.revoking.length > 0) {
    const done = new Set(
      request.revokeProgress.filter((p) => p.state === 'DONE').map((p) => p.shard),
    );
    const listed = new Set(request.currentAssignments);
    for (const shard of view.revoking) {
      const record = shardAt(group, shard);
      if (done.has(record.shard) || !listed.has(record.shard)) {
        const free = released(record, now);
        (changes ??= new Map()).set(record.shard, free);
        if (free.target === memberId && free.shard < group.shardCount) (grants ??= []).push(free);
      }
    }
  }
  // A shard is revoked when it targets another member, or nobody because it is paused.
  const halted = haltedShards(group);
  for (const shard of view.assigned) {
    const record = shardAt(group, shard);
    const elsewhere = record.target !== null && record.target !== memberId;
    if (elsewhere || (record.target === null && halted.includes(shard))) {
      (changes ??= new Map()).set(record.shard, { ...record, state: 'revoking', since: now });
    }
  }
  // Pending shards target this member and are owned by someone else or by nobody; the
  // released ones are granted now (all of them lie below shardCount).
  for (const shard of view.pending) {
    const record = shardAt(group, shard);
    if (record.state === 'released') (grants ??= []).push(record);
  }
  const retiring = retiringStep(group, memberId, request, now);
  if (
    changes === null &&
    grants === null &&
    retiring.finished.length === 0 &&
    retiring.told.length === 0
  ) {
    return null;
  }
  grants?.sort((a, b) => a.shard - b.shard);
  return { changes: changes ?? new Map(), grants: grants ?? [], retiring };
}

/**
 * The reply to the current member, served from `group` as the step left it, after refreshing
 * its liveness (in place: the per-group table, see `liveness.ts`).
 */
function answerMember(
  ctx: GroupContext,
  group: GroupState,
  member: MemberRecord,
  epoch: number,
  request: HeartbeatRequest,
  now: number,
): HeartbeatReply {
  const view = memberShards(group, member.memberId);
  refreshLiveness(ctx, member, request, view, now);
  return replyToMember(ctx, member.memberId, epoch, view);
}

/** The reply to a current member whose liveness was refreshed: OK, or REVOKE_PENDING. */
function replyToMember(
  ctx: Pick<GroupContext, 'group' | 'config' | 'recomputeAt'>,
  memberId: string,
  epoch: number,
  view: MemberShards,
): HeartbeatReply {
  const outcome = memberOutcome(view);
  return replyOf(
    ctx,
    outcome,
    memberId,
    epoch,
    view,
    outcome !== 'OK' || ctx.recomputeAt !== null || view.retiring.length > 0,
  );
}

/** A current member's outcome: REVOKE_PENDING while it has shards to give up or to wait for. */
function memberOutcome(view: MemberShards): 'OK' | 'REVOKE_PENDING' {
  return view.revoking.length > 0 || view.pending.length > 0 ? 'REVOKE_PENDING' : 'OK';
}

/** What {@link refreshLiveness} reads of a heartbeat request. */
type LivenessRequest = Pick<
  HeartbeatRequest,
  'heardAt' | 'metadataVersion' | 'assignmentEpoch' | 'currentAssignments' | 'revokeProgress'
>;

/**
 * Refreshes the member's liveness from its heartbeat. The revoke deadline is the rebalance
 * timeout after the oldest revoke the member has not finished (a shard's `since` is when it was
 * asked to revoke it), never earlier than the deadline it had (the grace a load gives): each
 * revoke gets the whole timeout (docs/protocol.md#who-may-release-a-members-shards), and a
 * revoke handed over while another runs does not move the older one's deadline, so a member
 * that keeps being handed revokes cannot stall a rebalance for ever. The lists of the last
 * heartbeat are kept when they did not change, or the member's shard list when they are what
 * it was told (shared, frozen): a steady heartbeat keeps nothing of its request (what outlives
 * a request ends up in the old generation).
 */
function refreshLiveness(
  ctx: GroupContext,
  member: MemberRecord,
  request: LivenessRequest,
  view: MemberShards,
  now: number,
): MemberLiveness {
  const previous = ctx.liveness.get(member.memberId);
  const revokeDeadline =
    view.revoking.length === 0 ? null : revokeDeadlineOf(ctx.group, member, view, previous);
  // A held heartbeat decided after its arrival counts from its arrival, and never moves the
  // session back behind what a later heartbeat gave.
  let lastHeartbeatAt = now;
  let sessionExpiresAt = now + member.sessionTimeoutMs;
  if (request.heardAt !== undefined) {
    const heardAt = Math.min(request.heardAt, now);
    lastHeartbeatAt = Math.max(previous?.lastHeartbeatAt ?? heardAt, heardAt);
    sessionExpiresAt = Math.max(
      previous?.sessionExpiresAt ?? heardAt,
      heardAt + member.sessionTimeoutMs,
    );
  }
  return ctx.liveness.refresh(
    member.memberId,
    lastHeartbeatAt,
    sessionExpiresAt,
    revokeDeadline,
    request.metadataVersion,
    request.assignmentEpoch,
    sameNumbers(previous?.currentAssignments, request.currentAssignments)
      ? previous!.currentAssignments
      : sameNumbers(view.assigned, request.currentAssignments)
        ? view.assigned
        : listOf(request.currentAssignments),
    sameProgress(previous?.revokeProgress, request.revokeProgress)
      ? previous!.revokeProgress
      : listOf(request.revokeProgress),
  );
}

/** The revoke deadline of a member with shards to revoke (see {@link refreshLiveness}). */
function revokeDeadlineOf(
  group: GroupState,
  member: MemberRecord,
  view: MemberShards,
  previous: MemberLiveness | undefined,
): number {
  let oldest = Infinity;
  for (const shard of view.revoking) oldest = Math.min(oldest, shardAt(group, shard).since);
  const deadline = oldest + member.rebalanceTimeoutMs;
  const had = previous?.revokeDeadline ?? null;
  return had === null ? deadline : Math.max(had, deadline);
}

function replyOf(
  ctx: Pick<GroupContext, 'group' | 'config'>,
  outcome: HeartbeatOutcome,
  memberId: string,
  memberEpoch: number,
  view: MemberShards,
  waiting: boolean,
): HeartbeatReply {
  const { group, config } = ctx;
  return new Reply(
    outcome,
    memberId,
    memberEpoch,
    group.assignmentEpoch,
    group.metadataVersion,
    group.lifecycleId,
    group.shardCount,
    view.assigned,
    view.revoking,
    view.retiring,
    view.pending,
    waiting ? config.rebalanceHeartbeatIntervalMs : config.heartbeatIntervalMs,
    group.layout.id,
    group.layout.version,
    group.startAt,
    group.initialShardCount,
    group.createdAt,
    group.startFrom,
    haltedShards(group),
  );
}

/**
 * A heartbeat reply: plain data, its fields in the order of the wire format. Built by a
 * constructor rather than an object literal on purpose: V8 moves the allocation site of a
 * literal whose objects tend to live long (a reply stays in the group's context until its next
 * event) to the old generation, and every steady reply would then be old-generation garbage.
 */
class Reply implements HeartbeatReply {
  constructor(
    readonly outcome: HeartbeatOutcome,
    readonly memberId: string,
    readonly memberEpoch: number,
    readonly assignmentEpoch: number,
    readonly metadataVersion: number,
    readonly lifecycleId: string,
    readonly shardCount: number,
    readonly assignedShards: readonly number[],
    readonly revokeShards: readonly number[],
    readonly retireShards: readonly number[],
    readonly pendingShards: readonly number[],
    readonly heartbeatIntervalMs: number,
    readonly layoutId: string,
    readonly layoutVersion: number,
    readonly startAt: StartAt,
    readonly initialShardCount: number,
    readonly createdAt: number,
    readonly startFromMs: number,
    readonly pausedShards: readonly number[],
  ) {}
}

const NOTHING: readonly never[] = Object.freeze([]);

/** A copy of `list` (one shared empty list for every empty one). */
function listOf<T>(list: readonly T[]): readonly T[] {
  return list.length === 0 ? NOTHING : [...list];
}

function sameNumbers(a: readonly number[] | undefined, b: readonly number[]): boolean {
  if (a === undefined || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function sameProgress(
  a: readonly RevokeProgress[] | undefined,
  b: readonly RevokeProgress[],
): boolean {
  if (a === undefined || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    if (a[i]!.shard !== b[i]!.shard || a[i]!.state !== b[i]!.state) return false;
  }
  return true;
}
