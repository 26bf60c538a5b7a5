/**
 * Online scaling (docs/architecture.md#migrations): SCALE starts a migration to a new shard count,
 * ROLLBACK starts one back to where a migration came from, and after every command event the active
 * migration is checked for convergence (IN_PROGRESS → CONVERGED) and for the end of its rollback
 * window (CONVERGED → COMPLETED). Pure functions of (context, event).
 *
 * A migration's first commit changes everything routing and assignment depend on at once:
 * `shardCount`, `metadataVersion` +1, targets recomputed and `assignmentEpoch` +1. Added shards
 * start released and are handed out by the normal revoke-first flow; removed shards become
 * retiring for the member that owns them (see `retiring.ts`).
 */
import type { GroupContext } from './context.js';
import { beginEvent, raise, succeed, touched, withEffects } from './context.js';
import { ChartEventType } from './events.js';
import type {
  AdoptLayoutEvent,
  RetiredShardsDrainedEvent,
  RollbackEvent,
  ScaleEvent,
} from './events.js';
import { allShards, withShards } from './group-state.js';
import { changeShards, NO_CHANGES } from './shard-changes.js';
import { leastLoadedMembers } from './retiring.js';
import { migrationProgress } from './migration-view.js';
import { recomputeTargets } from './targets.js';
import type {
  GroupState,
  LayoutRef,
  MigrationKind,
  MigrationRecord,
  ShardRecord,
} from './types.js';

/** Finished migrations kept in `group.migrations`. */
export const MIGRATION_HISTORY_LIMIT = 50;

/** Reply of a successful SCALE. */
export interface ScaleReply {
  /** The migration started (already CONVERGED when there was nothing to wait for). */
  readonly migration: MigrationRecord;
}

/** Reply of a successful ROLLBACK. */
export interface RollbackReply {
  /** The ROLLBACK migration started. */
  readonly migration: MigrationRecord;
  /** Id of the migration that ended ROLLED_BACK. */
  readonly rolledBack: string;
}

/**
 * SCALE, as the chart accepts it (docs/architecture.md#admin-refusals): a CONVERGED migration is
 * completed first, then the migration to `event.shardCount` starts.
 */
export function applyScale(ctx: GroupContext, event: ScaleEvent): GroupContext {
  const start = beginEvent(ctx, event.now);
  return touched(start, scale(start, event), event.now);
}

function scale(ctx: GroupContext, event: ScaleEvent): GroupContext {
  let next = ctx;
  if (ctx.group.activeMigration) next = finishActive(next, 'COMPLETED', event.now);
  next = startMigration(next, 'SCALE', event.migrationId, event.shardCount, null, event);
  if (event.layout) next = withLayout(next, event.layout);
  const reply: ScaleReply = { migration: migrationById(next.group, event.migrationId) };
  return succeed(next, reply);
}

/**
 * ROLLBACK, as the chart accepts it: the active migration (named by `event.migrationId` or
 * `'current'`) ends ROLLED_BACK and a ROLLBACK migration back to its `fromShardCount` starts in
 * the same commit; versions and epochs only go up.
 */
export function applyRollback(ctx: GroupContext, event: RollbackEvent): GroupContext {
  const start = beginEvent(ctx, event.now);
  return touched(start, rollback(start, event), event.now);
}

function rollback(ctx: GroupContext, event: RollbackEvent): GroupContext {
  const active = ctx.group.activeMigration!;
  let next = finishActive(ctx, 'ROLLED_BACK', event.now);
  next = startMigration(
    next,
    'ROLLBACK',
    event.newMigrationId,
    active.fromShardCount,
    active.migrationId,
    event,
  );
  if (event.layout) next = withLayout(next, event.layout);
  const reply: RollbackReply = {
    migration: migrationById(next.group, event.newMigrationId),
    rolledBack: active.migrationId,
  };
  return succeed(next, reply);
}

/**
 * MIGRATION_CONVERGED: the active IN_PROGRESS migration becomes CONVERGED (the chart raises the
 * event once {@link migrationConverged}); its rollback window starts now. A reply that carries
 * the migration (a SCALE that had nothing to wait for) shows it as it is now.
 */
export function convergeMigration(ctx: GroupContext, now: number): GroupContext {
  const migration = ctx.group.activeMigration;
  if (migration?.state !== 'IN_PROGRESS') return ctx;
  const converged: MigrationRecord = {
    ...migration,
    state: 'CONVERGED',
    convergedAt: now,
    rollbackAllowedUntil: now + ctx.config.rollbackWindowMs,
  };
  const next = withEffects(
    { ...ctx, group: { ...ctx.group, activeMigration: converged, updatedAt: now } },
    {
      type: 'MIGRATION_CONVERGED',
      migrationId: migration.migrationId,
      durationMs: Math.max(0, now - migration.startedAt),
    },
  );
  return withMigrationReply(next, converged);
}

