/**
 * Sends keyed orders to the group's shards. Creates the group first if it does not exist (that
 * needs the WRITE role; a producer-only token can skip it with CREATE_GROUP=no).
 *
 *   npx tsx --conditions=source examples/producer.ts
 */
import { ConflictError, Producer } from 'stream-coordinator/client';
import { consumerGroup, coordinatorClient, redisUrl, streamPrefix } from './shared.js';

const client = coordinatorClient();
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

const producer = new Producer({ client, redis: redisUrl, streamPrefix, consumerGroup });
const count = Number(process.env['COUNT'] ?? 100);
for (let i = 0; i < count; i++) {
  const customer = `customer-${i % 10}`;
  const { shard, id } = await producer.send(customer, { order: String(i), amount: '9.99' });
  console.log(`order ${i} for ${customer} → shard ${shard} (${id})`);
}
await producer.close();
