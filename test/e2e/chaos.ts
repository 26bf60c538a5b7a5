/**
 * End-to-end chaos run: real coordinator replicas, consumers and producers as child processes
 * (tsx), real Redis. While producers send keyed messages, consumers are SIGKILLed, a replica is
 * killed and restarted, the group is scaled and one migration is rolled back. Then every key the
 * producers recorded must have been processed, duplicates are counted, the consumers' own logs
 * must show no shard processed by two consumers at once, and the invariant metrics must be zero.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConflictError, CoordinatorClient } from '../../src/client/index.js';
import { duplicateCount, lostKeys, overlaps, type Processed } from '../support/processing-log.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';
import {
  ChildProcesses,
  metricSum,
  replicaToken,
  ReplicaSet,
  type Child,
} from '../support/replica-processes.js';

/** The shape of one run. */
export interface ChaosProfile {
  readonly name: string;
  readonly replicas: number;
  readonly consumers: number;
  readonly producers: number;
  /** Keyed messages in all, split evenly between the producers. */
  readonly messages: number;
  /** Consumers SIGKILLed during the run. */
  readonly killConsumers: number;
  /** Shard counts: created with the first, then scaled to each of the others in turn. */
  readonly shardCounts: readonly number[];
  /**
   * Start one more scale-out and roll it back: once it has `converged` (its new shards granted
   * and read), or `immediately` while it is still in progress (its new shards may hold messages
   * of producers that saw the larger count but have no owner yet).
   */
  readonly rollback: 'converged' | 'immediately' | false;
  /** SIGKILL one replica and start it again on the same port. */
  readonly restartReplica: boolean;
  /** Session timeout the consumers ask for (the coordinator's floor is 6 s). */
  readonly sessionTimeoutMs: number;
  /** Messages per second of all producers together, so the chaos happens while they send. */
  readonly ratePerSecond: number;
  /** How long to wait for the last messages to be processed after the producers are done. */
  readonly settleTimeoutMs: number;
}

/** What a run found. */
export interface ChaosResult {
  readonly sent: number;
  readonly processed: number;
  readonly lost: readonly string[];
  readonly duplicates: number;
  readonly overlaps: ReturnType<typeof overlaps>;
  readonly invariantViolations: number;
  /** The group settled: no migration in progress and no shard beyond the final count. */
  readonly converged: boolean;
  readonly timeline: readonly string[];
  readonly durationMs: number;
}

const CHANGE = { requestedBy: 'chaos-run', reason: 'end-to-end chaos test' };
const STREAM = 'chaos-orders';
const GROUP = 'billing';

function token(): string {
  return replicaToken('chaos', ['READ', 'WRITE', 'CONSUMER', 'PRODUCER']);
}

function jsonLines<T>(file: string): T[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .filter((line) => line.length > 0)
    .map((line) => JSON.parse(line) as T);
}

function lineCount(file: string): number {
  try {
    const text = readFileSync(file, 'utf8');
    let n = 0;
    for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) n++;
    return n;
  } catch {
    return 0;
  }
}

