import { z } from 'zod';
import { isStreamId } from '../../streams/positions.js';
import { queryInteger, queryIntegerList, queryText } from '../query-params.js';
import { route } from '../route.js';
import { changeMetaSchema, errorSchema, groupParamsSchema } from '../schemas.js';

/**
 * A group's dead letters (docs/protocol.md#dead-letters, docs/operations.md#dead-letters):
 * listed (READ), replayed through routing and purged (WRITE, audited), each answered by the
 * group's owner.
 */

/** Most dead letters one request lists or replays, and most ids it may name. */
export const MAX_DEAD_LETTERS = 1_000;
/** Dead letters a request takes when it does not say. */
export const DEFAULT_DEAD_LETTERS = 100;

const MAX_SHARD = 1_000_000;
const shardSchema = z.number().int().min(0).max(MAX_SHARD);
const shardsSchema = z.array(shardSchema).min(1).max(MAX_DEAD_LETTERS);
const idsSchema = z
  .array(z.string().refine(isStreamId, 'must be a stream entry id <ms>-<seq>'))
  .min(1)
  .max(MAX_DEAD_LETTERS);
const limitSchema = z.number().int().min(1).max(MAX_DEAD_LETTERS);
const keyFieldSchema = z.string().min(1).max(256);

/** `shards=0,2,3` in a query. */
const shardsQuerySchema = queryIntegerList(0, MAX_SHARD, MAX_DEAD_LETTERS);

const deadLetterSchema = z.object({
  shard: z.number().int(),
  id: z.string(),
  shared: z.boolean(),
  originalId: z.string(),
  deliveries: z.number().int(),
  error: z.string(),
  key: z.string().nullable(),
  fields: z.record(z.string(), z.string()),
});

export const deadLettersSchema = z.object({
  streamPrefix: z.string(),
  consumerGroup: z.string(),
  shards: z.array(
    z.object({
      shard: z.number().int(),
      stream: z.string(),
      count: z.number().int(),
      error: z.string().nullable(),
      shared: z.object({ stream: z.string(), count: z.number().int() }),
    }),
  ),
  deadLetters: z.array(deadLetterSchema),
  more: z.boolean(),
});

export const replaySchema = z.object({
  streamPrefix: z.string(),
  consumerGroup: z.string(),
  dryRun: z.boolean(),
  shardCount: z.number().int(),
  replayed: z.array(
    z.object({
      shard: z.number().int(),
      id: z.string(),
      shared: z.boolean(),
      originalId: z.string(),
      key: z.string().nullable(),
      toShard: z.number().int(),
      newId: z.string().nullable(),
    }),
  ),
  gone: z.array(z.object({ shard: z.number().int(), id: z.string(), shared: z.boolean() })),
  notFound: z.array(z.string()),
  more: z.boolean(),
  unreadable: z.array(z.object({ shard: z.number().int(), error: z.string() })),
  failed: z.array(
    z.object({
      shard: z.number().int(),
      id: z.string(),
      toShard: z.number().int(),
      error: z.string(),
    }),
  ),
});

export const purgeSchema = z.object({
  streamPrefix: z.string(),
  consumerGroup: z.string(),
  shards: z.array(
    z.object({
      shard: z.number().int(),
      stream: z.string(),
      purged: z.number().int(),
      error: z.string().nullable(),
      shared: z.object({ stream: z.string(), purged: z.number().int() }),
    }),
  ),
  purged: z.number().int(),
});

const readErrors = {
  400: { description: 'VALIDATION_FAILED: a bad name, shard or limit', schema: errorSchema },
  401: { description: 'No or invalid token', schema: errorSchema },
  403: { description: 'Missing role READ, or a group outside the token', schema: errorSchema },
  404: { description: 'Unknown group', schema: errorSchema },
  503: {
    description: 'STREAMS_UNAVAILABLE: the streams Redis cannot be read (or is not configured)',
    schema: errorSchema,
  },
};
const writeErrors = {
  ...readErrors,
  400: { description: 'VALIDATION_FAILED: a bad name, shard, id or limit', schema: errorSchema },
  403: { description: 'Missing role WRITE, or a group outside the token', schema: errorSchema },
  409: { description: 'GROUP_FROZEN or GROUP_FAILED_CLOSED_ADMIN', schema: errorSchema },
};

const adminPath = '/coord/v1/admin/streams/:stream/groups/:group/dead-letters';
const toRef = (p: { stream: string; group: string }) => ({
  streamPrefix: p.stream,
  consumerGroup: p.group,
});

export const deadLetterRoutes = [
  route({
    method: 'get',
    path: '/coord/v1/monitoring/streams/:stream/groups/:group/dead-letters',
    summary: "The group's dead letters, oldest first per shard, read by its owner",
    tag: 'monitoring',
    roles: ['READ'] as const,
    params: groupParamsSchema,
    query: z.object({
      shards: shardsQuerySchema.optional(),
      limit: queryInteger(1, MAX_DEAD_LETTERS).default(DEFAULT_DEAD_LETTERS),
      keyField: queryText(256).min(1).default('key'),
    }),
    responses: {
      200: { description: 'Per shard the count, and the dead letters', schema: deadLettersSchema },
      ...readErrors,
    },
    async handler({ params, query, services }) {
      const body = await services.coordinator.listDeadLetters(toRef(params), {
        shards: query.shards,
        limit: query.limit,
        keyField: query.keyField,
      });
      return { status: 200, body };
    },
  }),
  route({
    method: 'post',
    path: `${adminPath}/replay`,
    summary:
      'Send dead letters back through routing (the shard their key routes to now); dryRun says which and where',
    tag: 'admin',
    roles: ['WRITE'] as const,
    operation: 'replayDeadLetters',
    params: groupParamsSchema,
    body: changeMetaSchema.extend({
      shards: shardsSchema.optional(),
      limit: limitSchema.default(DEFAULT_DEAD_LETTERS),
      ids: idsSchema.optional(),
      dryRun: z.boolean().default(false),
      keyField: keyFieldSchema.default('key'),
    }),
    responses: {
      200: { description: 'Replayed (or, dry, what would be)', schema: replaySchema },
      ...writeErrors,
    },
    async handler({ params, body, services }) {
      const result = await services.coordinator.replayDeadLetters(toRef(params), {
        shards: body.shards,
        limit: body.limit,
        ids: body.ids,
        dryRun: body.dryRun,
        keyField: body.keyField,
      });
      return { status: 200, body: result };
    },
  }),
  route({
    method: 'post',
    path: `${adminPath}/purge`,
    summary: 'Delete dead letters: those of ids, or all of the chosen shards (default every shard)',
    tag: 'admin',
    roles: ['WRITE'] as const,
    operation: 'purgeDeadLetters',
    params: groupParamsSchema,
    body: changeMetaSchema.extend({ shards: shardsSchema.optional(), ids: idsSchema.optional() }),
    responses: {
      200: { description: 'Purged, per shard', schema: purgeSchema },
      ...writeErrors,
    },
    async handler({ params, body, services }) {
      const result = await services.coordinator.purgeDeadLetters(toRef(params), {
        shards: body.shards,
        ...(body.ids ? { ids: body.ids } : {}),
      });
      return { status: 200, body: result };
    },
  }),
];
