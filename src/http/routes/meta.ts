import { route, type RouteSpec } from '../route.js';
import { buildOpenApi } from '../openapi.js';

/** `/metrics` and the OpenAPI document (which describes every route, itself included). */
export function metaRoutes(allRoutes: () => readonly RouteSpec[], version: string): RouteSpec[] {
  let document: unknown = null;
  return [
    route({
      method: 'get',
      path: '/metrics',
      summary: 'Prometheus metrics',
      tag: 'meta',
      roles: null,
      responses: { 200: { description: 'Prometheus text format' } },
      async handler({ res, services }) {
        res.setHeader('Content-Type', services.metrics.registry.contentType);
        res.status(200).send(await services.metrics.registry.metrics());
        return { status: 200 };
      },
    }),
    route({
      method: 'get',
      path: '/coord/v1/openapi.json',
      summary: 'This API as OpenAPI 3.1',
      tag: 'meta',
      roles: null,
      responses: { 200: { description: 'OpenAPI document' } },
      async handler() {
        document ??= buildOpenApi(allRoutes(), version);
        return { status: 200, body: document };
      },
    }),
  ];
}
