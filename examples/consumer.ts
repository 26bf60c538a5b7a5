/**
 * Consumes the group: the coordinator decides which shards this process reads. Start two or
 * three of these with different MEMBER_ID values and watch the shards move between them.
 * Ctrl-C finishes the message in hand and leaves the group.
 *
 *   MEMBER_ID=worker-1 npx tsx --conditions=source examples/consumer.ts
 */
import { Consumer } from 'stream-coordinator/client';
import {
  closeOnSignals,
  consumerGroup,
  coordinatorClient,
  describeError,
  fail,
  redisUrl,
  streamPrefix,
} from './shared.js';

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

consumer.on('assigned', (granted, current) =>
  console.log(`now reading shards ${current.join(', ')} (new: ${granted.join(', ')})`),
);
consumer.on('revoked', (shards) => console.log(`gave up shards ${shards.join(', ')}`));
consumer.on('fenced', ({ reason }) => console.log(`dropped every shard (${reason}); rejoining`));
consumer.on('streamsUnreachable', ({ shards, cause }) =>
  console.error(
    `cannot read the streams (${cause}): gave shards ${shards.join(', ')} back; rejoining once Redis answers`,
  ),
);
consumer.on('streamsReachable', () => console.log('the streams Redis answers again: rejoining'));
consumer.on('error', (error) => console.error(`consumer error: ${describeError(error)}`));

// Ctrl-C (or SIGTERM) finishes the message in hand and leaves, within the close timeout.
const signals = closeOnSignals(() => consumer.close());
try {
  await consumer.start();
} catch (error) {
  // A refusal (401, 403, 404, ...) ends here; so does a stop before the join was answered.
  if (!signals.stopping()) fail('consumer cannot join', error);
}
if (!signals.stopping())
  console.log(`${consumer.memberId} joined ${streamPrefix}/${consumerGroup}`);
