/**
 * Fault injection: one of two consumer child processes is SIGSTOPped past its session timeout
 * and then resumed (SIGCONT), while a producer child process sends keyed messages through a
 * coordinator over real HTTP on a real redis-server.
 *
 * What must hold: the paused consumer stops handling its shards before the other consumer is
 * granted them (no shard processed by two consumers at once, across both consumers' own logs);
 * once resumed it drops what it held, rejoins as a new member epoch and handles messages again;
 * no sent message is lost. The run prints how long it took from the SIGSTOP until the paused
 * consumer's shards were handled by the other consumer.
 *
 * `npm test` runs the short profile (one pause); `FAULTS_PROFILE=long` pauses the consumers in
 * turn, three times, with a faster producer.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CoordinatorClient } from '../../src/client/index.js';
import { CHANGE, startTestCoordinator, type TestCoordinator } from '../support/coordinator.js';
import {
  heldShards,
  jsonLines,
  lostKeys,
  overlaps,
  type ConsumerEvent,
  type Processed,
} from '../support/processing-log.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';
import { ChildProcesses, type Child } from '../support/replica-processes.js';

interface FaultProfile {
  readonly name: string;
  readonly pauses: number;
  readonly messagesPerSecond: number;
}

const SHORT: FaultProfile = { name: 'short', pauses: 1, messagesPerSecond: 50 };
const LONG: FaultProfile = { name: 'long', pauses: 3, messagesPerSecond: 150 };
const profile = process.env['FAULTS_PROFILE'] === 'long' ? LONG : SHORT;

/** The shortest session timeout the coordinator accepts. */
const SESSION_TIMEOUT_MS = 6_000;
/** The pause: past the session timeout, so the coordinator expires the member. */
const PAUSE_MS = SESSION_TIMEOUT_MS + 1_500;
const STREAM = 'paused';
const GROUP = 'billing';
const SHARDS = 4;
const say = (line: string) => console.log(`[consumer-pause] ${line}`);

/** One consumer child process and its two logs (processed messages, events). */
interface RunConsumer {
  readonly name: string;
  readonly child: Child;
  readonly log: string;
}

