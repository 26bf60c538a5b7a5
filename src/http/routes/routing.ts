import { CoordinatorError } from '../../errors.js';
import { route } from '../route.js';
import { errorSchema, groupParamsSchema, routingSchema } from '../schemas.js';
import { routingView } from '../views.js';

export const routingRoutes = [
  route({
    method: 'get',
    path: '/coord/v1/routing/streams/:stream/groups/:group',
    summary: 'Producer routing metadata (ETag; If-None-Match answers 304)',
    tag: 'routing',
    roles: ['PRODUCER', 'READ'],
    params: groupParamsSchema,
    responses: {
      200: { description: 'Routing metadata', schema: routingSchema },
      304: { description: 'Not modified' },
      404: { description: 'Unknown group', schema: errorSchema },
      503: { description: 'Group failed closed', schema: errorSchema },
    },
    async handler({ params, req, services }) {
      const snapshot = await services.coordinator.getGroup({
        streamPrefix: params.stream,
        consumerGroup: params.group,
      });
      if (snapshot.context.group.status === 'FAILED_CLOSED') {
        throw new CoordinatorError(
          'GROUP_FAILED_CLOSED',
          'the group failed closed; routing is withheld until recovery',
          {
            details: { failureReason: snapshot.context.group.failureReason },
          },
        );
      }
      const body = routingView(snapshot);
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
