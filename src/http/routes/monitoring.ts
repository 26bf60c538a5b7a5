import { z } from 'zod';
import type { GroupSummaryView } from '../../actors/views.js';
import { permitsGroup } from '../auth/group-scope.js';
import type { Principal } from '../auth/roles.js';
import type { Services } from '../services.js';
import { queryInteger } from '../query-params.js';
import { route } from '../route.js';
import {
  auditRecordSchema,
  consumerGroupQuerySchema,
  errorSchema,
  groupDetailSchema,
  groupListSchema,
  groupParamsSchema,
  pagingQuerySchema,
  streamPrefixQuerySchema,
  transitionsSchema,
} from '../schemas.js';

const READ = ['READ'] as const;
const groupPath = '/coord/v1/monitoring/streams/:stream/groups/:group';
const toRef = (p: { stream: string; group: string }) => ({
  streamPrefix: p.stream,
  consumerGroup: p.group,
});
/** Registry pages a scoped listing reads at most per request before answering a short page. */
const SCOPED_LISTING_PAGES = 10;

/**
 * A page of groups. A scoped token's page holds only the groups its `groups` reach: it reads
 * registry pages until `limit` of those are found, the registry ends, or it has read
 * SCOPED_LISTING_PAGES pages; so a page may be short (even empty) while `nextCursor` is set.
 * Each read asks for exactly the groups still missing, so `nextCursor` resumes right after
 * the last group examined.
 */
async function listGroups(
  services: Services,
  principal: Principal | null,
  query: { cursor?: string | undefined; limit: number },
): Promise<{ groups: GroupSummaryView[]; nextCursor: string | null }> {
  if (principal?.groups === undefined) return services.coordinator.listGroups(query);
  const groups: GroupSummaryView[] = [];
  let cursor = query.cursor;
  for (let read = 0; read < SCOPED_LISTING_PAGES; read++) {
    const page = await services.coordinator.listGroups({
      cursor,
      limit: query.limit - groups.length,
    });
    for (const group of page.groups) {
      if (permitsGroup(principal, group.streamPrefix, group.consumerGroup)) groups.push(group);
    }
    if (page.nextCursor === null || groups.length >= query.limit) {
      return { groups, nextCursor: page.nextCursor };
    }
    cursor = page.nextCursor;
  }
  return { groups, nextCursor: cursor ?? null };
}

/** Probes are never answered from a cache. */
const NO_STORE: Readonly<Record<string, string>> = { 'Cache-Control': 'no-store' };

/** How long the readiness probe waits for the store's answer (probes time out at 1 s by default). */
const READY_PING_MS = 800;

const readinessSchema = z.object({
  status: z.enum(['READY', 'NOT_READY']),
  store: z.enum(['UP', 'DOWN', 'NOT_CONFIGURED']),
  /** Whether this replica is in the replica registry; null with one replica (no registry). */
  registered: z.boolean().nullable(),
  replicaId: z.string(),
});

/**
 * UP when the store answers a ping within `withinMs`, DOWN when it is known to be down (no
 * round trip then) or does not answer in time; NOT_CONFIGURED for the memory store.
 */
async function storeStatus(
  store: Services['store'],
  withinMs: number,
): Promise<'UP' | 'DOWN' | 'NOT_CONFIGURED'> {
  if (store.health() === 'NOT_CONFIGURED') return 'NOT_CONFIGURED';
  if (store.outage() !== null) return 'DOWN';
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'DOWN'>((resolve) => {
    timer = setTimeout(() => resolve('DOWN'), withinMs);
  });
  try {
    return await Promise.race([store.ping().then(() => 'UP' as const), late]);
  } catch {
    return 'DOWN';
  } finally {
    clearTimeout(timer);
  }
}

/** Bytes of events a client may leave unread before its event stream is cut off. */
const MAX_EVENT_BACKLOG_BYTES = 1 << 20;

