/** Settings both examples read from the environment. */
import { CoordinatorClient } from 'stream-coordinator/client';

export const streamPrefix = process.env['STREAM_PREFIX'] ?? 'orders';
export const consumerGroup = process.env['CONSUMER_GROUP'] ?? 'billing';
export const redisUrl = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';

/** A client from COORD_URL and either COORD_TOKEN or COORD_USERNAME / COORD_PASSWORD. */
export function coordinatorClient(): CoordinatorClient {
  const baseUrl = (process.env['COORD_URL'] ?? 'http://127.0.0.1:8080').split(',');
  const token = process.env['COORD_TOKEN'];
  if (token) return new CoordinatorClient({ baseUrl, token });
  const password = process.env['COORD_PASSWORD'];
  if (!password) throw new Error('set COORD_TOKEN, or COORD_USERNAME and COORD_PASSWORD');
  return new CoordinatorClient({
    baseUrl,
    username: process.env['COORD_USERNAME'] ?? 'admin',
    password,
  });
}
