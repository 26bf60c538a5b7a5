/**
 * Fault injection: the replica that owns a group is SIGSTOPped for twice the lease TTL and then
 * resumed, while SDK consumers and a producer run (docs/operations.md#a-paused-owner). Three
 * coordinator replicas are real child processes on a real redis-server; the consumers and the
 * producer run in this process, each consumer with all three base URLs, the first of them
 * starting on the paused replica itself.
 *
 * What must hold: every request a running replica got was answered within the answer timeout
 * (plus the wait it asked for, plus slack); the group is served again within the lease TTL +
 * 1.5 s of the SIGSTOP; no message is lost; no shard is handled by two consumers at once; no
 * member loses its session or its epoch; the stored fence and revision only move forward and
 * no write the paused owner sends after the takeover lands; an admin request sent meanwhile is
 * answered in time and audited once. The run prints its recovery times.
 *
 * `npm test` runs the short profile (lease TTL 2 s, one pause, four consumers);
 * `FAULTS_PROFILE=long` the long one (lease TTL 3 s, three pauses of the owner of the moment,
 * six consumers, a faster producer).
 */
import { writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Consumer, CoordinatorClient, Producer, type FencedEvent } from '../../src/client/index.js';
import { keyNames } from '../../src/store/keys.js';
import { lostKeys, overlaps, type Processed, recordingHandler } from '../support/processing-log.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';
import {
  ChildProcesses,
  metricSum,
  ownersNamed,
  replicaToken,
  ReplicaSet,
} from '../support/replica-processes.js';
import { watchedHeartbeats } from '../support/watched-heartbeats.js';

interface FaultProfile {
  readonly name: string;
  readonly leaseTtlMs: number;
  readonly pauses: number;
  readonly consumers: number;
  readonly messagesPerSecond: number;
}

const SHORT: FaultProfile = {
  name: 'short',
  leaseTtlMs: 2_000,
  pauses: 1,
  consumers: 4,
  messagesPerSecond: 100,
};
const LONG: FaultProfile = {
  name: 'long',
  leaseTtlMs: 3_000,
  pauses: 3,
  consumers: 6,
  messagesPerSecond: 300,
};
const profile = process.env['FAULTS_PROFILE'] === 'long' ? LONG : SHORT;

/** `coordinator.forwarding.answer-timeout` (the default). */
const ANSWER_TIMEOUT_MS = 2_000;
/** What a busy 2-core machine may add to a bound before the answer is seen. */
const SLACK_MS = 1_500;
/** The members' heartbeat interval, advised by the replicas. */
const HEARTBEAT_INTERVAL_MS = 1_000;
/** The consumers' session timeout: its 80 % is well above what a pause costs them. */
const SESSION_TIMEOUT_MS = 10_000;
const STREAM = 'faults';
const GROUP = 'billing';
const SHARDS = 4;
const CHANGE = { requestedBy: 'paused-owner-e2e', reason: 'fault injection test' };
const TOKEN = replicaToken('faults', ['READ', 'WRITE', 'CONSUMER', 'PRODUCER']);

const say = (line: string) => console.log(`[paused-owner] ${line}`);

/** One HTTP request this process sent to a replica, as it went. */
interface Sent {
  readonly base: string;
  readonly method: string;
  readonly path: string;
  /** The wait it asked for (`waitMs` of a long poll or a held heartbeat). */
  readonly waitMs: number;
  /** The member a heartbeat is for. */
  readonly memberId: string | null;
  readonly sentAt: number;
  /** When its answer (status and headers) came; null: none. */
  answeredAt: number | null;
  /** Why there was none: `TimeoutError` (the client gave up), `AbortError` (it cancelled), …. */
  failure: string | null;
  status: number | null;
  code: string | null;
  owner: string | null;
  requestId: string | null;
}

/**
 * Records every request to one of `bases` made through `fetch` in this process (the SDK's, the
 * test's own), passing each on unchanged. Returns the records and a function to stop.
 */
