/**
 * Why the group refuses an admin command, in the API's words (docs/architecture.md#admin-refusals).
 *
 * WHEN a command is refused is decided by the chart alone (`group-machine.ts`): each state lists
 * the commands it refuses and names the reason on the transition, so the chart is where an
 * operator reads which command is accepted in which state. The reducers that run for accepted
 * commands check nothing again. This module phrases each reason once; the reasons that depend
 * on the command's data (a scale's shard count, the migration a rollback names, the shards a
 * pause or reset names) are decided by {@link scaleRefusal}, {@link rollbackRefusal} and
 * `consumption.ts`'s `shardsRefusal` and `resetRefusal`, which the chart's guards ask.
 */
import type { ErrorCode } from '../errors.js';
import type { GroupContext } from './context.js';
import { resetRefusal, shardsRefusal } from './consumption.js';
import type {
  ConsumptionEvent,
  GroupEvent,
  ResetPositionsEvent,
  RollbackEvent,
  ScaleEvent,
} from './events.js';
import { rollbackAllowed } from './migration-view.js';
import type { GroupState } from './types.js';
import { groupId } from './types.js';

/** Why a refused admin command was refused, in the API's words. */
export interface Refusal {
  readonly code: ErrorCode;
  readonly message: string;
  readonly details?: Record<string, unknown>;
}

/** The reasons the chart names on its refusing transitions. */
export type RefusalReason =
  | 'alreadyFrozen'
  | 'notFrozen'
  | 'frozen'
  | 'failedClosed'
  | 'notFailedClosed'
  | 'migrationInProgress'
  | 'scale'
  | 'rollback'
  | 'shards'
  | 'reset'
  | 'consumptionPaused'
  | 'resetInProgress'
  | 'noReset';

/** The refusal for `reason`, phrased for `ctx`'s group and the refused `event`. */
export function refusalFor(reason: RefusalReason, ctx: GroupContext, event: GroupEvent): Refusal {
  const { group } = ctx;
  switch (reason) {
    case 'alreadyFrozen':
      return { code: 'GROUP_FROZEN', message: `group ${groupId(group)} is already frozen` };
    case 'notFrozen':
      return { code: 'GROUP_NOT_FROZEN', message: `group ${groupId(group)} is not frozen` };
    case 'frozen':
    case 'failedClosed':
      return lifecycleRefusal(group)!;
    case 'notFailedClosed':
      return {
        code: 'GROUP_NOT_FAILED_CLOSED',
        message: 'recovery applies only to a failed-closed group',
        details: { status: group.status },
      };
    case 'migrationInProgress': {
      const active = group.activeMigration!;
      return {
        code: 'MIGRATION_IN_PROGRESS',
        message: `migration ${active.migrationId} of group ${groupId(group)} is still in progress`,
        details: { migrationId: active.migrationId },
      };
    }
    case 'scale':
      return scaleRefusal(ctx, event as ScaleEvent) ?? unexplained(event);
    case 'rollback':
      return rollbackRefusal(ctx, event as RollbackEvent) ?? unexplained(event);
    case 'shards':
      return shardsRefusal(group, (event as ConsumptionEvent).shards) ?? unexplained(event);
    case 'reset': {
      const shards = (event as ResetPositionsEvent).reset.moves.map((move) => move.shard);
      return resetRefusal(group, shards) ?? unexplained(event);
    }
    case 'consumptionPaused':
      return pausedRefusal(group);
    case 'resetInProgress':
      return resetUnderWayRefusal(group);
    case 'noReset':
      return {
        code: 'NO_RESET_IN_PROGRESS',
        message: `group ${groupId(group)} has no position reset under way`,
      };
  }
}

/**
 * Why a group in `group.status` takes no admin change, or null when it is ACTIVE: a failed-closed
 * group takes nothing but recovery, a frozen one nothing but UNFREEZE. Also asked for the other
 * groups of a stream prefix before the prefix's layout moves.
 */
