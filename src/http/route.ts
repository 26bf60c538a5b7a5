import type { Request, Response } from 'express';
import type { z } from 'zod';
import { CoordinatorError } from '../errors.js';
import type { Principal, Role } from './auth/roles.js';
import type { Services } from './services.js';

/** What a handler returns; `send` turns it into the response. */
export interface HandlerResult {
  readonly status: number;
  readonly body?: unknown;
  readonly headers?: Readonly<Record<string, string>>;
}

export interface HandlerInput<P, B, Q> {
  readonly params: P;
  readonly body: B;
  readonly query: Q;
  readonly principal: Principal | null;
  readonly requestId: string;
  readonly req: Request;
  readonly res: Response;
  readonly services: Services;
}

/**
 * One route: method, path, role, zod schemas and handler. The same list mounts the express
 * routes and generates the OpenAPI document, so validation and docs cannot drift apart.
 */
export interface RouteSpec<P = unknown, B = unknown, Q = unknown> {
  readonly method: 'get' | 'post' | 'put' | 'delete';
  /** Express path, e.g. `/coord/v1/admin/streams/:stream/groups/:group`. */
  readonly path: string;
  readonly summary: string;
  readonly tag: string;
  /** Any one of these roles grants access; null: no token needed. */
  readonly roles: readonly Role[] | null;
  readonly params?: z.ZodType<P>;
  readonly body?: z.ZodType<B>;
  readonly query?: z.ZodType<Q>;
  readonly responses: Readonly<Record<number, { description: string; schema?: z.ZodType }>>;
  /** Audit operation name (admin routes). */
  readonly operation?: string;
  readonly handler: (input: HandlerInput<P, B, Q>) => Promise<HandlerResult>;
}

/** Keeps the generic types of a route while storing it in a list of routes. */
export function route<P, B, Q>(spec: RouteSpec<P, B, Q>): RouteSpec {
  return spec as unknown as RouteSpec;
}

/** Parses with a zod schema; a failure is a 400 naming each bad field. */
export function validate<T>(schema: z.ZodType<T>, value: unknown, where: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map((issue) => ({
    field: [where, ...issue.path.map(String)].join('.'),
    message: issue.message,
  }));
  throw new CoordinatorError(
    'VALIDATION_FAILED',
    issues.map((i) => `${i.field}: ${i.message}`).join('; '),
    { details: { issues } },
  );
}
