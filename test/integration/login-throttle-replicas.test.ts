import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { MemoryStore } from '../../src/store/memory-store.js';
import { RedisStore } from '../../src/store/redis-store.js';
import type { Store } from '../../src/store/store.js';
import {
  PASSWORD,
  startReplicaOn,
  startTestCoordinator,
  type TestCoordinator,
} from '../support/coordinator.js';
import {
  randomKeyPrefix,
  startRedisServer,
  waitFor,
  type RedisServerHandle,
} from '../support/redis-server.js';

const MAX_FAILURES = 5;
const WINDOW_MS = 3_000;

function login(c: TestCoordinator, username: string, password: string) {
  return c.call('POST', '/coord/v1/auth/login', { body: { username, password } });
}

async function codeOf(res: Response): Promise<string> {
  return ((await res.json()) as { error: { code: string } }).error.code;
}

describe('the failed-login count is shared by the replicas on one store', () => {
  let redis: RedisServerHandle;
  let a: TestCoordinator;
  let b: TestCoordinator;
  beforeAll(async () => {
    redis = await startRedisServer();
    const keyPrefix = randomKeyPrefix();
    const replica = (id: string) =>
      startReplicaOn(redis.url, keyPrefix, id, {
        'security.login-max-failures': MAX_FAILURES,
        'security.login-throttle-window': `${WINDOW_MS}ms`,
      });
    [a, b] = await Promise.all([replica('login-a'), replica('login-b')]);
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await redis?.stop();
  });

  it('five failures on one replica: 429 there and on the other replica, even with the right password', async () => {
    for (let i = 0; i < MAX_FAILURES; i++) {
      const res = await login(a, 'reader', 'wrong password');
      expect(res.status).toBe(401);
    }
    const here = await login(a, 'reader', PASSWORD);
    expect(here.status).toBe(429);
    expect(await codeOf(here)).toBe('LOGIN_THROTTLED');
    const there = await login(b, 'reader', PASSWORD);
    expect(there.status).toBe(429);
    expect(await codeOf(there)).toBe('LOGIN_THROTTLED');
    const retryAfter = Number(there.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(Math.ceil(WINDOW_MS / 1000));
    // Another user is not affected.
    expect((await login(b, 'writer', PASSWORD)).status).toBe(200);
  });

  it('failures on both replicas add up to one count', async () => {
    for (let i = 0; i < MAX_FAILURES; i++) {
      const res = await login(i % 2 === 0 ? a : b, 'producer', 'wrong password');
      expect(res.status).toBe(401);
    }
    expect((await login(a, 'producer', PASSWORD)).status).toBe(429);
    expect((await login(b, 'producer', PASSWORD)).status).toBe(429);
  });

  it('once the window has passed, the right password logs in on any replica', async () => {
    for (let i = 0; i < MAX_FAILURES; i++) await login(a, 'consumer', 'wrong password');
    expect((await login(b, 'consumer', PASSWORD)).status).toBe(429);
    await waitFor(async () => (await login(b, 'consumer', PASSWORD)).status === 200, {
      timeoutMs: WINDOW_MS + 3_000,
      intervalMs: 200,
      what: 'the login window to close',
    });
  });

  it('a successful login clears the count for every replica', async () => {
    for (let i = 0; i < MAX_FAILURES - 1; i++) await login(a, 'admin', 'wrong password');
    expect((await login(b, 'admin', PASSWORD)).status).toBe(200);
    // The count starts over: four more failures still leave the right password in.
    for (let i = 0; i < MAX_FAILURES - 1; i++) await login(b, 'admin', 'wrong password');
    expect((await login(a, 'admin', PASSWORD)).status).toBe(200);
  });

  it('the store holds a digest of user and address, never the username', async () => {
    expect((await login(a, 'writer', 'wrong password')).status).toBe(401);
    const keys = await redis.client().keys(`${a.keyPrefix}:login-failures:*`);
    expect(keys.length).toBeGreaterThan(0);
    for (const key of keys) {
      expect(key).toMatch(/:login-failures:[0-9a-f]{64}$/);
      expect(key).not.toContain('writer');
    }
  });
});

/**
 * Sends `count` wrong-password logins for `username` at once, spread over `replicas`; the
 * statuses answered, counted.
 */
async function parallelWrongLogins(
  replicas: readonly TestCoordinator[],
  username: string,
  count: number,
): Promise<Record<number, number>> {
  const statuses = await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const res = await login(replicas[i % replicas.length] as TestCoordinator, username, 'guess');
      await res.body?.cancel();
      return res.status;
    }),
  );
  const counted: Record<number, number> = {};
  for (const status of statuses) counted[status] = (counted[status] ?? 0) + 1;
  return counted;
}

