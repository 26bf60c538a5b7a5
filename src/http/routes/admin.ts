import { z } from 'zod';
import type { ChangeRequest, CommandOrigin, CommandOutcome } from '../../actors/types.js';
import type { Settings } from '../../config/settings.js';
import { assertPrefixPermitted } from '../auth/prefix-scope.js';
import { queryEnum } from '../query-params.js';
import { route, type HandlerInput, type HandlerResult, type RouteSpec } from '../route.js';
import type { Services } from '../services.js';
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
/**
 * What the caller knows of the group, from `X-Observed-Lifecycle-Id` and
 * `X-Observed-Metadata-Version`: reported before a mutation, so that a group whose metadata is
 * missing is failed closed rather than read as unknown (docs/operations.md#lost-metadata).
 */
export async function reportObserved(
  services: Services,
  req: { get(name: string): string | undefined },
  ref: { streamPrefix: string; consumerGroup: string },
): Promise<void> {
  const lifecycleId = req.get('x-observed-lifecycle-id');
  const version = Number(req.get('x-observed-metadata-version'));
  const metadataVersion = Number.isSafeInteger(version) && version > 0 ? version : undefined;
  if (!lifecycleId && metadataVersion === undefined) return;
  await services.coordinator.reportObserved(ref, {
    ...(lifecycleId ? { lifecycleId } : {}),
    ...(metadataVersion === undefined ? {} : { metadataVersion }),
  });
}

/** Who asked (kept with the transitions the command causes, shown in the group's timeline). */
export function originOf(
  requestId: string,
  principal: { readonly name: string } | null,
  requestedBy: string,
): CommandOrigin {
  return { requestId, principal: principal?.name ?? null, requestedBy };
}

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
    async handler({ params, body, services, req, requestId, principal }) {
      await reportObserved(services, req, toRef(params));
      const origin = originOf(requestId, principal, body.requestedBy);
      const { group } = await services.coordinator.command(toRef(params), { type }, origin);
      return { status: 200, body: group };
    },
  });
}

/** The reply of a scale or rollback: the migration as monitoring shows it, and the group. */
function migrationReply(outcome: CommandOutcome) {
  return { migration: outcome.migration, group: outcome.group };
}

/** What a scale or a rollback asks for besides the change fields, which come from the body. */
type MigrationCommand =
  | { readonly type: 'SCALE'; readonly shardCount: number }
  | { readonly type: 'ROLLBACK'; readonly migrationId: string };

/**
 * The handler of the scale and rollback routes, which differ only in their command: starts the
 * migration and answers 202 with it ({@link migrationReply}).
 */
async function startMigration(
  input: HandlerInput<{ stream: string; group: string }, ChangeRequest, unknown>,
  command: MigrationCommand,
): Promise<HandlerResult> {
  const { params, body, services, req, requestId, principal } = input;
  await assertPrefixPermitted(services.store, principal, toRef(params));
  await reportObserved(services, req, toRef(params));
  const outcome = await services.coordinator.command(
    toRef(params),
    { ...command, requestedBy: body.requestedBy, reason: body.reason },
    originOf(requestId, principal, body.requestedBy),
  );
  return { status: 202, body: migrationReply(outcome) };
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
      async handler({ body, services, requestId, principal }) {
        const group = await services.coordinator.createGroup(
          { streamPrefix: body.streamPrefix, consumerGroup: body.consumerGroup },
          { shardCount: body.shardCount, startAt: body.startAt },
          originOf(requestId, principal, body.requestedBy),
          body.requestedBy,
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
      // startAt applies when the PUT creates the group; an existing group keeps its own.
      body: changeMetaSchema.extend({ shardCount, startAt: startAtSchema.optional() }),
      responses: {
        200: { description: 'Unchanged', schema: groupDetailSchema },
        201: { description: 'Created', schema: groupDetailSchema },
        202: { description: 'Migration started' },
        ...errors,
      },
      async handler({ params, body, services, req, requestId, principal }) {
        await assertPrefixPermitted(services.store, principal, toRef(params), body.shardCount);
        await reportObserved(services, req, toRef(params));
        const result = await services.coordinator.putGroup(
          toRef(params),
          body.shardCount,
          { requestedBy: body.requestedBy, reason: body.reason, startAt: body.startAt },
          originOf(requestId, principal, body.requestedBy),
        );
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
      query: z.object({ force: queryEnum(['true', 'false']).default('false') }),
      responses: { 204: { description: 'Deleted' }, ...errors },
      async handler({ params, query, services, req }) {
        await reportObserved(services, req, toRef(params));
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
      handler: (input) =>
        startMigration(input, { type: 'SCALE', shardCount: input.body.shardCount }),
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
      handler: (input) =>
        startMigration(input, { type: 'ROLLBACK', migrationId: input.params.migrationId }),
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
      async handler({ params, body, services, req, requestId, principal }) {
        await reportObserved(services, req, toRef(params));
        const group = await services.coordinator.recover(
          toRef(params),
          body,
          originOf(requestId, principal, body.requestedBy),
        );
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
