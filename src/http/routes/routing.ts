import { z } from 'zod';
import { queryInteger } from '../query-params.js';
import { route } from '../route.js';
import { errorSchema, groupParamsSchema, routingSchema } from '../schemas.js';

/** Longest long poll a producer may ask for. */
export const MAX_WAIT_MS = 60_000;

export const routingRoutes = [
  route({
    method: 'get',
    path: '/coord/v1/routing/streams/:stream/groups/:group',
    summary:
      'Producer routing metadata. ETag (If-None-Match answers 304); long poll with afterVersion and waitMs',
    tag: 'routing',
    roles: ['PRODUCER', 'READ'],
    params: groupParamsSchema,
    query: z.object({
      afterVersion: queryInteger(0).optional(),
      waitMs: queryInteger(0, MAX_WAIT_MS).default(0),
    }),
    responses: {
      200: { description: 'Routing metadata', schema: routingSchema },
      304: { description: 'Not modified' },
      404: { description: 'Unknown group', schema: errorSchema },
      503: { description: 'Group failed closed', schema: errorSchema },
    },
    async handler({ params, query, req, res, services }) {
      const ref = { streamPrefix: params.stream, consumerGroup: params.group };
      const observed = req.get('x-observed-metadata-version');
      if (observed !== undefined && /^\d{1,15}$/.test(observed)) {
        // A producer that saw a higher version than we hold is a rollback signal
        // (docs/operations.md#what-the-coordinator-notices), unless it names the lifecycle the
        // version belongs to and that is not this one: the group was deleted and created again
        // (or recreated), and versions of two lifecycles are not comparable.
        const lifecycle = req.get('x-observed-lifecycle-id');
        const lifecycleId =
          lifecycle !== undefined && lifecycle !== '' && lifecycle.length <= 128
            ? lifecycle
            : undefined;
        await services.coordinator.observeVersion(ref, Number(observed), 'routing', lifecycleId);
      }
      // A client that goes away ends its wait: nothing is held for nobody.
      const gone = new AbortController();
      res.once('close', () => gone.abort());
      const body = await services.coordinator.getRouting(
        ref,
        query.afterVersion === undefined
          ? undefined
          : { afterVersion: query.afterVersion, waitMs: query.waitMs, signal: gone.signal },
      );
      const etag = `"${body.lifecycleId}:${body.metadataVersion}"`;
      const headers = { ETag: etag, 'Cache-Control': 'no-cache' };
      const match = req.get('if-none-match');
      if (match && match.split(',').some((tag) => tag.trim() === etag || tag.trim() === '*')) {
        return { status: 304, headers };
      }
      return { status: 200, body, headers };
    },
  }),
];
