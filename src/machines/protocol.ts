/**
 * Wire shapes of the consumer heartbeat (DESIGN.md §5) as the statechart sees them: already
 * validated by `src/http`, so plain data with no parsing here.
 */
import type { RevokeProgress } from './types.js';

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
}

/** Heartbeat outcomes, in the order DESIGN.md §5 decides them. */
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
}
