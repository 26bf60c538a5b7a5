import type { Clock } from '../machines/clock.js';
import { allShards } from '../machines/group-state.js';
import { groupId, type GroupRef } from '../machines/types.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { GroupPage } from '../store/store.js';
import { entryAgeSeconds, type ReadBound, type StreamsReader } from '../streams/streams-reader.js';
import type { GroupEntry } from './group-entry.js';
import type { GroupSnapshot } from './types.js';
import type { LagTotals, LagView, ShardLagView } from '../streams/lag-view.js';

export type { LagTotals, LagView, ShardLagView };

/** A group whose lag grew this many intervals in a row, with live members, is FALLING_BEHIND. */
export const FALLING_BEHIND_INTERVALS = 3;

export interface GroupLagOptions {
  /** Null when `coordinator.streams.url` is unset in embedded mode. */
  readonly reader: StreamsReader | null;
  readonly clock: Clock;
  readonly metrics: Metrics;
  readonly logger: Logger;
  /** `coordinator.streams.lag-cache`. */
  readonly cacheMs: number;
  /** `coordinator.streams.lag-interval`; 0: no metrics refresh. */
  readonly intervalMs: number;
  /** `coordinator.streams.lag-budget`: groups read per interval. */
  readonly budget: number;
  readonly shardMetrics: boolean;
  /** The store's registry of every group, a page at a time (`Store.listGroups`). */
  readonly registry: (page: { cursor?: string | undefined; limit: number }) => Promise<GroupPage>;
  /** Whether this replica owns the group, by the ownership seam's decision (no I/O). */
  readonly owns: (ref: GroupRef) => boolean;
  /**
   * The entry of a group this replica owns, loaded the way every owned group is when it is not
   * loaded yet; null when it is served elsewhere after all (it moved meanwhile).
   */
  readonly entryOf: (ref: GroupRef) => Promise<GroupEntry | null>;
  /** The groups loaded here now. */
  readonly entries: () => readonly GroupEntry[];
  readonly snapshotOf: (entry: GroupEntry) => GroupSnapshot;
}

/** Groups read at once by the metrics refresh. */
const REFRESH_CONCURRENCY = 16;
/** Groups listed per page of the registry by the metrics refresh. */
const REGISTRY_PAGE = 500;

/**
 * Lag of the groups this replica owns: read on demand for the lag endpoint (cached for
 * `lag-cache`), and for the metrics every `lag-interval`, at most `lag-budget` groups per
 * interval in turn, so 10,000 groups never stall the replica or Redis. The metrics cover every
 * group of the store's registry this replica owns, loaded or not: an idle group (no member, no
 * producer) is exactly the one a lag alert is for, and after a restart nothing else loads it.
 */
export class GroupLag {
  /**
   * Readings of the lag endpoint, each reused for `lag-cache`: only those of the last
   * `lag-cache` are kept (a reading holds every shard's), not one per group ever read.
   */
  private readonly cache = new Map<string, { at: number; view: Promise<LagView> }>();
  /** When {@link cache} was last rid of its expired readings. */
  private prunedAt = Number.NEGATIVE_INFINITY;
  /** Totals of the last refreshes per group (newest last), for FALLING_BEHIND. */
  private readonly history = new Map<string, number[]>();
  /** When each group's metrics were last measured (epoch ms). */
  private readonly measured = new Map<string, { ref: GroupRef; at: number; shards: number[] }>();
  /**
   * Where the refresh goes on in the store's registry: owned groups listed but not read yet
   * (read first, in order), and the cursor of the page after them (undefined: the first page).
   */
  private listed: GroupRef[] = [];
  private cursor: string | undefined = undefined;
  /** Where the next round starts among the groups loaded here, while the registry cannot be read. */
  private loadedTurn = 0;

  constructor(private readonly options: GroupLagOptions) {}

  /** Starts refreshing the lag metrics; returns the function that stops it. */
  start(): () => void {
    const { clock, intervalMs, logger, reader } = this.options;
    if (intervalMs <= 0 || reader === null) return () => undefined;
    let running = false;
    return clock.every(intervalMs, () => {
      if (running) return;
      running = true;
      this.refresh()
        .catch((error: unknown) => logger.info('lag refresh failed', { error: String(error) }))
        .finally(() => {
          running = false;
        });
    });
  }

