import { Command } from 'commander';
import { VERSION } from '../version.js';
import { registerAdminCommands } from './commands/admin.js';
import { registerBackupCommands } from './commands/backup.js';
import { registerConsumptionCommands } from './commands/consumption.js';
import { registerDeadLetterCommands } from './commands/dead-letters.js';
import { registerGitOpsCommands } from './commands/gitops.js';
import { registerHashPasswordCommand } from './commands/hash-password.js';
import { registerLagCommands } from './commands/lag.js';
import { registerLoginCommands } from './commands/login.js';
import { registerReadCommands } from './commands/read.js';
import { registerScaleCommands } from './commands/scale.js';

export { CliError } from './cli-error.js';

/**
 * The `coordctl` program. Results go to stdout, progress and errors to stderr. Errors are
 * thrown (commander's too, through `exitOverride`) and turned into an exit code by main.ts.
 */
export function buildProgram(): Command {
  const program = new Command('coordctl')
    .description('stream-coordinator command-line tool (docs/cli.md)')
    .version(VERSION)
    // A usage error prints the one line that is wrong and where to look, not the whole help.
    .showHelpAfterError('(add --help for usage)')
    .exitOverride();
  program.configureHelp({ sortSubcommands: false });
  registerLoginCommands(program);
  registerReadCommands(program);
  registerLagCommands(program);
  registerScaleCommands(program);
  registerAdminCommands(program);
  registerConsumptionCommands(program);
  registerDeadLetterCommands(program);
  registerGitOpsCommands(program);
  registerBackupCommands(program);
  registerHashPasswordCommand(program);
  return program;
}
