/**
 * The lag reading of a group (`GET …/lag`, docs/operations.md#lag) as the CLI prints it: a
 * table in the manner of `kafka-consumer-groups --describe`, one row per shard.
 */
import { CoordinatorApiError, type GroupLag } from '../client/index.js';
import type { CliApi } from './api.js';
import type { GroupName } from './options.js';
import { renderTable } from './output.js';
import type { RequestError } from './request-error.js';

/** The lag reading as the SDK types it (the CLI reads the same answer). */
export type Lag = GroupLag;

/**
 * One group's lag reading. With `once`, one attempt within that timeout: a reading that fails is
 * reported at once, not after a round of retries of a few seconds each (`coordctl lag`).
 */
export function getLag(api: CliApi, group: GroupName, once?: { timeoutMs: number }): Promise<Lag> {
  const path = api.groupPath('monitoring', group, '/lag');
  return api.call<Lag>('GET', path, undefined, once ? { ...once, retry: false } : undefined);
}

/** Lag readings `coordctl lag` makes at once. */
export const LAG_READS_AT_ONCE = 8;

/**
 * How long one reading of `coordctl lag` may take: the coordinator answers within a few seconds
 * even when the streams Redis is down (`STREAMS_UNAVAILABLE`).
 */
export const LAG_READ_TIMEOUT_MS = 10_000;

/** `read` of each item, at most `atOnce` at a time; the results in the items' order. */
export async function readAtMost<T, R>(
  items: readonly T[],
  atOnce: number,
  read: (item: T) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await read(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(atOnce, items.length) }, worker));
  return results;
}

/** Why a request failed, in one line: the coordinator's code and message, or why it gave none. */
export function causeOf(error: RequestError): string {
  const { cause } = error;
  if (cause instanceof CoordinatorApiError) return `${cause.code}: ${cause.message}`;
  return cause instanceof Error ? cause.message : String(cause);
}

/** `1.5s`, `3m20s`, `2h5m`: an age an operator reads at a glance. */
export function formatSeconds(seconds: number | null): string {
  if (seconds === null) return '-';
  // Rounded first: 59.96 s is 1m0s, not 60s.
  const tenths = Number(seconds.toFixed(1));
  if (tenths < 60) return `${tenths}s`;
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
    // The stream's own key is broken (not only its dead letters'): nothing of it was read.
    s.error?.startsWith(`${s.stream}: `)
      ? 'unreadable'
      : `${s.lagEntries}${s.lagExact ? '' : '+'}${s.noConsumerGroup ? ' (no group yet)' : ''}`,
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
  // Redis's error about a shard's key, one line each: too long for a cell.
  const errors = lag.shards
    .filter((s) => s.error)
    .map((s) => `shard ${s.shard} unreadable: ${s.error}\n`)
    .join('');
  return `${table}${errors}total: ${t.lagEntries} behind on ${t.shardsBehind} shard(s), ${t.pending} pending, at most ${formatSeconds(t.maxLagSeconds)} behind (measured ${lag.measuredAt})\n`;
}
