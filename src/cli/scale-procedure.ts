import { CoordinatorApiError, type ChangeMeta, type CoordinatorClient } from '../client/index.js';
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
  /**
   * The consumer groups on the stream prefix (the named one among them, or not): their
   * producers write the same shards, so they are paused and waited for too
   * (docs/protocol.md#one-shard-layout-per-stream-prefix).
   */
  readonly groupsOnPrefix: () => Promise<readonly string[]>;
  /** How long in-flight appends and publish retries need to drain after the pause. */
  readonly drainMs: number;
  /** How long producers need to refresh their routing caches before they resume. */
  readonly refreshMs: number;
  /** Upper bound for routing to show the new shard count. */
  readonly routingTimeoutMs: number;
  readonly sleep: (ms: number) => Promise<void>;
  /**
   * Aborted to stop the procedure (Ctrl-C): before the scale it resumes the producers it
   * paused, after it they stay paused; the signal's reason is thrown.
   */
  readonly signal?: AbortSignal;
  readonly progress: Progress;
}

/**
 * The duplicate-sensitive scale (docs/cli.md#scale), step by step: pause producers, wait for
 * the drain, scale, wait until routing shows the new shard count, let producers refresh,
 * resume. Producers of every group on the stream prefix are paused, since they all write its
 * shards, and each group's routing must show the new count before any resumes; another group whose
 * producers were paused already is left paused. If a step fails before the scale was accepted,
 * producers are resumed; after it, they stay paused (resuming them under an unconfirmed shard
 * count is what the procedure exists to avoid) and the error says so, as they do when the scale
 * got no answer at all (it may have been made).
 */
export async function scaleDuplicateSensitive(
  client: ScaleCalls,
  plan: DuplicateSensitiveScale,
): Promise<string> {
  const { streamPrefix: sp, consumerGroup: cg, change, progress } = plan;
  const groups = [cg, ...(await plan.groupsOnPrefix()).filter((g) => g !== cg).sort()];
  const label = groups.map((g) => `${sp}:${g}`).join(', ');
  progress(`1/6 pausing producers of ${label}`);
  const paused: string[] = [];
  const signal = plan.signal;
  const stopped = () => {
    if (signal?.aborted) throw signal.reason;
  };
  let scaled = false;
  try {
    for (const g of groups) {
      if (g !== cg && (await client.routing(sp, g)).producersPaused) continue;
      await client.pauseProducers(sp, g, change);
      paused.push(g);
      stopped();
    }
    progress(`2/6 waiting ${plan.drainMs} ms for in-flight appends and publish retries to drain`);
    await plan.sleep(plan.drainMs);
    stopped();
    progress(`3/6 scaling to ${plan.shardCount} shards`);
    let migration: { migrationId: string };
    try {
      ({ migration } = await client.scale(sp, cg, plan.shardCount, change));
    } catch (error) {
      // Refused by the coordinator: nothing changed. No answer at all: the scale may have
      // been made, so the producers stay paused as after an accepted one.
      if (!answered(error)) {
        scaled = true;
        throw new Error(
          `no answer to the scale of ${sp}:${cg}: it may have been made; producers of ${label} stay paused\n  what to do: check \`coordctl describe ${sp}:${cg}\`, then \`coordctl producers resume\` for each of ${label}`,
          { cause: error },
        );
      }
      throw error;
    }
    scaled = true;
    progress(
      `4/6 waiting for routing of ${label} to show shardCount ${plan.shardCount} (migration ${migration.migrationId})`,
    );
    const deadline = Date.now() + plan.routingTimeoutMs;
    let versions = '';
    for (const g of groups) {
      let routing = await client.routing(sp, g);
      while (routing.shardCount !== plan.shardCount) {
        stopped();
        const left = deadline - Date.now();
        if (left <= 0)
          throw new Error(
            `routing of ${sp}:${g} still shows shardCount ${routing.shardCount}; producers of ${label} stay paused\n  what to do: check \`coordctl describe ${sp}:${g}\`, then \`coordctl producers resume\` for each of ${label}`,
          );
        routing = await client.routing(
          sp,
          g,
          { afterVersion: routing.metadataVersion, waitMs: Math.min(left, 30_000) },
          signal ? { signal } : {},
        );
      }
      if (g === cg) versions = ` at metadataVersion ${routing.metadataVersion}`;
    }
    progress(
      `5/6 routing shows shardCount ${plan.shardCount}${versions}; waiting ${plan.refreshMs} ms for producer caches`,
    );
    await plan.sleep(plan.refreshMs);
    progress('6/6 resuming producers');
    for (const g of paused) await client.resumeProducers(sp, g, change);
    return migration.migrationId;
  } catch (error) {
    if (!scaled) {
      progress('scale not started: resuming producers');
      for (const g of paused) await client.resumeProducers(sp, g, change);
    } else if (!(error instanceof Error && error.message.includes('stay paused'))) {
      progress(
        `the scale was made: producers of ${label} stay paused; check \`coordctl describe ${sp}:${cg}\`, then \`coordctl producers resume\` for each of ${label}`,
      );
    }
    throw error;
  }
}

/** Whether `error` is (or wraps) an error answer of the coordinator, not a missing answer. */
function answered(error: unknown): boolean {
  for (let e = error; e instanceof Error; e = e.cause) {
    if (e instanceof CoordinatorApiError) return true;
  }
  return false;
}
