import type { CliApi } from '../api.js';
import type { GroupDetail } from '../monitoring.js';
import type { Progress } from '../backup.js';
import { explainError } from '../explain-error.js';
import type { Change } from './plan.js';
import type { DesiredState } from './desired-state.js';

const label = (g: { streamPrefix: string; consumerGroup: string }) =>
  `${g.streamPrefix}:${g.consumerGroup}`;

type PutReply =
  | GroupDetail
  | { migration: { migrationId: string; fromShardCount: number; toShardCount: number } };

/** One change through the admin API; the line that says what happened. */
async function applyOne(
  api: CliApi,
  change: Change,
  desired: DesiredState,
  options: { force: boolean },
  /** Groups this run has started a migration of, by stream prefix. */
  scaled: Map<string, string>,
): Promise<string> {
  const audit = { requestedBy: desired.requestedBy, reason: desired.reason };
  const name = label(change.group);
  if (change.action === 'delete') {
    const query = options.force ? '?force=true' : '';
    await api.call('DELETE', `${api.groupPath('admin', change.group)}${query}`, audit);
    return `deleted ${name}`;
  }
  // create, scale and ensure are all the desired-state PUT: the coordinator decides, idempotently
  const reply = await api.call<PutReply>('PUT', api.groupPath('admin', change.group), {
    shardCount: change.group.shardCount,
    ...(change.group.startAt ? { startAt: change.group.startAt } : {}),
    ...audit,
  });
  if ('migration' in reply) {
    const m = reply.migration;
    scaled.set(change.group.streamPrefix, name);
    return `scaling ${name} from ${m.fromShardCount} to ${m.toShardCount} shards: migration ${m.migrationId}`;
  }
  // A group on a prefix this run scaled moved with it (docs/protocol.md#one-shard-layout-per-stream-prefix).
  const movedWith = scaled.get(change.group.streamPrefix);
  if (change.action === 'scale' && movedWith && reply.shardCount === change.group.shardCount)
    return `scaled ${name} from ${change.fromShardCount} to ${reply.shardCount} shards with ${movedWith} (one shard layout per stream prefix)`;
  // without READ ('ensure') the reply does not tell a create from a no-op: say only what holds
  const verb = { create: 'created', scale: 'unchanged', ensure: 'ensured' }[change.action];
  return `${verb} ${name}: ${reply.shardCount} shard${reply.shardCount === 1 ? '' : 's'}`;
}

/**
 * Makes the changes one by one, each audited with the file's `requestedBy` and `reason`. A
 * change that fails is reported and the others are still made; returns how many failed.
 */
export async function applyChanges(
  api: CliApi,
  changes: readonly Change[],
  desired: DesiredState,
  options: { force: boolean; progress: Progress },
): Promise<number> {
  let failed = 0;
  const scaled = new Map<string, string>();
  for (const change of changes) {
    try {
      process.stdout.write(`${await applyOne(api, change, desired, options, scaled)}\n`);
    } catch (error) {
      failed++;
      options.progress(
        `failed ${change.action} ${label(change.group)}: ${explainError(error).message ?? ''}`,
      );
    }
  }
  return failed;
}
