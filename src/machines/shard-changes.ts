/**
 * Every change of a group's shard records goes through {@link changeShards}, which names the
 * chart event each change is as it makes it (docs/architecture.md#the-statechart): a shard that
 * starts revoking is REVOKE_REQUESTED, one given up or retired is SHARDS_RELEASED, one handed to
 * a member is SHARDS_GRANTED. A retiring shard changing hands is none of these.
 */
import type { GroupContext } from './context.js';
import { raise } from './context.js';
import type { ChartEventName } from './events.js';
import { ChartEventType } from './events.js';
import { allShards, released, withShards, withoutShards } from './group-state.js';
import type { ShardRecord } from './types.js';

/** No changed records. */
export const NO_CHANGES: ReadonlyMap<number, ShardRecord> = new Map();

/**
 * Applies `changes` (new records by shard), then removes the `removed` shards (retired shards
 * leave the group), and raises what they are.
 */
export function changeShards(
  ctx: GroupContext,
  changes: ReadonlyMap<number, ShardRecord>,
  removed: Iterable<number> = [],
): GroupContext {
  const before = ctx.group.shards;
  const events: ChartEventName[] = [];
  for (const [shard, record] of changes) {
    const event = shardEvent(before[shard], record);
    if (event !== null) events.push(event);
  }
  const gone = [...removed];
  for (const shard of gone) {
    const was = before[shard];
    if (was && was.state !== 'released') events.push(ChartEventType.SHARDS_RELEASED);
  }
  const group = withoutShards(withShards(ctx.group, changes), gone);
  return raise(group === ctx.group ? ctx : { ...ctx, group }, ...events);
}

/**
 * Releases every shard `memberId` owns as assigned or revoking: owner gone, target kept (the
 * caller recomputes targets when membership changed). Retiring shards belong to scale-in and
 * are left alone here.
 */
export function releaseShardsOf(ctx: GroupContext, memberId: string, now: number): GroupContext {
  const changes = new Map<number, ShardRecord>();
  for (const record of allShards(ctx.group)) {
    if (record.owner !== memberId) continue;
    if (record.state !== 'assigned' && record.state !== 'revoking') continue;
    changes.set(record.shard, released(record, now));
  }
  return changeShards(ctx, changes);
}

/** The chart event a shard record changing from `was` to `now` is, or null. */
function shardEvent(was: ShardRecord | undefined, now: ShardRecord): ChartEventName | null {
  if (was === now) return null;
  if (now.state === 'revoking' && was?.state !== 'revoking') return ChartEventType.REVOKE_REQUESTED;
  if (now.state === 'released' && was !== undefined && was.state !== 'released') {
    return ChartEventType.SHARDS_RELEASED;
  }
  if (now.state === 'assigned' && was?.state !== 'assigned') return ChartEventType.SHARDS_GRANTED;
  return null;
}