/** The head of a group's event stream (`…/events`), also what a HEAD of it gets. */
const EVENT_STREAM_HEADERS = { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' };

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
    path: '/coord/v1/monitoring/health/live',
    summary: 'Liveness probe: 200 while the process serves HTTP (the store is not asked)',
    tag: 'monitoring',
    roles: null,
    responses: {
      200: {
        description: 'The process serves',
        schema: z.object({ status: z.literal('UP'), replicaId: z.string() }),
      },
    },
    async handler({ services }) {
      return {
        status: 200,
        body: { status: 'UP', replicaId: services.replicaId },
        headers: NO_STORE,
      };
    },
  }),
  route({
    method: 'get',
    path: '/coord/v1/monitoring/health/ready',
    summary:
      'Readiness probe: 200 when the store answers and, with several replicas, this replica is in the registry; 503 otherwise',
    tag: 'monitoring',
    roles: null,
    responses: {
      200: { description: 'Ready to serve', schema: readinessSchema },
      503: {
        description: 'The store is down, or the replica has not joined',
        schema: readinessSchema,
      },
    },
    async handler({ services }) {
      const store = await storeStatus(services.store, READY_PING_MS);
      const registered = services.replicas ? services.replicas.joined() : null;
      const ready = store !== 'DOWN' && registered !== false;
      return {
        status: ready ? 200 : 503,
        body: {
          status: ready ? 'READY' : 'NOT_READY',
          store,
          registered,
          replicaId: services.replicaId,
        },
        headers: ready ? NO_STORE : { ...NO_STORE, 'Retry-After': '1' },
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
    path: '/coord/v1/monitoring/replicas',
    summary: 'Live replicas: advertised URL, groups owned, last registry heartbeat, lease ages',
    tag: 'monitoring',
    roles: READ,
    responses: { 200: { description: 'Replicas' }, 401: errors[401], 403: errors[403] },
    async handler({ services, principal }) {
      const all = services.replicas
        ? await services.replicas.list()
        : [
            {
              // One replica: no registry, no leases.
              replicaId: services.replicaId,
              advertisedUrl: services.advertisedUrl ?? null,
              groupsOwned: services.coordinator.groupsOwned(),
              lastHeartbeatAt: new Date(services.clock.now()).toISOString(),
            },
          ];
      // A scoped token sees the leases of its own groups only (group names are not for all).
      const replicas = all.map((replica) =>
        'leases' in replica && replica.leases && principal
          ? {
              ...replica,
              leases: replica.leases.filter((l) =>
                permitsGroup(principal, l.streamPrefix, l.consumerGroup),
              ),
            }
          : replica,
      );
      return { status: 200, body: { replicas, self: services.replicaId } };
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
    async handler({ query, principal, services }) {
      const page = await listGroups(services, principal, query);
      return {
        status: 200,
        body: { groups: page.groups, nextCursor: page.nextCursor },
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
      return { status: 200, body: await services.coordinator.getGroup(toRef(params)) };
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
      return { status: 200, body: await services.coordinator.getMembers(toRef(params)) };
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
        body: await services.coordinator.getAssignments(toRef(params)),
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
        body: await services.coordinator.getStatechart(toRef(params)),
      };
    },
  }),
  route({
    method: 'get',
    path: `${groupPath}/transitions`,
    summary:
      "The group's recent transitions, newest first: time, command, state before and after, cause",
    tag: 'monitoring',
    roles: READ,
    params: groupParamsSchema,
    responses: {
      200: { description: 'Kept by the owner, the last 50', schema: transitionsSchema },
      ...errors,
    },
    async handler({ params, services }) {
      return {
        status: 200,
        body: await services.coordinator.getTransitions(toRef(params)),
        headers: { 'Cache-Control': 'no-store' },
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
    async handler({ params, req, res, services }) {
      const ref = toRef(params);
      if (req.method === 'HEAD') {
        // The stream's headers, at once: a HEAD has no body to stream, so it must not wait for
        // the client to go away.
        await services.coordinator.getGroup(ref);
        return { status: 200, headers: EVENT_STREAM_HEADERS };
      }
      // Listen for the end of the stream before anything awaits, so a client gone early is seen.
      const closed = new Promise<void>((resolve) => res.once('close', resolve));
      const group = await services.coordinator.getGroup(ref);
      res.writeHead(200, { ...EVENT_STREAM_HEADERS, Connection: 'keep-alive' });
      // A client that does not read (a stalled tab, a stuck proxy) would make every transition
      // wait in memory here for as long as it stays connected: past the bound it is cut off,
      // and connects again when it reads again (docs/operations.md#http-timeouts).
      const write = (event: string, data: unknown) => {
        if (res.destroyed) return;
        res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
        if (res.writableLength <= MAX_EVENT_BACKLOG_BYTES) return;
        services.metrics.eventStreamsCut.inc();
        services.rateLimitedLog.info(
          'event-stream-cut',
          'event stream cut: its client does not read',
          {
            streamPrefix: ref.streamPrefix,
            consumerGroup: ref.consumerGroup,
            backlogBytes: res.writableLength,
          },
        );
        res.destroy();
      };
      write('snapshot', group);
      // The group leaving this replica ends the stream: its transitions happen elsewhere now,
      // or nowhere. A client that connects again follows it to its new owner (or hears 404).
      const unsubscribe = await services.coordinator.subscribe(
        ref,
        (t) => write('transition', t),
        () => {
          if (res.writableEnded || res.destroyed) return;
          write('end', {
            reason: 'the group is no longer served by this replica: deleted, or moved to another',
          });
          res.end();
        },
      );
      const keepAlive = setInterval(() => res.destroyed || res.write(': keep-alive\n\n'), 15_000);
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
      return { status: 200, body: await services.coordinator.getMigrations(toRef(params)) };
    },
  }),
  route({
    method: 'get',
    path: '/coord/v1/monitoring/audit',
    summary: 'Audit records, newest first',
    tag: 'monitoring',
    roles: READ,
    query: z.object({
      streamPrefix: streamPrefixQuerySchema.optional(),
      consumerGroup: consumerGroupQuerySchema.optional(),
      limit: queryInteger(1, 1000).default(100),
    }),
    responses: {
      200: {
        description: 'Audit records',
        schema: z.object({ records: z.array(auditRecordSchema) }),
      },
      401: errors[401],
      403: errors[403],
    },
    async handler({ query, principal, services }) {
      const scoped = principal?.groups === undefined ? null : principal;
      const records = await services.store.queryAudit({
        limit: query.limit,
        ...(query.streamPrefix ? { streamPrefix: query.streamPrefix } : {}),
        ...(query.consumerGroup ? { consumerGroup: query.consumerGroup } : {}),
        ...(scoped ? { permits: (s: string, g: string) => permitsGroup(scoped, s, g) } : {}),
      });
      return { status: 200, body: { records } };
    },
  }),
];
