import { z } from 'zod';
import { route } from '../route.js';
import {
  auditRecordSchema,
  consumerGroupSchema,
  errorSchema,
  groupDetailSchema,
  groupListSchema,
  groupParamsSchema,
  pagingQuerySchema,
  streamPrefixSchema,
} from '../schemas.js';
import { assignmentsView, groupDetail, groupSummary, membersView } from '../views.js';
import { statechartView } from '../statechart.js';
import { migrationView } from '../../machines/migration-view.js';

const READ = ['READ'] as const;
const groupPath = '/coord/v1/monitoring/streams/:stream/groups/:group';
const toRef = (p: { stream: string; group: string }) => ({
  streamPrefix: p.stream,
  consumerGroup: p.group,
});
const errors = {
  400: { description: 'Invalid name', schema: errorSchema },
  401: { description: 'No or invalid token', schema: errorSchema },
  403: { description: 'Missing role READ', schema: errorSchema },
  404: { description: 'Unknown group', schema: errorSchema },
};

export const monitoringRoutes = [
  route({
    method: 'get',
    path: '/coord/v1/monitoring/health',
    summary: 'Health of the coordinator and its store',
    tag: 'monitoring',
    roles: null,
    responses: {
      200: {
        description: 'UP, or DEGRADED when the store is down',
        schema: z.object({
          status: z.enum(['UP', 'DEGRADED']),
          store: z.enum(['UP', 'DOWN', 'NOT_CONFIGURED']),
        }),
      },
    },
    async handler({ services }) {
      let store = services.store.health();
      if (store !== 'NOT_CONFIGURED') {
        try {
          await services.store.ping();
          store = 'UP';
        } catch {
          store = 'DOWN';
        }
      }
      return {
        status: 200,
        body: {
          status: store === 'DOWN' ? 'DEGRADED' : 'UP',
          store,
          storeType: services.store.kind,
          replicaId: services.replicaId,
        },
      };
    },
  }),
  route({
    method: 'get',
    path: '/coord/v1/monitoring/info',
    summary: 'Version, replica id and supported coordination versions',
    tag: 'monitoring',
    roles: READ,
    responses: { 200: { description: 'Info' }, 401: errors[401], 403: errors[403] },
    async handler({ services }) {
      const range = services.settings['coordination-version'];
      return {
        status: 200,
        body: {
          name: 'stream-coordinator',
          version: services.version,
          replicaId: services.replicaId,
          storeType: services.store.kind,
          keyPrefix: services.settings.store['key-prefix'],
          coordinationVersion: { min: range.min, max: range.max },
        },
      };
    },
  }),
  route({
    method: 'get',
    path: '/coord/v1/monitoring/groups',
    summary: 'List groups (paged with limit and cursor)',
    tag: 'monitoring',
    roles: READ,
    query: pagingQuerySchema,
    responses: {
      200: { description: 'A page of groups', schema: groupListSchema },
      401: errors[401],
      403: errors[403],
    },
    async handler({ query, services }) {
      const page = await services.coordinator.listGroups({
        cursor: query.cursor,
        limit: query.limit,
      });
      return {
        status: 200,
        body: { groups: page.groups.map(groupSummary), nextCursor: page.nextCursor },
      };
    },
  }),
  route({
    method: 'get',
    path: groupPath,
    summary: 'One group, with rollback signals and failure reason',
    tag: 'monitoring',
    roles: READ,
    params: groupParamsSchema,
    responses: { 200: { description: 'The group', schema: groupDetailSchema }, ...errors },
    async handler({ params, services }) {
      return { status: 200, body: groupDetail(await services.coordinator.getGroup(toRef(params))) };
    },
  }),
  route({
    method: 'get',
    path: `${groupPath}/members`,
    summary: 'Members of a group and their liveness',
    tag: 'monitoring',
    roles: READ,
    params: groupParamsSchema,
    responses: { 200: { description: 'Members' }, ...errors },
    async handler({ params, services }) {
      return { status: 200, body: membersView(await services.coordinator.getGroup(toRef(params))) };
    },
  }),
  route({
    method: 'get',
    path: `${groupPath}/assignments`,
    summary: 'Shard states, current and target owners, and what each member reports',
    tag: 'monitoring',
    roles: READ,
    params: groupParamsSchema,
    responses: { 200: { description: 'Assignments' }, ...errors },
    async handler({ params, services }) {
      return {
        status: 200,
        body: assignmentsView(await services.coordinator.getGroup(toRef(params))),
      };
    },
  }),
  route({
    method: 'get',
    path: `${groupPath}/statechart`,
    summary: 'The group statechart: definition, current state and a mermaid diagram',
    tag: 'monitoring',
    roles: READ,
    params: groupParamsSchema,
    responses: { 200: { description: 'Statechart' }, ...errors },
    async handler({ params, services }) {
      return {
        status: 200,
        body: statechartView(await services.coordinator.getGroup(toRef(params))),
      };
    },
  }),
  route({
    method: 'get',
    path: `${groupPath}/events`,
    summary: 'Server-sent events: every state transition and effect of the group, as it happens',
    tag: 'monitoring',
    roles: READ,
    params: groupParamsSchema,
    responses: { 200: { description: 'text/event-stream of `transition` events' }, ...errors },
    async handler({ params, res, services }) {
      const ref = toRef(params);
      // Listen for the end of the stream before anything awaits, so a client gone early is seen.
      const closed = new Promise<void>((resolve) => res.once('close', resolve));
      const snapshot = await services.coordinator.getGroup(ref);
      res.writeHead(200, {
        'Content-Type': 'text/event-stream',
        'Cache-Control': 'no-cache',
        Connection: 'keep-alive',
      });
      const write = (event: string, data: unknown) =>
        res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
      write('snapshot', groupDetail(snapshot));
      const unsubscribe = await services.coordinator.subscribe(ref, (t) => write('transition', t));
      const keepAlive = setInterval(() => res.write(': keep-alive\n\n'), 15_000);
      keepAlive.unref();
      await closed;
      clearInterval(keepAlive);
      unsubscribe();
      return { status: 200 };
    },
  }),
  route({
    method: 'get',
    path: `${groupPath}/migrations`,
    summary: 'Migrations of a group: the active one with progress, and history (newest first)',
    tag: 'monitoring',
    roles: READ,
    params: groupParamsSchema,
    responses: { 200: { description: 'Migrations' }, ...errors },
    async handler({ params, services }) {
      const snapshot = await services.coordinator.getGroup(toRef(params));
      const { group } = snapshot.context;
      const now = services.clock.now();
      return {
        status: 200,
        body: {
          active: group.activeMigration
            ? migrationView(group.activeMigration, snapshot.context, now)
            : null,
          migrations: group.migrations.map((m) => migrationView(m, null, now)),
        },
      };
    },
  }),
  route({
    method: 'get',
    path: '/coord/v1/monitoring/audit',
    summary: 'Audit records, newest first',
    tag: 'monitoring',
    roles: READ,
    query: z.object({
      streamPrefix: streamPrefixSchema.optional(),
      consumerGroup: consumerGroupSchema.optional(),
      limit: z.coerce.number().int().min(1).max(1000).default(100),
    }),
    responses: {
      200: {
        description: 'Audit records',
        schema: z.object({ records: z.array(auditRecordSchema) }),
      },
      401: errors[401],
      403: errors[403],
    },
    async handler({ query, services }) {
      const records = await services.store.queryAudit({
        limit: query.limit,
        ...(query.streamPrefix ? { streamPrefix: query.streamPrefix } : {}),
        ...(query.consumerGroup ? { consumerGroup: query.consumerGroup } : {}),
      });
      return { status: 200, body: { records } };
    },
  }),
];
