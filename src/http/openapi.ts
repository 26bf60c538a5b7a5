import { z } from 'zod';
import type { RouteSpec } from './route.js';

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): unknown {
  try {
    const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, {
      io,
      unrepresentable: 'any',
    }) as Record<string, unknown>;
    return rest;
  } catch {
    return {};
  }
}

/** `/a/:b/c` → `/a/{b}/c`. */
function openApiPath(path: string): string {
  return path.replace(/:([A-Za-z]+)/g, '{$1}');
}

/**
 * The OpenAPI 3.1 document, generated from the same route list and zod schemas that
 * validate requests.
 */
export function buildOpenApi(routes: readonly RouteSpec[], version: string): unknown {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const spec of routes) {
    const params = spec.params
      ? (jsonSchema(spec.params, 'input') as { properties?: Record<string, unknown> })
      : null;
    const query = spec.query
      ? (jsonSchema(spec.query, 'input') as {
          properties?: Record<string, unknown>;
          required?: string[];
        })
      : null;
    const parameters = [
      ...Object.entries(params?.properties ?? {}).map(([name, schema]) => ({
        name,
        in: 'path',
        required: true,
        schema,
      })),
      ...Object.entries(query?.properties ?? {}).map(([name, schema]) => ({
        name,
        in: 'query',
        required: query?.required?.includes(name) ?? false,
        schema,
      })),
    ];
    const operation: Record<string, unknown> = {
      summary: spec.summary,
      tags: [spec.tag],
      ...(spec.operation ? { operationId: spec.operation } : {}),
      ...(spec.roles ? { security: [{ bearer: [] }], 'x-roles': spec.roles } : { security: [] }),
      ...(parameters.length ? { parameters } : {}),
      ...(spec.body
        ? {
            requestBody: {
              required: true,
              content: { 'application/json': { schema: jsonSchema(spec.body, 'input') } },
            },
          }
        : {}),
      responses: Object.fromEntries(
        Object.entries(spec.responses).map(([status, r]) => [
          status,
          {
            description: r.description,
            ...(r.schema
              ? { content: { 'application/json': { schema: jsonSchema(r.schema, 'output') } } }
              : {}),
          },
        ]),
      ),
    };
    const path = openApiPath(spec.path);
    paths[path] = { ...(paths[path] ?? {}), [spec.method]: operation };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'stream-coordinator', version },
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
    },
    paths,
  };
}
