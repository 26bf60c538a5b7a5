import { z } from 'zod';
import type { CommandOutcome } from '../../actors/types.js';
import type { Settings } from '../../config/settings.js';
import { route, type RouteSpec } from '../route.js';
import {
  changeMetaSchema,
  consumerGroupSchema,
  errorSchema,
  groupDetailSchema,
  groupParamsSchema,
  shardCountSchema,
  startAtSchema,
  streamPrefixSchema,
} from '../schemas.js';

const WRITE = ['WRITE'] as const;
const groupPath = '/coord/v1/admin/streams/:stream/groups/:group';
const toRef = (p: { stream: string; group: string }) => ({
  streamPrefix: p.stream,
  consumerGroup: p.group,
});
const errors = {
  400: { description: 'Invalid request', schema: errorSchema },
  401: { description: 'No or invalid token', schema: errorSchema },
  403: { description: 'Missing role WRITE', schema: errorSchema },
  404: { description: 'Unknown group', schema: errorSchema },
  409: { description: 'Conflicts with the group state', schema: errorSchema },
  503: { description: 'Store or audit unavailable, or group failed closed', schema: errorSchema },
};

function commandRoute(
  suffix: string,
  operation: string,
  type: 'FREEZE' | 'UNFREEZE' | 'PAUSE_PRODUCERS' | 'RESUME_PRODUCERS',
  summary: string,
): RouteSpec {
  return route({
    method: 'post',
    path: `${groupPath}${suffix}`,
    summary,
    tag: 'admin',
    roles: WRITE,
    operation,
    params: groupParamsSchema,
    body: changeMetaSchema,
    responses: { 200: { description: 'Done', schema: groupDetailSchema }, ...errors },
    async handler({ params, services }) {
      const { group } = await services.coordinator.command(toRef(params), { type });
      return { status: 200, body: group };
    },
  });
}

/** The reply of a scale or rollback: the migration as monitoring shows it, and the group. */
function migrationReply(outcome: CommandOutcome) {
  return { migration: outcome.migration, group: outcome.group };
}

/** Admin routes; the shard count bound comes from settings. */
export function adminRoutes(settings: Settings): RouteSpec[] {
  const shardCount = shardCountSchema(settings.limits['max-shard-count']);
  return [
    route({
      method: 'post',
      path: '/coord/v1/admin/groups',
      summary: 'Create a group',
      tag: 'admin',
      roles: WRITE,
      operation: 'createGroup',
      body: changeMetaSchema.extend({
        streamPrefix: streamPrefixSchema,
        consumerGroup: consumerGroupSchema,
        // Omitted: the stream prefix's count (docs/protocol.md#one-shard-layout-per-stream-prefix).
        shardCount: shardCount.optional(),
        startAt: startAtSchema.default('latest'),
      }),
      responses: { 201: { description: 'Created', schema: groupDetailSchema }, ...errors },
      async handler({ body, services }) {
        const group = await services.coordinator.createGroup(
          { streamPrefix: body.streamPrefix, consumerGroup: body.consumerGroup },
          { shardCount: body.shardCount, startAt: body.startAt },
        );
        return { status: 201, body: group };
      },
    }),
    route({
      method: 'put',
      path: groupPath,
      summary: 'Desired state: create the group, or leave it unchanged (200)',
      tag: 'admin',
      roles: WRITE,
      operation: 'putGroup',
      params: groupParamsSchema,
      body: changeMetaSchema.extend({ shardCount }),
      responses: {
        200: { description: 'Unchanged', schema: groupDetailSchema },
        201: { description: 'Created', schema: groupDetailSchema },
        202: { description: 'Migration started' },
        ...errors,
      },
      async handler({ params, body, services }) {
        const result = await services.coordinator.putGroup(toRef(params), body.shardCount, {
          requestedBy: body.requestedBy,
          reason: body.reason,
        });
        const status = { CREATED: 201, UNCHANGED: 200, MIGRATION_STARTED: 202 }[result.outcome];
        return {
          status,
          body: result.migration ? migrationReply(result) : result.group,
        };
      },
    }),
    route({
      method: 'delete',
      path: groupPath,
      summary: 'Delete a group (409 while it has live members unless force=true)',
      tag: 'admin',
      roles: WRITE,
      operation: 'deleteGroup',
      params: groupParamsSchema,
      body: changeMetaSchema,
      query: z.object({ force: z.enum(['true', 'false']).default('false') }),
      responses: { 204: { description: 'Deleted' }, ...errors },
      async handler({ params, query, services }) {
        await services.coordinator.deleteGroup(toRef(params), { force: query.force === 'true' });
        return { status: 204 };
      },
    }),
    route({
      method: 'post',
      path: `${groupPath}/scale`,
      summary: 'Start a migration to a new shard count (202)',
      tag: 'admin',
      roles: WRITE,
      operation: 'scale',
      params: groupParamsSchema,
      body: changeMetaSchema.extend({ shardCount }),
      responses: { 202: { description: 'Migration started' }, ...errors },
      async handler({ params, body, services }) {
        const outcome = await services.coordinator.command(toRef(params), {
          type: 'SCALE',
          shardCount: body.shardCount,
          requestedBy: body.requestedBy,
          reason: body.reason,
        });
        return { status: 202, body: migrationReply(outcome) };
      },
    }),
    route({
      method: 'post',
      path: `${groupPath}/migrations/:migrationId/rollback`,
      summary: 'Roll back a migration while allowed (`current` names the active one)',
      tag: 'admin',
      roles: WRITE,
      operation: 'rollback',
      params: groupParamsSchema.extend({ migrationId: z.string().min(1).max(64) }),
      body: changeMetaSchema,
      responses: { 202: { description: 'Rollback migration started' }, ...errors },
      async handler({ params, body, services }) {
        const outcome = await services.coordinator.command(toRef(params), {
          type: 'ROLLBACK',
          migrationId: params.migrationId,
          requestedBy: body.requestedBy,
          reason: body.reason,
        });
        return { status: 202, body: migrationReply(outcome) };
      },
    }),
    route({
      method: 'post',
      path: `${groupPath}/recovery`,
      summary:
        'Recover a failed-closed group: RESUME restored metadata or RECREATE a new lifecycle',
      tag: 'admin',
      roles: WRITE,
      operation: 'recovery',
      params: groupParamsSchema,
      body: z.discriminatedUnion('action', [
        changeMetaSchema.extend({ action: z.literal('RESUME') }),
        changeMetaSchema.extend({ action: z.literal('RECREATE'), shardCount }),
      ]),
      responses: { 200: { description: 'Recovered', schema: groupDetailSchema }, ...errors },
      async handler({ params, body, services }) {
        const group = await services.coordinator.recover(toRef(params), body);
        return { status: 200, body: group };
      },
    }),
    commandRoute('/freeze', 'freeze', 'FREEZE', 'Freeze: refuse admin mutations until unfrozen'),
    commandRoute('/unfreeze', 'unfreeze', 'UNFREEZE', 'Unfreeze a frozen group'),
    commandRoute(
      '/producers/pause',
      'pauseProducers',
      'PAUSE_PRODUCERS',
      'Tell producers to pause (routing producersPaused)',
    ),
    commandRoute(
      '/producers/resume',
      'resumeProducers',
      'RESUME_PRODUCERS',
      'Tell producers to resume',
    ),
  ];
}