  /** The lag of the group in `snapshot`, read at most once per `lag-cache`. */
  read(snapshot: GroupSnapshot): Promise<LagView> {
    const { clock, cacheMs } = this.options;
    const group = snapshot.context.group;
    const id = groupId(group);
    const now = clock.now();
    const cached = this.cache.get(id);
    if (cached && now - cached.at < cacheMs) return cached.view;
    this.pruneCache(now);
    const view = this.measure(snapshot, 'reading');
    this.cache.set(id, { at: now, view });
    view.catch(() => this.cache.delete(id));
    return view;
  }

  /** The number of lag readings kept for reuse (tests). */
  get cached(): number {
    return this.cache.size;
  }

  /** Drops the expired readings, at most once per `lag-cache` (so O(1) per reading on average). */
  private pruneCache(now: number): void {
    const { cacheMs } = this.options;
    if (now - this.prunedAt < cacheMs) return;
    this.prunedAt = now;
    for (const [id, { at }] of this.cache) if (now - at >= cacheMs) this.cache.delete(id);
  }

  /** Health hints of a group: `FALLING_BEHIND` while its lag keeps growing with live members. */
  hints(snapshot: GroupSnapshot): string[] {
    const group = snapshot.context.group;
    const totals = this.history.get(groupId(group));
    if (!totals || group.members.size === 0) return [];
    if (totals.length <= FALLING_BEHIND_INTERVALS) return [];
    const recent = totals.slice(-(FALLING_BEHIND_INTERVALS + 1));
    const growing = recent.every((total, i) => i === 0 || total > recent[i - 1]!);
    return growing ? ['FALLING_BEHIND'] : [];
  }

  /**
   * One metrics round: the next `lag-budget` groups of the registry this replica owns, a few at
   * a time; a group owned here but not loaded yet is loaded (owning a group is serving it).
   */
  async refresh(): Promise<void> {
    const { entries, budget, logger, clock } = this.options;
    this.pruneCache(clock.now());
    this.forgetGone(entries());
    this.updateAges();
    let batch: GroupRef[];
    try {
      batch = await this.nextOwned(budget);
    } catch (error) {
      // The registry cannot be read (the store is down): the groups loaded here are read still,
      // as long as this replica may serve them.
      logger.info('lag refresh: the group registry cannot be read; reading the loaded groups', {
        error: String(error),
      });
      batch = this.loadedInTurn(budget);
    }
    for (let i = 0; i < batch.length; i += REFRESH_CONCURRENCY) {
      await Promise.all(batch.slice(i, i + REFRESH_CONCURRENCY).map((ref) => this.refreshOne(ref)));
    }
  }

  /**
   * The next `count` groups of the registry this replica owns, in turn from where the last round
   * stopped, each at most once: fewer when it owns fewer (the round stops where it started).
   */
  private async nextOwned(count: number): Promise<GroupRef[]> {
    const { registry, owns } = this.options;
    const batch: GroupRef[] = [];
    const taken = new Set<string>();
    // A round lists the registry to its end and, when it began in the middle, from its start
    // to its end once more (meeting a group taken in this round ends it sooner).
    let ends = this.listed.length === 0 && this.cursor === undefined ? 1 : 0;
    while (batch.length < count) {
      if (this.listed.length === 0) {
        if (ends === 2) break;
        let page: GroupPage;
        try {
          page = await registry({ cursor: this.cursor, limit: REGISTRY_PAGE });
        } catch (error) {
          // The groups taken so far are read; the next round lists on from here.
          if (batch.length > 0) break;
          throw error;
        }
        this.listed = page.groups.filter(owns);
        this.cursor = page.nextCursor ?? undefined;
        if (page.nextCursor === null) ends++;
        continue;
      }
      const ref = this.listed[0]!;
      const id = groupId(ref);
      // Round the whole registry: the next round starts here.
      if (taken.has(id)) break;
      this.listed.shift();
      taken.add(id);
      batch.push(ref);
    }
    return batch;
  }