export function lifecycleRefusal(group: GroupState): Refusal | null {
  if (group.status === 'FAILED_CLOSED') {
    return {
      code: 'GROUP_FAILED_CLOSED_ADMIN',
      message: `group ${groupId(group)} is failed closed; only recovery is allowed`,
    };
  }
  if (group.status === 'FROZEN') {
    return {
      code: 'GROUP_FROZEN',
      message: `group ${groupId(group)} is frozen; unfreeze it first`,
    };
  }
  return null;
}

/**
 * Why the group could not take a migration now for its state, or null: its lifecycle, or
 * consumption not running on every shard (a migration waits for paused shards to be resumed and
 * a position reset to end). Also asked for the other groups of a stream prefix before the
 * prefix's layout moves, since each of them must follow it.
 */
export function migrationBlocker(group: GroupState): Refusal | null {
  const lifecycle = lifecycleRefusal(group);
  if (lifecycle) return lifecycle;
  if (group.positionReset) return resetUnderWayRefusal(group);
  if ((group.pausedShards ?? []).length > 0) return pausedRefusal(group);
  return null;
}

function pausedRefusal(group: GroupState): Refusal {
  const paused = group.pausedShards ?? [];
  return {
    code: 'CONSUMPTION_PAUSED',
    message: `group ${groupId(group)} has paused shards (${paused.join(', ')}); resume them first`,
    details: { pausedShards: paused },
  };
}

function resetUnderWayRefusal(group: GroupState): Refusal {
  const resetId = group.positionReset?.resetId ?? null;
  return {
    code: 'RESET_IN_PROGRESS',
    message: `a position reset of group ${groupId(group)} is under way (${resetId}); wait for it to end`,
    details: { resetId },
  };
}

/**
 * Why SCALE's shard count is refused, or null: it must be a positive integer other than the
 * current count. (A frozen or failed-closed group and a migration in progress are the chart's
 * states, refused there first.)
 */
export function scaleRefusal(ctx: GroupContext, event: ScaleEvent): Refusal | null {
  const { group } = ctx;
  const { shardCount } = event;
  if (!Number.isSafeInteger(shardCount) || shardCount < 1) {
    return {
      code: 'VALIDATION_FAILED',
      message: `shardCount must be a positive integer, got ${shardCount}`,
    };
  }
  if (shardCount === group.shardCount) {
    return {
      code: 'SHARD_COUNT_UNCHANGED',
      message: `group ${groupId(group)} already has ${shardCount} shards`,
      details: { shardCount },
    };
  }
  return null;
}

/**
 * Why ROLLBACK is refused, or null: it must name the active migration (a finished one is
 * ROLLBACK_NOT_ALLOWED, an unknown one MIGRATION_NOT_FOUND) while its rollback window is open.
 */
export function rollbackRefusal(ctx: GroupContext, event: RollbackEvent): Refusal | null {
  const { group } = ctx;
  const active = group.activeMigration;
  const named = event.migrationId;
  if (!active || (named !== 'current' && named !== active.migrationId)) {
    // `current` with nothing active names the latest migration: after COMPLETED, rollback is
    // not allowed any more (409), which is what an operator asking for it needs to hear.
    const past =
      named === 'current'
        ? group.migrations[0]
        : group.migrations.find((m) => m.migrationId === named);
    if (past) {
      return {
        code: 'ROLLBACK_NOT_ALLOWED',
        message: `migration ${past.migrationId} is ${past.state}; only the active migration can be rolled back`,
        details: { migrationId: past.migrationId, state: past.state },
      };
    }
    const message =
      named === 'current'
        ? `group ${groupId(group)} has no active migration`
        : `group ${groupId(group)} has no migration ${named}`;
    return { code: 'MIGRATION_NOT_FOUND', message, details: { migrationId: named } };
  }
  if (!rollbackAllowed(active, event.now)) {
    return {
      code: 'ROLLBACK_NOT_ALLOWED',
      message: `the rollback window of migration ${active.migrationId} has passed`,
      details: {
        migrationId: active.migrationId,
        state: active.state,
        rollbackAllowedUntil: active.rollbackAllowedUntil,
      },
    };
  }
  return null;
}

/** A refusing transition whose reason found nothing to refuse: a bug in the chart. */
function unexplained(event: GroupEvent): Refusal {
  return { code: 'INTERNAL', message: `${event.type} was refused without a reason` };
}
