import { CoordinatorError } from '../errors.js';
import { assertRequestGroupPermitted } from './auth/group-scope.js';
import { assertAnyRole, type Principal } from './auth/roles.js';
import { validate, type RouteSpec } from './route.js';

/*
 * The checks of the request pipeline once the caller is known and the body read
 * (docs/architecture.md#the-request-pipeline), one implementation each, called in this order by
 * the express routes (`app.ts`) and the heartbeat fast path: the role (403), the route's zod
 * schemas (400), the token's group scope (403). The caller itself comes from the bearer token
 * through `principalOfRequest` (`auth/passport.ts`), the one token rule of both.
 */

/** What a route asks of a request besides its body's media type: roles and zod schemas. */
export type RequestRules<P = unknown, B = unknown, Q = unknown> = Pick<
  RouteSpec<P, B, Q>,
  'roles' | 'params' | 'body' | 'query'
>;

/** A request's inputs as received: path parameters, parsed JSON body, query. */
export interface RawInputs {
  readonly params: unknown;
  readonly body: unknown;
  readonly query: unknown;
}

/** A request's inputs once its route's schemas passed. */
export interface CheckedInputs<P, B, Q> {
  readonly params: P;
  readonly body: B;
  readonly query: Q;
}

/** 403 FORBIDDEN unless the caller has one of the route's roles (none needed: no check). */
export function checkRole(rules: RequestRules, principal: Principal | null): void {
  if (rules.roles === null) return;
  // Reached after the token was verified; the guard is for the type only.
  if (!principal) throw new CoordinatorError('UNAUTHENTICATED', 'a bearer token is required');
  assertAnyRole(principal, rules.roles);
}

/** The path parameters against the route's schema (see {@link checkInputs}). */
export function checkParams<P>(rules: Pick<RequestRules<P>, 'params'>, raw: unknown, valid?: P): P {
  return valid ?? (rules.params ? validate(rules.params, raw, 'path') : (raw as P));
}

/**
 * The inputs against the route's zod schemas (400 VALIDATION_FAILED naming the bad fields).
 * What `valid` gives was validated against the same schema before (the fast path remembers
 * what a URL's parameters and a body's text validate to) and is taken as it is.
 */
export function checkInputs<P, B, Q>(
  rules: RequestRules<P, B, Q>,
  raw: RawInputs,
  valid: { readonly params?: P; readonly body?: B } = {},
): CheckedInputs<P, B, Q> {
  return {
    params: checkParams(rules, raw.params, valid.params),
    body:
      valid.body ?? (rules.body ? validate(rules.body, raw.body ?? {}, 'body') : (raw.body as B)),
    query: rules.query ? validate(rules.query, raw.query, 'query') : (raw.query as Q),
  };
}

/**
 * 403 GROUP_NOT_PERMITTED when the group the request names (path, or the body of a create) is
 * outside the token's `groups`: after the schemas, before anything looks the group up.
 */
export function checkScope(
  principal: Principal | null,
  inputs: { readonly params: unknown; readonly body: unknown },
): void {
  if (principal) assertRequestGroupPermitted(principal, inputs.params, inputs.body);
}

/** The three checks in their order: role, schemas, group scope. Returns the checked inputs. */
export function checkRequest<P, B, Q>(
  rules: RequestRules<P, B, Q>,
  principal: Principal | null,
  raw: RawInputs,
  valid?: { readonly params?: P; readonly body?: B },
): CheckedInputs<P, B, Q> {
  checkRole(rules, principal);
  const inputs = checkInputs(rules, raw, valid);
  checkScope(principal, inputs);
  return inputs;
}
