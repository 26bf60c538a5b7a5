import { queryInteger, queryMatching, queryText } from './query-params.js';
import { z } from 'zod';

/** Names and shapes of the API (README.md#api-at-a-glance). */
const STREAM_PREFIX = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$/;
const CONSUMER_GROUP = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
export const streamPrefixSchema = z
  .string()
  .regex(STREAM_PREFIX, `must match ${STREAM_PREFIX.source}`);
export const consumerGroupSchema = z
  .string()
  .regex(CONSUMER_GROUP, `must match ${CONSUMER_GROUP.source}`);
/** A stream prefix as a query parameter (src/http/query-params.ts). */
export const streamPrefixQuerySchema = queryMatching(
  STREAM_PREFIX,
  `must match ${STREAM_PREFIX.source}`,
);
/** A consumer group as a query parameter. */
export const consumerGroupQuerySchema = queryMatching(
  CONSUMER_GROUP,
  `must match ${CONSUMER_GROUP.source}`,
);

export const groupParamsSchema = z.object({
  stream: streamPrefixSchema,
  group: consumerGroupSchema,
});

/** Where a new group's shards start being read (docs/protocol.md#start-position). */
export const startAtSchema = z.enum(['earliest', 'latest']);

export function shardCountSchema(max: number) {
  return z.number().int().min(1).max(max);
}

/** `requestedBy` and `reason` of every admin mutation. */
export const changeMetaSchema = z.object({
  requestedBy: z.string().trim().min(1).max(256),
  reason: z.string().trim().min(1).max(1024),
});

export const errorSchema = z.object({
  error: z.object({
    code: z.string(),
    message: z.string(),
    requestId: z.string(),
    details: z.record(z.string(), z.unknown()).optional(),
  }),
});

export const loginBodySchema = z.object({
  username: z.string().min(1).max(128),
  password: z.string().min(1).max(1024),
});

export const loginResponseSchema = z.object({
  accessToken: z.string(),
  tokenType: z.literal('Bearer'),
  expiresIn: z.number().int(),
  roles: z.array(z.string()),
  /** Present when the user is limited to some groups (README.md#tokens-roles-and-group-scopes). */
  groups: z.array(z.string()).optional(),
});

export const rollbackSignalsSchema = z
  .object({
    count: z.number().int(),
    firstAt: z.string(),
    lastAt: z.string(),
    highestVersionSeen: z.number().int(),
    lastSource: z.string(),
  })
  .nullable();

export const groupSummarySchema = z.object({
  streamPrefix: z.string(),
  consumerGroup: z.string(),
  shardCount: z.number().int(),
  metadataVersion: z.number().int(),
  assignmentEpoch: z.number().int(),
  lifecycleId: z.string(),
  status: z.enum(['ACTIVE', 'FROZEN', 'FAILED_CLOSED']),
  phase: z.string(),
  memberCount: z.number().int(),
  owner: z.string(),
  failureReason: z.string().nullable(),
  startAt: z.enum(['earliest', 'latest']),
});

/** Where a position reset moves the group (docs/operations.md#replay-or-skip). */
export const resetTargetSchema = z.union([
  z.enum(['earliest', 'latest']),
  z.object({ timestamp: z.number().int().min(0) }).strict(),
  z.object({ ids: z.record(z.string(), z.string().max(64)) }).strict(),
]);

export const shardMoveSchema = z.object({
  shard: z.number().int(),
  from: z.string().nullable(),
  to: z.string(),
  redeliver: z.number().int(),
  skip: z.number().int(),
  exact: z.boolean(),
  acknowledge: z.boolean(),
  moved: z.boolean(),
});

export const resetSchema = z.object({
  resetId: z.string(),
  to: resetTargetSchema,
  stage: z.enum(['pausing', 'moving', 'done']),
  requestedBy: z.string(),
  reason: z.string(),
  startedAt: z.string(),
  moves: z.array(shardMoveSchema),
});

