import { readFile, writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { Command, InvalidArgumentError } from 'commander';
import { CoordinatorClient } from '../client/index.js';
import { parseDuration } from '../config/duration.js';
import { hashPassword } from '../http/auth/password-hash.js';
import { createStore } from '../store/index.js';
import type { Store } from '../store/store.js';
import { VERSION } from '../version.js';
import { backupMetadata, parseBackup, restoreMetadata } from './backup.js';
import { readSecret } from './read-secret.js';
import { scaleDuplicateSensitive } from './scale-procedure.js';

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

const env = process.env;
const progress = (message: string) => process.stderr.write(`${message}\n`);

function duration(value: string): number {
  const ms = parseDuration(value);
  if (ms === null) throw new InvalidArgumentError('not a duration (e.g. 500ms, 30s, 5m)');
  return ms;
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a positive integer');
  return n;
}

interface StoreFlags {
  url: string;
  keyPrefix: string;
  clusterNodes?: string;
}

function storeOptions(command: Command): Command {
  return command
    .option(
      '--url <url>',
      'Redis URL (COORDINATOR_STORE_URL)',
      env.COORDINATOR_STORE_URL ?? 'redis://127.0.0.1:6379',
    )
    .option(
      '--cluster-nodes <list>',
      'Redis Cluster seeds host:port,... (COORDINATOR_STORE_CLUSTER_NODES)',
      env.COORDINATOR_STORE_CLUSTER_NODES,
    )
    .option(
      '--key-prefix <prefix>',
      'key prefix (COORDINATOR_STORE_KEY_PREFIX)',
      env.COORDINATOR_STORE_KEY_PREFIX ?? 'redis-stream:coord',
    );
}

async function withStore<T>(flags: StoreFlags, run: (store: Store) => Promise<T>): Promise<T> {
  const clusterNodes =
    flags.clusterNodes
      ?.split(',')
      .map((s) => s.trim())
      .filter(Boolean) ?? [];
  const store = createStore({
    type: clusterNodes.length ? 'redis-cluster' : 'redis',
    url: flags.url,
    clusterNodes,
    keyPrefix: flags.keyPrefix,
    auditMaxLen: 100_000,
  });
  try {
    await store.ping();
    return await run(store);
  } finally {
    await store.close();
  }
}

function parseGroup(value: string): { streamPrefix: string; consumerGroup: string } {
  const at = value.lastIndexOf(':');
  if (at <= 0 || at === value.length - 1)
    throw new InvalidArgumentError('expected <streamPrefix>:<consumerGroup>');
  return { streamPrefix: value.slice(0, at), consumerGroup: value.slice(at + 1) };
}

/** The `coordctl` program. Results go to stdout, progress and errors to stderr. */
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

  storeOptions(
    program
      .command('backup')
      .description('dump the metadata keys of every registered group (or --group) to a JSON file')
      .option('-o, --out <file>', 'write here instead of stdout')
      .option('--group <sp:cg...>', 'only these groups', (v: string, acc: string[] = []) => [
        ...acc,
        v,
      ]),
  ).action(async (flags: StoreFlags & { out?: string; group?: string[] }) => {
    const backup = await withStore(flags, (store) =>
      backupMetadata(store, flags.keyPrefix, {
        progress,
        ...(flags.group ? { groups: flags.group.map(parseGroup) } : {}),
      }),
    );
    const text = `${JSON.stringify(backup, null, 2)}\n`;
    if (flags.out) {
      await writeFile(flags.out, text, { mode: 0o600 });
      progress(`wrote ${backup.groups.length} groups to ${flags.out}`);
    } else process.stdout.write(text);
  });

  storeOptions(
    program
      .command('restore')
      .description(
        'write metadata keys back from a backup file (disaster recovery; then RESUME the groups)',
      )
      .requiredOption('-i, --in <file>', 'backup file')
      .option('--group <sp:cg...>', 'only these groups', (v: string, acc: string[] = []) => [
        ...acc,
        v,
      ]),
  ).action(async (flags: StoreFlags & { in: string; group?: string[] }) => {
    let backup;
    try {
      backup = parseBackup(JSON.parse(await readFile(flags.in, 'utf8')));
    } catch (error) {
      throw new CliError(`cannot read ${flags.in}: ${(error as Error).message}`, 2);
    }
    if (backup.keyPrefix !== flags.keyPrefix) {
      progress(
        `note: the backup was taken under key prefix ${backup.keyPrefix}; restoring into ${flags.keyPrefix}`,
      );
    }
    const wanted = flags.group?.map(parseGroup);
    const only = wanted
      ? (ref: { streamPrefix: string; consumerGroup: string }) =>
          wanted.some(
            (w) => w.streamPrefix === ref.streamPrefix && w.consumerGroup === ref.consumerGroup,
          )
      : undefined;
    const missing = wanted?.filter(
      (w) =>
        !backup.groups.some(
          (g) => g.streamPrefix === w.streamPrefix && g.consumerGroup === w.consumerGroup,
        ),
    );
    if (missing && missing.length > 0) {
      throw new CliError(
        `not in the backup: ${missing.map((m) => `${m.streamPrefix}:${m.consumerGroup}`).join(', ')}`,
        2,
      );
    }
    const count = await withStore(flags, (store) =>
      restoreMetadata(store, backup, { progress, ...(only ? { only } : {}) }),
    );
    progress(`restored ${count} groups into key prefix ${flags.keyPrefix}`);
  });

  program
    .command('scale')
    .description(
      'change the shard count of a group (with --duplicate-sensitive: the spec §4 procedure)',
    )
    .argument('<group>', '<streamPrefix>:<consumerGroup>', parseGroup)
    .argument('<shardCount>', 'new shard count', positiveInt)
    .requiredOption('--requested-by <who>', 'recorded in the audit log')
    .requiredOption('--reason <why>', 'recorded in the audit log')
    .option(
      '--coordinator <url>',
      'coordinator URL (COORDCTL_URL)',
      env.COORDCTL_URL ?? 'http://127.0.0.1:8080',
    )
    .option(
      '--token <jwt>',
      'bearer token (COORDCTL_TOKEN); otherwise --username and a password prompt',
      env.COORDCTL_TOKEN,
    )
    .option('--username <name>', 'log in as this user (password from stdin or a prompt)')
    .option(
      '--duplicate-sensitive',
      'pause producers, drain, scale, wait for routing, refresh, resume',
    )
    .option('--drain <duration>', 'wait after pausing producers', duration, 30_000)
    .option('--refresh <duration>', 'wait for producers to refresh routing', duration, 10_000)
    .option('--routing-timeout <duration>', 'give up waiting for routing after', duration, 120_000)
    .action(
      async (
        group: { streamPrefix: string; consumerGroup: string },
        shardCount: number,
        flags: {
          requestedBy: string;
          reason: string;
          coordinator: string;
          token?: string;
          username?: string;
          duplicateSensitive?: boolean;
          drain: number;
          refresh: number;
          routingTimeout: number;
        },
      ) => {
        const client = new CoordinatorClient({
          url: flags.coordinator,
          ...(flags.token ? { token: flags.token } : {}),
        });
        if (!flags.token) {
          if (!flags.username)
            throw new CliError('give --token (or COORDCTL_TOKEN) or --username', 2);
          await client.login(flags.username, await readSecret('password: '));
        }
        const change = { requestedBy: flags.requestedBy, reason: flags.reason };
        if (flags.duplicateSensitive) {
          const id = await scaleDuplicateSensitive(client, {
            ...group,
            shardCount,
            change,
            drainMs: flags.drain,
            refreshMs: flags.refresh,
            routingTimeoutMs: flags.routingTimeout,
            sleep: (ms) => sleep(ms),
            progress,
          });
          process.stdout.write(`${id}\n`);
        } else {
          const { migration } = await client.scale(
            group.streamPrefix,
            group.consumerGroup,
            shardCount,
            change,
          );
          process.stdout.write(`${migration.migrationId}\n`);
        }
      },
    );

  return program;
}
