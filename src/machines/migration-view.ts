/**
 * Migrations as monitoring shows them (docs/architecture.md#migrations):
 * whether rollback is still allowed, and how far the active migration has converged. Pure
 * views: the convergence rule of `migration.ts` is read off {@link migrationProgress}, so what
 * an operator sees and what the machine decides cannot drift apart.
 */
import type { GroupContext } from './context.js';
import { allShards, memberIds } from './group-state.js';
import type { MigrationKind, MigrationRecord, MigrationState } from './types.js';

/**
 * Whether `migration` may be rolled back at `now`: while IN_PROGRESS, and while CONVERGED
 * until `rollbackAllowedUntil` (exclusive). Never once COMPLETED or ROLLED_BACK. Whether the
 * group accepts admin mutations at all (frozen, failed closed) is not looked at.
 */
export function rollbackAllowed(migration: MigrationRecord, now: number): boolean {
  if (migration.state === 'IN_PROGRESS') return true;
  if (migration.state !== 'CONVERGED') return false;
  return migration.rollbackAllowedUntil !== null && now < migration.rollbackAllowedUntil;
}

/** How far a group is from the target of its active migration (or its current shard count). */
export interface MigrationProgress {
  /**
   * Shards below the target count that are where the target assignment wants them: assigned
   * to their target. With no members every such shard counts (there is nobody to hand it to).
   */
  readonly shardsConverged: number;
  /** The target shard count. */
  readonly shardsTotal: number;
  /** Removed shards (at or above the target count) still in the group, retiring. */
  readonly removedShardsRemaining: number[];
  /** Removed shards a live member still reports in `currentAssignments` or `revokeProgress`. */
  readonly removedShardsReported: number[];
  /** Live members that report exactly their assigned shards, and no removed shard. */
  readonly membersReporting: number;
  readonly membersTotal: number;
}

/**
 * Progress of the active migration towards `toShardCount` (or of the group towards its
 * current shard count when none is active). One pass over shards and members' reports: it
 * runs after every event while a migration is in progress, heartbeats included.
 */
export function migrationProgress(ctx: GroupContext): MigrationProgress {
  const { group, liveness } = ctx;
  const to = group.activeMigration?.toShardCount ?? group.shardCount;
  const members = memberIds(group);
  const assigned = new Map<string, Set<number>>(members.map((id) => [id, new Set<number>()]));
  const removedShardsRemaining: number[] = [];
  let shardsConverged = 0;
  for (const record of allShards(group)) {
    if (record.shard >= to) {
      removedShardsRemaining.push(record.shard);
      continue;
    }
    if (record.state === 'assigned' && record.owner !== null) {
      assigned.get(record.owner)?.add(record.shard);
    }
    const settled =
      members.length === 0 ||
      (record.state === 'assigned' && record.owner !== null && record.owner === record.target);
    if (settled) shardsConverged++;
  }
  const reported = new Set<number>();
  let membersReporting = 0;
  for (const memberId of members) {
    const live = liveness.get(memberId);
    const current = new Set(live?.currentAssignments ?? []);
    let reportsRemoved = false;
    for (const shard of [...current, ...(live?.revokeProgress ?? []).map((p) => p.shard)]) {
      if (shard >= to) {
        reported.add(shard);
        reportsRemoved = true;
      }
    }
    const mine = assigned.get(memberId) ?? new Set<number>();
    const exact = current.size === mine.size && [...current].every((shard) => mine.has(shard));
    if (exact && !reportsRemoved) membersReporting++;
  }
  return {
    shardsConverged,
    shardsTotal: to,
    removedShardsRemaining,
    removedShardsReported: [...reported].sort((a, b) => a - b),
    membersReporting,
    membersTotal: members.length,
  };
}

/** A migration in the shape of the monitoring API; times are ISO 8601. */
export interface MigrationView {
  readonly migrationId: string;
  readonly kind: MigrationKind;
  readonly fromShardCount: number;
  readonly toShardCount: number;
  readonly state: MigrationState;
  readonly rollbackAllowed: boolean;
  readonly rollbackAllowedUntil: string | null;
  readonly startedAt: string;
  readonly convergedAt: string | null;
  readonly completedAt: string | null;
  readonly requestedBy: string;
  readonly reason: string;
  readonly rollbackOf: string | null;
  /** Only for the group's active migration; null for history. */
  readonly progress: MigrationProgress | null;
}

/**
 * `migration` as monitoring shows it at `now`. `ctx` is the group's context; progress is
 * included only when `migration` is that group's active migration (history has none).
 */
export function migrationView(
  migration: MigrationRecord,
  ctx: GroupContext | null,
  now: number,
): MigrationView {
  const active = ctx?.group.activeMigration?.migrationId === migration.migrationId;
  return {
    migrationId: migration.migrationId,
    kind: migration.kind,
    fromShardCount: migration.fromShardCount,
    toShardCount: migration.toShardCount,
    state: migration.state,
    rollbackAllowed: rollbackAllowed(migration, now),
    rollbackAllowedUntil: iso(migration.rollbackAllowedUntil),
    startedAt: new Date(migration.startedAt).toISOString(),
    convergedAt: iso(migration.convergedAt),
    completedAt: iso(migration.completedAt),
    requestedBy: migration.requestedBy,
    reason: migration.reason,
    rollbackOf: migration.rollbackOf,
    progress: active && ctx ? migrationProgress(ctx) : null,
  };
}

/** The `/migrations` monitoring answer: the active migration with progress, then history. */
export function migrationsView(
  ctx: GroupContext,
  now: number,
): { active: MigrationView | null; migrations: MigrationView[] } {
  const { group } = ctx;
  return {
    active: group.activeMigration ? migrationView(group.activeMigration, ctx, now) : null,
    migrations: group.migrations.map((m) => migrationView(m, null, now)),
  };
}

function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}