/** Runs one chaos profile; `say` receives the timeline as it happens. */
export async function runChaos(
  profile: ChaosProfile,
  say: (line: string) => void = () => undefined,
): Promise<ChaosResult> {
  const began = Date.now();
  const timeline: string[] = [];
  const mark = (line: string) => {
    const entry = `+${((Date.now() - began) / 1000).toFixed(1)}s ${line}`;
    timeline.push(entry);
    say(entry);
  };
  const children = new ChildProcesses(`chaos-${profile.name}`);
  const dir = children.dir;
  let redis: RedisServerHandle | null = null;
  let succeeded = false;
  try {
    redis = await startRedisServer();
    const keyPrefix = `chaos-${Date.now()}:coord`;
    const replicas = await ReplicaSet.start(children, {
      count: profile.replicas,
      store: { type: 'redis', url: redis.url },
      keyPrefix,
      env: {
        COORDINATOR_MEMBERSHIP_HEARTBEAT_INTERVAL: '1s',
        COORDINATOR_MEMBERSHIP_REBALANCE_HEARTBEAT_INTERVAL: '100ms',
        COORDINATOR_MEMBERSHIP_ASSIGNMENT_DEBOUNCE: '200ms',
      },
    });
    const urls = replicas.urls;
    mark(`${profile.replicas} replica(s) up`);

    const admin = new CoordinatorClient({ baseUrl: urls, token: token() });
    await admin.createGroup(STREAM, GROUP, profile.shardCounts[0], CHANGE);
    const common = {
      CHAOS_COORDINATORS: urls.join(','),
      CHAOS_TOKEN: token(),
      CHAOS_REDIS: redis.url,
      CHAOS_STREAM: STREAM,
      CHAOS_GROUP: GROUP,
    };
    const consumerLogs: string[] = [];
    const consumers: Child[] = [];
    for (let i = 0; i < profile.consumers; i++) {
      const log = join(dir, `consumer-${i}.log`);
      writeFileSync(log, '');
      consumerLogs.push(log);
      consumers.push(
        children.start(`consumer-${i}`, 'test/e2e/consumer-process.ts', {
          ...common,
          CHAOS_MEMBER_ID: `consumer-${i}`,
          CHAOS_LOG: log,
          CHAOS_SESSION_TIMEOUT_MS: String(profile.sessionTimeoutMs),
        }),
      );
    }
    const membersPath = `${admin.groupPath('monitoring', STREAM, GROUP)}/members`;
    await waitFor(
      async () =>
        (await admin.request<{ members: unknown[] }>('GET', membersPath)).members.length ===
        profile.consumers,
      { timeoutMs: 120_000, intervalMs: 250, what: 'every consumer joined' },
    );
    mark(`${profile.consumers} consumers joined`);

    const records: string[] = [];
    const producers: Child[] = [];
    const perProducer = Math.ceil(profile.messages / profile.producers);
    for (let i = 0; i < profile.producers; i++) {
      const record = join(dir, `producer-${i}.record`);
      records.push(record);
      producers.push(
        children.start(`producer-${i}`, 'test/e2e/producer-process.ts', {
          ...common,
          CHAOS_PRODUCER_ID: `p${i}`,
          CHAOS_COUNT: String(Math.min(perProducer, profile.messages - i * perProducer)),
          CHAOS_RECORD: record,
          CHAOS_RATE: String(profile.ratePerSecond / profile.producers),
        }),
      );
    }
    mark(`${profile.producers} producers started, ${profile.messages} messages to send`);

    const sentSoFar = () => records.reduce((n, file) => n + lineCount(file), 0);
    const atProgress = (fraction: number) =>
      waitFor(
        () =>
          sentSoFar() >= fraction * profile.messages ||
          producers.every((p) => p.exitCode !== undefined),
        { timeoutMs: 600_000, intervalMs: 100, what: `${fraction * 100}% sent` },
      );
    const scaleTo = async (shardCount: number) => {
      await waitFor(
        async () => {
          try {
            await admin.scale(STREAM, GROUP, shardCount, CHANGE);
            return true;
          } catch (error) {
            if (error instanceof ConflictError && error.code === 'MIGRATION_IN_PROGRESS')
              return false;
            throw error;
          }
        },
        { timeoutMs: 120_000, intervalMs: 250, what: `scale to ${shardCount} accepted` },
      );
      mark(`scale to ${shardCount} (sent ${sentSoFar()})`);
    };

    const steps: { at: number; run: () => Promise<void> }[] = [];
    const kills = Math.min(profile.killConsumers, profile.consumers - 1);
    for (let k = 0; k < kills; k++) {
      steps.push({
        at: 0.1 + (0.3 * k) / Math.max(1, kills),
        run: async () => {
          await children.kill(consumers[k]!);
          mark(`SIGKILL consumer-${k} (sent ${sentSoFar()})`);
        },
      });
    }
    profile.shardCounts.slice(1).forEach((count, i) => {
      steps.push({ at: 0.2 + 0.25 * i, run: () => scaleTo(count) });
    });
    if (profile.restartReplica) {
      const victim = profile.replicas - 1;
      steps.push({
        at: 0.55,
        run: async () => {
          await replicas.kill(victim);
          mark(`SIGKILL replica-${victim} (sent ${sentSoFar()})`);
          await replicas.restart(victim);
          mark(`replica-${victim} restarted`);
        },
      });
    }
    if (profile.rollback) {
      steps.push({
        at: 0.7,
        run: async () => {
          const last = profile.shardCounts.at(-1)!;
          await scaleTo(last + 4);
          if (profile.rollback === 'converged') {
            const migrationsPath = `${admin.groupPath('monitoring', STREAM, GROUP)}/migrations`;
            await waitFor(
              async () => {
                const { active } = await admin.request<{ active: { state: string } | null }>(
                  'GET',
                  migrationsPath,
                );
                return active?.state === 'CONVERGED';
              },
              { timeoutMs: 120_000, intervalMs: 200, what: `scale to ${last + 4} converged` },
            );
          }
          await admin.rollback(STREAM, GROUP, 'current', CHANGE);
          mark(`rolled back the scale to ${last + 4} (${profile.rollback})`);
        },
      });
    }
    steps.sort((a, b) => a.at - b.at);
    for (const step of steps) {
      await atProgress(step.at);
      await step.run();
    }

    await Promise.all(producers.map((p) => p.exited));
    const failedProducer = producers.find((p) => p.exitCode !== 0);
    if (failedProducer) throw new Error(`${failedProducer.name} exited ${failedProducer.exitCode}`);
    const sent = records.flatMap((file) => jsonLines<{ key: string }>(file).map((r) => r.key));
    mark(`producers done: ${sent.length} sent`);
    const processedNow = () => consumerLogs.flatMap((file) => jsonLines<Processed>(file));
    try {
      await waitFor(() => lostKeys(sent, processedNow()).length === 0, {
        timeoutMs: profile.settleTimeoutMs,
        intervalMs: 500,
        what: 'every sent key processed',
      });
    } catch {
      // Reported below as lost keys.
    }
    const assignmentsPath = `${admin.groupPath('monitoring', STREAM, GROUP)}/assignments`;
    const migrationsPath = `${admin.groupPath('monitoring', STREAM, GROUP)}/migrations`;
    const converged = await waitFor(
      async () => {
        const { shards, shardCount } = await admin.request<{
          shardCount: number;
          shards: { shard: number; state: string }[];
        }>('GET', assignmentsPath);
        const { active } = await admin.request<{ active: { state: string } | null }>(
          'GET',
          migrationsPath,
        );
        return (
          (active === null || active.state !== 'IN_PROGRESS') &&
          shards.every((s) => s.shard < shardCount && s.state === 'assigned')
        );
      },
      { timeoutMs: profile.settleTimeoutMs, intervalMs: 500, what: 'the group converged' },
    ).then(
      () => true,
      () => false,
    );
    mark(converged ? 'group converged' : 'group did NOT converge');
    const processed = processedNow();
    const lost = lostKeys(sent, processed);
    mark(`checked: ${processed.length} processed, ${lost.length} lost`);
    let violations = 0;
    for (const i of replicas.running()) {
      violations += metricSum(await replicas.metrics(i), 'coord_invariant_violations_total');
    }
    const result: ChaosResult = {
      sent: sent.length,
      processed: processed.length,
      lost,
      duplicates: duplicateCount(processed),
      overlaps: overlaps(processed),
      invariantViolations: violations,
      converged,
      timeline,
      durationMs: Date.now() - began,
    };
    succeeded = lost.length === 0 && result.overlaps.length === 0 && violations === 0 && converged;
    if (!succeeded) say(`chaos run files kept in ${dir}`);
    return result;
  } finally {
    await children.cleanUp(!succeeded);
    await redis?.stop();
  }
}

