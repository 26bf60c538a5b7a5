/**
 * How a group follows the shard layout of its stream prefix
 * (docs/protocol.md#one-shard-layout-per-stream-prefix): when a scale or rollback of any group
 * moved the prefix to another count, every other group on it migrates to that count in its own
 * actor. Decided here, once, as a pure function of the group and the layout.
 */
import { rollbackAllowed } from './migration-view.js';
import type { GroupState, LayoutRef } from './types.js';

/** The layout as a group needs to see it. */
export interface LayoutTarget extends LayoutRef {
  readonly shardCount: number;
}

/**
 * What a group does about its prefix's layout:
 * - `none`: it follows it already, or cannot act now (failed closed; a migration of its own to
 *   another count still in progress: it follows once that converged);
 * - `adopt`: its shard count is the layout's already: it takes the layout's identity, no migration;
 * - `rollback`: its active migration came from the layout's count and may still be rolled back
 *   (the prefix's migration was rolled back);
 * - `scale`: a migration to the layout's count (a frozen group's chart refuses it until unfrozen).
 */
export type LayoutStep =
  | { readonly kind: 'none' }
  | { readonly kind: 'adopt' }
  | { readonly kind: 'rollback' }
  | { readonly kind: 'scale'; readonly shardCount: number };

export function layoutStep(group: GroupState, layout: LayoutTarget, now: number): LayoutStep {
  if (group.status === 'FAILED_CLOSED') return { kind: 'none' };
  if (group.layout.id === layout.id && group.layout.version >= layout.version) {
    return { kind: 'none' };
  }
  if (group.shardCount === layout.shardCount) return { kind: 'adopt' };
  const active = group.activeMigration;
  if (active && active.fromShardCount === layout.shardCount && rollbackAllowed(active, now)) {
    return { kind: 'rollback' };
  }
  if (active?.state === 'IN_PROGRESS') return { kind: 'none' };
  return { kind: 'scale', shardCount: layout.shardCount };
}
