import { randomBytes } from 'node:crypto';
import { chmod, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { Option, type Command } from 'commander';
import { createStore } from '../../store/index.js';
import type { Store } from '../../store/store.js';
import { backupMetadata, parseBackup, restoreMetadata, restoreProblem } from '../backup.js';
import { CliError } from '../cli-error.js';
import { collect, groupLabel, parseGroup, progress, type GroupName } from '../options.js';

const env = process.env;

interface StoreFlags {
  url: string;
  keyPrefix: string;
  clusterNodes?: string;
}

function storeOptions(command: Command): Command {
  // The URL (and seeds) may hold the Redis password: taken from the environment by `.env()`,
  // which `--help` names without printing the value, never as a default, which it prints.
  return command
    .addOption(
      new Option('--url <url>', 'Redis URL')
        .env('COORDINATOR_STORE_URL')
        .default('redis://127.0.0.1:6379'),
    )
    .addOption(
      new Option('--cluster-nodes <list>', 'Redis Cluster seeds host:port,...').env(
        'COORDINATOR_STORE_CLUSTER_NODES',
      ),
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

/**
 * Writes `text` to `path` readable by its owner only (0600), also over an existing file with wider
 * permissions (which a plain write keeps): a new file renamed over the old one.
 */
async function writePrivate(path: string, text: string): Promise<void> {
  const temporary = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    await writeFile(temporary, text, { mode: 0o600, flag: 'wx' });
    await chmod(temporary, 0o600);
    await rename(temporary, path);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
}

/** `backup` and `restore`: metadata keys straight from and to the store (disaster recovery). */
export function registerBackupCommands(program: Command): void {
  storeOptions(
    program
      .command('backup')
      .description('dump the metadata keys of every registered group (or --group) to a JSON file')
      .option('-o, --out <file>', 'write here instead of stdout')
      .option('--group <sp:cg...>', 'only these groups', collect),
  ).action(async (flags: StoreFlags & { out?: string; group?: string[] }) => {
    const backup = await withStore(flags, (store) =>
      backupMetadata(store, flags.keyPrefix, {
        progress,
        ...(flags.group ? { groups: flags.group.map(parseGroup) } : {}),
      }),
    );
    const text = `${JSON.stringify(backup, null, 2)}\n`;
    if (flags.out) {
      await writePrivate(flags.out, text);
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
      .option('--group <sp:cg...>', 'only these groups', collect),
  ).action(async (flags: StoreFlags & { in: string; group?: string[] }, command: Command) => {
    let backup;
    try {
      backup = parseBackup(JSON.parse(await readFile(flags.in, 'utf8')));
    } catch (error) {
      throw new CliError(`cannot read ${flags.in}: ${(error as Error).message}`);
    }
    // Only a prefix the operator named (option or environment) is restored into when it is not
    // the backup's: the default may be another deployment's on the same Redis.
    const named =
      command.getOptionValueSource('keyPrefix') !== 'default' ||
      env.COORDINATOR_STORE_KEY_PREFIX !== undefined;
    if (backup.keyPrefix !== flags.keyPrefix && !named) {
      throw new CliError(
        `the backup was taken under key prefix ${backup.keyPrefix}, not ${flags.keyPrefix}; nothing restored\n  what to do: give --key-prefix ${backup.keyPrefix} (or the prefix to restore into)`,
      );
    }
    if (backup.keyPrefix !== flags.keyPrefix) {
      progress(
        `note: the backup was taken under key prefix ${backup.keyPrefix}; restoring into ${flags.keyPrefix}`,
      );
    }
    const wanted = flags.group?.map(parseGroup);
    const same = (a: GroupName, b: GroupName) =>
      a.streamPrefix === b.streamPrefix && a.consumerGroup === b.consumerGroup;
    const only = wanted ? (ref: GroupName) => wanted.some((w) => same(w, ref)) : undefined;
    const missing = wanted?.filter((w) => !backup.groups.some((g) => same(g, w)));
    if (missing && missing.length > 0) {
      throw new CliError(
        `not in the backup: ${missing.map(groupLabel).join(', ')}\n  what to do: give --group names the backup holds (${backup.groups.slice(0, 10).map(groupLabel).join(', ') || 'it holds no groups'})`,
      );
    }
    // Every group is checked before the store is even reached: an edited or damaged file
    // restores nothing, rather than the groups before the first bad one.
    const problem = restoreProblem(backup.groups.filter((g) => only?.(g) ?? true));
    if (problem !== null) {
      throw new CliError(
        `cannot restore ${flags.in}: ${problem}; nothing restored\n  what to do: restore an unedited backup, or leave those groups out with --group`,
      );
    }
    const count = await withStore(flags, (store) =>
      restoreMetadata(store, backup, { progress, ...(only ? { only } : {}) }),
    );
    progress(`restored ${count} groups into key prefix ${flags.keyPrefix}`);
  });
}
