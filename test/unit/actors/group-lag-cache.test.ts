import { describe, expect, it } from 'vitest';
import { GroupLag } from '../../../src/actors/group-lag.js';
import type { GroupEntry } from '../../../src/actors/group-entry.js';
import type { GroupSnapshot } from '../../../src/actors/types.js';
import { CoordinatorError } from '../../../src/errors.js';
import { allShards } from '../../../src/machines/group-state.js';
import { ManualClock } from '../../../src/machines/clock.js';
import { Metrics } from '../../../src/observability/metrics.js';
import type { ShardStreamReading, StreamsReader } from '../../../src/streams/streams-reader.js';
import { makeGroupState } from '../../support/fixtures.js';
import { silentLogger } from './actor-harness.js';

const CACHE_MS = 1_000;

function reading(stream: string): ShardStreamReading {
  return {
    stream,
    missing: false,
    length: 3,
    lastEntryId: '3-0',
    noConsumerGroup: false,
    lastDeliveredId: '1-0',
    lagEntries: 2,
    lagExact: true,
    pending: 0,
    oldestUndeliveredId: '2-0',
    oldestPendingMs: null,
    serverTimeMs: 10,
    deadLetters: 0,
    error: null,
  };
}

function lagRig() {
  const clock = new ManualClock(1_000_000);
  let reads = 0;
  const reader = {
    read: (streams: readonly string[]) => {
      reads++;
      return Promise.resolve(streams.map(reading));
    },
    describe: () => 'fake',
    close: () => Promise.resolve(),
  } as unknown as StreamsReader;
  const lag = new GroupLag({
    reader,
    clock,
    metrics: new Metrics(),
    logger: silentLogger(),
    cacheMs: CACHE_MS,
    intervalMs: 0,
    budget: 10,
    shardMetrics: false,
    registry: () => Promise.resolve({ groups: [], nextCursor: null }),
    owns: () => true,
    entryOf: () => Promise.resolve(null),
    entries: () => [],
    snapshotOf: () => {
      throw new Error('not used');
    },
  });
  const snapshot = (i: number) =>
    ({ context: { group: makeGroupState({ consumerGroup: `g${i}` }) } }) as GroupSnapshot;
  return { clock, lag, snapshot, reads: () => reads };
}

describe('lag readings kept for reuse', () => {
  it('reuses a reading for lag-cache', async () => {
    const { clock, lag, snapshot, reads } = lagRig();
    const first = await lag.read(snapshot(0));
    expect(first.totals?.lagEntries).toBe(8);
    clock.advance(CACHE_MS - 1);
    expect(await lag.read(snapshot(0))).toBe(first);
    expect(reads()).toBe(1);
    clock.advance(1);
    expect(await lag.read(snapshot(0))).not.toBe(first);
    expect(reads()).toBe(2);
  });

  it('keeps only the readings of the last lag-cache, not one per group ever read', async () => {
    // A reading holds every shard's: one kept per group read once (a dashboard going through
    // all of them) would stay for as long as the group is served here.
    const { clock, lag, snapshot } = lagRig();
    for (let i = 0; i < 100; i++) await lag.read(snapshot(i));
    expect(lag.cached).toBe(100);
    clock.advance(CACHE_MS);
    await lag.read(snapshot(100));
    expect(lag.cached).toBe(1);
    // Expired readings also go with the metrics refresh, read or not.
    for (let i = 0; i < 10; i++) await lag.read(snapshot(i));
    clock.advance(CACHE_MS);
    await lag.refresh();
    expect(lag.cached).toBe(0);
  });
});

describe('what bounds a lag reading', () => {
  it('the metrics refresh reads each slice within the timeout, the lag request the whole reading', async () => {
    // The reader answers as for a 1,024-shard group on a distant streams Redis: its whole
    // reading never fits the bound of a lag request (STREAMS_UNAVAILABLE), each slice of it does.
    const bounds: string[] = [];
    const reader = {
      read: (streams: readonly string[], _group: string, options?: { bound?: string }) => {
        const bound = options?.bound ?? 'reading';
        bounds.push(bound);
        if (bound !== 'slice') {
          return Promise.reject(
            new CoordinatorError('STREAMS_UNAVAILABLE', 'cannot be read (no answer)'),
          );
        }
        return Promise.resolve(streams.map(reading));
      },
      describe: () => 'far',
      close: () => Promise.resolve(),
    } as unknown as StreamsReader;
    const group = makeGroupState({ consumerGroup: 'big' });
    const snapshot = { context: { group } } as GroupSnapshot;
    const ref = { streamPrefix: group.streamPrefix, consumerGroup: group.consumerGroup };
    const entry = { ref, phase: 'owned' } as unknown as GroupEntry;
    const metrics = new Metrics();
    const lag = new GroupLag({
      reader,
      clock: new ManualClock(1_000_000),
      metrics,
      logger: silentLogger(),
      cacheMs: CACHE_MS,
      intervalMs: 0,
      budget: 10,
      shardMetrics: false,
      registry: () => Promise.resolve({ groups: [ref], nextCursor: null }),
      owns: () => true,
      entryOf: () => Promise.resolve(entry),
      entries: () => [entry],
      snapshotOf: () => snapshot,
    });

    await lag.refresh();
    const text = await metrics.registry.metrics();
    const labels = `{stream_prefix="${ref.streamPrefix}",consumer_group="big"}`;
    expect(text).toContain(`coord_group_lag_entries${labels} ${2 * allShards(group).length}`);
    expect(text).toContain(`coord_group_lag_measured_age_seconds${labels} 0`);
    await expect(lag.read(snapshot)).rejects.toMatchObject({ code: 'STREAMS_UNAVAILABLE' });
    expect(bounds).toEqual(['slice', 'reading']);
  });
});
