import { CoordinatorError } from '../../errors.js';
import { permitsGroup } from './group-scope.js';
import type { Principal } from './roles.js';

/** What each refusal by another group on the prefix says once that group's name is withheld. */
const SIBLING_REFUSALS: Readonly<Record<string, string>> = {
  GROUP_FROZEN: 'is frozen: it must be unfrozen first',
  GROUP_FAILED_CLOSED_ADMIN: 'is failed closed: it must be recovered first',
  MIGRATION_IN_PROGRESS: 'is still migrating: try again once it converged',
};

/** Details that name or point at the other group, dropped with its name. */
const SIBLING_DETAILS = new Set(['consumerGroup', 'migrationId']);

/**
 * An error as a scoped caller may see it (README.md#tokens-roles-and-group-scopes): a refusal
 * caused by other groups on the same stream prefix (a shard count that is not the prefix's, a
 * sibling frozen, failed closed or migrating, docs/protocol.md#one-shard-layout-per-stream-prefix)
 * names them in its message and details; names of groups outside the token's `groups` are
 * withheld, as a listing or a 403 withholds them. The code, the status and the rest of the
 * details stay. Any other error, and every error for an unscoped caller, is returned as it is.
 */
export function withinScope(error: unknown, principal: Principal | null): unknown {
  if (!principal?.groups || !(error instanceof CoordinatorError) || !error.details) return error;
  const details = error.details;
  const streamPrefix = details.streamPrefix;
  if (typeof streamPrefix !== 'string') return error;
  const hidden = (group: unknown) =>
    typeof group === 'string' && !permitsGroup(principal, streamPrefix, group);

  if (error.code === 'SHARD_COUNT_MISMATCH' && Array.isArray(details.groups)) {
    if (!details.groups.some(hidden)) return error;
    return new CoordinatorError(
      error.code,
      `stream prefix ${streamPrefix} has ${String(details.shardCount)} shards (held by groups ` +
        `this token does not reach too); a group on it cannot have ` +
        `${String(details.requestedShardCount)}: omit shardCount to adopt the prefix's, or ` +
        'scale the prefix',
      { details: { ...details, groups: details.groups.filter((g) => !hidden(g)) } },
    );
  }

  if (!hidden(details.consumerGroup)) return error;
  const what = SIBLING_REFUSALS[error.code] ?? 'refuses the change';
  const kept = Object.fromEntries(
    Object.entries(details).filter(([name]) => !SIBLING_DETAILS.has(name)),
  );
  return new CoordinatorError(
    error.code,
    `another group on stream prefix ${streamPrefix}, one this token does not reach, ${what} ` +
      `(it shares stream prefix ${streamPrefix}, whose shards every group on it reads)`,
    { details: kept },
  );
}
