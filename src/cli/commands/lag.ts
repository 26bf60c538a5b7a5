import { setTimeout as sleep } from 'node:timers/promises';
import { Option, type Command } from 'commander';
import { parseDuration } from '../../config/duration.js';
import { CoordinatorApiError, CoordinatorUnreachableError } from '../../client/index.js';
import type { CliApi } from '../api.js';
import { CliError, EXIT } from '../cli-error.js';
import { connect, connectionOptions, type ConnectionFlags } from '../connection.js';
import {
  causeOf,
  formatSeconds,
  getLag,
  LAG_READ_TIMEOUT_MS,
  LAG_READS_AT_ONCE,
  readAtMost,
  type Lag,
} from '../lag.js';
import { getGroup, listAllGroups, type GroupDetail, type GroupSummary } from '../monitoring.js';
import { groupLabel, parseGroup, type GroupName } from '../options.js';
import { outputOption, print, renderTable, type OutputFormat } from '../output.js';
import { RequestError } from '../request-error.js';

type LagFlags = ConnectionFlags & { output: OutputFormat; maxLagSeconds?: number };

function durationArg(value: string): number {
  const ms = parseDuration(value);
  if (ms === null || ms <= 0) throw new CliError(`not a duration (use e.g. 500ms, 2s): ${value}`);
  return ms;
}

function nonNegative(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new CliError(`not a number of seconds: ${value}`);
  return n;
}

/** Answers of a group moving between replicas: asked once more, shortly after. */
const MOVING = new Set(['GROUP_MOVED', 'OWNER_MOVING']);
const MOVING_RETRY_MS = 500;

/** One group's lag, or why it has none (the streams cannot be read, lag not configured). */
async function lagOrProblem(
  api: CliApi,
  group: GroupName,
  timeoutMs?: number,
): Promise<Lag | { problem: string }> {
  for (let attempt = 0; ; attempt++) {
    try {
      const lag = await getLag(api, group, timeoutMs === undefined ? undefined : { timeoutMs });
      return lag.available && lag.totals ? lag : { problem: lag.reason ?? 'not available' };
    } catch (error) {
      if (!(error instanceof RequestError)) throw error;
      const moving = error.cause instanceof CoordinatorApiError && MOVING.has(error.cause.code);
      if (!moving || attempt > 0) return { problem: causeOf(error) };
      await sleep(MOVING_RETRY_MS);
    }
  }
}

type Row = { group: GroupSummary; lag: Lag | { problem: string } };

/**
 * What a reading could not read: its shards whose keys Redis answered with an error
 * (docs/operations.md#a-broken-shard-stream), or null when it read every shard.
 */
function unreadable(lag: Row['lag']): string | null {
  if ('problem' in lag) return null;
  const broken = lag.shards.filter((s) => s.error);
  if (broken.length === 0) return null;
  return `shard ${broken.map((s) => s.shard).join(', ')} unreadable (${broken[0]!.error})`;
}

/**
 * Whether a failed reading of `coordctl watch` is one that passes (docs/cli.md#reading): the
 * coordinator could not be reached or could not serve it then (5xx), as in a restart, a group
 * moving between replicas or a store outage. A 4xx (login, role, no such group) does not.
 */
function passing(error: unknown): error is RequestError {
  if (!(error instanceof RequestError)) return false;
  const { cause } = error;
  return (
    cause instanceof CoordinatorUnreachableError ||
    (cause instanceof CoordinatorApiError && cause.status >= 500)
  );
}

/** `a:g, b:g`. */
const labels = (rows: readonly Row[]) => rows.map((r) => groupLabel(r.group)).join(', ');

/**
 * Why `coordctl lag --max-lag-seconds` exits 2: the groups further behind, and those whose lag
 * could not be read (by cause), which count as over the limit: a check that cannot see the lag
 * must not pass.
 */
function overMessage(limit: number, behind: readonly Row[], unknown: readonly Row[]): string {
  const parts: string[] = [];
  if (behind.length > 0)
    parts.push(`${behind.length} group(s) more than ${limit}s behind: ${labels(behind)}`);
  const byCause = new Map<string, Row[]>();
  for (const row of unknown) {
    const cause = 'problem' in row.lag ? row.lag.problem : (unreadable(row.lag) ?? '');
    byCause.set(cause, [...(byCause.get(cause) ?? []), row]);
  }
  for (const [cause, rows] of byCause) {
    parts.push(
      `${rows.length} group(s) counted as more than ${limit}s behind: ${labels(rows)} (lag unknown: ${cause})`,
    );
  }
  return parts.join('; ');
}

