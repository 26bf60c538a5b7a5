import { Argument, type Command } from 'commander';
import { changeOf, changeOptions } from '../change.js';
import { CliError } from '../cli-error.js';
import { connect, connectionOptions, type ConnectionFlags } from '../connection.js';
import type { GroupDetail } from '../monitoring.js';
import { groupLabel, parseGroup, positiveInt, type GroupName } from '../options.js';

type ChangeFlags = ConnectionFlags & { requestedBy: string; reason: string };

/** The one line a group mutation prints: what was done and the group's state after it. */
function report(done: string, group: GroupDetail): void {
  process.stdout.write(
    `${done} ${groupLabel(group)}: status ${group.status}, ${group.shardCount} shards, producers ${group.producersPaused ? 'paused' : 'running'}\n`,
  );
}

/**
 * A `<group>` mutation with `requestedBy`/`reason` and nothing else: POSTs `suffix` under the
 * group's `/admin/` path and reports `done`.
 */
function groupCommand(
  parent: Command,
  name: string,
  description: string,
  suffix: string,
  done: string,
): void {
  changeOptions(
    connectionOptions(
      parent
        .command(name)
        .description(description)
        .argument('<group>', '<streamPrefix>:<consumerGroup>', parseGroup),
    ),
  ).action(async (group: GroupName, flags: ChangeFlags) =>
    report(done, await (await connect(flags)).admin(group, suffix, changeOf(flags))),
  );
}

/** `freeze`, `unfreeze`, `recovery`, `producers pause|resume`. */
export function registerAdminCommands(program: Command): void {
  groupCommand(
    program,
    'freeze',
    'refuse admin changes to a group until unfrozen (recovery step 1)',
    '/freeze',
    'froze',
  );
  groupCommand(
    program,
    'unfreeze',
    'accept admin changes to a frozen group again',
    '/unfreeze',
    'unfroze',
  );

  const producers = program
    .command('producers')
    .description('tell the producers of a group to pause or resume (routing producersPaused)');
  groupCommand(producers, 'pause', 'pause producers', '/producers/pause', 'paused producers of');
  groupCommand(
    producers,
    'resume',
    'resume producers',
    '/producers/resume',
    'resumed producers of',
  );

  changeOptions(
    connectionOptions(
      program
        .command('recovery')
        .description(
          'recover a failed-closed group: resume restored metadata, or recreate it as a new lifecycle',
        )
        .argument('<group>', '<streamPrefix>:<consumerGroup>', parseGroup)
        .addArgument(
          new Argument('<action>', 'resume or recreate').choices(['resume', 'recreate']),
        ),
    ),
  )
    .option('--shard-count <n>', 'recreate: the shard count of the new lifecycle', positiveInt)
    .action(
      async (
        group: GroupName,
        action: 'resume' | 'recreate',
        flags: ChangeFlags & { shardCount?: number },
      ) => {
        if (action === 'recreate' && flags.shardCount === undefined)
          throw new CliError(
            'recovery recreate needs --shard-count <n> (the shard count of the new lifecycle)',
          );
        if (action === 'resume' && flags.shardCount !== undefined)
          throw new CliError(
            'recovery resume keeps the restored shard count: --shard-count is for recreate (a new lifecycle); scale the group once it is resumed',
          );
        const api = await connect(flags);
        const body = {
          action: action.toUpperCase(),
          ...(action === 'recreate' ? { shardCount: flags.shardCount } : {}),
        };
        report(
          action === 'resume' ? 'resumed' : 'recreated',
          await api.admin(group, '/recovery', changeOf(flags), body),
        );
      },
    );
}
