/**
 * The lag reading of a group (`GET …/lag`, docs/operations.md#lag) as the CLI prints it: a
 * table in the manner of `kafka-consumer-groups --describe`, one row per shard.
 */
import type { GroupLag } from '../client/index.js';
import type { CliApi } from './api.js';
import type { GroupName } from './options.js';
import { renderTable } from './output.js';

/** The lag reading as the SDK types it (the CLI reads the same answer). */
export type Lag = GroupLag;

export function getLag(api: CliApi, group: GroupName): Promise<Lag> {
  return api.get<Lag>(api.groupPath('monitoring', group, '/lag'));
}

/** `1.5s`, `3m20s`, `2h5m`: an age an operator reads at a glance. */
export function formatSeconds(seconds: number | null): string {
  if (seconds === null) return '-';
  if (seconds < 60) return `${Number(seconds.toFixed(1))}s`;
  const whole = Math.round(seconds);
  if (whole < 3600) return `${Math.floor(whole / 60)}m${whole % 60}s`;
  return `${Math.floor(whole / 3600)}h${Math.floor((whole % 3600) / 60)}m`;
}

/** The per-shard table and a totals line; the reason when lag is not available. */
export function lagTable(lag: Lag): string {
  if (!lag.available || !lag.totals) return `lag: not available (${lag.reason ?? 'unknown'})\n`;
  const rows = lag.shards.map((s) => [
    s.retiring ? `${s.shard} (retiring)` : s.shard,
    s.missing ? `${s.stream} (missing)` : s.stream,
    s.owner,
    s.memberEpoch,
    s.length,
    `${s.lagEntries}${s.lagExact ? '' : '+'}${s.noConsumerGroup ? ' (no group yet)' : ''}`,
    formatSeconds(s.lagSeconds),
    s.pending,
    formatSeconds(s.oldestPendingMs === null ? null : s.oldestPendingMs / 1000),
  ]);
  const table = renderTable(
    [
      'shard',
      'stream',
      'owner',
      'epoch',
      'length',
      'lag',
      'lag-seconds',
      'pending',
      'oldest-pending',
    ],
    rows,
  );
  const t = lag.totals;
  return `${table}total: ${t.lagEntries} behind on ${t.shardsBehind} shard(s), ${t.pending} pending, at most ${formatSeconds(t.maxLagSeconds)} behind (measured ${lag.measuredAt})\n`;
}