  /** The next `count` groups loaded here, in turn from where the last such round stopped. */
  private loadedInTurn(count: number): GroupRef[] {
    const loaded = this.options.entries();
    if (loaded.length === 0) return [];
    const n = Math.min(count, loaded.length);
    const start = this.loadedTurn % loaded.length;
    this.loadedTurn = (start + n) % loaded.length;
    return Array.from({ length: n }, (_, i) => loaded[(start + i) % loaded.length]!.ref);
  }

  /**
   * Reads one owned group's lag into the metrics. A group not loaded (deleted or moved
   * meanwhile, store down) is left out; one not read (streams down) keeps its last values, and
   * its age gauge grows (never 0).
   */
  private async refreshOne(ref: GroupRef): Promise<void> {
    const { owns, entryOf, snapshotOf, clock, reader } = this.options;
    // Asked again: the owners may have changed since the registry was listed.
    if (!owns(ref)) return;
    const entry = await entryOf(ref).catch(() => null);
    if (entry === null) return;
    const triedAt = clock.now();
    // Read at the pace the streams Redis answers, each slice bounded: the whole reading of a
    // large group on a distant Redis outlasts the lag request's bound, and its series would
    // never be written (docs/operations.md#lag).
    const view = await this.measure(snapshotOf(entry), 'slice').catch(() => null);
    // Left this replica while it was read: reported by its new owner, or nowhere.
    if (entry.phase !== 'owned') return;
    if (view?.totals) this.record(entry.ref, view, clock.now());
    else if (view === null || reader !== null) this.unmeasured(entry.ref, triedAt);
  }

  /**
   * A group served here whose lag could not be read: one never measured here (the streams
   * down since this replica started, its shards not known) gets its age gauge all the same,
   * counted from this first try, so the alert on the age fires for it too (an absent series
   * never does).
   */
  private unmeasured(ref: GroupRef, at: number): void {
    const id = groupId(ref);
    if (this.measured.has(id)) return;
    this.measured.set(id, { ref, at, shards: [] });
    this.options.metrics.groupLagMeasuredAge.set(
      { stream_prefix: ref.streamPrefix, consumer_group: ref.consumerGroup },
      Math.max(0, (this.options.clock.now() - at) / 1000),
    );
  }

  private async measure(snapshot: GroupSnapshot, bound: ReadBound): Promise<LagView> {
    const { reader, clock } = this.options;
    const group = snapshot.context.group;
    const base = { streamPrefix: group.streamPrefix, consumerGroup: group.consumerGroup };
    const unavailable = (reason: string): LagView => ({
      ...base,
      measuredAt: new Date(clock.now()).toISOString(),
      available: false,
      reason,
      shards: [],
      totals: null,
    });
    if (reader === null) {
      return unavailable(
        'the coordinator does not know where the streams are: set coordinator.streams.url (COORDINATOR_STREAMS_URL)',
      );
    }
    const records = allShards(group);
    if (records.length === 0) {
      // A group failed closed whose metadata cannot be read (lost, corrupt) stands in with no
      // shards: its streams are not known, and zeros would read as caught up.
      return unavailable(
        'the group failed closed and its metadata cannot be read: its shards are not known until it is recovered',
      );
    }
    const readings = await reader.read(
      records.map((r) => `${group.streamPrefix}:${r.shard}`),
      group.consumerGroup,
      { bound },
    );
    const shards = records.map((record, i): ShardLagView => {
      const reading = readings[i]!;
      const member = record.owner === null ? undefined : group.members.get(record.owner);
      return {
        shard: record.shard,
        stream: reading.stream,
        owner: record.owner,
        memberEpoch: member?.memberEpoch ?? null,
        length: reading.length,
        lagEntries: reading.lagEntries,
        lagExact: reading.lagExact,
        pending: reading.pending,
        oldestPendingMs: reading.oldestPendingMs,
        lastDeliveredId: reading.lastDeliveredId,
        lastEntryId: reading.lastEntryId,
        lagSeconds: roundSeconds(
          entryAgeSeconds(reading.oldestUndeliveredId, reading.serverTimeMs),
        ),
        deadLetters: reading.deadLetters,
        retiring: record.state === 'retiring',
        missing: reading.missing,
        noConsumerGroup: reading.noConsumerGroup,
        error: reading.error,
      };
    });
    return {
      ...base,
      measuredAt: new Date(clock.now()).toISOString(),
      available: true,
      streams: reader.describe(),
      shards,
      totals: {
        lagEntries: shards.reduce((sum, s) => sum + s.lagEntries, 0),
        pending: shards.reduce((sum, s) => sum + s.pending, 0),
        maxLagSeconds: shards.reduce((max, s) => Math.max(max, s.lagSeconds), 0),
        shardsBehind: shards.filter((s) => s.lagEntries > 0).length,
        shardsUnreadable: shards.filter((s) => s.error).length,
      },
    };
  }

