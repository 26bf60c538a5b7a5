/**
 * Fault injection: a slow, stalling and resetting network between SDK consumers and their
 * coordinator. A TCP proxy sits between the consumers (their base URL) and a coordinator over
 * real HTTP on a real redis-server; a producer sends keyed messages to the coordinator directly.
 * The proxy first adds latency to every chunk, then stalls (forwards nothing, keeps every socket
 * open) for less than the session timeout, then destroys every socket a few times.
 *
 * What must hold: every request the consumers sent through the proxy was answered or failed
 * within the SDK's bound (its heartbeat timeout plus the wait it asked for, plus slack); the
 * consumers keep or regain their shards; no message is lost; no shard is handled by two
 * consumers at once. The run prints what the proxy did to the requests and how long the
 * consumers took to be answered again after the last reset.
 *
 * `npm test` runs the short profile; `FAULTS_PROFILE=long` a longer one (longer latency phase,
 * a longer stall, more resets, a faster producer).
 */
import { describe, expect, it } from 'vitest';
import { Consumer, CoordinatorClient, Producer, type FencedEvent } from '../../src/client/index.js';
import { CHANGE, startTestCoordinator, type TestCoordinator } from '../support/coordinator.js';
import { lostKeys, overlaps, type Processed, recordingHandler } from '../support/processing-log.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';
import { TcpProxy } from '../support/tcp-proxy.js';

interface FaultProfile {
  readonly name: string;
  readonly latencyMs: number;
  readonly latencyPhaseMs: number;
  readonly stallMs: number;
  readonly resets: number;
  readonly messagesPerSecond: number;
}

const SHORT: FaultProfile = {
  name: 'short',
  latencyMs: 200,
  latencyPhaseMs: 3_000,
  stallMs: 3_000,
  resets: 3,
  messagesPerSecond: 50,
};
const LONG: FaultProfile = {
  name: 'long',
  latencyMs: 300,
  latencyPhaseMs: 10_000,
  stallMs: 3_500,
  resets: 10,
  messagesPerSecond: 200,
};
const profile = process.env['FAULTS_PROFILE'] === 'long' ? LONG : SHORT;

/**
 * The consumers' session timeout. A consumer keeps its shards through a stall as long as the
 * stall, plus the heartbeat interval (1 s) and the SDK's heartbeat timeout, stays below 80 % of
 * it: the heartbeat last answered may have been sent an interval before the stall began, and
 * one sent during it may be answered only at its timeout.
 */
const SESSION_TIMEOUT_MS = 10_000;
/** The SDK's timeout of one heartbeat for that session (a quarter of it, at least 2.5 s). */
const HEARTBEAT_TIMEOUT_MS = Math.min(10_000, Math.max(2_500, SESSION_TIMEOUT_MS / 4));
/** What a busy 2-core machine (and the proxy's latency) may add before an outcome is seen. */
const SLACK_MS = 1_500;
const STREAM = 'slow';
const GROUP = 'billing';
const SHARDS = 4;
const CONSUMERS = 2;
const say = (line: string) => console.log(`[slow-network] ${line}`);

/** One request sent through the proxy, as it went. */
interface Sent {
  readonly path: string;
  readonly waitMs: number;
  readonly memberId: string | null;
  readonly sentAt: number;
  /** When its answer (status and headers) came, or when it failed. */
  settledAt: number | null;
  status: number | null;
  /** `TimeoutError`, `AbortError`, `TypeError` (the connection failed), …; null: answered. */
  failure: string | null;
}

/** Records every `fetch` in this process to `origin`, passing each on unchanged. */
function recordRequests(origin: string): { sent: Sent[]; stop: () => void } {
  const realFetch = globalThis.fetch;
  const sent: Sent[] = [];
  globalThis.fetch = async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(input instanceof Request ? input.url : input);
    if (url.origin !== origin) return realFetch(input, init);
    let waitMs = Number(url.searchParams.get('waitMs') ?? 0);
    let memberId: string | null = null;
    if (typeof init?.body === 'string' && url.pathname.endsWith('/heartbeat')) {
      const body = JSON.parse(init.body) as { waitMs?: number; memberId?: string };
      waitMs = body.waitMs ?? 0;
      memberId = body.memberId ?? null;
    }
    const record: Sent = {
      path: url.pathname,
      waitMs,
      memberId,
      sentAt: Date.now(),
      settledAt: null,
      status: null,
      failure: null,
    };
    sent.push(record);
    try {
      const res = await realFetch(input, init);
      record.status = res.status;
      return res;
    } catch (error) {
      record.failure = (error as { name?: string }).name ?? 'Error';
      throw error;
    } finally {
      record.settledAt = Date.now();
    }
  };
  return {
    sent,
    stop: () => {
      globalThis.fetch = realFetch;
    },
  };
}

