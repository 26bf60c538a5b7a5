/**
 * Fault injection: the store's Redis is stopped (SIGTERM) in the middle of a run and started
 * again on the same port with its AOF, while two coordinator replicas (real child processes),
 * SDK consumers and a producer run (docs/operations.md#when-the-store-is-down).
 *
 * What must hold: while Redis is down the replicas say so (health DEGRADED, ready 503, admin
 * changes 503 STORE_UNAVAILABLE naming the store) and every request is answered within the
 * outage bound; no answer and no log line carries ioredis internals; once Redis is back the
 * group is served again, every member keeps its epoch (nobody is fenced) and no message sent is
 * lost. The run prints how long it took from the SIGTERM to the group served again.
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { Consumer, CoordinatorClient, Producer, type FencedEvent } from '../../src/client/index.js';
import { STORE_OUTAGE_ANSWER_MS } from '../../src/http/store-outage.js';
import { lostKeys, overlaps, type Processed, recordingHandler } from '../support/processing-log.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';
import { ChildProcesses, replicaToken, ReplicaSet } from '../support/replica-processes.js';

const LEASE_TTL_MS = 2_000;
/** Long enough for the replicas to lose their leases and the lease keys to expire. */
const OUTAGE_MS = 3_000;
const SHARDS = 4;
const CONSUMERS = 2;
const MESSAGES_PER_SECOND = 100;
const SESSION_TIMEOUT_MS = 10_000;
/** The outage bound, plus what a busy 2-core machine adds before the answer is seen. */
const ANSWER_WITHIN_MS = STORE_OUTAGE_ANSWER_MS + 1_000;
const STREAM = 'restart';
const GROUP = 'g';
const CHANGE = { requestedBy: 'redis-restart-e2e', reason: 'store outage test' };
const TOKEN = replicaToken('e2e', ['READ', 'WRITE', 'CONSUMER', 'PRODUCER']);
const say = (line: string) => console.log(`[redis-restart] ${line}`);
/** How long each part of the run may take to stop at its end. */
const STOP_WITHIN_MS = 5_000;

interface Probe {
  readonly replica: number;
  readonly label: string;
  readonly status: number;
  readonly ms: number;
  readonly body: string;
}