  /** Sets the group's gauges and remembers its total for FALLING_BEHIND. */
  private record(ref: GroupRef, view: LagView, now: number): void {
    const { metrics, shardMetrics } = this.options;
    if (!view.totals) return;
    const labels = { stream_prefix: ref.streamPrefix, consumer_group: ref.consumerGroup };
    metrics.groupLagEntries.set(labels, view.totals.lagEntries);
    metrics.groupLagSeconds.set(labels, view.totals.maxLagSeconds);
    metrics.groupPendingEntries.set(labels, view.totals.pending);
    metrics.groupLagUnreadableShards.set(labels, view.totals.shardsUnreadable ?? 0);
    metrics.groupLagMeasuredAge.set(labels, 0);
    const id = groupId(ref);
    const previous = this.measured.get(id);
    if (shardMetrics) {
      for (const shard of previous?.shards ?? []) {
        if (!view.shards.some((s) => s.shard === shard)) {
          metrics.shardLagEntries.remove({ ...labels, shard: String(shard) });
        }
      }
      for (const s of view.shards) {
        metrics.shardLagEntries.set({ ...labels, shard: String(s.shard) }, s.lagEntries);
      }
    }
    this.measured.set(id, { ref, at: now, shards: view.shards.map((s) => s.shard) });
    const totals = [...(this.history.get(id) ?? []), view.totals.lagEntries];
    this.history.set(id, totals.slice(-(FALLING_BEHIND_INTERVALS + 1)));
  }

  /** The age gauge of every group measured here, as of now. */
  private updateAges(): void {
    const now = this.options.clock.now();
    for (const { ref, at } of this.measured.values()) {
      this.options.metrics.groupLagMeasuredAge.set(
        { stream_prefix: ref.streamPrefix, consumer_group: ref.consumerGroup },
        Math.max(0, (now - at) / 1000),
      );
    }
  }

  /** Groups no longer served here leave the metrics (their new owner reports them). */
  private forgetGone(owned: readonly GroupEntry[]): void {
    const here = new Set(owned.map((e) => groupId(e.ref)));
    for (const [id, { ref }] of this.measured) {
      if (!here.has(id)) this.forget(ref);
    }
  }

  /**
   * The group left this replica (handed over, deleted, dropped): its series go now, not at the
   * next refresh, so that no two replicas report it and a deleted group is not reported at all.
   */
  forget(ref: GroupRef): void {
    const { metrics } = this.options;
    const id = groupId(ref);
    const measured = this.measured.get(id);
    if (measured) {
      const labels = { stream_prefix: ref.streamPrefix, consumer_group: ref.consumerGroup };
      metrics.groupLagEntries.remove(labels);
      metrics.groupLagSeconds.remove(labels);
      metrics.groupPendingEntries.remove(labels);
      metrics.groupLagUnreadableShards.remove(labels);
      metrics.groupLagMeasuredAge.remove(labels);
      for (const shard of measured.shards)
        metrics.shardLagEntries.remove({ ...labels, shard: String(shard) });
    }
    this.measured.delete(id);
    this.history.delete(id);
    this.cache.delete(id);
  }

  async close(): Promise<void> {
    await this.options.reader?.close();
  }
}

function roundSeconds(seconds: number): number {
  return Math.round(seconds * 1000) / 1000;
}
