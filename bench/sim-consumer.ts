import { Redis } from 'ioredis';
import { KclWorker } from './kcl-baseline.js';

/*
 * One simulated consumer, a child process of bench/handoff.ts (so that it can be SIGKILLed). It
 * reads nothing: it reports, as JSON lines on stdout, when it starts and stops "processing" a
 * shard, with cross-process timestamps (performance.timeOrigin + performance.now()).
 *
 *   SIM_MODE=coordinator  heartbeats to the coordinator as the SDK's consumer does
 *     (src/client/consumer.ts): while it has nothing to report or act on, each heartbeat is held
 *     open (`waitMs`: the advised heartbeatIntervalMs) and the next goes out when it is answered
 *     (at once, except after a held one answered without news: then not before the interval);
 *     otherwise at the advised interval. Granted shards start at once; a revoked shard drains for
 *     SIM_DRAIN_MS, then stops, and a heartbeat reporting it DONE goes out at once (the SDK's
 *     nudge, which also cancels a held heartbeat). A fenced member stops everything and rejoins.
 *     SIM_HOLD=0 turns held heartbeats off (the SDK's `holdHeartbeats: false`).
 *   SIM_MODE=kcl  a KclWorker (bench/kcl-baseline.ts) on the same Redis; a shard starts when its
 *     lease is acquired and stops when a renewal finds it lost.
 *
 * It prints `LISTENING 0` when ready and starts on the stdin line `go`.
 */

