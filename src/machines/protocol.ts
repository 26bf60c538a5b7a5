/**
 * Wire shapes of the consumer heartbeat (docs/protocol.md#the-call) as the statechart sees them:
 * already validated by `src/http`, so plain data with no parsing here.
 */
import type { RevokeProgress, StartAt } from './types.js';

/** A member's heartbeat. `memberEpoch` 0 joins, -1 leaves. */
export interface HeartbeatRequest {
  readonly memberId: string;
  /**
   * The authenticated principal (`sub`) sending the heartbeat; set by `src/http`, never read
   * from the body. Absent only for callers that do not authenticate (tests).
   */
  readonly principal?: string;
  readonly memberEpoch: number;
  readonly assignmentEpoch: number;
  readonly metadataVersion: number;
  /** Shards the member reports it currently works on. */
  readonly currentAssignments: readonly number[];
  readonly revokeProgress: readonly RevokeProgress[];
  /** @default 1 */
  readonly coordinationVersion?: number;
  readonly lifecycleId?: string;
  readonly clientId?: string;
  readonly sessionTimeoutMs?: number;
  readonly rebalanceTimeoutMs?: number;
  /**
   * When the request arrived, for a held heartbeat decided again later (see `held-heartbeat.ts`):
   * the member's session counts from its arrival, never from when it was answered. Set by the
   * host, never read from the body.
   */
  readonly heardAt?: number;
}

/** Longest hold a heartbeat may ask for (`waitMs`, docs/protocol.md "Held heartbeats"). */
export const MAX_HEARTBEAT_WAIT_MS = 60_000;

/** Heartbeat outcomes (docs/protocol.md#outcomes). */
export const HEARTBEAT_OUTCOMES = [
  'SYNC_METADATA',
  'FENCED_MEMBER_EPOCH',
  'REVOKE_PENDING',
  'OK',
] as const;

export type HeartbeatOutcome = (typeof HEARTBEAT_OUTCOMES)[number];

/**
 * The 200 answer to a heartbeat. The four shard lists are sorted ascending and disjoint: a
 * shard being revoked or retired is not in `assignedShards`.
 */
export interface HeartbeatReply {
  readonly outcome: HeartbeatOutcome;
  readonly memberId: string;
  readonly memberEpoch: number;
  readonly assignmentEpoch: number;
  readonly metadataVersion: number;
  readonly lifecycleId: string;
  readonly shardCount: number;
  /** Owned now; newly granted ones may be started. */
  readonly assignedShards: readonly number[];
  /** Stop, finish in-flight work, report DONE. */
  readonly revokeShards: readonly number[];
  /** Consume to the end, then report DONE. */
  readonly retireShards: readonly number[];
  /** Yours once another member lets go. */
  readonly pendingShards: readonly number[];
  readonly heartbeatIntervalMs: number;
  /**
   * The stream prefix's shard layout the group follows: a member retiring a shard seals it
   * with these (docs/protocol.md#scale-in-and-the-end-of-a-retiring-shard). Absent from older
   * coordinators.
   */
  readonly layoutId?: string;
  readonly layoutVersion?: number;
  /**
   * Where a shard's Redis consumer group starts when the member has to create it: shards below
   * `initialShardCount` at `startAt` (`earliest` is `0`; `latest` is the group's creation, see
   * `createdAt`), shards a scale-out added later at `0` (docs/protocol.md#start-position).
   * Absent from older coordinators: `0`.
   */
  readonly startAt?: StartAt;
  readonly initialShardCount?: number;
  /**
   * When the group was created (epoch ms): `latest` means what is written after it, so a
   * member that comes later does not skip what producers wrote meanwhile.
   */
  readonly createdAt?: number;
  /**
   * Where `latest` starts, as a stream id's time (epoch ms by the streams Redis's clock when the
   * coordinator could read it): a shard's Redis consumer group is created at the older of this
   * and the stream's last entry. Absent from older coordinators: `createdAt` less a margin.
   */
  readonly startFromMs?: number;
  /**
   * Shards of the group an operator paused or a position reset holds, ascending: nobody is
   * granted them until they are resumed (docs/operations.md#pausing-consumption). Absent from
   * older coordinators: none.
   */
  readonly pausedShards?: readonly number[];
}

/**
 * Whether `reply` tells the member that sent `request` nothing it does not know already: `OK`
 * or `REVOKE_PENDING` with the member's own epochs and versions, its `assignedShards` exactly
 * the `currentAssignments` it reported, nothing to revoke or retire, and nothing reported in
 * `revokeProgress`. (`pendingShards` may be non-empty: they follow from the versions the member
 * sent, so it was told them already.) Only such a reply is held (docs/protocol.md "Held
 * heartbeats"); the SDK asks again at once after any other.
 */
export function tellsNothingNew(
  request: Pick<
    HeartbeatRequest,
    | 'memberEpoch'
    | 'assignmentEpoch'
    | 'metadataVersion'
    | 'lifecycleId'
    | 'currentAssignments'
    | 'revokeProgress'
  >,
  reply: HeartbeatReply,
): boolean {
  return (
    (reply.outcome === 'OK' || reply.outcome === 'REVOKE_PENDING') &&
    reply.memberEpoch === request.memberEpoch &&
    reply.assignmentEpoch === request.assignmentEpoch &&
    reply.metadataVersion === request.metadataVersion &&
    (request.lifecycleId === undefined || request.lifecycleId === reply.lifecycleId) &&
    reply.revokeShards.length === 0 &&
    reply.retireShards.length === 0 &&
    request.revokeProgress.length === 0 &&
    sameShards(reply.assignedShards, request.currentAssignments)
  );
}

/** Whether `sorted` (ascending, no duplicates) and `reported` hold the same shards. */
export function sameShards(sorted: readonly number[], reported: readonly number[]): boolean {
  if (sorted.length !== reported.length) return false;
  const given = [...reported].sort((a, b) => a - b);
  return given.every((shard, i) => shard === sorted[i]);
}
