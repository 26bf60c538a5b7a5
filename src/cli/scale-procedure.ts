import type { ChangeMeta, CoordinatorClient } from '../client/index.js';
import type { Progress } from './backup.js';

/** The calls the procedure makes (the CLI's API, or a {@link CoordinatorClient}). */
export type ScaleCalls = Pick<
  CoordinatorClient,
  'pauseProducers' | 'resumeProducers' | 'scale' | 'routing'
>;

export interface DuplicateSensitiveScale {
  readonly streamPrefix: string;
  readonly consumerGroup: string;
  readonly shardCount: number;
  readonly change: ChangeMeta;
  /** How long in-flight appends and publish retries need to drain after the pause. */
  readonly drainMs: number;
  /** How long producers need to refresh their routing caches before they resume. */
  readonly refreshMs: number;
  /** Upper bound for routing to show the new shard count. */
  readonly routingTimeoutMs: number;
  readonly sleep: (ms: number) => Promise<void>;
  readonly progress: Progress;
}

/**
 * The duplicate-sensitive scale (docs/cli.md#scale), step by step: pause producers, wait for the drain, scale, wait until routing
 * shows the new shard count, let producers refresh, resume. If a step fails before the scale
 * was accepted, producers are resumed; after it, they stay paused (resuming them under an
 * unconfirmed shard count is what the procedure exists to avoid) and the error says so.
 */
export async function scaleDuplicateSensitive(
  client: ScaleCalls,
  plan: DuplicateSensitiveScale,
): Promise<string> {
  const { streamPrefix: sp, consumerGroup: cg, change, progress } = plan;
  progress(`1/6 pausing producers of ${sp}:${cg}`);
  await client.pauseProducers(sp, cg, change);
  let scaled = false;
  try {
    progress(`2/6 waiting ${plan.drainMs} ms for in-flight appends and publish retries to drain`);
    await plan.sleep(plan.drainMs);
    progress(`3/6 scaling to ${plan.shardCount} shards`);
    const { migration } = await client.scale(sp, cg, plan.shardCount, change);
    scaled = true;
    progress(
      `4/6 waiting for routing to show shardCount ${plan.shardCount} (migration ${migration.migrationId})`,
    );
    const deadline = Date.now() + plan.routingTimeoutMs;
    let routing = await client.routing(sp, cg);
    while (routing.shardCount !== plan.shardCount) {
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(
          `routing still shows shardCount ${routing.shardCount}; producers stay paused\n  what to do: check \`coordctl describe ${sp}:${cg}\`, then \`coordctl producers resume ${sp}:${cg}\``,
        );
      routing = await client.routing(sp, cg, {
        afterVersion: routing.metadataVersion,
        waitMs: Math.min(left, 30_000),
      });
    }
    progress(
      `5/6 routing shows shardCount ${routing.shardCount} at metadataVersion ${routing.metadataVersion}; waiting ${plan.refreshMs} ms for producer caches`,
    );
    await plan.sleep(plan.refreshMs);
    progress('6/6 resuming producers');
    await client.resumeProducers(sp, cg, change);
    return migration.migrationId;
  } catch (error) {
    if (!scaled) {
      progress('scale not started: resuming producers');
      await client.resumeProducers(sp, cg, change);
    }
    throw error;
  }
}