const env = (name: string) => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is required`);
  return value;
};
const now = () => performance.timeOrigin + performance.now();
const emit = (event: Record<string, unknown>) =>
  process.stdout.write(`${JSON.stringify({ ...event, t: now() })}\n`);

interface Reply {
  outcome: string;
  memberEpoch: number;
  assignmentEpoch: number;
  metadataVersion: number;
  lifecycleId: string;
  assignedShards: number[];
  revokeShards: number[];
  retireShards: number[];
  heartbeatIntervalMs: number;
}

const sameShards = (a: readonly number[], b: readonly number[]) =>
  a.length === b.length && [...a].sort((x, y) => x - y).every((s, i) => s === b[i]);

async function coordinatorConsumer(): Promise<void> {
  const url = `http://127.0.0.1:${env('SIM_PORT')}/coord/v1/consumer/streams/${env('SIM_STREAM')}/groups/${env('SIM_GROUP')}/heartbeat`;
  const token = env('SIM_TOKEN');
  const memberId = env('SIM_MEMBER');
  const drainMs = Number(env('SIM_DRAIN_MS'));
  const sessionTimeoutMs = Number(env('SIM_SESSION_MS'));
  const holdHeartbeats = process.env.SIM_HOLD !== '0';
  const joining = { memberEpoch: 0, assignmentEpoch: 0, metadataVersion: 0 };
  let versions: typeof joining & { lifecycleId?: string } = joining;
  const running = new Set<number>();
  const draining = new Set<number>();
  let wake: (() => void) | null = null;
  let nudged = false;
  /** The held heartbeat in flight, cancelled by a nudge. */
  let held: AbortController | null = null;
  /** The wait the next heartbeat asks for (0: not held). */
  let holdMs = 0;
  const nudge = () => {
    held?.abort();
    if (wake) wake();
    else nudged = true;
  };
  const sleep = (ms: number) =>
    nudged
      ? ((nudged = false), Promise.resolve())
      : new Promise<void>((resolve) => {
          const timer = setTimeout(done, ms);
          function done() {
            clearTimeout(timer);
            wake = null;
            resolve();
          }
          wake = done;
        });
  const stop = (shard: number) => {
    if (running.delete(shard)) emit({ e: 'stop', shard });
  };
  emit({ e: 'join' });
  for (;;) {
    const sentAt = now();
    const body = {
      memberId,
      ...versions,
      currentAssignments: [...running].sort((a, b) => a - b),
      revokeProgress: [...draining].map((shard) => ({ shard, state: 'DRAINING' })),
      sessionTimeoutMs,
      ...(holdMs > 0 && draining.size === 0 ? { waitMs: holdMs } : {}),
    };
    const controller = body.waitMs ? new AbortController() : null;
    held = controller;
    let wait = 200;
    try {
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify(body),
        ...(controller ? { signal: controller.signal } : {}),
      });
      const text = await res.text();
      holdMs = 0;
      if (res.status === 200) {
        const reply = JSON.parse(text) as Reply;
        if (reply.outcome === 'FENCED_MEMBER_EPOCH') {
          for (const shard of [...running]) stop(shard);
          draining.clear();
          versions = joining;
          emit({ e: 'fenced' });
          continue;
        }
        versions = {
          memberEpoch: reply.memberEpoch,
          assignmentEpoch: reply.assignmentEpoch,
          metadataVersion: reply.metadataVersion,
          lifecycleId: reply.lifecycleId,
        };
        // The reply tells nothing new: what was sent is what it says.
        const nothingNew =
          (reply.outcome === 'OK' || reply.outcome === 'REVOKE_PENDING') &&
          reply.memberEpoch === body.memberEpoch &&
          reply.assignmentEpoch === body.assignmentEpoch &&
          reply.metadataVersion === body.metadataVersion &&
          reply.revokeShards.length === 0 &&
          reply.retireShards.length === 0 &&
          body.revokeProgress.length === 0 &&
          sameShards(body.currentAssignments, reply.assignedShards);
        const keep = new Set([
          ...reply.assignedShards,
          ...reply.revokeShards,
          ...reply.retireShards,
        ]);
        for (const shard of [...running]) if (!keep.has(shard) && !draining.has(shard)) stop(shard);
        for (const shard of reply.assignedShards)
          if (!running.has(shard)) {
            running.add(shard);
            emit({ e: 'start', shard });
          }
        for (const shard of reply.revokeShards) {
          if (!running.has(shard) || draining.has(shard)) continue;
          draining.add(shard);
          const finish = () => {
            draining.delete(shard);
            stop(shard);
            nudge();
          };
          if (drainMs === 0) finish();
          else setTimeout(finish, drainMs);
        }
        wait = reply.heartbeatIntervalMs;
        const quiet =
          (reply.outcome === 'OK' || reply.outcome === 'REVOKE_PENDING') &&
          reply.revokeShards.length === 0 &&
          reply.retireShards.length === 0 &&
          draining.size === 0;
        if (holdHeartbeats && quiet) {
          holdMs = reply.heartbeatIntervalMs;
          wait =
            controller && nothingNew ? Math.max(0, sentAt + reply.heartbeatIntervalMs - now()) : 0;
        }
      } else emit({ e: 'error', status: res.status, text: text.slice(0, 200) });
    } catch (error) {
      // Cancelled by a nudge: not a failure, the next heartbeat goes out at once.
      if (controller?.signal.aborted) wait = 0;
      else {
        holdMs = 0;
        emit({ e: 'error', error: String(error) });
      }
    } finally {
      held = null;
    }
    await sleep(wait);
  }
}

async function kclConsumer(): Promise<void> {
  const redis = new Redis(env('SIM_REDIS_URL'));
  const worker = new KclWorker({
    redis,
    keyPrefix: env('SIM_KCL_PREFIX'),
    workerId: env('SIM_MEMBER'),
    shardCount: Number(env('SIM_SHARDS')),
    onStart: (shard) => emit({ e: 'start', shard }),
    onStop: (shard) => emit({ e: 'stop', shard }),
  });
  emit({ e: 'join' });
  await worker.start();
}

process.stdout.write('LISTENING 0\n');
process.stdin.setEncoding('utf8');
let started = false;
process.stdin.on('data', (chunk: string) => {
  if (started || !chunk.includes('go')) return;
  started = true;
  void (env('SIM_MODE') === 'kcl' ? kclConsumer() : coordinatorConsumer());
});
// The parent holds our stdin open: when it goes away, so do we.
process.stdin.on('end', () => process.exit(0));
