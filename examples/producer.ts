/**
 * Sends keyed orders to the group's shards. Creates the group first if it does not exist (that
 * needs the WRITE role; a producer-only token can skip it with CREATE_GROUP=no).
 *
 *   npx tsx --conditions=source examples/producer.ts
 */
import { ConflictError, Producer } from 'stream-coordinator/client';
import {
  closeOnSignals,
  consumerGroup,
  coordinatorClient,
  describeError,
  fail,
  redisUrl,
  streamPrefix,
} from './shared.js';

const client = coordinatorClient();
const producer = new Producer({ client, redis: redisUrl, streamPrefix, consumerGroup });
producer.on('error', (error) => console.error(`producer error: ${describeError(error)}`));
// Ctrl-C (or SIGTERM) stops sending; a send waiting for Redis is given up.
const signals = closeOnSignals(() => producer.close());

try {
  if (process.env['CREATE_GROUP'] !== 'no') {
    try {
      await client.createGroup(streamPrefix, consumerGroup, 4, {
        requestedBy: 'examples/producer.ts',
        reason: 'example group',
      });
      console.log(`created group ${streamPrefix}/${consumerGroup} with 4 shards`);
    } catch (error) {
      if (!(error instanceof ConflictError && error.code === 'GROUP_EXISTS')) throw error;
    }
  }
  const count = Number(process.env['COUNT'] ?? 100);
  for (let i = 0; i < count && !signals.stopping(); i++) {
    const customer = `customer-${i % 10}`;
    const { shard, id } = await producer.send(customer, { order: String(i), amount: '9.99' });
    console.log(`order ${i} for ${customer} → shard ${shard} (${id})`);
  }
} catch (error) {
  // A refusal (401, 403, 404, ...) ends here; after a signal, so does the send it cut short.
  if (!signals.stopping()) fail('producer', error);
}
if (!signals.stopping()) await producer.close();
