import type { Command } from 'commander';
import { CoordinatorClient } from '../../client/index.js';
import { CliApi } from '../api.js';
import { CliError } from '../cli-error.js';
import { coordinatorUrl, connectionOptions, logIn, type ConnectionFlags } from '../connection.js';
import { progress } from '../options.js';
import { readSecret } from '../read-secret.js';
import { removeToken, saveToken, tokenFilePath } from '../token-file.js';

/** `login` (token to a 0600 file) and `logout`. */
export function registerLoginCommands(program: Command): void {
  connectionOptions(
    program
      .command('login')
      .description(
        'log in and keep the token in a file only you can read (password from stdin or a prompt)',
      ),
  ).action(async (flags: ConnectionFlags) => {
    const url = coordinatorUrl(flags);
    const username = flags.username;
    if (!username)
      throw new CliError('give --username <name>; the password is read from stdin or a prompt');
    const api = new CliApi(new CoordinatorClient({ url }), url);
    const reply = await logIn(api, username, await readSecret('password: '));
    const path = tokenFilePath(flags.tokenFile);
    await saveToken(path, reply.accessToken);
    const expires = new Date(Date.now() + reply.expiresIn * 1000).toISOString();
    progress(
      `logged in to ${url} as ${username} (roles ${reply.roles.join(', ')}); token saved to ${path}, valid until ${expires}`,
    );
  });

  program
    .command('logout')
    .description('delete the saved token')
    .option('--token-file <path>', 'where `login` saved the token (COORDCTL_TOKEN_FILE)')
    .action(async (flags: { tokenFile?: string }) => {
      const path = tokenFilePath(flags.tokenFile);
      progress((await removeToken(path)) ? `deleted ${path}` : `no token at ${path}`);
    });
}
