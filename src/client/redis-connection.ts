import { Redis } from 'ioredis';

/** A Redis connection given as a URL (the SDK owns it) or an ioredis instance (the caller does). */
export type RedisOption = string | Redis;

/** The connection to use, and whether closing the SDK object closes it. */
export function resolveRedis(option: RedisOption): { redis: Redis; owned: boolean } {
  if (typeof option !== 'string') return { redis: option, owned: false };
  const redis = new Redis(option, { maxRetriesPerRequest: null });
  return { redis, owned: true };
}

/** A connection of its own for blocking reads, on the same server as `redis`. */
export function blockingConnection(redis: Redis, onError: (error: Error) => void): Redis {
  const reader = redis.duplicate({ maxRetriesPerRequest: null });
  reader.on('error', onError);
  return reader;
}