describe('logins sent at once cannot outrun the failed-login count', () => {
  let redis: RedisServerHandle;
  let replicas: TestCoordinator[];
  beforeAll(async () => {
    redis = await startRedisServer();
    const keyPrefix = randomKeyPrefix();
    replicas = await Promise.all(
      ['burst-a', 'burst-b', 'burst-c'].map((id) =>
        startTestCoordinator({
          store: 'redis',
          redisUrl: redis.url,
          overrides: {
            'store.key-prefix': keyPrefix,
            'replica.id': id,
            'lease.ttl': '1500ms',
            'security.login-max-failures': MAX_FAILURES,
            // Longer than the test: every attempt falls in one window.
            'security.login-throttle-window': '10m',
            // Every one of the burst gets a turn to be counted (the bound on checks in flight,
            // docs/operations.md#password-checks-in-flight, is tested on its own).
            'security.login-max-queued-checks': 60,
          },
        }),
      ),
    );
  });
  afterAll(async () => {
    await Promise.all((replicas ?? []).map((replica) => replica.close()));
    await redis?.stop();
  });

  it('60 wrong passwords at once over three replicas: at most five are checked, the rest 429; then the right one is 429 too', async () => {
    const counted = await parallelWrongLogins(replicas, 'reader', 60);
    expect(Object.keys(counted).sort()).toEqual(['401', '429']);
    expect(counted[401]).toBeLessThanOrEqual(MAX_FAILURES);
    expect(counted[401]! + counted[429]!).toBe(60);
    for (const replica of replicas) {
      const res = await login(replica, 'reader', PASSWORD);
      expect(res.status).toBe(429);
      expect(await codeOf(res)).toBe('LOGIN_THROTTLED');
    }
  });
});

