import { Option, type Command } from 'commander';
import { CoordinatorClient } from '../client/index.js';
import { CliApi } from './api.js';
import { CliError } from './cli-error.js';
import { readSecret } from './read-secret.js';
import { loadToken, tokenFilePath } from './token-file.js';

/** The options every command that talks to a coordinator takes. */
export interface ConnectionFlags {
  coordinator: string;
  token?: string;
  tokenFile?: string;
  username?: string;
}

/** Adds `--coordinator`, `--token`, `--token-file` and `--username` to a command. */
export function connectionOptions(command: Command): Command {
  return command
    .addOption(
      new Option('--coordinator <url>', 'coordinator base URL')
        .env('COORDCTL_URL')
        .default('http://127.0.0.1:8080'),
    )
    .addOption(
      new Option('--token <jwt>', 'bearer token (else the saved login)').env('COORDCTL_TOKEN'),
    )
    .addOption(
      new Option('--token-file <path>', 'where `login` saved the token').env('COORDCTL_TOKEN_FILE'),
    )
    .option('--username <name>', 'log in for this command only (password from stdin or a prompt)');
}

/** The coordinator's URL, checked, with a message that says what to fix. */
export function coordinatorUrl(flags: ConnectionFlags): string {
  let url: URL;
  try {
    url = new URL(flags.coordinator);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('not http(s)');
  } catch {
    throw new CliError(
      `--coordinator ${flags.coordinator} is not an http(s) URL; give e.g. --coordinator http://127.0.0.1:8080 (or set COORDCTL_URL)`,
    );
  }
  // Never sent (coordctl authenticates with a bearer token), and never printed.
  if (url.username !== '' || url.password !== '') {
    url.username = '';
    url.password = '';
    throw new CliError(
      `--coordinator carries a user name or password, which coordctl does not send (it logs in with --username and keeps a bearer token): give ${url.href} (or set COORDCTL_URL)`,
    );
  }
  return url.href;
}

/**
 * A {@link CliApi} with credentials: `--username` (log in now), else `--token`/`COORDCTL_TOKEN`,
 * else the token `coordctl login` saved.
 */
export async function connect(flags: ConnectionFlags): Promise<CliApi> {
  const url = coordinatorUrl(flags);
  if (flags.username) {
    const api = new CliApi(new CoordinatorClient({ url }), url);
    const { accessToken } = await logIn(api, flags.username, await readSecret('password: '));
    return new CliApi(new CoordinatorClient({ url, token: accessToken }), url);
  }
  const path = tokenFilePath(flags.tokenFile);
  let token = flags.token;
  if (!token) {
    try {
      token = (await loadToken(path)) ?? undefined;
    } catch (error) {
      throw new CliError((error as Error).message);
    }
  }
  if (!token) {
    throw new CliError(
      `not logged in (no token in ${path}): run \`coordctl login --username <name>\`, or pass --token / set COORDCTL_TOKEN`,
    );
  }
  return new CliApi(new CoordinatorClient({ url, token }), url);
}

/** What `POST /coord/v1/auth/login` answers. */
export interface LoginReply {
  readonly accessToken: string;
  readonly expiresIn: number;
  readonly roles: readonly string[];
}

/** Logs in and returns the token (the caller decides where it goes). */
export function logIn(api: CliApi, username: string, password: string): Promise<LoginReply> {
  return api.call<LoginReply>('POST', '/coord/v1/auth/login', { username, password });
}
