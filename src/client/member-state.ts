/**
 * The consumer's side of the heartbeat protocol (docs/protocol.md) as pure logic, no I/O: what the
 * member reports, and what a reply tells it to start, drain, retire or drop. The rule it keeps:
 * the member's ownership is never wider than the coordinator's. A shard is started only when a
 * reply lists it in `assignedShards` or `retireShards`; a shard the coordinator no longer lists
 * at all is dropped at once.
 */
import type { HeartbeatReply, HeartbeatRequest } from '../machines/protocol.js';

/**
 * Where one local shard is: `running` (reading), `draining` (revoked: no new reads, in-flight
 * work finishing), `drained` (drain finished, DONE being reported), `retiring` (consuming a
 * removed shard to its end), `retired` (end reached, DONE being reported).
 */
export type ShardPhase = 'running' | 'draining' | 'drained' | 'retiring' | 'retired';

/** The member's identity in the group, as the last reply gave it. */
export interface MemberVersions {
  readonly memberEpoch: number;
  readonly assignmentEpoch: number;
  readonly metadataVersion: number;
  readonly lifecycleId: string | null;
}

/** A member that has not joined yet (or was fenced and rejoins). */
export const JOINING: MemberVersions = {
  memberEpoch: 0,
  assignmentEpoch: 0,
  metadataVersion: 0,
  lifecycleId: null,
};

/** What one reply asks of the local shards. Each shard appears in at most one list. */
export interface ShardPlan {
  /** Granted: start reading (after a drain still finishing, if one is). */
  readonly start: readonly number[];
  /** Revoked while running: stop reading, finish or abandon in-flight work, then report DONE. */
  readonly drain: readonly number[];
  /** Retiring: consume to the end (start reading first if not running), then report DONE. */
  readonly retire: readonly number[];
  /** Not the member's any more (or a DONE the coordinator has taken note of): forget at once. */
  readonly drop: readonly number[];
}

/** The heartbeat body for the member's versions and local shards. */
export function heartbeatRequest(
  versions: MemberVersions,
  shards: ReadonlyMap<number, ShardPhase>,
  extra: Pick<HeartbeatRequest, 'clientId' | 'sessionTimeoutMs' | 'rebalanceTimeoutMs'>,
): HeartbeatRequest {
  const currentAssignments: number[] = [];
  const revokeProgress: { shard: number; state: 'DRAINING' | 'DONE' }[] = [];
  for (const [shard, phase] of [...shards].sort((a, b) => a[0] - b[0])) {
    if (phase === 'running' || phase === 'retiring') currentAssignments.push(shard);
    else if (phase === 'draining') {
      currentAssignments.push(shard);
      revokeProgress.push({ shard, state: 'DRAINING' });
    } else revokeProgress.push({ shard, state: 'DONE' });
  }
  return {
    memberId: '', // filled by the caller, which owns the id
    memberEpoch: versions.memberEpoch,
    assignmentEpoch: versions.assignmentEpoch,
    metadataVersion: versions.metadataVersion,
    currentAssignments,
    revokeProgress,
    ...(versions.lifecycleId === null ? {} : { lifecycleId: versions.lifecycleId }),
    ...stripUndefined(extra),
  };
}

/** The member's versions after a reply (fenced: back to {@link JOINING}). */
export function versionsAfter(reply: HeartbeatReply): MemberVersions {
  if (reply.outcome === 'FENCED_MEMBER_EPOCH') return JOINING;
  return {
    memberEpoch: reply.memberEpoch,
    assignmentEpoch: reply.assignmentEpoch,
    metadataVersion: reply.metadataVersion,
    lifecycleId: reply.lifecycleId,
  };
}

/**
 * What an `OK` or `REVOKE_PENDING` reply asks of the local shards. (`FENCED_MEMBER_EPOCH` drops
 * everything; `SYNC_METADATA` changes nothing but the versions: callers handle those two.)
 */
export function planReply(
  shards: ReadonlyMap<number, ShardPhase>,
  reply: Pick<HeartbeatReply, 'assignedShards' | 'revokeShards' | 'retireShards'>,
): ShardPlan {
  const start: number[] = [];
  const drain: number[] = [];
  const retire: number[] = [];
  const drop: number[] = [];
  const assigned = new Set(reply.assignedShards);
  const revoking = new Set(reply.revokeShards);
  const retiring = new Set(reply.retireShards);
  for (const shard of reply.assignedShards) {
    const phase = shards.get(shard);
    // A shard it drained may be granted back (its target came back to it): start it again.
    if (phase !== 'running') start.push(shard);
  }
  for (const shard of reply.revokeShards) {
    // Not running here (never started, or already drained): nothing to stop; not listing it
    // reports it DONE.
    if (shards.get(shard) === 'running') drain.push(shard);
  }
  for (const shard of reply.retireShards) {
    const phase = shards.get(shard);
    if (phase !== 'retiring' && phase !== 'retired') retire.push(shard);
  }
  for (const shard of shards.keys()) {
    if (assigned.has(shard) || revoking.has(shard) || retiring.has(shard)) continue;
    // Unlisted: a DONE the coordinator took note of, or a shard it no longer gives us.
    drop.push(shard);
  }
  return { start, drain, retire, drop };
}

/**
 * Where a shard's Redis consumer group starts when the member creates it (it is missing):
 * `beginning` is the whole stream (`0`); `end` only what is added from then on (`$`); `since`
 * what was added after the group was created: the older of the stream's last entry and `ms`.
 */
export type GroupStart =
  | { readonly at: 'beginning' }
  | { readonly at: 'end' }
  | { readonly at: 'since'; readonly ms: number };

/**
 * How far before a group's `createdAt` a `latest` start reaches when the reply has no
 * `startFromMs` (a coordinator that did not read the streams Redis's clock): the clocks may
 * disagree.
 */
export const CREATED_AT_SLACK_MS = 5_000;

/**
 * Where a shard's Redis consumer group starts when the member has to create it
 * (docs/protocol.md#start-position): `earliest` at the beginning; `latest` at what was written
 * after the group was created, on every shard, also those a later scale-out added (a stream
 * may hold entries from before the group existed): `startFromMs` (the streams Redis's clock),
 * else `createdAt` less {@link CREATED_AT_SLACK_MS}, else the stream's end. A reply without
 * `startAt` (an older coordinator) means the beginning.
 */
export function groupStart(
  _shard: number,
  reply: Pick<HeartbeatReply, 'startAt' | 'createdAt' | 'startFromMs'>,
): GroupStart {
  if (reply.startAt === undefined || reply.startAt === 'earliest') return { at: 'beginning' };
  if (reply.startFromMs !== undefined) return { at: 'since', ms: reply.startFromMs };
  return reply.createdAt === undefined
    ? { at: 'end' }
    : { at: 'since', ms: reply.createdAt - CREATED_AT_SLACK_MS };
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