describe('store verbs of the failed-login count', () => {
  let redis: RedisServerHandle;
  const stores: Array<[string, () => Store]> = [];
  let redisStore: RedisStore;
  beforeAll(async () => {
    redis = await startRedisServer();
    redisStore = new RedisStore({ url: redis.url, keyPrefix: randomKeyPrefix(), auditMaxLen: 100 });
  });
  afterAll(async () => {
    await redisStore?.close();
    await redis?.stop();
  });
  stores.push(['memory', () => new MemoryStore({ keyPrefix: 'kp', auditMaxLen: 100 })]);
  stores.push(['redis', () => redisStore]);

  it.each(stores)(
    '%s: counts in one window, reads it, clears it; the window is not extended',
    async (_kind, make) => {
      const store = make();
      const id = `id-${Math.random().toString(16).slice(2)}`;
      expect(await store.readLoginFailures(id)).toEqual({ failures: 0, remainingMs: 0 });
      const first = await store.reserveLoginAttempt(id, 5, 1_000);
      expect(first).toMatchObject({ allowed: true, failures: 1 });
      expect(first.remainingMs).toBeGreaterThan(900);
      expect(first.remainingMs).toBeLessThanOrEqual(1_000);
      const second = await store.reserveLoginAttempt(id, 5, 60_000);
      expect(second).toMatchObject({ allowed: true, failures: 2 });
      // The window opened by the first attempt: a later one does not extend it.
      expect(second.remainingMs).toBeLessThanOrEqual(1_000);
      const read = await store.readLoginFailures(id);
      expect(read.failures).toBe(2);
      expect(read.remainingMs).toBeLessThanOrEqual(1_000);
      await store.clearLoginFailures(id);
      expect(await store.readLoginFailures(id)).toEqual({ failures: 0, remainingMs: 0 });
    },
  );

  it('memory: a window of 1,000 ms has 1,000 ms left when opened, whatever the fraction of now', async () => {
    const store = new MemoryStore({ keyPrefix: 'kp', auditMaxLen: 100 });
    // A time at which (now + 1000) - now is 1000.0000000000009 in floating point.
    const now = vi.spyOn(performance, 'now').mockReturnValue(8007.361017239312);
    try {
      const first = await store.reserveLoginAttempt('fractional', 5, 1_000);
      expect(first.remainingMs).toBe(1_000);
      expect((await store.readLoginFailures('fractional')).remainingMs).toBe(1_000);
    } finally {
      now.mockRestore();
    }
  });

  it.each(stores)(
    '%s: a full window refuses the attempt and counts nothing more',
    async (_kind, make) => {
      const store = make();
      const id = `id-${Math.random().toString(16).slice(2)}`;
      for (let i = 1; i <= 3; i++) {
        expect(await store.reserveLoginAttempt(id, 3, 60_000)).toMatchObject({
          allowed: true,
          failures: i,
        });
      }
      const refused = await store.reserveLoginAttempt(id, 3, 60_000);
      expect(refused).toMatchObject({ allowed: false, failures: 3 });
      expect(refused.remainingMs).toBeGreaterThan(0);
      expect(refused.remainingMs).toBeLessThanOrEqual(60_000);
      expect((await store.readLoginFailures(id)).failures).toBe(3);
    },
  );

  it.each(stores)(
    '%s: of many attempts reserved at once, exactly the limit is allowed',
    async (_kind, make) => {
      const store = make();
      const id = `id-${Math.random().toString(16).slice(2)}`;
      const answers = await Promise.all(
        Array.from({ length: 50 }, () => store.reserveLoginAttempt(id, MAX_FAILURES, 60_000)),
      );
      expect(answers.filter((answer) => answer.allowed)).toHaveLength(MAX_FAILURES);
      expect((await store.readLoginFailures(id)).failures).toBe(MAX_FAILURES);
    },
  );

  it.each(stores)('%s: a closed window counts from zero again', async (_kind, make) => {
    const store = make();
    const id = `id-${Math.random().toString(16).slice(2)}`;
    await store.reserveLoginAttempt(id, 2, 50);
    expect((await store.reserveLoginAttempt(id, 2, 50)).allowed).toBe(true);
    await waitFor(async () => (await store.readLoginFailures(id)).failures === 0, {
      timeoutMs: 2_000,
      what: 'the window to close',
    });
    expect(await store.reserveLoginAttempt(id, 2, 1_000)).toMatchObject({
      allowed: true,
      failures: 1,
    });
  });
});

describe('embedded mode keeps its own count', () => {
  let c: TestCoordinator;
  beforeAll(async () => {
    c = await startTestCoordinator({
      store: 'memory',
      // Every one of the burst gets a turn to be counted (the bound on checks in flight is
      // tested on its own).
      overrides: { 'security.login-max-queued-checks': 60 },
    });
  });
  afterAll(async () => c?.close());

  it('60 wrong passwords at once: at most five are checked, the rest 429; then the right one is 429 too', async () => {
    const counted = await parallelWrongLogins([c], 'writer', 60);
    expect(Object.keys(counted).sort()).toEqual(['401', '429']);
    expect(counted[401]).toBeLessThanOrEqual(MAX_FAILURES);
    expect((await login(c, 'writer', PASSWORD)).status).toBe(429);
  });

  it('throttles after the failures, with no store behind it', async () => {
    for (let i = 0; i < MAX_FAILURES; i++) await login(c, 'reader', 'wrong password');
    const res = await login(c, 'reader', PASSWORD);
    expect(res.status).toBe(429);
    expect(await codeOf(res)).toBe('LOGIN_THROTTLED');
  });
});
