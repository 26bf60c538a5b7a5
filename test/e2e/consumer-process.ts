/**
 * A consumer as a child process of the chaos run. Every message it finishes is one JSON line
 * `{consumer, shard, key, start, end}` appended synchronously to its log (so a SIGKILL loses no
 * finished work from the record), then acked by the SDK.
 */
import { openSync, writeSync } from 'node:fs';
import { Consumer } from '../../src/client/index.js';
import { chaosGroup, env } from './chaos-child.js';

const name = env('CHAOS_MEMBER_ID');
const log = openSync(env('CHAOS_LOG'), 'a');
const events = openSync(`${env('CHAOS_LOG')}.events`, 'a');
const note = (event: Record<string, unknown>) =>
  writeSync(events, `${JSON.stringify({ at: Date.now(), ...event })}\n`);

const consumer = new Consumer({
  ...chaosGroup(),
  memberId: name,
  sessionTimeoutMs: Number(env('CHAOS_SESSION_TIMEOUT_MS')),
  rebalanceTimeoutMs: 30_000,
  blockMs: 200,
  batchSize: 50,
  handler: async (message) => {
    const start = Date.now();
    await new Promise((resolve) => setImmediate(resolve));
    const line = { consumer: name, shard: message.shard, key: message.key, start, end: Date.now() };
    writeSync(log, `${JSON.stringify(line)}\n`);
  },
});
consumer.on('assigned', (shards) => note({ event: 'assigned', shards }));
consumer.on('revoked', (shards) => note({ event: 'revoked', shards }));
consumer.on('fenced', (event) => note({ event: 'fenced', ...event }));
consumer.on('error', (error) => note({ event: 'error', error: String(error) }));

await consumer.start();
note({ event: 'started' });
process.on('SIGTERM', () => {
  void consumer.close().then(() => process.exit(0));
});