/** ROLLBACK_WINDOW_ELAPSED: a CONVERGED migration becomes COMPLETED. */
export function completeMigration(ctx: GroupContext, now: number): GroupContext {
  const migration = ctx.group.activeMigration;
  if (migration?.state !== 'CONVERGED') return ctx;
  const next = finishActive(ctx, 'COMPLETED', now);
  const completed = next.group.migrations[0];
  const done = { ...next, group: { ...next.group, updatedAt: now } };
  return completed ? withMigrationReply(done, completed) : done;
}

/**
 * RETIRED_SHARDS_DRAINED: the host sealed these ownerless retiring shards and found nothing
 * left unread or unacknowledged before the seal: they leave the group. A shard that has an
 * owner again (a member took it meanwhile) stays with it.
 */
export function applyRetiredShardsDrained(
  ctx: GroupContext,
  event: RetiredShardsDrainedEvent,
): GroupContext {
  const start = beginEvent(ctx, event.now);
  const gone = event.shards.filter((shard) => {
    const record = start.group.shards[shard];
    return record?.state === 'retiring' && record.owner === null;
  });
  if (gone.length === 0) return succeed(start, { drained: [] });
  const next = changeShards(start, NO_CHANGES, gone);
  return touched(start, succeed(next, { drained: gone }), event.now);
}

/** The group now follows `layout` (its shard count is the layout's). */
function withLayout(ctx: GroupContext, layout: LayoutRef): GroupContext {
  return { ...ctx, group: { ...ctx.group, layout } };
}

/**
 * ADOPT_LAYOUT: the group follows a layout of its stream prefix whose shard count it has
 * already (a failed-closed group refuses it in the chart; a frozen one follows too, its shards
 * do not change). `metadataVersion` +1 so routing long polls see the new layout.
 */
export function applyAdoptLayout(ctx: GroupContext, event: AdoptLayoutEvent): GroupContext {
  const start = beginEvent(ctx, event.now);
  const { group } = start;
  if (event.layout.id === group.layout.id && event.layout.version === group.layout.version) {
    return succeed(start, { layout: group.layout });
  }
  const next = {
    ...start,
    group: { ...group, layout: event.layout, metadataVersion: group.metadataVersion + 1 },
  };
  return touched(start, succeed(next, { layout: event.layout }), event.now);
}

/** Keeps a successful reply that names `migration` in step with the record. */
function withMigrationReply(ctx: GroupContext, migration: MigrationRecord): GroupContext {
  const result = ctx.result;
  if (!result?.ok || typeof result.reply !== 'object' || result.reply === null) return ctx;
  const reply = result.reply as { migration?: MigrationRecord };
  if (reply.migration?.migrationId !== migration.migrationId) return ctx;
  return { ...ctx, result: { ok: true, reply: { ...reply, migration } } };
}

/**
 * Whether the group has converged to its active migration (docs/architecture.md#migrations): no
 * removed shard is left in the group or reported by any live member (in `currentAssignments`
 * or `revokeProgress`), every remaining shard is assigned to its target (nothing revoking or
 * waiting, no recompute pending) and every live member reports exactly its assigned shards.
 * With no members, as soon as no removed shard is left.
 */
export function migrationConverged(ctx: GroupContext): boolean {
  const progress = migrationProgress(ctx);
  return (
    ctx.recomputeAt === null &&
    progress.removedShardsRemaining.length === 0 &&
    progress.removedShardsReported.length === 0 &&
    progress.shardsConverged === progress.shardsTotal &&
    progress.membersReporting === progress.membersTotal
  );
}

/** Ends the active migration as `state` and files it first in the history. */
function finishActive(
  ctx: GroupContext,
  state: 'COMPLETED' | 'ROLLED_BACK',
  now: number,
): GroupContext {
  const { group } = ctx;
  const active = group.activeMigration;
  if (!active) return ctx;
  const finished: MigrationRecord = { ...active, state, completedAt: now };
  const migrations = [finished, ...group.migrations].slice(0, MIGRATION_HISTORY_LIMIT);
  return withEffects(
    { ...ctx, group: { ...group, activeMigration: null, migrations } },
    state === 'COMPLETED'
      ? { type: 'MIGRATION_COMPLETED', migrationId: active.migrationId }
      : { type: 'MIGRATION_ROLLED_BACK', migrationId: active.migrationId },
  );
}

