import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeFailures } from '../../src/store/redis-store.js';
import { startRedisServer, type RedisServerHandle } from '../support/redis-server.js';

/*
 * The lease client's failures reach log lines (a lease lost while Redis is down says why): they
 * must name the store and the cause as the store's own errors do, never ioredis' bookkeeping,
 * and the wrapping must not change what ioredis does (replies Redis gave, commands it sends
 * again after a reconnect).
 */
describe('describeFailures: a Redis client whose failures name the store', () => {
  let redis: RedisServerHandle;
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => redis?.stop());

  const clientOf = (options: { maxRetriesPerRequest: number | null; commandTimeout: number }) => {
    const client = describeFailures(
      new Redis(redis.url, { ...options, connectTimeout: 500 }),
      'lease command',
      { url: redis.url },
    );
    client.on('error', () => undefined);
    return client;
  };

  it('a reply error of Redis passes unchanged', async () => {
    const client = clientOf({ maxRetriesPerRequest: 1, commandTimeout: 2_000 });
    try {
      const error = (await client.call('NO-SUCH-COMMAND').catch((e: unknown) => e)) as Error;
      expect(error.name).toBe('ReplyError');
      expect(error.message).toMatch(/unknown command/i);
    } finally {
      client.disconnect();
    }
  });

  it('with Redis down: the store and the cause, not the retry limit or a timeout', async () => {
    const retries = clientOf({ maxRetriesPerRequest: 1, commandTimeout: 5_000 });
    const timeouts = clientOf({ maxRetriesPerRequest: null, commandTimeout: 300 });
    try {
      await Promise.all([retries.ping(), timeouts.ping()]);
      await redis.kill();
      for (const client of [retries, timeouts]) {
        const error = (await client.get('k').catch((e: unknown) => e)) as Error & {
          code?: string;
          details?: { store?: string };
        };
        expect(error.message).toMatch(
          new RegExp(
            `^lease command failed: Redis at 127\\.0\\.0\\.1:${redis.port} unreachable \\(`,
          ),
        );
        expect(error.message).not.toMatch(/max retries|maxRetriesPerRequest|Command timed out/i);
        expect(error.code).toBe('STORE_UNAVAILABLE');
        expect(error.details?.store).toBe(`127.0.0.1:${redis.port}`);
      }
    } finally {
      retries.disconnect();
      timeouts.disconnect();
      await redis.restart();
    }
  });

  it('a command queued while Redis is down is sent again once it is back, and answered', async () => {
    const client = clientOf({ maxRetriesPerRequest: null, commandTimeout: 10_000 });
    try {
      await client.ping();
      await redis.kill();
      const queued = client.set('queued', 'yes');
      const refused = client.call('NO-SUCH-COMMAND').catch((e: unknown) => e);
      await redis.restart();
      // Both are sent again by ioredis on its own; an unhandled rejection of a second promise
      // for the refused one would fail this file.
      expect(await queued).toBe('OK');
      expect(((await refused) as Error).name).toBe('ReplyError');
      expect(await client.get('queued')).toBe('yes');
    } finally {
      client.disconnect();
    }
  });
});