function recordRequests(bases: readonly string[]): { sent: Sent[]; stop: () => void } {
  const realFetch = globalThis.fetch;
  const sent: Sent[] = [];
  const tracked = new Set(bases);
  globalThis.fetch = async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(input instanceof Request ? input.url : input);
    if (!tracked.has(url.origin)) return realFetch(input, init);
    const headers = new Headers(init?.headers);
    let waitMs = Number(url.searchParams.get('waitMs') ?? 0);
    let memberId: string | null = null;
    if (typeof init?.body === 'string' && url.pathname.endsWith('/heartbeat')) {
      const body = JSON.parse(init.body) as { waitMs?: number; memberId?: string };
      waitMs = body.waitMs ?? 0;
      memberId = body.memberId ?? null;
    }
    const record: Sent = {
      base: url.origin,
      method: init?.method ?? 'GET',
      path: url.pathname,
      waitMs,
      memberId,
      sentAt: Date.now(),
      answeredAt: null,
      failure: null,
      status: null,
      code: null,
      owner: null,
      requestId: headers.get('x-request-id'),
    };
    sent.push(record);
    let res: Response;
    try {
      res = await realFetch(input, init);
    } catch (error) {
      record.failure = (error as { name?: string }).name ?? 'Error';
      record.answeredAt = null;
      throw error;
    }
    record.answeredAt = Date.now();
    record.status = res.status;
    record.owner = res.headers.get('x-coord-owner');
    if (res.status >= 400) {
      record.code = await res
        .clone()
        .json()
        .then((body) => (body as { error?: { code?: string } }).error?.code ?? null)
        .catch(() => null);
    }
    return res;
  };
  return {
    sent,
    stop: () => {
      globalThis.fetch = realFetch;
    },
  };
}

/** A consumer of the run, with what it saw. */
interface RunConsumer {
  readonly name: string;
  readonly consumer: Consumer;
  /** memberEpoch of every heartbeat reply, with when it came. */
  readonly epochs: Array<{ at: number; epoch: number }>;
  readonly fenced: FencedEvent[];
}

/** Every command on one key as MONITOR saw it, in the order Redis ran them. */
interface Command {
  readonly at: number;
  readonly args: readonly string[];
  /** `lua` for a command a script ran. */
  readonly source: string;
}

/**
 * Runs MONITOR on its own connection (RESP by hand: each line `+<time> [<db> <source>] "arg"…`)
 * and keeps, in the order Redis ran them, the commands that name `key`. Resolves once Redis
 * said OK.
 */
async function monitorCommands(port: number, key: string, into: Command[]): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  let buffered = '';
  let started!: () => void;
  const ok = new Promise<void>((resolve) => (started = resolve));
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    buffered += chunk;
    let end: number;
    while ((end = buffered.indexOf('\r\n')) !== -1) {
      const line = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      if (line === '+OK') {
        started();
        continue;
      }
      const head = /^\+(\d+\.\d+) \[\d+ ([^\]]+)\] /.exec(line);
      if (!head || !line.includes(key)) continue;
      const args = [...line.slice(head[0].length).matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) =>
        m[1]!.replace(/\\(x[0-9a-f]{2}|.)/g, (_, e: string) =>
          e.length === 3 ? String.fromCharCode(parseInt(e.slice(1), 16)) : e,
        ),
      );
      into.push({ at: Number(head[1]) * 1000, args, source: head[2]! });
    }
  });
  socket.write('MONITOR\r\n');
  await ok;
  return socket;
}

