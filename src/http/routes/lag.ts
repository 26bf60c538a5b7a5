import { z } from 'zod';
import { route } from '../route.js';
import { errorSchema, groupParamsSchema } from '../schemas.js';

const shardLagSchema = z.object({
  shard: z.number().int(),
  stream: z.string(),
  owner: z.string().nullable(),
  memberEpoch: z.number().int().nullable(),
  length: z.number().int(),
  lagEntries: z.number().int(),
  lagExact: z.boolean(),
  pending: z.number().int(),
  oldestPendingMs: z.number().int().nullable(),
  lastDeliveredId: z.string().nullable(),
  lastEntryId: z.string().nullable(),
  lagSeconds: z.number(),
  deadLetters: z.number().int(),
  retiring: z.boolean(),
  missing: z.boolean(),
  noConsumerGroup: z.boolean(),
  error: z.string().nullable(),
});

export const lagSchema = z.object({
  streamPrefix: z.string(),
  consumerGroup: z.string(),
  measuredAt: z.string(),
  available: z.boolean(),
  reason: z.string().optional(),
  streams: z.string().optional(),
  shards: z.array(shardLagSchema),
  totals: z
    .object({
      lagEntries: z.number().int(),
      pending: z.number().int(),
      maxLagSeconds: z.number(),
      shardsBehind: z.number().int(),
      shardsUnreadable: z.number().int(),
    })
    .nullable(),
});

/** How far a group is behind on its streams (docs/operations.md#lag). */
export const lagRoutes = [
  route({
    method: 'get',
    path: '/coord/v1/monitoring/streams/:stream/groups/:group/lag',
    summary: "Per-shard lag of the group on its streams, read by the group's owner",
    tag: 'monitoring',
    roles: ['READ'] as const,
    params: groupParamsSchema,
    responses: {
      200: {
        description:
          'The lag reading (available false, with a reason, when the streams are unknown)',
        schema: lagSchema,
      },
      400: { description: 'Invalid name', schema: errorSchema },
      401: { description: 'No or invalid token', schema: errorSchema },
      403: { description: 'Missing role READ, or a group outside the token', schema: errorSchema },
      404: { description: 'Unknown group', schema: errorSchema },
      503: {
        description: 'STREAMS_UNAVAILABLE: the streams Redis cannot be read',
        schema: errorSchema,
      },
    },
    async handler({ params, services }) {
      const ref = { streamPrefix: params.stream, consumerGroup: params.group };
      return { status: 200, body: await services.coordinator.getLag(ref) };
    },
  }),
];
