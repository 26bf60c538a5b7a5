import { Redis } from 'ioredis';

/** A Redis connection given as a URL (the SDK owns it) or an ioredis instance (the caller does). */
export type RedisOption = string | Redis;

/**
 * The connection to use, and whether closing the SDK object closes it. A connection made here
 * has `onError` listening to its `error` events from the start (ioredis emits one per failed
 * reconnect, and prints each it finds nobody listening to); a caller's connection is left as
 * the caller set it up.
 */
export function resolveRedis(
  option: RedisOption,
  onError: (error: Error) => void,
): { redis: Redis; owned: boolean } {
  if (typeof option !== 'string') return { redis: option, owned: false };
  const redis = new Redis(option, { maxRetriesPerRequest: null });
  redis.on('error', onError);
  return { redis, owned: true };
}

/**
 * A connection of its own for blocking reads, on the same server as `redis`, with `onError`
 * listening to its `error` events.
 */
export function blockingConnection(redis: Redis, onError: (error: Error) => void): Redis {
  const reader = redis.duplicate({ maxRetriesPerRequest: null });
  reader.on('error', onError);
  return reader;
}