/** Consumption control of a group (docs/operations.md#pausing-consumption). */
export const consumptionSchema = z.object({
  state: z.enum(['running', 'pausing', 'paused', 'resetting']),
  pausedShards: z.array(z.number().int()),
  reset: resetSchema.nullable(),
  /** The last reset to have ended; `cancelled`: an operator ended it where it got to. */
  lastReset: resetSchema.extend({ completedAt: z.string(), cancelled: z.boolean() }).nullable(),
});

export const groupDetailSchema = groupSummarySchema.extend({
  failureReason: z.string().nullable(),
  producersPaused: z.boolean(),
  initialShardCount: z.number().int(),
  startFrom: z.string(),
  layoutId: z.string(),
  layoutVersion: z.number().int(),
  storeRevision: z.number().int(),
  highestVersionSeen: z.number().int(),
  createdAt: z.string(),
  updatedAt: z.string(),
  state: z.unknown(),
  consumption: consumptionSchema,
  rollbackSignals: rollbackSignalsSchema,
  /** Health hints that are not states, e.g. FALLING_BEHIND (docs/operations.md#lag). */
  hints: z.array(z.string()).optional(),
});

export const groupListSchema = z.object({
  groups: z.array(groupSummarySchema),
  nextCursor: z.string().nullable(),
});

export const auditRecordSchema = z.object({
  timestamp: z.string(),
  method: z.string(),
  path: z.string(),
  pathLength: z.number().int().optional(),
  operation: z.string(),
  outcome: z.enum(['SUCCEEDED', 'REJECTED', 'DENIED', 'FAILED']),
  status: z.number().int(),
  principal: z.string().nullable(),
  roles: z.array(z.string()),
  requestId: z.string(),
  bodySha256: z.string().nullable(),
  clientAddress: z.string().nullable(),
  durationMs: z.number(),
  streamPrefix: z.string().nullable(),
  consumerGroup: z.string().nullable(),
  requestedBy: z.string().nullable(),
  reason: z.string().nullable(),
  deniedDropped: z.number().int().optional(),
});

export const routingSchema = z.object({
  streamPrefix: z.string(),
  consumerGroup: z.string(),
  lifecycleId: z.string(),
  shardCount: z.number().int(),
  metadataVersion: z.number().int(),
  streams: z.array(z.string()),
  partitioner: z.string(),
  producersPaused: z.boolean(),
  layoutId: z.string(),
  layoutVersion: z.number().int(),
});

export const pagingQuerySchema = z.object({
  limit: queryInteger(1, 1000).default(100),
  cursor: queryText(2048).optional(),
});

/** Who or what caused a transition of a group. */
export const transitionCauseSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('member'), memberId: z.string().nullable() }),
  z.object({
    kind: z.literal('admin'),
    requestId: z.string().nullable(),
    principal: z.string().nullable(),
    requestedBy: z.string().nullable(),
  }),
  z.object({ kind: z.literal('timer') }),
  z.object({ kind: z.literal('producer') }),
  z.object({ kind: z.literal('replica'), detail: z.string() }),
]);

/** One transition of a group: `…/transitions`, and each `transition` of `…/events`. */
export const transitionSchema = z.object({
  seq: z.number().int(),
  at: z.string(),
  event: z.string(),
  raised: z.array(z.string()),
  from: z.unknown(),
  state: z.unknown(),
  stateChanged: z.boolean(),
  changes: z.array(z.object({ region: z.string(), from: z.string().nullable(), to: z.string() })),
  cause: transitionCauseSchema,
  effects: z.array(z.unknown()),
  metadataVersion: z.number().int(),
  assignmentEpoch: z.number().int(),
  status: z.string(),
});

export const transitionsSchema = z.object({
  owner: z.string(),
  capacity: z.number().int(),
  transitions: z.array(transitionSchema),
});