describe(`a paused group owner (${profile.name} profile: lease TTL ${profile.leaseTtlMs} ms, ${profile.pauses} pause(s))`, () => {
  it(
    'is replaced within the lease TTL + 1.5 s; every request answered in time, nothing lost, every member keeps its epoch',
    async () => {
      const children = new ChildProcesses('paused-owner');
      let redis: RedisServerHandle | null = null;
      let recorder: { sent: Sent[]; stop: () => void } | null = null;
      const stoppers: Array<() => Promise<unknown>> = [];
      let succeeded = false;
      try {
        redis = await startRedisServer();
        const keyPrefix = `faults-${Date.now()}:coord`;
        const set = await ReplicaSet.start(children, {
          count: 3,
          store: { type: 'redis', url: redis.url },
          keyPrefix,
          env: {
            COORDINATOR_LEASE_TTL: `${profile.leaseTtlMs}ms`,
            COORDINATOR_MEMBERSHIP_HEARTBEAT_INTERVAL: `${HEARTBEAT_INTERVAL_MS}ms`,
            COORDINATOR_MEMBERSHIP_REBALANCE_HEARTBEAT_INTERVAL: '100ms',
            COORDINATOR_MEMBERSHIP_ASSIGNMENT_DEBOUNCE: '100ms',
            COORDINATOR_LOG_FORMAT: 'json',
          },
        });
        const urls = set.urls;
        const admin = new CoordinatorClient({ baseUrl: urls, token: TOKEN });
        await admin.createGroup(STREAM, GROUP, SHARDS, CHANGE);
        const viewPath = admin.groupPath('monitoring', STREAM, GROUP);
        const ownerNow = async (): Promise<string> => {
          let owner = '';
          await waitFor(
            async () => {
              const res = await fetch(`${urls[0]}${viewPath}`, {
                headers: { authorization: `Bearer ${TOKEN}` },
                signal: AbortSignal.timeout(5_000),
              });
              await res.body?.cancel();
              owner = res.headers.get('x-coord-owner') ?? '';
              return res.status === 200 && owner !== '';
            },
            { timeoutMs: 30_000, intervalMs: 100, what: 'the group served' },
          );
          return owner;
        };
        const firstOwner = await ownerNow();
        const ownerUrl = urls[set.indexOf(firstOwner)]!;
        recorder = recordRequests(urls);

        // Consumers: each with every base URL; the first starts on the owner itself.
        const processed: Processed[] = [];
        const others = urls.filter((u) => u !== ownerUrl);
        const consumers: RunConsumer[] = [];
        for (let i = 0; i < profile.consumers; i++) {
          const first = i === 0 ? ownerUrl : others[i % others.length]!;
          const baseUrl = [first, ...urls.filter((u) => u !== first)];
          const client = new CoordinatorClient({ baseUrl, token: TOKEN });
          const name = `consumer-${i}`;
          const run: RunConsumer = {
            name,
            epochs: [],
            fenced: [],
            consumer: new Consumer({
              client: watchedHeartbeats(client, (reply) =>
                run.epochs.push({ at: Date.now(), epoch: reply.memberEpoch }),
              ),
              redis: redis.url,
              streamPrefix: STREAM,
              consumerGroup: GROUP,
              memberId: name,
              sessionTimeoutMs: SESSION_TIMEOUT_MS,
              blockMs: 100,
              handler: recordingHandler(processed, name),
            }),
          };
          run.consumer.on('fenced', (event) => run.fenced.push(event));
          run.consumer.on('error', () => undefined);
          consumers.push(run);
        }
        await Promise.all(consumers.map((c) => c.consumer.start()));
        stoppers.push(() => Promise.all(consumers.map((c) => c.consumer.close())));
        const settled = () =>
          consumers.reduce((n, c) => n + c.consumer.shards().length, 0) === SHARDS &&
          consumers.every((c) => c.consumer.shards().length <= 1);
        await waitFor(settled, { timeoutMs: 30_000, intervalMs: 50, what: 'shards spread' });

        // The producer sends keys at a steady rate until told to stop.
        const producer = new Producer({
          client: new CoordinatorClient({ baseUrl: others, token: TOKEN }),
          redis: redis.url,
          streamPrefix: STREAM,
          consumerGroup: GROUP,
          longPollWaitMs: 5_000,
        });
        stoppers.push(() => producer.close());
        const sentKeys: string[] = [];
        let producing = true;
        const producing$ = (async () => {
          const began = Date.now();
          for (let n = 0; producing; n++) {
            const due = began + (n * 1000) / profile.messagesPerSecond;
            if (due > Date.now()) await new Promise((r) => setTimeout(r, due - Date.now()));
            await producer.send(`k-${n}`, { n: String(n) });
            sentKeys.push(`k-${n}`);
          }
        })();
        await waitFor(() => sentKeys.length >= profile.messagesPerSecond / 2, {
          timeoutMs: 20_000,
          what: 'the producer going',
        });
        // The epochs the members settled with: no fault may change them from here on.
        const faultsFrom = Date.now();
        const settledEpochs = consumers.map((c) => c.epochs.at(-1)?.epoch);

        // What reaches the store: the group's fence and revision, and every command on its key.
        const metadataKey = keyNames(keyPrefix).metadata({
          streamPrefix: STREAM,
          consumerGroup: GROUP,
        });
        const commands: Command[] = [];
        const monitor = await monitorCommands(redis.port, metadataKey, commands);
        stoppers.push(async () => monitor.destroy());
        const stored: Array<{ fence: number; revision: number }> = [];
        let sampling = true;
        const sampler = (async () => {
          const client = redis.client();
          while (sampling) {
            const [fence, revision] = await client.hmget(metadataKey, 'fence', 'storeRevision');
            stored.push({ fence: Number(fence), revision: Number(revision) });
            await new Promise((r) => setTimeout(r, 20));
          }
        })();
        stoppers.push(async () => {
          sampling = false;
          await sampler;
        });

        const pauses: Array<{
          owner: string;
          fence: number;
          pausedAt: number;
          resumedAt: number;
          recoveredMs: number;
          /** Members none of whose heartbeats went to the paused replica; null: there were none. */
          servedAgainMs: number | null;
          /** Every member, also those that waited out a heartbeat sent to the paused replica. */
          allServedMs: number;
          adminMs: number;
        }> = [];
        const adminIds: string[] = [];
        for (let p = 0; p < profile.pauses; p++) {
          const owner = await ownerNow();
          const x = set.indexOf(owner);
          const pausedUrl = urls[x]!;
          const running = urls.filter((u) => u !== pausedUrl);
          const fence = Number(await redis.client().hget(metadataKey, 'fence'));
          const lostBefore = metricSum(await set.metrics(x), 'coord_lease_changes_total', {
            event: 'lost',
          });
          const pausedAt = Date.now();
          set.pause(x);
          let resumedAt = 0;
          try {
            // An admin request through a running replica at once: the owner cannot answer it.
            const adminId = `faults-admin-${p}-${Date.now()}`;
            adminIds.push(adminId);
            const adminAnswer = (async () => {
              const began = Date.now();
              const res = await fetch(`${running[0]}${admin.groupPath('admin', STREAM, GROUP)}`, {
                method: 'PUT',
                headers: {
                  authorization: `Bearer ${TOKEN}`,
                  'content-type': 'application/json',
                  'x-request-id': adminId,
                },
                body: JSON.stringify({ shardCount: SHARDS, ...CHANGE }),
                signal: AbortSignal.timeout(30_000),
              });
              await res.body?.cancel();
              return { status: res.status, ms: Date.now() - began };
            })();

            // Until a running replica serves the group from another owner.
            let recoveredMs = 0;
            await waitFor(
              async () => {
                const answers = (await ownersNamed(running, viewPath, TOKEN)).map(
                  (named) => named !== null && named !== owner,
                );
                if (answers.some(Boolean)) recoveredMs = Date.now() - pausedAt;
                return answers.some(Boolean);
              },
              { timeoutMs: 30_000, intervalMs: 50, what: 'the group served by another owner' },
            );
            const answered = await adminAnswer;
            expect([200, 503], 'the admin request').toContain(answered.status);
            // Every member is served again: when its first heartbeat after the SIGSTOP was
            // answered by another owner.
            const servedAt = (memberId: string) =>
              Math.min(
                ...recorder!.sent
                  .filter(
                    (s) =>
                      s.memberId === memberId &&
                      s.sentAt > pausedAt &&
                      s.status === 200 &&
                      s.owner !== owner,
                  )
                  .map((s) => s.answeredAt!),
              );
            await waitFor(() => consumers.every((c) => servedAt(c.name) < Infinity), {
              timeoutMs: 30_000,
              intervalMs: 50,
              what: 'heartbeats served again',
            });
            // Those that heartbeat through the running replicas (not through the paused one):
            // none when every consumer knew the paused replica as the owner among its base URLs.
            const through = consumers.filter(
              (c) =>
                !recorder!.sent.some(
                  (s) =>
                    s.memberId === c.name && s.base === pausedUrl && s.sentAt >= pausedAt - 1_000,
                ),
            );
            const servedAgainMs =
              through.length === 0
                ? null
                : Math.max(...through.map((c) => servedAt(c.name))) - pausedAt;
            const allServedMs = Math.max(...consumers.map((c) => servedAt(c.name))) - pausedAt;
            // The pause lasts twice the lease TTL.
            const left = pausedAt + 2 * profile.leaseTtlMs - Date.now();
            if (left > 0) await new Promise((r) => setTimeout(r, left));
            set.resume(x);
            resumedAt = Date.now();
            pauses.push({
              owner,
              fence,
              pausedAt,
              resumedAt,
              recoveredMs,
              servedAgainMs,
              allServedMs,
              adminMs: answered.ms,
            });
            say(
              `SIGSTOP ${owner} for ${resumedAt - pausedAt} ms: group served again after ` +
                `${recoveredMs} ms; heartbeats of the ${through.length} members going through ` +
                `the running replicas served again after ${servedAgainMs ?? '-'} ms, of all members ` +
                `after ${allServedMs} ms; admin request answered ${answered.status} after ` +
                `${answered.ms} ms`,
            );
          } finally {
            set.resume(x);
          }
          // The resumed replica noticed its lost lease; it takes its groups back in turn.
          await waitFor(
            async () =>
              metricSum(await set.metrics(x), 'coord_lease_changes_total', { event: 'lost' }) >
              lostBefore,
            { timeoutMs: 20_000, intervalMs: 100, what: `${owner} counts its lost lease` },
          );
          await waitFor(settled, { timeoutMs: 30_000, intervalMs: 50, what: 'shards settled' });
        }

        producing = false;
        await producing$;
        await waitFor(() => lostKeys(sentKeys, processed).length === 0, {
          timeoutMs: 30_000,
          intervalMs: 100,
          what: 'every sent key processed',
        });
        await waitFor(settled, { timeoutMs: 30_000, intervalMs: 50, what: 'shards settled' });
        for (const stop of stoppers.splice(0).reverse()) await stop();
        recorder.stop();

        // Every request a running replica got was answered, in time.
        const toPaused = (s: Sent) =>
          pauses.some(
            (p) =>
              s.base === urls[set.indexOf(p.owner)] &&
              s.sentAt < p.resumedAt &&
              (s.answeredAt ?? Infinity) > p.pausedAt,
          );
        const toRunning = recorder.sent.filter((s) => !toPaused(s));
        const late = toRunning.filter((s) =>
          s.answeredAt === null
            ? s.failure !== 'AbortError' // cancelled by its caller: not waiting any more
            : s.answeredAt - s.sentAt > s.waitMs + ANSWER_TIMEOUT_MS + SLACK_MS,
        );
        const slowest = Math.max(
          ...toRunning
            .filter((s) => s.answeredAt !== null)
            .map((s) => s.answeredAt! - s.sentAt - s.waitMs),
        );
        const refused = new Map<string, number>();
        for (const s of toRunning) {
          if (s.status === 503) refused.set(s.code ?? '-', (refused.get(s.code ?? '-') ?? 0) + 1);
        }
        say(
          `${toRunning.length} requests to running replicas; slowest answer ${slowest} ms past ` +
            `its wait; 503s: ${[...refused].map(([code, n]) => `${n} ${code}`).join(', ') || 'none'}`,
        );
        expect(late.slice(0, 5)).toEqual([]);

        // Nothing lost, no shard handled by two consumers at once, nobody lost its session.
        say(`${sentKeys.length} keys sent, ${processed.length} processed`);
        expect(lostKeys(sentKeys, processed)).toEqual([]);
        expect(overlaps(processed).slice(0, 5)).toEqual([]);
        for (const c of consumers) {
          expect(c.fenced, c.name).toEqual([]);
          // (The leave heartbeat of close() answers -1.)
          const epochs = new Set(
            c.epochs.filter((e) => e.at >= faultsFrom && e.epoch > 0).map((e) => e.epoch),
          );
          expect([...epochs], c.name).toEqual([settledEpochs[consumers.indexOf(c)]]);
        }

        // The store: fence and revision only moved forward; no write of a paused owner landed.
        for (let i = 1; i < stored.length; i++) {
          expect(stored[i]!.fence).toBeGreaterThanOrEqual(stored[i - 1]!.fence);
          expect(stored[i]!.revision).toBeGreaterThanOrEqual(stored[i - 1]!.revision);
        }
        let attempts = 0;
        let landed = 0;
        for (const pause of pauses) {
          const claims = commands.filter(
            (c) =>
              c.source === 'lua' &&
              c.args[0]?.toLowerCase() === 'hincrby' &&
              c.args[2] === 'fence' &&
              c.at >= pause.pausedAt,
          );
          expect(claims.length, 'a claim after the pause').toBeGreaterThan(0);
          const takeover = commands.indexOf(claims[0]!);
          for (let i = takeover + 1; i < commands.length; i++) {
            const c = commands[i]!;
            const numKeys = Number(c.args[2]);
            const carries =
              c.source !== 'lua' &&
              c.args[0]?.toLowerCase() === 'evalsha' &&
              c.args[3] === metadataKey &&
              c.args[3 + numKeys] === String(pause.fence);
            if (!carries) continue;
            attempts++;
            for (let j = i + 1; j < commands.length && commands[j]!.source === 'lua'; j++) {
              if (/^(hset|hdel|hincrby|del|hmset)$/i.test(commands[j]!.args[0] ?? '')) landed++;
            }
          }
          expect(Math.max(...stored.map((s) => s.fence))).toBeGreaterThan(pause.fence);
        }
        say(
          `writes sent with a paused owner's fence after the takeover: ${attempts}, landed: ${landed}`,
        );
        expect(landed).toBe(0);

        // Each admin request: answered in time, audited once.
        for (const pause of pauses) {
          expect(pause.adminMs).toBeLessThan(ANSWER_TIMEOUT_MS + SLACK_MS);
        }
        const audit = await admin.request<{ records: Array<{ requestId: string }> }>(
          'GET',
          `/coord/v1/monitoring/audit?streamPrefix=${STREAM}&consumerGroup=${GROUP}&limit=1000`,
        );
        for (const id of adminIds) {
          expect(
            audit.records.filter((r) => r.requestId === id),
            id,
          ).toHaveLength(1);
        }

        // The promised bound, and no error in any replica's log.
        for (const pause of pauses) {
          expect(pause.recoveredMs).toBeLessThan(profile.leaseTtlMs + 1_500 + SLACK_MS);
          if (pause.servedAgainMs !== null)
            expect(pause.servedAgainMs).toBeLessThan(profile.leaseTtlMs + 1_500 + SLACK_MS);
          // A heartbeat sent straight to the paused owner (held up to the 1 s interval) gets the
          // SDK's 2.5 s direct answer bound, then goes to a running replica in the same call.
          expect(pause.allServedMs).toBeLessThan(
            profile.leaseTtlMs + HEARTBEAT_INTERVAL_MS + 2_500 + SLACK_MS,
          );
        }
        for (const id of set.ids) {
          const errors = children
            .output(id)
            .split('\n')
            .filter(
              (line) =>
                line.startsWith('{') && (JSON.parse(line) as { level?: string }).level === 'error',
            );
          expect(errors, id).toEqual([]);
        }
        for (const i of set.running()) {
          expect(metricSum(await set.metrics(i), 'coord_invariant_violations_total')).toBe(0);
        }
        say(
          `recovery (SIGSTOP → group served again): ${pauses.map((p) => `${p.recoveredMs} ms`).join(', ')} ` +
            `(lease TTL ${profile.leaseTtlMs} ms)`,
        );
        succeeded = true;
      } finally {
        recorder?.stop();
        for (const stop of stoppers.reverse()) await stop().catch(() => undefined);
        if (!succeeded) {
          if (recorder) {
            writeFileSync(
              join(children.dir, 'requests.json'),
              JSON.stringify(recorder.sent, null, 1),
            );
          }
          say(`replica logs and requests.json kept in ${children.dir}`);
        }
        await children.cleanUp(!succeeded);
        await redis?.stop();
      }
    },
    profile.name === 'long' ? 600_000 : 120_000,
  );
});