interface RunConsumer {
  readonly name: string;
  readonly consumer: Consumer;
  readonly fenced: FencedEvent[];
}

describe(`a slow network between consumers and their coordinator (${profile.name} profile)`, () => {
  it(
    'every request answered or failed within the SDK bound; shards kept or regained; nothing lost',
    async () => {
      let redis: RedisServerHandle | null = null;
      let coordinator: TestCoordinator | null = null;
      let proxy: TcpProxy | null = null;
      let recorder: { sent: Sent[]; stop: () => void } | null = null;
      const stoppers: Array<() => Promise<unknown>> = [];
      try {
        redis = await startRedisServer();
        // The coordinator advertises the proxy as its URL: the SDK sends a group's requests to
        // the URL its owner advertises, so that is the path they all take.
        // Started first (its target set once the coordinator listens), so that no port is
        // chosen and freed for another process to take before the coordinator listens on it.
        proxy = await TcpProxy.start('http://127.0.0.1:1');
        coordinator = await startTestCoordinator({
          store: 'redis',
          redisUrl: redis.url,
          overrides: {
            'http.advertised-url': proxy.url,
            'membership.heartbeat-interval': '1s',
            'membership.rebalance-heartbeat-interval': '100ms',
            'membership.assignment-debounce': '100ms',
          },
        });
        proxy.retarget(coordinator.url);
        const token = coordinator.token('admin');
        const admin = new CoordinatorClient({ baseUrl: coordinator.url, token });
        await admin.createGroup(STREAM, GROUP, SHARDS, CHANGE);
        recorder = recordRequests(proxy.url);

        const processed: Processed[] = [];
        const consumers: RunConsumer[] = Array.from({ length: CONSUMERS }, (_, i) => {
          const name = `consumer-${i}`;
          const run: RunConsumer = {
            name,
            fenced: [],
            consumer: new Consumer({
              client: new CoordinatorClient({ baseUrl: proxy!.url, token }),
              redis: redis!.url,
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
          return run;
        });
        await Promise.all(consumers.map((c) => c.consumer.start()));
        stoppers.push(() => Promise.all(consumers.map((c) => c.consumer.close())));
        const spread = () =>
          consumers.every((c) => c.consumer.shards().length === SHARDS / CONSUMERS);
        await waitFor(spread, { timeoutMs: 30_000, intervalMs: 50, what: 'shards spread' });

        const producer = new Producer({
          client: new CoordinatorClient({ baseUrl: coordinator.url, token }),
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
        stoppers.push(async () => {
          producing = false;
          await producing$;
        });
        await waitFor(() => processed.length >= profile.messagesPerSecond / 2, {
          timeoutMs: 20_000,
          what: 'messages flowing',
        });
        const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

        // Latency on every chunk, both ways.
        const latencyFrom = Date.now();
        proxy.setMode('latency', profile.latencyMs);
        await sleep(profile.latencyPhaseMs);
        proxy.setMode('pass');
        const latencyTo = Date.now();
        await sleep(1_000);

        // A stall shorter than the session timeout.
        const stalledAt = Date.now();
        proxy.setMode('stall');
        await sleep(profile.stallMs);
        proxy.setMode('pass');
        const stallEndedAt = Date.now();
        await sleep(1_000);

        // Every socket destroyed, a few times.
        const resetsFrom = Date.now();
        let resetSockets = 0;
        for (let r = 0; r < profile.resets; r++) {
          resetSockets += proxy.reset();
          await sleep(500);
        }
        resetSockets += proxy.reset();
        const lastResetAt = Date.now();

        // Recovery: every consumer answered again through the proxy, and processing.
        let recoveredMs = 0;
        await waitFor(
          () => {
            const answered = consumers.map((c) =>
              recorder!.sent.find(
                (s) => s.memberId === c.name && s.sentAt >= lastResetAt && s.status === 200,
              ),
            );
            if (answered.some((s) => s === undefined)) return false;
            recoveredMs = Math.max(...answered.map((s) => s!.settledAt!)) - lastResetAt;
            return true;
          },
          { timeoutMs: 30_000, intervalMs: 50, what: 'heartbeats answered again' },
        );
        await waitFor(spread, { timeoutMs: 30_000, intervalMs: 50, what: 'shards held again' });
        await waitFor(
          () =>
            consumers.every((c) =>
              processed.some((p) => p.consumer === c.name && p.start > lastResetAt),
            ),
          { timeoutMs: 30_000, intervalMs: 50, what: 'both consumers processing again' },
        );

        producing = false;
        await producing$;
        await waitFor(() => lostKeys(sentKeys, processed).length === 0, {
          timeoutMs: 30_000,
          intervalMs: 100,
          what: 'every sent key processed',
        });
        const closingAt = Date.now();
        for (const stop of stoppers.splice(0).reverse()) await stop();
        await waitFor(() => recorder!.sent.every((s) => s.settledAt !== null), {
          timeoutMs: 10_000,
          intervalMs: 50,
          what: 'every request settled',
        });
        recorder.stop();
        const checked = recorder.sent.filter((s) => s.sentAt < closingAt);

        // Every request answered or failed within the SDK's bound.
        const bound = (s: Sent) => s.waitMs + HEARTBEAT_TIMEOUT_MS + SLACK_MS;
        const late = checked.filter((s) => s.settledAt! - s.sentAt > bound(s));
        /** The requests in flight during a window. */
        const during = (from: number, to: number) =>
          checked.filter((s) => s.sentAt < to && s.settledAt! > from);
        const outcome = (list: readonly Sent[]) => {
          const counts = new Map<string, number>();
          for (const s of list) {
            const key = s.failure ?? String(s.status);
            counts.set(key, (counts.get(key) ?? 0) + 1);
          }
          return [...counts].map(([k, n]) => `${n} ${k}`).join(', ') || 'none';
        };
        const slowest = (list: readonly Sent[]) =>
          Math.max(0, ...list.map((s) => s.settledAt! - s.sentAt - s.waitMs));
        const stats = proxy.stats();
        // (Those still in flight when the stall began count for the stall.)
        const slowed = during(latencyFrom, latencyTo).filter((s) => s.settledAt! < stalledAt);
        const stalled = during(stalledAt, stallEndedAt);
        const reset = during(resetsFrom, lastResetAt);
        /** When every consumer had a heartbeat answered (200) after `from`, in ms after it. */
        const answeredAgain = (from: number) =>
          Math.max(
            ...consumers.map((c) =>
              Math.min(
                ...checked
                  .filter((s) => s.memberId === c.name && s.status === 200 && s.settledAt! >= from)
                  .map((s) => s.settledAt!),
              ),
            ),
          ) - from;
        say(
          `latency ${profile.latencyMs} ms per chunk for ${latencyTo - latencyFrom} ms: ` +
            `${slowed.length} requests in flight (${outcome(slowed)}), ${stats.delayedChunks} ` +
            `chunks delayed, slowest ${slowest(slowed)} ms past its wait`,
        );
        say(
          `stall for ${stallEndedAt - stalledAt} ms: ${stalled.length} requests in flight ` +
            `(${outcome(stalled)}), ${stats.stalledChunks} chunks held on ` +
            `${stats.stalledConnections} connections, slowest ${slowest(stalled)} ms past its ` +
            `wait; every consumer answered again ${answeredAgain(stallEndedAt)} ms after the stall`,
        );
        say(
          `${profile.resets + 1} resets, ${resetSockets} connections destroyed: ` +
            `${reset.length} requests in flight (${outcome(reset)}); every consumer answered ` +
            `again ${recoveredMs} ms after the last reset`,
        );
        say(
          `${checked.length} requests through the proxy, ${late.length} past the bound ` +
            `(wait + ${HEARTBEAT_TIMEOUT_MS} ms + ${SLACK_MS} ms slack); fenced: ` +
            `${consumers.map((c) => `${c.name} ${c.fenced.map((f) => f.reason).join('/') || 'never'}`).join(', ')}`,
        );
        expect(late.slice(0, 5)).toEqual([]);

        say(`${sentKeys.length} keys sent, ${processed.length} processed`);
        expect(lostKeys(sentKeys, processed)).toEqual([]);
        expect(overlaps(processed).slice(0, 5)).toEqual([]);
        // The stall stayed under the session: nobody lost it.
        for (const c of consumers) {
          expect(
            c.fenced.filter((f) => f.reason === 'SESSION_LOST'),
            c.name,
          ).toEqual([]);
        }
      } finally {
        recorder?.stop();
        for (const stop of stoppers.reverse()) await stop().catch(() => undefined);
        await proxy?.close();
        await coordinator?.close();
        await redis?.stop();
      }
    },
    profile.name === 'long' ? 300_000 : 90_000,
  );
});
