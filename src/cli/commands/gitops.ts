import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { CoordinatorApiError } from '../../client/index.js';
import type { CliApi } from '../api.js';
import { CliError, EXIT } from '../cli-error.js';
import { connect, connectionOptions, type ConnectionFlags } from '../connection.js';
import { applyChanges } from '../gitops/apply.js';
import { parseDesiredState, type DesiredState } from '../gitops/desired-state.js';
import {
  conflictMessage,
  planChanges,
  renderPlan,
  type Change,
  type Plan,
} from '../gitops/plan.js';
import { listAllGroups } from '../monitoring.js';
import { progress } from '../options.js';
import { outputOption, print, type OutputFormat } from '../output.js';
import { RequestError } from '../request-error.js';

type GitOpsFlags = ConnectionFlags & {
  file: string;
  prune?: boolean;
  force?: boolean;
  output: OutputFormat;
};

/** Reads and validates the desired-state file (`-` is stdin). */
async function readDesiredState(file: string): Promise<DesiredState> {
  let text: string;
  try {
    text = file === '-' ? await readStdin() : await readFile(file, 'utf8');
  } catch (error) {
    throw new CliError(`cannot read ${file}: ${(error as Error).message}`);
  }
  try {
    return parseDesiredState(text, file);
  } catch (error) {
    throw new CliError(
      `${(error as Error).message}\n  what to do: fix the file and run the command again`,
    );
  }
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(Buffer.from(chunk as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * The plan against what the read APIs show now; refused when it would move a group the file
 * does not list (nothing is changed then).
 */
async function currentPlan(
  api: CliApi,
  desired: DesiredState,
  prune: boolean,
  source: string,
): Promise<Plan> {
  const plan = planChanges(desired, await listAllGroups(api), { prune });
  const conflict = conflictMessage(plan, source);
  if (conflict) throw new CliError(conflict);
  return plan;
}

function isForbidden(error: unknown): boolean {
  return (
    error instanceof RequestError &&
    error.cause instanceof CoordinatorApiError &&
    error.cause.status === 403
  );
}

function gitopsCommand(program: Command, name: string, description: string): Command {
  return outputOption(
    connectionOptions(
      program
        .command(name)
        .description(description)
        .requiredOption('-f, --file <desired.yaml>', 'the desired-state file (- for stdin)')
        .option('--prune', 'also delete groups the coordinator has and the file lacks'),
    ),
  );
}

/** `plan -f` and `apply -f`: GitOps over the desired-state file. */
export function registerGitOpsCommands(program: Command): void {
  gitopsCommand(
    program,
    'plan',
    'show what apply would change (exit 0: nothing, 2: changes planned, 1: error); needs READ',
  ).action(async (flags: GitOpsFlags) => {
    const desired = await readDesiredState(flags.file);
    const plan = await currentPlan(await connect(flags), desired, flags.prune ?? false, flags.file);
    print(flags.output, plan, () => renderPlan(plan, flags.file));
    if (plan.changes.length > 0) throw new CliError('', EXIT.CHANGES_PLANNED);
  });

  gitopsCommand(
    program,
    'apply',
    'make the coordinator match the file, idempotently, each change audited with its requestedBy/reason; needs WRITE (and READ to skip unchanged groups)',
  )
    .option('--force', 'with --prune: delete groups even while they have live members')
    .action(async (flags: GitOpsFlags) => {
      // Alone it changes nothing: said before anything is read or sent, not ignored.
      if (flags.force && !flags.prune)
        throw new CliError(
          '--force only takes effect with --prune (it lets a prune delete groups that have live members): add --prune, or leave --force out',
        );
      const desired = await readDesiredState(flags.file);
      const api = await connect(flags);
      let changes: readonly Change[];
      try {
        const plan = await currentPlan(api, desired, flags.prune ?? false, flags.file);
        for (const g of plan.unmanaged)
          progress(
            `kept ${g.streamPrefix}:${g.consumerGroup}: not in ${flags.file}; only --prune deletes it`,
          );
        changes = plan.changes;
      } catch (error) {
        if (!isForbidden(error) || flags.prune) throw error;
        progress(
          'the token may not read groups (no READ role): sending the desired state of every group in the file; the coordinator leaves unchanged ones as they are',
        );
        changes = desired.groups.map((group) => ({ action: 'ensure', group }));
      }
      if (changes.length === 0) {
        progress(`nothing to change: the coordinator matches ${flags.file}`);
        return;
      }
      const failed = await applyChanges(api, changes, desired, {
        force: flags.force ?? false,
        progress,
      });
      if (failed > 0)
        throw new CliError(
          `${failed} of ${changes.length} changes failed (see above); the others were made\n  what to do: fix the cause and run apply again (it only makes what is still missing)`,
        );
    });
}
