import type { GroupRef } from '../machines/types.js';
import { groupId } from '../machines/types.js';
import {
  CoordinatorError,
  FenceMismatchError,
  LeaseNotHeldError,
  RevisionMismatchError,
} from '../errors.js';

/**
 * Status codes of the store's write scripts: the first element of every Lua reply
 * (`src/store/lua/*.lua`). Negative codes are refusals; nothing was written. MemoryStore reports
 * its refusals with the same codes, so both stores raise the same errors through
 * {@link refusalError}.
 */
export enum ScriptStatus {
  OK = 0,
  /** The caller's fence token is not the group's: another owner took over. */
  FENCE_MISMATCH = -1,
  /** The stored `storeRevision` is not the one the caller expected. */
  REVISION_MISMATCH = -2,
  /** The metadata key does not exist. */
  GROUP_NOT_FOUND = -3,
  /** The metadata key or the registry entry already exists. */
  GROUP_EXISTS = -4,
  /** The group's lease key does not hold the claiming caller's lease value. */
  LEASE_NOT_HELD = -5,
  /** A group's exact shard count is not its stream prefix's (the layout scripts only). */
  SHARD_COUNT_MISMATCH = -6,
}

/** What a refused write was about, for the error's message and details. */
export interface RefusalContext {
  readonly ref: GroupRef;
  /** The revision the caller expected (fenced writes only). */
  readonly expectedRevision?: number;
  /** The revision the store holds, as reported by the script. */
  readonly actualRevision: number;
}

/**
 * The one place that turns a script status into a typed error. Returns (not throws) so callers
 * write `throw refusalError(...)` and control flow stays visible.
 */
export function refusalError(status: number, context: RefusalContext): CoordinatorError {
  const group = groupId(context.ref);
  switch (status as ScriptStatus) {
    case ScriptStatus.FENCE_MISMATCH:
      return new FenceMismatchError(`the fence token is no longer the owner of group ${group}`);
    case ScriptStatus.REVISION_MISMATCH:
      return new RevisionMismatchError(context.expectedRevision ?? -1, context.actualRevision);
    case ScriptStatus.GROUP_NOT_FOUND:
      return new CoordinatorError('GROUP_NOT_FOUND', `group ${group} does not exist`, {
        details: {
          streamPrefix: context.ref.streamPrefix,
          consumerGroup: context.ref.consumerGroup,
        },
      });
    case ScriptStatus.GROUP_EXISTS:
      return new CoordinatorError('GROUP_EXISTS', `group ${group} already exists`, {
        details: {
          streamPrefix: context.ref.streamPrefix,
          consumerGroup: context.ref.consumerGroup,
        },
      });
    case ScriptStatus.LEASE_NOT_HELD:
      return new LeaseNotHeldError(`this replica does not hold the lease of group ${group}`);
    default:
      return new CoordinatorError('INTERNAL', `store script returned unknown status ${status}`);
  }
}
