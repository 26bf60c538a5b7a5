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

/** Issues a validation error names at most; the others are only counted (`details.moreIssues`). */
export const MAX_REPORTED_ISSUES = 10;
/** Longest field path or message of one reported issue (a path may name keys the client chose). */
const MAX_ISSUE_CHARS = 200;

function clip(text: string): string {
  return text.length > MAX_ISSUE_CHARS ? `${text.slice(0, MAX_ISSUE_CHARS - 1)}…` : text;
}

/**
 * Parses with a zod schema; a failure is a 400 naming the first {@link MAX_REPORTED_ISSUES}
 * bad fields (each path and message clipped) and counting the rest, so a hostile body (an
 * array of thousands of bad entries) is answered in a few KB, not in megabytes.
 */
export function validate<T>(schema: z.ZodType<T>, value: unknown, where: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const all = parsed.error.issues;
  const issues = all.slice(0, MAX_REPORTED_ISSUES).map((issue) => ({
    field: clip([where, ...issue.path.map(String)].join('.')),
    message: clip(issue.message),
  }));
  const more = all.length - issues.length;
  const listed = issues.map((i) => `${i.field}: ${i.message}`).join('; ');
  throw new CoordinatorError(
    'VALIDATION_FAILED',
    more > 0 ? `${listed}; and ${more} more` : listed,
    { details: more > 0 ? { issues, moreIssues: more } : { issues } },
  );
}
