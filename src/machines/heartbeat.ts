/**
 * The heartbeat protocol of DESIGN.md §5, decided in its order: failed closed / coordination
 * version, SYNC_METADATA, leave, join, FENCED_MEMBER_EPOCH, then the current member's step.
 * Grants happen only in the target member's own heartbeat and only for released shards, so
 * within one event no shard's owner changes directly from one member to another.
 */
import { effectiveRebalanceTimeout, effectiveSessionTimeout } from './config.js';
import type { FenceReason, GroupContext } from './context.js';
import { fail, succeed, withEffects } from './context.js';
import type { MemberShards } from './group-state.js';
import {
  released,
  NO_SHARDS,
  allShards,
  isMember,
  memberIds,
  memberOf,
  memberShards,
  ownedShards,
  releaseShardsOf,
  withShards,
  withoutShards,
} from './group-state.js';
import { recompute, removeMember } from './member-changes.js';
import type { HeartbeatOutcome, HeartbeatReply, HeartbeatRequest } from './protocol.js';
import { retiringStep } from './retiring.js';
import type { VersionReport } from './rollback-signals.js';
import { recordRollbackSignal, versionsAhead } from './rollback-signals.js';
import type { GroupState, MemberLiveness, MemberRecord, ShardRecord } from './types.js';
import { groupId } from './types.js';

/** Decides one heartbeat on a context whose event has begun (see `applyHeartbeat`). */
export function decideHeartbeat(
  ctx: GroupContext,
  request: HeartbeatRequest,
  now: number,
): GroupContext {
  const { group, config } = ctx;
  if (group.status === 'FAILED_CLOSED') {
    // Clients keep their state while failed closed, but what they report is the evidence a
    // RESUME is checked against, so it is recorded even now.
    const signalled = recordRollbackSignal(
      ctx,
      versionsAhead(ctx, request),
      request.metadataVersion,
      now,
    );
    return fail(signalled, 'GROUP_FAILED_CLOSED', `group ${groupId(group)} is failed closed`);
  }
  const version = request.coordinationVersion ?? 1;
  const min = config.coordinationVersionMin;
  const max = config.coordinationVersionMax;
  if (!(version >= min && version <= max)) {
    return fail(
      ctx,
      'UNSUPPORTED_COORDINATION_VERSION',
      `coordination version ${version} is not supported; supported range is ${min}..${max}`,
      { min, max },
    );
  }
  const ahead = versionsAhead(ctx, request);
  if (ahead.length > 0) return syncMetadata(ctx, request, ahead, now);
  if (request.memberEpoch === -1) return leave(ctx, request, now);
  if (request.memberEpoch === 0) return serveMember(join(ctx, request, now), request, now, true);
  const reason = fenceReason(group, request);
  if (reason !== null) return fence(ctx, request, reason, now);
  return serveMember(ctx, request, now, false);
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
    next = removeMember(next, request.memberId, now);
    next = recompute(withEffects(next, { type: 'MEMBER_LEFT', memberId: request.memberId }));
  }
  return succeed(next, replyOf(next, 'OK', request.memberId, -1, NO_SHARDS, false));
}

/**
 * Step 3: a join is always accepted. A known member joining again has lost its state, so its
 * shards are released first; membership itself is unchanged then, and its targets stay valid.
 * A new member triggers a recompute, debounced so a burst of joins costs one epoch.
 */
function join(ctx: GroupContext, request: HeartbeatRequest, now: number): GroupContext {
  const { config } = ctx;
  const memberId = request.memberId;
  const known = memberOf(ctx.group, memberId);
  const hadMembers = memberIds(ctx.group).length > 0;
  const released = known ? releaseShardsOf(ctx.group, memberId, now) : ctx.group;
  const member: MemberRecord = {
    memberId,
    clientId: request.clientId ?? null,
    // Both epochs are replaced when the join is served (step 5e).
    memberEpoch: known?.memberEpoch ?? 0,
    previousEpoch: null,
    sessionTimeoutMs: effectiveSessionTimeout(config, request.sessionTimeoutMs),
    rebalanceTimeoutMs: effectiveRebalanceTimeout(config, request.rebalanceTimeoutMs),
    joinedAt: now,
  };
  const liveness = { ...ctx.liveness };
  delete liveness[memberId];
  const joined = withEffects(
    {
      ...ctx,
      group: { ...released, members: { ...released.members, [memberId]: member } },
      liveness,
    },
    { type: 'MEMBER_JOINED', memberId },
  );
  if (known) return joined;
  if (!hadMembers || config.assignmentDebounceMs <= 0) return recompute(joined);
  return { ...joined, recomputeAt: joined.recomputeAt ?? now + config.assignmentDebounceMs };
}

/**
 * Step 4: why a non-join, non-leave heartbeat is fenced, or null when it comes from the current
 * member. The previous epoch is accepted when the member reports no shard it does not own: its
 * last response was lost, and answering it as current is what it needs.
 */
