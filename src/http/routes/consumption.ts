import { z } from 'zod';
import type { Settings } from '../../config/settings.js';
import { forwardedAnswerWithinMs } from '../forwarding.js';
import { requestContext } from '../request-context.js';
import { route, type RouteSpec } from '../route.js';
import { originOf, reportObserved } from './admin.js';
import {
  changeMetaSchema,
  errorSchema,
  groupDetailSchema,
  groupParamsSchema,
  resetSchema,
  resetTargetSchema,
} from '../schemas.js';

const WRITE = ['WRITE'] as const;
const toRef = (p: { stream: string; group: string }) => ({
  streamPrefix: p.stream,
  consumerGroup: p.group,
});
const groupPath = '/coord/v1/admin/streams/:stream/groups/:group';

const errors = {
  400: {
    description: 'Invalid request, a shard the group does not have, a bad id or a future time',
    schema: errorSchema,
  },
  401: { description: 'No or invalid token', schema: errorSchema },
  403: { description: 'Missing role WRITE, or a group outside the token', schema: errorSchema },
  404: { description: 'Unknown group', schema: errorSchema },
  409: {
    description:
      'Frozen, failed closed, a migration or a reset under way, shards paused by another request, or (a reset) a shard whose stream key holds another type',
    schema: errorSchema,
  },
  503: { description: 'Store, audit or streams unavailable', schema: errorSchema },
};

const shardPlanSchema = z.object({
  shard: z.number().int(),
  stream: z.string(),
  from: z.string().nullable(),
  to: z.string(),
  redeliver: z.number().int(),
  skip: z.number().int(),
  exact: z.boolean(),
  pendingSkipped: z.number().int(),
});

export const positionsReplySchema = z.object({
  dryRun: z.boolean(),
  plan: z.array(shardPlanSchema),
  changes: z.number().int(),
  reset: resetSchema.nullable(),
});

/** Pausing and resuming consumption, and resetting positions (docs/operations.md#pausing-consumption). */
export function consumptionRoutes(settings: Settings): RouteSpec[] {
  const shards = z
    .array(z.number().int().min(0))
    .min(1)
    .max(settings.limits['max-shard-count'])
    .optional();
  return [
    route({
      method: 'post',
      path: `${groupPath}/consumption`,
      summary: 'Pause or resume consumption of some shards (all when `shards` is omitted)',
      tag: 'admin',
      roles: WRITE,
      operation: 'consumption',
      params: groupParamsSchema,
      body: changeMetaSchema.extend({
        action: z.enum(['PAUSE', 'RESUME', 'CANCEL_RESET']),
        shards,
      }),
      responses: {
        200: {
          description: 'Done; paused shards are revoked from their members',
          schema: groupDetailSchema,
        },
        ...errors,
      },
      async handler({ params, body, services, req, requestId, principal }) {
        const ref = toRef(params);
        await reportObserved(services, req, ref);
        const { group } = await services.coordinator.command(
          ref,
          body.action === 'CANCEL_RESET'
            ? { type: 'CANCEL_RESET' }
            : {
                type: body.action === 'PAUSE' ? 'PAUSE_CONSUMPTION' : 'RESUME_CONSUMPTION',
                shards: body.shards ?? null,
              },
          originOf(requestId, principal, body.requestedBy),
        );
        return { status: 200, body: group };
      },
    }),
    route({
      method: 'post',
      path: `${groupPath}/positions`,
      summary:
        'Plan (dryRun, the default) or run a reset of the consumer group positions: replay or skip',
      tag: 'admin',
      roles: WRITE,
      operation: 'resetPositions',
      params: groupParamsSchema,
      body: changeMetaSchema.extend({
        to: resetTargetSchema,
        shards,
        dryRun: z.boolean().default(true),
      }),
      responses: {
        200: {
          description: 'The plan (dryRun), or nothing to change',
          schema: positionsReplySchema,
        },
        202: {
          description: 'Reset started: its shards are paused, moved, then resumed',
          schema: positionsReplySchema,
        },
        ...errors,
      },
      async handler({ params, body, services, req, res, requestId, principal }) {
        const ref = toRef(params);
        await reportObserved(services, req, ref);
        const view = await services.coordinator.resetPositions(
          ref,
          {
            to: body.to,
            shards: body.shards ?? null,
            dryRun: body.dryRun,
            requestedBy: body.requestedBy,
            reason: body.reason,
            // Forwarded: answered before the forwarding replica gives up (docs/operations.md#replay-or-skip).
            planWithinMs: forwardedAnswerWithinMs(services, req, requestContext(res).forwarded),
          },
          originOf(requestId, principal, body.requestedBy),
        );
        return { status: view.reset === null ? 200 : 202, body: view };
      },
    }),
  ];
}
