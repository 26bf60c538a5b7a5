import { setTimeout as sleep } from 'node:timers/promises';
import { Option, type Command } from 'commander';
import { parseDuration } from '../../config/duration.js';
import type { CliApi } from '../api.js';
import { CliError, EXIT } from '../cli-error.js';
import { connect, connectionOptions, type ConnectionFlags } from '../connection.js';
import { formatSeconds, getLag, type Lag } from '../lag.js';
import { getGroup, listAllGroups } from '../monitoring.js';
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

/** One group's lag, or why it has none (the streams cannot be read, lag not configured). */
async function lagOrProblem(api: CliApi, group: GroupName): Promise<Lag | { problem: string }> {
  try {
    const lag = await getLag(api, group);
    return lag.available ? lag : { problem: lag.reason ?? 'not available' };
  } catch (error) {
    if (error instanceof RequestError) return { problem: error.message };
    throw error;
  }
}

/** `coordctl lag` and `coordctl watch`. */
export function registerLagCommands(program: Command): void {
  const lag = program
    .command('lag')
    .description(
      'every group the token may see, most behind first; exit 2 when one is above --max-lag-seconds',
    )
    .addOption(
      new Option('--max-lag-seconds <seconds>', 'exit 2 when a group is further behind').argParser(
        nonNegative,
      ),
    );
  outputOption(connectionOptions(lag)).action(async () => {
    const flags = lag.opts<LagFlags>();
    const api = await connect(flags);
    const groups = await listAllGroups(api);
    const rows: Array<{ group: (typeof groups)[number]; lag: Lag | { problem: string } }> = [];
    for (const group of groups) rows.push({ group, lag: await lagOrProblem(api, group) });
    const seconds = (r: (typeof rows)[number]) =>
      'problem' in r.lag ? -1 : (r.lag.totals?.maxLagSeconds ?? -1);
    const entries = (r: (typeof rows)[number]) =>
      'problem' in r.lag ? -1 : (r.lag.totals?.lagEntries ?? -1);
    rows.sort((a, b) => seconds(b) - seconds(a) || entries(b) - entries(a));
    const limit = flags.maxLagSeconds;
    const over = limit === undefined ? [] : rows.filter((r) => seconds(r) > limit);
    print(
      flags.output,
      {
        groups: rows.map((r) => ({
          streamPrefix: r.group.streamPrefix,
          consumerGroup: r.group.consumerGroup,
          ...('problem' in r.lag ? { problem: r.lag.problem } : { totals: r.lag.totals }),
        })),
        ...(limit === undefined ? {} : { maxLagSeconds: limit, over: over.length }),
      },
      () =>
        renderTable(
          ['group', 'shards', 'lag', 'lag-seconds', 'pending', 'shards-behind', 'note'],
          rows.map((r) =>
            'problem' in r.lag
              ? [groupLabel(r.group), r.group.shardCount, null, null, null, null, r.lag.problem]
              : [
                  groupLabel(r.group),
                  r.group.shardCount,
                  r.lag.totals?.lagEntries,
                  formatSeconds(r.lag.totals?.maxLagSeconds ?? null),
                  r.lag.totals?.pending,
                  r.lag.totals?.shardsBehind,
                  limit !== undefined && seconds(r) > limit ? `over ${limit}s` : null,
                ],
          ),
        ),
    );
    if (over.length > 0) {
      throw new CliError(
        `${over.length} group(s) more than ${limit}s behind: ${over.map((r) => groupLabel(r.group)).join(', ')}`,
        EXIT.CHANGES_PLANNED,
      );
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
    try {
      while (!stop.signal.aborted) {
        const [detail, lagNow] = await Promise.all([
          getGroup(api, group),
          lagOrProblem(api, group),
        ]);
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
