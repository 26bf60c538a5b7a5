/**
 * A producer as a child process of the chaos run: sends keys `<id>-<n>` for n < count, and
 * records each key once `send` resolved (the record the run checks for lost messages).
 */
import { openSync, writeSync } from 'node:fs';
import { Producer } from '../../src/client/index.js';
import { chaosGroup, env } from './chaos-child.js';

const id = env('CHAOS_PRODUCER_ID');
const count = Number(env('CHAOS_COUNT'));
/** Messages per second (spread so the chaos happens while producers send). */
const rate = Number(env('CHAOS_RATE'));
const record = openSync(env('CHAOS_RECORD'), 'a');
const producer = new Producer({
  ...chaosGroup(),
  longPollWaitMs: 5_000,
});

// A few sends in flight at once, as a real service would have.
const inFlight = 8;
let next = 0;
const began = Date.now();
await Promise.all(
  Array.from({ length: inFlight }, async () => {
    while (next < count) {
      const n = next++;
      const due = began + (n / rate) * 1000;
      if (due > Date.now()) await new Promise((resolve) => setTimeout(resolve, due - Date.now()));
      const key = `${id}-${n}`;
      const { shard, metadataVersion } = await producer.send(key, { producer: id });
      writeSync(record, `${JSON.stringify({ key, shard, metadataVersion })}\n`);
    }
  }),
);
await producer.close();
process.exit(0);
