import type { DesiredGroup, DesiredState } from './desired-state.js';

/** What the coordinator has of a group, as far as a plan needs it. */
export interface CurrentGroup {
  readonly streamPrefix: string;
  readonly consumerGroup: string;
  readonly shardCount: number;
  readonly status: string;
}

export type Change =
  | { readonly action: 'create'; readonly group: DesiredGroup }
  | {
      readonly action: 'scale';
      readonly group: DesiredGroup;
      readonly fromShardCount: number;
      readonly status: string;
      /**
       * Another group on its stream prefix that is not ACTIVE: the prefix moves only when every
       * group on it can follow, so the coordinator refuses the scale
       * (docs/protocol.md#one-shard-layout-per-stream-prefix). Absent when none is.
       */
      readonly blockedBy?: CurrentGroup;
    }
  | { readonly action: 'delete'; readonly group: CurrentGroup }
  /** Send the desired state without knowing the current one (a token without READ). */
  | { readonly action: 'ensure'; readonly group: DesiredGroup };

export interface Plan {
  /**
   * Changes, in the order `apply` makes them: scales, creates, then deletes. Scales come first:
   * a group created on a stream prefix must have the prefix's shard count
   * (docs/protocol.md#one-shard-layout-per-stream-prefix), the count the file scales it to.
   */
  readonly changes: readonly Change[];
  /** Groups in the file that already match it. */
  readonly unchanged: readonly DesiredGroup[];
  /** Groups the coordinator has and the file lacks, left alone without `--prune`. */
  readonly unmanaged: readonly CurrentGroup[];
  /**
   * Groups the file lacks that a change would move all the same: every group on a stream prefix
   * has its shard count (docs/protocol.md#one-shard-layout-per-stream-prefix), so a scale of the
   * prefix (or a create with another count) cannot keep them. Without `--prune` such a file
   * cannot be applied.
   */
  readonly conflicts: ReadonlyArray<{
    readonly group: CurrentGroup;
    readonly shardCount: number;
    readonly by: DesiredGroup;
  }>;
}

const key = (g: { streamPrefix: string; consumerGroup: string }) =>
  `${g.streamPrefix}\u0000${g.consumerGroup}`;

/** The difference between the file and the coordinator. Pure. */
export function planChanges(
  desired: DesiredState,
  current: readonly CurrentGroup[],
  options: { prune: boolean },
): Plan {
  const byKey = new Map(current.map((g) => [key(g), g]));
  const wanted = new Set(desired.groups.map(key));
  const creates: Change[] = [];
  const scales: Change[] = [];
  const unchanged: DesiredGroup[] = [];
  for (const group of desired.groups) {
    const existing = byKey.get(key(group));
    if (!existing) creates.push({ action: 'create', group });
    else if (existing.shardCount !== group.shardCount) {
      const blockedBy = current.find(
        (other) =>
          other.streamPrefix === group.streamPrefix &&
          other.consumerGroup !== group.consumerGroup &&
          other.status !== 'ACTIVE',
      );
      scales.push({
        action: 'scale',
        group,
        fromShardCount: existing.shardCount,
        status: existing.status,
        ...(blockedBy ? { blockedBy } : {}),
      });
    } else unchanged.push(group);
  }
  const extra = current.filter((g) => !wanted.has(key(g)));
  const deletes: Change[] = options.prune
    ? extra.map((group) => ({ action: 'delete', group }))
    : [];
  // A prefix the file changes takes every group on it to the file's count, listed or not.
  const changedPrefixes = new Map<string, DesiredGroup>();
  for (const group of desired.groups)
    if (!unchanged.includes(group) && !changedPrefixes.has(group.streamPrefix))
      changedPrefixes.set(group.streamPrefix, group);
  const conflicts = options.prune
    ? []
    : extra.flatMap((group) => {
        const by = changedPrefixes.get(group.streamPrefix);
        return by && by.shardCount !== group.shardCount
          ? [{ group, shardCount: by.shardCount, by }]
          : [];
      });
  return {
    changes: [...scales, ...creates, ...deletes],
    unchanged,
    unmanaged: options.prune ? [] : extra,
    conflicts,
  };
}

const label = (g: { streamPrefix: string; consumerGroup: string }) =>
  `${g.streamPrefix}:${g.consumerGroup}`;

/** One line per change, then the unmanaged groups and a summary. */
export function renderPlan(plan: Plan, source: string): string {
  const lines = plan.changes.map((c) => {
    switch (c.action) {
      case 'create':
        return `+ create ${label(c.group)} with ${c.group.shardCount} shards`;
      case 'scale':
        return `~ scale  ${label(c.group)} from ${c.fromShardCount} to ${c.group.shardCount} shards${
          c.status !== 'ACTIVE'
            ? ` (status ${c.status}: the coordinator will refuse until it is ACTIVE)`
            : c.blockedBy
              ? ` (${label(c.blockedBy)} on its stream prefix is ${c.blockedBy.status}: the coordinator will refuse until it is ACTIVE)`
              : ''
        }`;
      case 'delete':
        return `- delete ${label(c.group)} (${c.group.shardCount} shards; not in ${source}, --prune)`;
      case 'ensure':
        return `? ensure ${label(c.group)} has ${c.group.shardCount} shards`;
    }
  });
  for (const g of plan.unmanaged)
    lines.push(
      `! keep   ${label(g)} (${g.shardCount} shards): not in ${source}; only --prune deletes it`,
    );
  const count = (action: Change['action']) =>
    plan.changes.filter((c) => c.action === action).length;
  lines.push(
    `plan: ${count('create')} to create, ${count('scale')} to scale, ${count('delete')} to delete, ${plan.unchanged.length} unchanged, ${plan.unmanaged.length} not in the file`,
  );
  return `${lines.join('\n')}\n`;
}

/** The error for a plan with conflicts (see {@link Plan.conflicts}), or null when it has none. */
export function conflictMessage(plan: Plan, source: string): string | null {
  if (plan.conflicts.length === 0) return null;
  const lines = plan.conflicts.map(
    (c) =>
      `${label(c.group)} (${c.group.shardCount} shards) is not in ${source}, but ${label(c.by)} with ${c.shardCount} shards would move it to ${c.shardCount} too: every group on stream prefix ${c.group.streamPrefix} has the same shard count`,
  );
  return `${source} cannot be applied without changing groups it does not list:\n  ${lines.join('\n  ')}\n  what to do: add them to ${source} with the prefix's new shard count, or run with --prune to delete them`;
}
