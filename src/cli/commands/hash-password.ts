import type { Command } from 'commander';
import { hashPassword } from '../../http/auth/password-hash.js';
import { CliError } from '../cli-error.js';
import { readSecret } from '../read-secret.js';

/** `hash-password`: a passwordHash for the users file. */
export function registerHashPasswordCommand(program: Command): void {
  program
    .command('hash-password')
    .description(
      'print a passwordHash for the users file (reads the password from stdin or a prompt)',
    )
    .action(async () => {
      const password = await readSecret('password: ');
      if (password.length < 8) throw new CliError('the password must have at least 8 characters');
      process.stdout.write(`${await hashPassword(password)}\n`);
    });
}