function fenceReason(group: GroupState, request: HeartbeatRequest): FenceReason | null {
  const member = memberOf(group, request.memberId);
  if (!member) return 'UNKNOWN_MEMBER';
  if (request.lifecycleId !== undefined && request.lifecycleId !== group.lifecycleId) {
    return 'LIFECYCLE_MISMATCH';
  }
  if (request.memberEpoch === member.memberEpoch) return null;
  if (member.previousEpoch !== null && request.memberEpoch === member.previousEpoch) {
    const owned = new Set(
      allShards(group)
        .filter((r) => r.owner === member.memberId && r.state !== 'released')
        .map((r) => r.shard),
    );
    if (request.currentAssignments.every((shard) => owned.has(shard))) return null;
  }
  return 'STALE_EPOCH';
}

function fence(
  ctx: GroupContext,
  request: HeartbeatRequest,
  reason: FenceReason,
  now: number,
): GroupContext {
  const { group } = ctx;
  const member = memberOf(group, request.memberId);
  let next = ctx;
  const storedEpoch = member?.memberEpoch ?? group.memberEpochSeq;
  if (request.memberEpoch > group.memberEpochSeq || request.memberEpoch > storedEpoch) {
    next = recordRollbackSignal(
      next,
      [{ field: 'memberEpoch', reported: request.memberEpoch, stored: storedEpoch }],
      request.metadataVersion,
      now,
    );
  }
  if (member) next = removeMember(next, member.memberId, now);
  next = withEffects(next, { type: 'MEMBER_FENCED', memberId: request.memberId, reason });
  if (member) next = recompute(next);
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

  const done = new Set(
    request.revokeProgress.filter((p) => p.state === 'DONE').map((p) => p.shard),
  );
  const listed = new Set(request.currentAssignments);
  const changes = new Map<number, ShardRecord>();
  for (const record of ownedShards(group, memberId, 'revoking')) {
    if (done.has(record.shard) || !listed.has(record.shard)) {
      changes.set(record.shard, released(record, now));
    }
  }
  for (const record of ownedShards(group, memberId, 'assigned')) {
    if (record.target !== null && record.target !== memberId) {
      changes.set(record.shard, { ...record, state: 'revoking', since: now });
    }
  }
  const grants = allShards(group)
    .map((record) => changes.get(record.shard) ?? record)
    .filter((r) => r.state === 'released' && r.target === memberId && r.shard < group.shardCount);
  const retiring = retiringStep(group, memberId, request, now);
  const bump =
    joined ||
    changes.size > 0 ||
    grants.length > 0 ||
    retiring.finished.length > 0 ||
    retiring.told.length > 0;
  const epoch = bump ? group.memberEpochSeq + 1 : member.memberEpoch;
  for (const record of grants) {
    changes.set(record.shard, {
      ...record,
      state: 'assigned',
      owner: memberId,
      ownerEpoch: epoch,
      since: now,
    });
  }
  for (const record of retiring.told) changes.set(record.shard, { ...record, ownerEpoch: epoch });

  let updated = withoutShards(withShards(group, changes), retiring.finished);
  if (bump) {
    const renewed: MemberRecord = {
      ...member,
      previousEpoch: joined ? null : member.memberEpoch,
      memberEpoch: epoch,
    };
    updated = {
      ...updated,
      memberEpochSeq: epoch,
      members: { ...updated.members, [memberId]: renewed },
    };
  }
  const view = memberShards(updated, memberId);
  const live = refreshedLiveness(next.liveness[memberId], member, request, view, now);
  next = { ...next, group: updated, liveness: { ...next.liveness, [memberId]: live } };
  const blocked = view.revoking.length > 0 || view.pending.length > 0;
  const reply = replyOf(
    next,
    blocked ? 'REVOKE_PENDING' : 'OK',
    memberId,
    epoch,
    view,
    blocked || next.recomputeAt !== null || view.retiring.length > 0,
  );
  return succeed(next, reply);
}

function refreshedLiveness(
  previous: MemberLiveness | undefined,
  member: MemberRecord,
  request: HeartbeatRequest,
  view: MemberShards,
  now: number,
): MemberLiveness {
  // The revoke deadline runs from the first revoke and is not extended by later ones, so a
  // member that keeps being handed revokes cannot stall a rebalance for ever.
  const revokeDeadline =
    view.revoking.length === 0
      ? null
      : (previous?.revokeDeadline ?? now + member.rebalanceTimeoutMs);
  return {
    lastHeartbeatAt: now,
    sessionExpiresAt: now + member.sessionTimeoutMs,
    revokeDeadline,
    reportedMetadataVersion: request.metadataVersion,
    reportedAssignmentEpoch: request.assignmentEpoch,
    currentAssignments: [...request.currentAssignments],
    revokeProgress: [...request.revokeProgress],
  };
}

function replyOf(
  ctx: GroupContext,
  outcome: HeartbeatOutcome,
  memberId: string,
  memberEpoch: number,
  view: MemberShards,
  waiting: boolean,
): HeartbeatReply {
  const { group, config } = ctx;
  return {
    outcome,
    memberId,
    memberEpoch,
    assignmentEpoch: group.assignmentEpoch,
    metadataVersion: group.metadataVersion,
    lifecycleId: group.lifecycleId,
    shardCount: group.shardCount,
    assignedShards: view.assigned,
    revokeShards: view.revoking,
    retireShards: view.retiring,
    pendingShards: view.pending,
    heartbeatIntervalMs: waiting ? config.rebalanceHeartbeatIntervalMs : config.heartbeatIntervalMs,
  };
}
