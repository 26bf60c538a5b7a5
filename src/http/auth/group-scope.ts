import { z } from 'zod';
import { CoordinatorError } from '../../errors.js';
import { consumerGroupSchema, streamPrefixSchema } from '../schemas.js';
import type { GroupPattern, Principal } from './roles.js';

export type { GroupPattern } from './roles.js';

/** Stands for a whole part of a pattern: any stream prefix, or any consumer group. */
export const ANY = '*';

/** The most patterns one token or user may carry. */
export const MAX_GROUP_PATTERNS = 1000;

/**
 * One entry of a token's `groups` claim (README.md#tokens-roles-and-group-scopes): `orders:billing`, `orders:*`, `*:billing`, `*:*`. A stream prefix may itself contain `:` and
 * a consumer group may not, so the pattern splits at its last `:`. Each part is `*` or a valid
 * name: anything else (`ord*`, `.*`, an empty part) is refused rather than guessed at.
 */
export const groupPatternSchema = z
  .string()
  .max(400)
  .transform((text, ctx): GroupPattern => {
    const colon = text.lastIndexOf(':');
    const streamPrefix = text.slice(0, colon);
    const consumerGroup = text.slice(colon + 1);
    const valid =
      colon > 0 &&
      (streamPrefix === ANY || streamPrefixSchema.safeParse(streamPrefix).success) &&
      (consumerGroup === ANY || consumerGroupSchema.safeParse(consumerGroup).success);
    if (!valid) {
      ctx.addIssue({
        code: 'custom',
        message: `"${text.slice(0, 100)}" is not <streamPrefix>:<consumerGroup> with names or *`,
      });
      return z.NEVER;
    }
    return { streamPrefix, consumerGroup };
  });

/** A `groups` claim or users-file field: a list of patterns (an empty list reaches no group). */
export const groupPatternsSchema = z.array(groupPatternSchema).max(MAX_GROUP_PATTERNS);

/** The wire form of a pattern, as the `groups` claim carries it. */
export function formatGroupPattern(pattern: GroupPattern): string {
  return `${pattern.streamPrefix}:${pattern.consumerGroup}`;
}

/**
 * The patterns of a verified token's `groups` claim: undefined when the claim is absent (the
 * token reaches every group, as before scoped tokens), else the parsed list; a malformed claim
 * is a 401 INVALID_TOKEN, never a token of wider reach.
 */
export function groupsFromClaim(claim: unknown): readonly GroupPattern[] | undefined {
  if (claim === undefined) return undefined;
  const parsed = groupPatternsSchema.safeParse(claim);
  if (parsed.success) return parsed.data;
  throw new CoordinatorError(
    'INVALID_TOKEN',
    `the groups claim of the access token is invalid: ${parsed.error.issues[0]?.message ?? 'not a list of patterns'}`,
  );
}

function matches(pattern: GroupPattern, streamPrefix: string, consumerGroup: string): boolean {
  return (
    (pattern.streamPrefix === ANY || pattern.streamPrefix === streamPrefix) &&
    (pattern.consumerGroup === ANY || pattern.consumerGroup === consumerGroup)
  );
}

/** Whether the principal may reach this group: always for an unscoped principal. */
export function permitsGroup(
  principal: Principal,
  streamPrefix: string,
  consumerGroup: string,
): boolean {
  return (
    principal.groups === undefined ||
    principal.groups.some((pattern) => matches(pattern, streamPrefix, consumerGroup))
  );
}

/**
 * Throws 403 GROUP_NOT_PERMITTED when the principal's `groups` do not reach the group. It is
 * decided from the names alone, before anything looks the group up, so the answer is the same
 * whether the group exists or not. The one check behind express and the heartbeat fast path.
 */
export function assertGroupPermitted(
  principal: Principal,
  streamPrefix: string,
  consumerGroup: string,
): void {
  if (permitsGroup(principal, streamPrefix, consumerGroup)) return;
  throw new CoordinatorError(
    'GROUP_NOT_PERMITTED',
    'the access token is not permitted to reach this group',
  );
}

/**
 * The scope check of a validated request, wherever its route names the group: the path
 * parameters `:stream` and `:group`, or for group creation the body's `streamPrefix` and
 * `consumerGroup`. Routes that name no group (listings, the audit query) filter instead.
 */
export function assertRequestGroupPermitted(
  principal: Principal,
  params: unknown,
  body: unknown,
): void {
  const named = (source: unknown, stream: string, group: string): boolean => {
    const fields = source as Record<string, unknown> | null | undefined;
    const streamPrefix = fields?.[stream];
    const consumerGroup = fields?.[group];
    if (typeof streamPrefix !== 'string' || typeof consumerGroup !== 'string') return false;
    assertGroupPermitted(principal, streamPrefix, consumerGroup);
    return true;
  };
  if (!named(params, 'stream', 'group')) named(body, 'streamPrefix', 'consumerGroup');
}
