import { setTimeout as sleep } from 'node:timers/promises';
import type { Command } from 'commander';
import { changeOf, changeOptions } from '../change.js';
import { CliError } from '../cli-error.js';
import { connect, connectionOptions, type ConnectionFlags } from '../connection.js';
import {
  durationOption,
  groupLabel,
  parseGroup,
  positiveInt,
  progress,
  type GroupName,
} from '../options.js';
import { listAllGroups } from '../monitoring.js';
import { scaleDuplicateSensitive } from '../scale-procedure.js';
import { watchMigration } from '../watch-migration.js';

interface ScaleFlags extends ConnectionFlags {
  requestedBy: string;
  reason: string;
  duplicateSensitive?: boolean;
  drain: number;
  refresh: number;
  routingTimeout: number;
  watch?: boolean;
  interval: number;
  timeout: number;
}

/** `scale` (with `--watch`, `--duplicate-sensitive`) and `rollback`. */
export function registerScaleCommands(program: Command): void {
  changeOptions(
    connectionOptions(
      program
        .command('scale')
        .description(
          'change the shard count of a group (with --duplicate-sensitive: pause producers around it)',
        )
        .argument('<group>', '<streamPrefix>:<consumerGroup>', parseGroup)
        .argument('<shardCount>', 'new shard count', positiveInt),
    ),
  )
    .option('--watch', 'print progress until the migration has converged')
    .addOption(durationOption('--interval <duration>', 'with --watch: time between reads', '1s'))
    .addOption(
      durationOption('--timeout <duration>', 'with --watch: give up after (exit code 3)', '10m'),
    )
    .option(
      '--duplicate-sensitive',
      'pause producers, drain, scale, wait for routing, refresh, resume',
    )
    .addOption(durationOption('--drain <duration>', 'wait after pausing producers', '30s'))
    .addOption(
      durationOption('--refresh <duration>', 'wait for producers to refresh routing', '10s'),
    )
    .addOption(
      durationOption('--routing-timeout <duration>', 'give up waiting for routing after', '2m'),
    )
    .action(async (group: GroupName, shardCount: number, flags: ScaleFlags) => {
      const api = await connect(flags);
      const change = changeOf(flags);
      let migrationId: string;
      if (flags.duplicateSensitive) {
        // Ctrl-C (or SIGTERM) stops the procedure at its next step, so producers are resumed
        // (before the scale) or said to stay paused (after it); a second one ends coordctl.
        const stop = new AbortController();
        const onSignal = () => {
          if (stop.signal.aborted) process.exit(130);
          stop.abort(new CliError('interrupted'));
        };
        process.on('SIGINT', onSignal);
        process.on('SIGTERM', onSignal);
        try {
          migrationId = await scaleDuplicateSensitive(api, {
            ...group,
            shardCount,
            change,
            groupsOnPrefix: async () =>
              (await listAllGroups(api))
                .filter((g) => g.streamPrefix === group.streamPrefix)
                .map((g) => g.consumerGroup),
            drainMs: flags.drain,
            refreshMs: flags.refresh,
            routingTimeoutMs: flags.routingTimeout,
            sleep: (ms) =>
              sleep(ms, undefined, { signal: stop.signal }).catch(() => {
                throw stop.signal.reason as Error;
              }),
            signal: stop.signal,
            progress,
          });
        } finally {
          process.off('SIGINT', onSignal);
          process.off('SIGTERM', onSignal);
        }
      } else {
        const { migration } = await api.scale(
          group.streamPrefix,
          group.consumerGroup,
          shardCount,
          change,
        );
        migrationId = migration.migrationId;
        progress(`scaling ${groupLabel(group)} to ${shardCount} shards: migration ${migrationId}`);
      }
      process.stdout.write(`${migrationId}\n`);
      if (flags.watch) {
        await watchMigration(api, group, migrationId, {
          intervalMs: flags.interval,
          timeoutMs: flags.timeout,
          sleep: (ms) => sleep(ms),
          now: () => Date.now(),
          progress,
        });
        progress(`migration ${migrationId} converged`);
      }
    });

  changeOptions(
    connectionOptions(
      program
        .command('rollback')
        .description('roll a migration back while allowed (default: the active one)')
        .argument('<group>', '<streamPrefix>:<consumerGroup>', parseGroup)
        .argument('[migrationId]', 'the migration to roll back', 'current'),
    ),
  ).action(async (group: GroupName, migrationId: string, flags: ScaleFlags) => {
    const api = await connect(flags);
    const { migration } = await api.admin<{
      migration: { migrationId: string; fromShardCount: number; toShardCount: number };
    }>(group, `/migrations/${encodeURIComponent(migrationId)}/rollback`, changeOf(flags));
    progress(
      `rolling ${groupLabel(group)} back from ${migration.fromShardCount} to ${migration.toShardCount} shards: migration ${migration.migrationId}`,
    );
    process.stdout.write(`${migration.migrationId}\n`);
  });
}