function rollbackMode(fallback: 'converged' | 'immediately'): 'converged' | 'immediately' {
  const given = process.env['CHAOS_ROLLBACK'];
  return given === 'converged' || given === 'immediately' ? given : fallback;
}

/** The profile `npm test` runs: small enough for ≤ 3 minutes on a busy 2-core machine. */
export const SHORT_PROFILE: ChaosProfile = {
  name: 'short',
  replicas: Number(process.env['CHAOS_REPLICAS'] ?? 3),
  consumers: 4,
  producers: 2,
  messages: 4_000,
  killConsumers: 1,
  shardCounts: [8, 16, 6],
  rollback: rollbackMode('converged'),
  restartReplica: true,
  sessionTimeoutMs: 6_000,
  ratePerSecond: 200,
  settleTimeoutMs: 60_000,
};

/** The full profile (`CHAOS_PROFILE=full`). */
export const FULL_PROFILE: ChaosProfile = {
  name: 'full',
  replicas: Number(process.env['CHAOS_REPLICAS'] ?? 3),
  consumers: 6,
  producers: 2,
  messages: 50_000,
  killConsumers: 2,
  shardCounts: [8, 16, 6],
  rollback: rollbackMode('immediately'),
  restartReplica: true,
  sessionTimeoutMs: 6_000,
  ratePerSecond: 500,
  settleTimeoutMs: 180_000,
};
