/**
 * The lag reading of a group as the API answers it (`GET …/lag`, docs/operations.md#lag): one
 * definition for the coordinator that makes it and the SDK that reads it.
 */

/** One shard's lag as monitoring shows it (docs/operations.md#lag). */
export interface ShardLagView {
  readonly shard: number;
  readonly stream: string;
  /** Member that owns (or retires, or revokes) the shard; null when released. */
  readonly owner: string | null;
  readonly memberEpoch: number | null;
  readonly length: number;
  readonly lagEntries: number;
  /** False when the count is a lower bound (Redis could not say, and counting stopped). */
  readonly lagExact: boolean;
  readonly pending: number;
  readonly oldestPendingMs: number | null;
  readonly lastDeliveredId: string | null;
  readonly lastEntryId: string | null;
  /** Age of the oldest entry not delivered yet, by the streams Redis's clock; 0 when caught up. */
  readonly lagSeconds: number;
  readonly deadLetters: number;
  /** Removed by a scale-in and still being read to its end. */
  readonly retiring: boolean;
  /** The stream does not exist (length 0). */
  readonly missing: boolean;
  /** No member created the shard's Redis consumer group yet: every entry counts as lag. */
  readonly noConsumerGroup: boolean;
  /**
   * Redis's error about the shard's stream key or its dead-letter key (`<key>: WRONGTYPE …`),
   * which kept those figures from being read (zeros then, `lagExact` false for the stream's);
   * null when read (docs/operations.md#a-broken-shard-stream). Absent from older coordinators.
   */
  readonly error?: string | null;
}

export interface LagTotals {
  readonly lagEntries: number;
  readonly pending: number;
  readonly maxLagSeconds: number;
  readonly shardsBehind: number;
  /** Shards with an {@link ShardLagView.error}. Absent from older coordinators. */
  readonly shardsUnreadable?: number;
}

/** A group's lag reading. */
export interface LagView {
  readonly streamPrefix: string;
  readonly consumerGroup: string;
  readonly measuredAt: string;
  /** False when the coordinator does not know where the streams are (`reason` says why). */
  readonly available: boolean;
  readonly reason?: string;
  /** `host:port` of the streams Redis read. */
  readonly streams?: string;
  readonly shards: readonly ShardLagView[];
  /** Null when not available: never zeros that look like "caught up". */
  readonly totals: LagTotals | null;
}
