import { Command } from 'commander';
import { hashPassword } from '../http/auth/password-hash.js';
import { VERSION } from '../version.js';
import { readSecret } from './read-secret.js';

/** Thrown by commands for a clean, non-zero exit with a message (no stack trace). */
export class CliError extends Error {
  override readonly name = 'CliError';
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
  }
}

/** The `coordctl` program. Commands print their result on stdout and errors on stderr. */
export function buildProgram(): Command {
  const program = new Command('coordctl')
    .description('stream-coordinator command-line tool')
    .version(VERSION)
    .showHelpAfterError();

  program
    .command('hash-password')
    .description(
      'print a passwordHash for the users file (reads the password from stdin or a prompt)',
    )
    .action(async () => {
      const password = await readSecret('password: ');
      if (password.length < 8)
        throw new CliError('the password must have at least 8 characters', 2);
      process.stdout.write(`${await hashPassword(password)}\n`);
    });

  return program;
}