describe(`a paused consumer process (${profile.name} profile: session ${SESSION_TIMEOUT_MS} ms, ${profile.pauses} pause(s))`, () => {
  it(
    'stops handling its shards before they move, rejoins as a new epoch, loses nothing',
    async () => {
      const children = new ChildProcesses('consumer-pause');
      let redis: RedisServerHandle | null = null;
      let coordinator: TestCoordinator | null = null;
      let succeeded = false;
      try {
        redis = await startRedisServer();
        coordinator = await startTestCoordinator({
          store: 'redis',
          redisUrl: redis.url,
          overrides: {
            'membership.heartbeat-interval': '1s',
            'membership.rebalance-heartbeat-interval': '100ms',
            'membership.assignment-debounce': '100ms',
          },
        });
        const token = coordinator.token('admin');
        const admin = new CoordinatorClient({ baseUrl: coordinator.url, token });
        await admin.createGroup(STREAM, GROUP, SHARDS, CHANGE);
        const membersPath = `${admin.groupPath('monitoring', STREAM, GROUP)}/members`;
        const epochOf = async (memberId: string): Promise<number | null> => {
          const body = await admin.request<{
            members: Array<{ memberId: string; memberEpoch: number }>;
          }>('GET', membersPath);
          return body.members.find((m) => m.memberId === memberId)?.memberEpoch ?? null;
        };
        const common = {
          CHAOS_COORDINATORS: coordinator.url,
          CHAOS_TOKEN: token,
          CHAOS_REDIS: redis.url,
          CHAOS_STREAM: STREAM,
          CHAOS_GROUP: GROUP,
        };

        const consumers: RunConsumer[] = [0, 1].map((i) => {
          const name = `consumer-${i}`;
          const log = join(children.dir, `${name}.log`);
          writeFileSync(log, '');
          const child = children.start(name, 'test/e2e/consumer-process.ts', {
            ...common,
            CHAOS_MEMBER_ID: name,
            CHAOS_LOG: log,
            CHAOS_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS),
          });
          return { name, child, log };
        });
        const events = (c: RunConsumer) => jsonLines<ConsumerEvent>(`${c.log}.events`);
        const processed = (): Processed[] => consumers.flatMap((c) => jsonLines<Processed>(c.log));
        const spread = () => consumers.every((c) => heldShards(events(c)).size === SHARDS / 2);
        await waitFor(spread, { timeoutMs: 60_000, intervalMs: 100, what: 'shards spread' });

        const record = join(children.dir, 'producer.record');
        writeFileSync(record, '');
        const sentKeys = () => jsonLines<{ key: string }>(record).map((r) => r.key);
        const producer = children.start('producer', 'test/e2e/producer-process.ts', {
          ...common,
          CHAOS_PRODUCER_ID: 'p',
          CHAOS_COUNT: '1000000',
          CHAOS_RECORD: record,
          CHAOS_RATE: String(profile.messagesPerSecond),
        });
        await waitFor(() => processed().length >= profile.messagesPerSecond, {
          timeoutMs: 30_000,
          intervalMs: 100,
          what: 'messages flowing',
        });

        const results: Array<{ pausedMs: number; takeoverMs: number; rejoinMs: number }> = [];
        for (let p = 0; p < profile.pauses; p++) {
          const victim = consumers[p % 2]!;
          const other = consumers[(p + 1) % 2]!;
          const shards = [...heldShards(events(victim))];
          expect(shards.length, `${victim.name} holds shards`).toBeGreaterThan(0);
          const epochBefore = await epochOf(victim.name);
          expect(epochBefore).toBeGreaterThan(0);

          const pausedAt = Date.now();
          children.signal(victim.child, 'SIGSTOP');
          let resumedAt = 0;
          let takeoverMs = 0;
          try {
            // The other consumer handles the paused one's shards (a message it started after the
            // SIGSTOP on each of them).
            await waitFor(
              () => {
                const mine = jsonLines<Processed>(other.log).filter(
                  (m) => m.start > pausedAt && shards.includes(m.shard),
                );
                const covered = shards.every((s) => mine.some((m) => m.shard === s));
                if (covered) takeoverMs = Math.min(...mine.map((m) => m.start)) - pausedAt;
                return covered;
              },
              {
                timeoutMs: 30_000,
                intervalMs: 50,
                what: `${other.name} handles shards ${shards.join(',')}`,
              },
            );
            const left = pausedAt + PAUSE_MS - Date.now();
            if (left > 0) await new Promise((r) => setTimeout(r, left));
          } finally {
            children.signal(victim.child, 'SIGCONT');
            resumedAt = Date.now();
          }

          // Resumed: it drops what it held (session lost), rejoins as a new epoch, works again.
          await waitFor(
            () =>
              events(victim).some(
                (e) => e.event === 'fenced' && e.at >= resumedAt - 1_000 && e.at > pausedAt,
              ),
            { timeoutMs: 20_000, intervalMs: 50, what: `${victim.name} drops its shards` },
          );
          let rejoinMs = 0;
          await waitFor(
            () => {
              const again = jsonLines<Processed>(victim.log).filter((m) => m.start > resumedAt);
              if (again.length > 0) rejoinMs = again[0]!.start - resumedAt;
              return again.length > 0 && spread();
            },
            { timeoutMs: 30_000, intervalMs: 100, what: `${victim.name} handles messages again` },
          );
          const epochAfter = await epochOf(victim.name);
          expect(epochAfter, `${victim.name} rejoined as a new epoch`).not.toBe(epochBefore);
          expect(epochAfter).toBeGreaterThan(0);
          const fenced = events(victim).filter((e) => e.event === 'fenced' && e.at > pausedAt);
          say(
            `SIGSTOP ${victim.name} (shards ${shards.join(',')}) for ${resumedAt - pausedAt} ms: ` +
              `its shards handled by ${other.name} after ${takeoverMs} ms; resumed, it dropped ` +
              `them (${fenced.map((e) => e.reason).join(', ')}), rejoined (epoch ${epochBefore} → ` +
              `${epochAfter}) and handled a message again ${rejoinMs} ms after SIGCONT`,
          );
          results.push({ pausedMs: resumedAt - pausedAt, takeoverMs, rejoinMs });
        }

        await children.kill(producer);
        const sent = sentKeys();
        await waitFor(() => lostKeys(sent, processed()).length === 0, {
          timeoutMs: 30_000,
          intervalMs: 100,
          what: 'every sent key processed',
        });
        const all = processed();
        say(`${sent.length} keys sent, ${all.length} processed`);
        expect(lostKeys(sent, all)).toEqual([]);
        expect(overlaps(all).slice(0, 5)).toEqual([]);
        for (const c of consumers) expect(c.child.exitCode, c.name).toBeUndefined();
        say(
          `SIGSTOP → shards handled by the other consumer: ` +
            `${results.map((r) => `${r.takeoverMs} ms`).join(', ')} (session timeout ${SESSION_TIMEOUT_MS} ms)`,
        );
        succeeded = true;
      } finally {
        if (!succeeded) say(`consumer logs kept in ${children.dir}`);
        await children.cleanUp(!succeeded);
        await coordinator?.close();
        await redis?.stop();
      }
    },
    profile.name === 'long' ? 300_000 : 90_000,
  );
});
