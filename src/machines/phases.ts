/**
 * The statechart's state is derived from the context, never stored beside it: these functions
 * say which state a context belongs in. The machine's guards use them, so an actor restored
 * from any context lands in the right state, and tests compare them with the actual state.
 */
import type { GroupContext } from './context.js';
import { allShards, memberCount, shardsDerived, type ShardPhase } from './group-state.js';
import type { GroupState } from './types.js';
import { consumptionPhase } from './consumption.js';

export type LifecyclePhase = 'active' | 'frozen' | 'failedClosed';

/** `rebalancing` has two substates: `revoking` and `granting`. */
export type MembershipPhase = 'empty' | 'stable' | 'revoking' | 'granting';

/** Follows `group.activeMigration.state`. */
export type MigrationPhase = 'idle' | 'inProgress' | 'converged';

/** The state value a context belongs in (the shape of `snapshot.value`). */
export interface GroupStateValue {
  readonly lifecycle: LifecyclePhase;
  readonly membership: 'empty' | 'stable' | { readonly rebalancing: 'revoking' | 'granting' };
  readonly consumption:
    'running' | 'pausing' | 'paused' | { readonly resetting: 'pausing' | 'moving' };
  readonly migration: MigrationPhase;
}

/** Follows `group.status`. */
export function lifecyclePhase(group: GroupState): LifecyclePhase {
  switch (group.status) {
    case 'FROZEN':
      return 'frozen';
    case 'FAILED_CLOSED':
      return 'failedClosed';
    default:
      return 'active';
  }
}

/** `idle` without an active migration, else its state: IN_PROGRESS or CONVERGED. */
export function migrationPhase(group: GroupState): MigrationPhase {
  switch (group.activeMigration?.state) {
    case 'IN_PROGRESS':
      return 'inProgress';
    case 'CONVERGED':
      return 'converged';
    default:
      return 'idle';
  }
}

/**
 * `empty` without members; `revoking` while some shard is revoking; `granting` while no shard
 * revokes but some shard below `shardCount` is not yet with its target, or a recompute is
 * pending; `stable` otherwise. Retiring shards belong to migrations and are not looked at.
 */
export function membershipPhase(ctx: GroupContext): MembershipPhase {
  const { group } = ctx;
  if (memberCount(group) === 0) return 'empty';
  // Each guard of the chart asks after every event: what the shards say is kept per shards
  // object, so an event that leaves them alone (a join) does not scan them again.
  const shards = shardsDerived(group);
  shards.phase ??= shardPhase(group);
  if (shards.phase === 'revoking') return 'revoking';
  return shards.phase === 'granting' || ctx.recomputeAt !== null ? 'granting' : 'stable';
}

/** `revoking`, `granting` or `stable` as the shards alone say (no pending recompute counted). */
function shardPhase(group: GroupState): ShardPhase {
  let granting = false;
  for (const record of allShards(group)) {
    if (record.state === 'revoking') return 'revoking';
    if (record.state === 'retiring' || record.shard >= group.shardCount) continue;
    if (record.target !== record.owner) granting = true;
  }
  return granting ? 'granting' : 'stable';
}

/** The full state value for `ctx`. */
export function expectedStateValue(ctx: GroupContext): GroupStateValue {
  const phase = membershipPhase(ctx);
  return {
    lifecycle: lifecyclePhase(ctx.group),
    membership: phase === 'empty' || phase === 'stable' ? phase : { rebalancing: phase },
    consumption: consumptionValue(ctx.group),
    migration: migrationPhase(ctx.group),
  };
}

/** The consumption region's value, from `consumptionPhase` (`consumption.ts`). */
function consumptionValue(group: GroupState): GroupStateValue['consumption'] {
  const phase = consumptionPhase(group);
  if (phase === 'resetPausing') return { resetting: 'pausing' };
  if (phase === 'resetMoving') return { resetting: 'moving' };
  return phase;
}
