import type { CliApi } from './api.js';
import { CliError, EXIT } from './cli-error.js';
import { getMigrations, progressLine, type Migration } from './monitoring.js';
import type { GroupName } from './options.js';
import type { Progress } from './backup.js';

export interface WatchOptions {
  /** Time between two reads of the migration. */
  readonly intervalMs: number;
  /** Give up (exit code 3) when the migration has not converged after this long. */
  readonly timeoutMs: number;
  readonly sleep: (ms: number) => Promise<void>;
  readonly now: () => number;
  readonly progress: Progress;
}

/** The migration with this id: the active one, or from history. */
function findMigration(
  body: { active: Migration | null; migrations: readonly Migration[] },
  id: string,
) {
  return body.active?.migrationId === id
    ? body.active
    : body.migrations.find((m) => m.migrationId === id);
}

/**
 * Reads the migration until it has converged (CONVERGED or COMPLETED), printing its progress
 * each time it changes. A migration rolled back meanwhile, or one that does not converge in
 * time, ends the watch with an error that says what to do.
 */
export async function watchMigration(
  api: CliApi,
  group: GroupName,
  migrationId: string,
  options: WatchOptions,
): Promise<Migration> {
  const deadline = options.now() + options.timeoutMs;
  const label = `${group.streamPrefix}:${group.consumerGroup}`;
  let last = '';
  for (;;) {
    const migration = findMigration(await getMigrations(api, group), migrationId);
    if (!migration) throw new CliError(`migration ${migrationId} of ${label} is no longer listed`);
    const line = `${migration.state}: ${progressLine(migration.progress) || `${migration.fromShardCount} → ${migration.toShardCount} shards`}`;
    if (line !== last) options.progress(line);
    last = line;
    if (migration.state === 'CONVERGED' || migration.state === 'COMPLETED') return migration;
    if (migration.state === 'ROLLED_BACK')
      throw new CliError(
        `migration ${migrationId} of ${label} was rolled back\n  what to do: see \`coordctl migrations ${label}\` and the audit log (\`coordctl audit --group ${label}\`)`,
      );
    if (options.now() >= deadline)
      throw new CliError(
        `migration ${migrationId} of ${label} has not converged after ${options.timeoutMs} ms (${last})\n  what to do: check its members (\`coordctl members ${label}\`); keep watching with \`coordctl migrations ${label}\`, or roll back with \`coordctl rollback ${label}\``,
        EXIT.TIMED_OUT,
      );
    await options.sleep(options.intervalMs);
  }
}
