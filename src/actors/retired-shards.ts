import { retiringRecords } from '../machines/group-state.js';
import { groupId, type GroupRef, type GroupState } from '../machines/types.js';
import { groupLogFields } from '../observability/logger.js';
import { groupOf, isFailedClosed } from './group-entry.js';
import type { ReplicaWorkOptions } from './replica-work.js';

export type RetiredShardsOptions = ReplicaWorkOptions;

/**
 * Retiring shards that no member reads (a scale-in of a group without members, or whose last
 * member left): they wait ownerless for the next member, which reads them to their end. Where
 * the coordinator can read the streams, it seals such a shard itself, so producers with older
 * routing are refused by it at once, and lets the shard go when the group has nothing left
 * unread or unacknowledged before the seal (docs/architecture.md#migrations). Never drops a
 * shard with unread entries.
 */
export class RetiredShards {
  /** Groups being checked now: a round does not start a second check of the same group. */
  private readonly checking = new Set<string>();

  constructor(private readonly options: RetiredShardsOptions) {}

  /** Checks every group this replica serves that has ownerless retiring shards. */
  async sweep(): Promise<void> {
    if (this.options.reader === null) return;
    for (const entry of this.options.entries()) {
      if (!isFailedClosed(entry) && ownerless(groupOf(entry)).length > 0)
        await this.check(entry.ref);
    }
  }

  /** Seals and, where drained, lets go the ownerless retiring shards of `ref`. Never throws. */
  async check(ref: GroupRef): Promise<void> {
    const { reader, withEntry, dispatch, clock, logger } = this.options;
    const id = groupId(ref);
    if (reader === null || this.checking.has(id)) return;
    this.checking.add(id);
    try {
      await withEntry(ref, async (entry) => {
        if (isFailedClosed(entry)) return;
        const group = groupOf(entry);
        const shards = ownerless(group);
        if (shards.length === 0) return;
        const seal = group.layout.id
          ? { id: group.layout.id, version: group.layout.version }
          : { id: group.lifecycleId, version: group.metadataVersion };
        // Where the group's members would start a shard they never read (the SDK's
        // `groupStart`): the beginning for `earliest`, its creation for `latest`.
        const startFromMs = group.startAt === 'latest' ? group.startFrom : null;
        const drained: number[] = [];
        for (const shard of shards) {
          const result = await reader.sealRetired(
            `${group.streamPrefix}:${shard}`,
            group.consumerGroup,
            seal,
            startFromMs,
          );
          if (result.drained) drained.push(shard);
        }
        if (drained.length === 0) return;
        await dispatch(entry, {
          type: 'RETIRED_SHARDS_DRAINED',
          now: clock.now(),
          shards: drained,
        });
        logger.info('retiring shards read to their end leave the group', {
          ...groupLogFields(ref),
          shards: drained,
        });
      });
    } catch (error) {
      logger.debug('retiring shards not checked now', {
        ...groupLogFields(ref),
        reason: error instanceof Error ? error.message : String(error),
      });
    } finally {
      this.checking.delete(id);
    }
  }
}

/** Retiring shards of `group` that no member has. */
function ownerless(group: GroupState): number[] {
  return retiringRecords(group)
    .filter((r) => r.owner === null)
    .map((r) => r.shard);
}