/** One request to one replica, no retry; its answer and how long it took. */
async function probe(
  set: ReplicaSet,
  replica: number,
  label: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<Probe> {
  const started = performance.now();
  try {
    const res = await fetch(`${set.urls[replica]}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${TOKEN}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      signal: AbortSignal.timeout(15_000),
    });
    const text = await res.text();
    return { replica, label, status: res.status, ms: performance.now() - started, body: text };
  } catch (error) {
    return { replica, label, status: 0, ms: Infinity, body: String(error) };
  }
}

const view = (suffix = '') => `/coord/v1/monitoring/streams/${STREAM}/groups/${GROUP}${suffix}`;

/** A round of the requests an operator and the clients send, against every replica. */
function probeRound(set: ReplicaSet, round: number): Array<Promise<Probe>> {
  return set.running().flatMap((i) => [
    probe(set, i, 'health', 'GET', '/coord/v1/monitoring/health'),
    probe(set, i, 'ready', 'GET', '/coord/v1/monitoring/health/ready'),
    probe(set, i, 'live', 'GET', '/coord/v1/monitoring/health/live'),
    probe(set, i, 'members', 'GET', view('/members')),
    probe(set, i, 'assignments', 'GET', view('/assignments')),
    probe(set, i, 'group', 'GET', view()),
    probe(set, i, 'routing', 'GET', `/coord/v1/routing/streams/${STREAM}/groups/${GROUP}`),
    probe(set, i, 'groups', 'GET', '/coord/v1/monitoring/groups'),
    probe(set, i, 'create', 'POST', '/coord/v1/admin/groups', {
      streamPrefix: STREAM,
      consumerGroup: `during-${round}-${i}`,
      shardCount: SHARDS,
      ...CHANGE,
    }),
  ]);
}

/** SIGTERM to the test's redis-server, by its process id; resolves once it no longer answers. */
async function sigtermRedis(redis: RedisServerHandle): Promise<void> {
  const info = await redis.client().info('server');
  const pid = Number(/process_id:(\d+)/.exec(info)?.[1]);
  expect(pid).toBeGreaterThan(0);
  process.kill(pid, 'SIGTERM');
  await waitFor(
    async () => {
      const client = new Redis({
        port: redis.port,
        host: '127.0.0.1',
        lazyConnect: true,
        retryStrategy: () => null,
        maxRetriesPerRequest: 0,
        connectTimeout: 200,
      });
      client.on('error', () => undefined);
      try {
        await client.connect();
        await client.ping();
        return false;
      } catch {
        return true;
      } finally {
        client.disconnect();
      }
    },
    { timeoutMs: 10_000, intervalMs: 20, what: 'redis-server to exit' },
  );
}

describe('Redis restarted under running replicas, consumers and a producer', () => {
  it('says the store is down, answers in time, then serves again with every epoch and message kept', async () => {
    const children = new ChildProcesses('redis-restart');
    let redis: RedisServerHandle | null = null;
    const stoppers: Array<[string, () => Promise<unknown>]> = [];
    let failed = true;
    try {
      redis = await startRedisServer({ extraArgs: ['--appendonly', 'yes'] });
      const set = await ReplicaSet.start(children, {
        count: 2,
        store: { type: 'redis', url: redis.url },
        keyPrefix: `restart-${Date.now()}:coord`,
        env: {
          COORDINATOR_LEASE_TTL: `${LEASE_TTL_MS}ms`,
          COORDINATOR_MEMBERSHIP_HEARTBEAT_INTERVAL: '1s',
          COORDINATOR_MEMBERSHIP_REBALANCE_HEARTBEAT_INTERVAL: '100ms',
          COORDINATOR_MEMBERSHIP_ASSIGNMENT_DEBOUNCE: '100ms',
          COORDINATOR_LOG_LEVEL: 'info',
        },
      });
      say('replicas started');
      const admin = new CoordinatorClient({ baseUrl: set.urls, token: TOKEN });
      await admin.createGroup(STREAM, GROUP, SHARDS, CHANGE);

      // Consumers, each with both base URLs; every heartbeat reply's epoch is kept.
      const processed: Processed[] = [];
      const fenced: FencedEvent[] = [];
      const consumers = Array.from({ length: CONSUMERS }, (_, i) => {
        const client = new CoordinatorClient({
          baseUrl: i % 2 === 0 ? set.urls : [...set.urls].reverse(),
          token: TOKEN,
        });
        const name = `consumer-${i}`;
        const consumer = new Consumer({
          client,
          redis: redis!.url,
          streamPrefix: STREAM,
          consumerGroup: GROUP,
          memberId: name,
          sessionTimeoutMs: SESSION_TIMEOUT_MS,
          blockMs: 100,
          handler: recordingHandler(processed, name),
        });
        consumer.on('fenced', (event) => fenced.push(event));
        consumer.on('error', () => undefined);
        return consumer;
      });
      await Promise.all(consumers.map((c) => c.start()));
      say('consumers started');
      stoppers.push(['the consumers', () => Promise.all(consumers.map((c) => c.close()))]);
      // Settled: the shards spread evenly and the group stable (no rebalance under way), so the
      // epochs read before the outage are the ones that must come back.
      await waitFor(
        async () =>
          consumers.every((c) => c.shards().length === SHARDS / CONSUMERS) &&
          (await admin.request<{ phase: string }>('GET', view())).phase === 'stable',
        { timeoutMs: 20_000, intervalMs: 50, what: 'the shards spread and the group stable' },
      );
      say('shards spread, group stable');

      const producer = new Producer({
        client: new CoordinatorClient({ baseUrl: set.urls, token: TOKEN }),
        redis: redis.url,
        streamPrefix: STREAM,
        consumerGroup: GROUP,
        longPollWaitMs: 5_000,
      });
      stoppers.push(['the producer', () => producer.close()]);
      const sent: string[] = [];
      let producing = true;
      const producing$ = (async () => {
        const began = Date.now();
        for (let n = 0; producing; n++) {
          const due = began + (n * 1000) / MESSAGES_PER_SECOND;
          if (due > Date.now()) await new Promise((r) => setTimeout(r, due - Date.now()));
          await producer.send(`k-${n}`, { n: String(n) });
          sent.push(`k-${n}`);
        }
      })();
      await waitFor(() => sent.length >= MESSAGES_PER_SECOND / 2, {
        timeoutMs: 10_000,
        what: 'the producer going',
      });

      const epochsOf = async () => {
        const { members } = await admin.request<{
          members: Array<{ memberId: string; memberEpoch: number }>;
        }>('GET', view('/members'));
        return Object.fromEntries(members.map((m) => [m.memberId, m.memberEpoch]));
      };
      const before = await epochsOf();
      expect(Object.keys(before)).toHaveLength(CONSUMERS);

      // The outage: SIGTERM, Redis down for OUTAGE_MS while every replica is probed.
      const stoppedAt = performance.now();
      await sigtermRedis(redis);
      say(`Redis stopped (SIGTERM) after ${sent.length} messages sent`);
      const during: Probe[] = [];
      for (let round = 0; performance.now() - stoppedAt < OUTAGE_MS; round++) {
        const started = performance.now();
        during.push(...(await Promise.all(probeRound(set, round))));
        const left = 500 - (performance.now() - started);
        if (left > 0) await new Promise((resolve) => setTimeout(resolve, left));
      }
      const restartAt = performance.now();
      await redis.restart();
      say(`Redis started again on port ${redis.port} with its AOF`);

      // Served again: every replica ready, and the group's members read on every replica.
      const probes = [...during];
      let servedAt = 0;
      await waitFor(
        async () => {
          for (const i of set.running()) {
            const ready = await probe(set, i, 'ready', 'GET', '/coord/v1/monitoring/health/ready');
            const members = await probe(set, i, 'members', 'GET', view('/members'));
            probes.push(ready, members);
            if (ready.status !== 200 || members.status !== 200) return false;
          }
          servedAt = performance.now();
          return true;
        },
        { timeoutMs: 20_000, intervalMs: 50, what: 'the group served again on every replica' },
      );
      const outageToServed = (servedAt - stoppedAt) / 1000;
      const restartToServed = (servedAt - restartAt) / 1000;
      say(
        `outage-to-served-again ${outageToServed.toFixed(1)} s (Redis down ` +
          `${((restartAt - stoppedAt) / 1000).toFixed(1)} s; served again ` +
          `${restartToServed.toFixed(1)} s after the restart)`,
      );

      // Every request was answered within the bound, outage or not.
      const slowest = Math.max(...probes.map((p) => p.ms));
      say(`${probes.length} probes, slowest answer ${Math.round(slowest)} ms`);
      const late = probes.filter((p) => p.ms > ANSWER_WITHIN_MS);
      expect(late.map((p) => `${p.label}@${p.replica} ${p.status} ${Math.round(p.ms)} ms`)).toEqual(
        [],
      );
      for (const p of probes) {
        // An answer, never a failure of the coordinator's own (500) or none at all.
        expect([200, 201, 503], `${p.label}@${p.replica}: ${p.body}`).toContain(p.status);
        expect(p.body).not.toMatch(/max retries|maxRetriesPerRequest/i);
      }
      const codes = new Map<string, number>();
      for (const p of during.filter((p) => p.status === 503)) {
        const code = (JSON.parse(p.body) as { error?: { code?: string } }).error?.code ?? p.label;
        codes.set(code, (codes.get(code) ?? 0) + 1);
      }
      say(`503 answers during the outage: ${[...codes].map(([c, n]) => `${c} ${n}`).join(', ')}`);
      // While it was down, every replica said so.
      for (const i of set.running()) {
        const mine = during.filter((p) => p.replica === i);
        expect(
          mine.some(
            (p) =>
              p.label === 'health' &&
              (JSON.parse(p.body) as { status: string }).status === 'DEGRADED',
          ),
          `replica ${i} health DEGRADED`,
        ).toBe(true);
        expect(
          mine.some((p) => p.label === 'ready' && p.status === 503),
          `replica ${i} ready 503`,
        ).toBe(true);
        expect(mine.filter((p) => p.label === 'live').every((p) => p.status === 200)).toBe(true);
        const creates = mine.filter((p) => p.label === 'create' && p.status !== 201);
        expect(creates.length, `replica ${i} refused admin changes`).toBeGreaterThan(0);
        for (const p of creates) {
          expect(p.status).toBe(503);
          const { error } = JSON.parse(p.body) as {
            error: { code: string; details?: { store?: string } };
          };
          expect(error.code).toBe('STORE_UNAVAILABLE');
          expect(error.details?.store).toBe(`127.0.0.1:${redis.port}`);
        }
      }

      // The run goes on: the producer finishes, every message sent is processed.
      await waitFor(() => sent.length >= MESSAGES_PER_SECOND * 3, {
        timeoutMs: 20_000,
        what: 'the producer going on after the restart',
      });
      producing = false;
      await producing$;
      await waitFor(() => lostKeys(sent, processed).length === 0, {
        timeoutMs: 20_000,
        intervalMs: 100,
        what: 'every sent message processed',
      });
      expect(overlaps(processed).slice(0, 3)).toEqual([]);

      // Members kept their epochs: nobody was fenced, and the epochs read now are those before.
      expect(fenced).toEqual([]);
      expect(await epochsOf()).toEqual(before);

      for (const i of [0, 1]) {
        const log = children.output(set.ids[i]!);
        expect(log).not.toMatch(/max retries|maxRetriesPerRequest|Command timed out/i);
        // A lease lost meanwhile says why in the store's words.
        for (const line of log.split('\n').filter((l) => l.includes('group lease lost'))) {
          expect(line).toContain(`Redis at 127.0.0.1:${redis.port} unreachable`);
        }
      }
      // Both replicas ran throughout (none died of the outage).
      expect(set.running()).toEqual([0, 1]);
      say(`${sent.length} messages sent, ${processed.length} processed, none lost`);
      failed = false;
    } finally {
      // Each stop bounded and named when it hangs: a hang here would otherwise hide the failure
      // behind the test's own timeout.
      for (const [what, stop] of stoppers.reverse()) {
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<'late'>((resolve) => {
          timer = setTimeout(() => resolve('late'), STOP_WITHIN_MS);
        });
        const stopped = stop().then(
          () => 'stopped' as const,
          () => 'stopped' as const,
        );
        if ((await Promise.race([stopped, late])) === 'late')
          say(`${what}: not stopped within ${STOP_WITHIN_MS} ms`);
        clearTimeout(timer);
      }
      if (failed) say(`replica logs kept in ${children.dir}`);
      await children.cleanUp(failed);
      await redis?.stop();
    }
  }, 60_000);
});
