/**
 * Readiness with several replicas follows the replica's registry entry as it is in Redis, not
 * the live list as last read (docs/operations.md, the health/ready row): a Redis that answers
 * but refuses writes (read-only after a failover, `REPLICAOF`) lets every entry expire, and no
 * replica may go on saying it is ready. Two replicas in this process on one real redis-server.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  startReplicaOn,
  type TestCoordinator,
  waitUntilSeenByEach,
} from '../support/coordinator.js';
import {
  randomKeyPrefix,
  startRedisServer,
  waitFor,
  type RedisServerHandle,
} from '../support/redis-server.js';

interface Readiness {
  readonly status: number;
  readonly registered: boolean | null;
}

async function readiness(c: TestCoordinator): Promise<Readiness> {
  const res = await c.call('GET', '/coord/v1/monitoring/health/ready');
  const body = (await res.json()) as { registered: boolean | null };
  return { status: res.status, registered: body.registered };
}

describe('readiness of a replica whose registry entry cannot be written', () => {
  let redis: RedisServerHandle;
  const prefix = randomKeyPrefix();
  const replicas: TestCoordinator[] = [];

  beforeAll(async () => {
    redis = await startRedisServer();
    // Lease TTL 1.5 s: registry entries live 750 ms, refreshed every 250 ms.
    for (const id of ['r1', 'r2']) replicas.push(await startReplicaOn(redis.url, prefix, id));
    await waitUntilSeenByEach(replicas, ['r1', 'r2']);
  }, 60_000);

  afterAll(async () => {
    await redis?.client().call('REPLICAOF', 'NO', 'ONE');
    for (const c of replicas) await c.close();
    await redis?.stop();
  });

  it('says NOT_READY once its entry expired while Redis refuses writes, and READY when it is back', async () => {
    for (const c of replicas) expect(await readiness(c)).toEqual({ status: 200, registered: true });
    // Read-only: PING and reads answer, every write is refused (READONLY). Nothing listens on
    // port 1, so the data stays as it is.
    await redis.client().call('REPLICAOF', '127.0.0.1', '1');
    await waitFor(async () => (await redis.client().exists(`${prefix}:replica:r1`)) === 0, {
      what: 'the entry of r1 expired in Redis',
    });
    for (const c of replicas) {
      await waitFor(
        async () => {
          const seen = await readiness(c);
          return seen.status === 503 && seen.registered === false;
        },
        { timeoutMs: 2_000, what: `${c.services.replicaId} not ready, not registered` },
      );
    }
    await redis.client().call('REPLICAOF', 'NO', 'ONE');
    for (const c of replicas) {
      await waitFor(async () => (await readiness(c)).status === 200, {
        what: `${c.services.replicaId} ready again`,
      });
      expect((await readiness(c)).registered).toBe(true);
    }
  });
});