/** `coordctl lag` and `coordctl watch`. */
export function registerLagCommands(program: Command): void {
  const lag = program
    .command('lag')
    .description(
      'every group the token may see, most behind first; exit 2 when one is above --max-lag-seconds or its lag cannot be read',
    )
    .addOption(
      new Option(
        '--max-lag-seconds <seconds>',
        'exit 2 when a group is further behind, or its lag cannot be read',
      ).argParser(nonNegative),
    );
  outputOption(connectionOptions(lag)).action(async () => {
    const flags = lag.opts<LagFlags>();
    const api = await connect(flags);
    const groups = await listAllGroups(api);
    // A few at a time, one attempt each: with the streams Redis down, every reading fails
    // within seconds, and so does the whole command.
    const lags = await readAtMost(groups, LAG_READS_AT_ONCE, (group) =>
      lagOrProblem(api, group, LAG_READ_TIMEOUT_MS),
    );
    const rows: Row[] = groups.map((group, i) => ({ group, lag: lags[i]! }));
    const seconds = (r: Row) => ('problem' in r.lag ? -1 : (r.lag.totals?.maxLagSeconds ?? -1));
    const entries = (r: Row) => ('problem' in r.lag ? -1 : (r.lag.totals?.lagEntries ?? -1));
    rows.sort((a, b) => seconds(b) - seconds(a) || entries(b) - entries(a));
    const limit = flags.maxLagSeconds;
    const behind = limit === undefined ? [] : rows.filter((r) => seconds(r) > limit);
    const unknown =
      limit === undefined
        ? []
        : rows.filter((r) => 'problem' in r.lag || unreadable(r.lag) !== null);
    const over = [...behind, ...unknown];
    print(
      flags.output,
      {
        groups: rows.map((r) => ({
          streamPrefix: r.group.streamPrefix,
          consumerGroup: r.group.consumerGroup,
          ...('problem' in r.lag ? { problem: r.lag.problem } : { totals: r.lag.totals }),
        })),
        ...(limit === undefined
          ? {}
          : { maxLagSeconds: limit, over: over.length, unknown: unknown.length }),
      },
      () =>
        renderTable(
          ['group', 'shards', 'lag', 'lag-seconds', 'pending', 'shards-behind', 'note'],
          rows.map((r) =>
            'problem' in r.lag
              ? [
                  groupLabel(r.group),
                  r.group.shardCount,
                  null,
                  null,
                  null,
                  null,
                  `lag unknown: ${r.lag.problem}`,
                ]
              : [
                  groupLabel(r.group),
                  r.group.shardCount,
                  r.lag.totals?.lagEntries,
                  formatSeconds(r.lag.totals?.maxLagSeconds ?? null),
                  r.lag.totals?.pending,
                  r.lag.totals?.shardsBehind,
                  unreadable(r.lag) ??
                    (limit !== undefined && seconds(r) > limit ? `over ${limit}s` : null),
                ],
          ),
        ),
    );
    if (limit !== undefined && over.length > 0) {
      throw new CliError(overMessage(limit, behind, unknown), EXIT.CHANGES_PLANNED);
    }
  });

  const watch = program
    .command('watch')
    .description('follow one group live (state, members, lag) until interrupted')
    .argument('<group>', '<streamPrefix>:<consumerGroup>', parseGroup)
    .addOption(
      new Option('--interval <duration>', 'time between readings (e.g. 500ms, 2s)')
        .default(2_000, '2s')
        .argParser(durationArg),
    );
  connectionOptions(watch).action(async (group: GroupName) => {
    const flags = watch.opts<ConnectionFlags & { interval: number }>();
    const interval = flags.interval;
    const api = await connect(flags);
    // Ctrl-C (or SIGTERM) ends the watch cleanly: exit 0 after the current reading.
    const stop = new AbortController();
    const onSignal = () => stop.abort();
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    let last = '';
    let down = ''; // why the last reading failed, said once per outage
    try {
      while (!stop.signal.aborted) {
        let reading: [GroupDetail, Lag | { problem: string }];
        try {
          reading = await Promise.all([getGroup(api, group), lagOrProblem(api, group)]);
        } catch (error) {
          // A replica restarting, a group moving, a store outage: the watch is for exactly
          // those, so it says so and reads again; a refusal of the reading itself ends it.
          if (!passing(error)) throw error;
          const why = causeOf(error);
          if (why !== down)
            process.stderr.write(
              `${new Date().toISOString()}  cannot read ${groupLabel(group)}: ${why}; reading again every ${formatSeconds(interval / 1000)}\n`,
            );
          down = why;
          await sleep(interval, undefined, { signal: stop.signal }).catch(() => undefined);
          continue;
        }
        down = '';
        const [detail, lagNow] = reading;
        const state = JSON.stringify(detail.state);
        const at = new Date().toISOString();
        if (state !== last) {
          process.stdout.write(`${at}  ${last === '' ? 'state' : 'transition →'} ${state}\n`);
          last = state;
        }
        const lagLine =
          'problem' in lagNow
            ? `lag unavailable (${lagNow.problem})`
            : `lag ${lagNow.totals?.lagEntries ?? '-'} (${formatSeconds(lagNow.totals?.maxLagSeconds ?? null)}), pending ${lagNow.totals?.pending ?? '-'}`;
        process.stdout.write(
          `${at}  ${groupLabel(detail)} ${detail.status} ${detail.phase}; ${detail.memberCount} member(s), ${detail.shardCount} shards, version ${detail.metadataVersion}; ${lagLine}\n`,
        );
        await sleep(interval, undefined, { signal: stop.signal }).catch(() => undefined);
      }
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
  });
}