/**
 * The first commit of a migration: the record becomes active, the shards are resized, the
 * shard count and `metadataVersion` change, targets are recomputed with a new
 * `assignmentEpoch` (also when no target moved, e.g. without members: the assignment set
 * changed all the same), and a pending debounced recompute is folded in. With nothing to wait
 * for it has converged already: the chart then raises MIGRATION_CONVERGED.
 */
function startMigration(
  ctx: GroupContext,
  kind: MigrationKind,
  migrationId: string,
  toShardCount: number,
  rollbackOf: string | null,
  request: { readonly now: number; readonly requestedBy: string; readonly reason: string },
): GroupContext {
  const { group } = ctx;
  const { now } = request;
  const migration: MigrationRecord = {
    migrationId,
    kind,
    fromShardCount: group.shardCount,
    toShardCount,
    state: 'IN_PROGRESS',
    startedAt: now,
    convergedAt: null,
    completedAt: null,
    rollbackAllowedUntil: null,
    requestedBy: request.requestedBy,
    reason: request.reason,
    rollbackOf,
  };
  const withResized = changeShards(ctx, resizeChanges(group, toShardCount, now));
  const resized: GroupState = {
    ...withResized.group,
    shardCount: toShardCount,
    metadataVersion: group.metadataVersion + 1,
    activeMigration: migration,
  };
  const assignmentEpoch = group.assignmentEpoch + 1;
  const next = withEffects(
    {
      ...withResized,
      group: { ...recomputeTargets(resized), assignmentEpoch },
      recomputeAt: null,
      recomputeBy: null,
    },
    { type: 'MIGRATION_STARTED', migrationId, kind },
    { type: 'ASSIGNMENT_RECOMPUTED', assignmentEpoch },
  );
  return raise(next, ChartEventType.TARGETS_RECOMPUTED);
}

/**
 * The shard records that change for a new count `to`. At or above it: owned shards (assigned, revoking)
 * become retiring for their owner, with no target; released ones become retiring for the least
 * loaded members (they may hold unread messages) or, with no member, wait ownerless; retiring
 * ones stay. A revoking shard's owner has not been told to retire it (`ownerEpoch` null, see
 * `retiring.ts`): the DONE it may report next is about the revoke, a drain that stopped short of
 * the shard's end, not about reading it to its seal. Below it: shards added by a scale-out start
 * released; a retiring shard back below the count (a rollback of a scale-in) stays with its
 * owner, as assigned (the one member that may be reading it: it consumes it, was draining it, or
 * never learned of it), or is released when it has none.
 */
function resizeChanges(
  group: GroupState,
  to: number,
  now: number,
): ReadonlyMap<number, ShardRecord> {
  const changes = new Map<number, ShardRecord>();
  const released: ShardRecord[] = [];
  for (const record of allShards(group)) {
    if (record.shard >= to) {
      if (record.state === 'assigned') {
        changes.set(record.shard, { ...record, state: 'retiring', target: null, since: now });
      } else if (record.state === 'revoking') {
        changes.set(record.shard, {
          ...record,
          state: 'retiring',
          ownerEpoch: null,
          target: null,
          since: now,
        });
      } else if (record.state === 'released') {
        // A released shard may still hold messages nobody read (a scale-out rolled back before
        // its new shards were granted, an owner gone before the handoff): it retires too, and
        // is consumed to its end by the member it is handed to, not dropped with them in it.
        released.push(record);
      }
    } else if (record.state === 'retiring') {
      changes.set(
        record.shard,
        record.owner !== null
          ? { ...record, state: 'assigned', since: now }
          : { ...record, state: 'released', owner: null, ownerEpoch: null, since: now },
      );
    }
  }
  for (let shard = group.shardCount; shard < to; shard++) {
    if (Object.hasOwn(group.shards, shard)) continue;
    changes.set(shard, {
      shard,
      state: 'released',
      owner: null,
      ownerEpoch: null,
      target: null,
      since: now,
    });
  }
  // With no member they wait ownerless for the next member (or for the coordinator to find
  // them read to the end: RETIRED_SHARDS_DRAINED), never dropped with unread entries in them.
  const heirs = leastLoadedMembers(withShards(group, changes), released.length);
  released.forEach((record, i) => {
    changes.set(record.shard, {
      ...record,
      state: 'retiring',
      owner: heirs[i] ?? null,
      ownerEpoch: null,
      target: null,
      since: now,
    });
  });
  return changes;
}

/** The migration `migrationId`, active or in history (it exists: the caller just made it). */
function migrationById(group: GroupState, migrationId: string): MigrationRecord {
  const found =
    group.activeMigration?.migrationId === migrationId
      ? group.activeMigration
      : group.migrations.find((m) => m.migrationId === migrationId);
  if (!found) throw new Error(`migration ${migrationId} vanished`);
  return found;
}
