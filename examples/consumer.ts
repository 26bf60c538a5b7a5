/**
 * Consumes the group: the coordinator decides which shards this process reads. Start two or
 * three of these with different MEMBER_ID values and watch the shards move between them.
 * Ctrl-C finishes the message in hand and leaves the group.
 *
 *   MEMBER_ID=worker-1 npx tsx --conditions=source examples/consumer.ts
 */
import { Consumer } from 'stream-coordinator/client';
import { consumerGroup, coordinatorClient, redisUrl, streamPrefix } from './shared.js';

const consumer = new Consumer({
  client: coordinatorClient(),
  redis: redisUrl,
  streamPrefix,
  consumerGroup,
  ...(process.env['MEMBER_ID'] ? { memberId: process.env['MEMBER_ID'] } : {}),
  handler: async ({ shard, id, key, fields, signal }) => {
    // Real work goes here; stop early if `signal` aborts (the shard was taken away).
    if (signal.aborted) return;
    console.log(`shard ${shard} ${id} key=${key} order=${fields['order']}`);
  },
});

consumer.on('assigned', (shards) => console.log(`now reading shards ${shards.join(', ')}`));
consumer.on('revoked', (shards) => console.log(`gave up shards ${shards.join(', ')}`));
consumer.on('fenced', ({ reason }) => console.log(`dropped every shard (${reason}); rejoining`));
consumer.on('error', (error) => console.error('consumer error:', error));

await consumer.start();
console.log(`${consumer.memberId} joined ${streamPrefix}/${consumerGroup}`);

let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  void consumer.close().then(() => process.exit(0));
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
