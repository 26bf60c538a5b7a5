import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { coordctl } from '../support/cli.js';
import {
  randomKeyPrefix,
  startRedisServer,
  type RedisServerHandle,
} from '../support/redis-server.js';

/**
 * `coordctl backup` and `restore` take the store's URL from `COORDINATOR_STORE_URL`, which holds
 * the Redis password: it is used, never printed, not even by `--help`
 * (docs/operations.md#logs: secrets never appear).
 */
describe('coordctl backup and restore keep the Redis password to themselves', () => {
  const password = 'redis-password-that-must-not-be-printed';
  let redis: RedisServerHandle;
  let url: string;
  beforeAll(async () => {
    redis = await startRedisServer();
    // Set once the harness's client is in (it stays authenticated): later connections need it.
    await redis.client().config('SET', 'requirepass', password);
    url = `redis://:${password}@127.0.0.1:${redis.port}`;
  });
  afterAll(async () => redis?.stop());

  it.each(['backup', 'restore'])('%s --help names the variable, not its value', async (command) => {
    const { code, stdout, stderr } = await coordctl([command, '--help'], {
      env: {
        COORDINATOR_STORE_URL: url,
        COORDINATOR_STORE_CLUSTER_NODES: `redis://:${password}@127.0.0.1:7000`,
      },
    });
    expect(code).toBe(0);
    expect(stdout).toContain('COORDINATOR_STORE_URL');
    expect(`${stdout}${stderr}`).not.toContain(password);
  });

  it('backup still connects with the URL the environment gives', async () => {
    const keyPrefix = randomKeyPrefix();
    const { code, stdout, stderr } = await coordctl(['backup', '--key-prefix', keyPrefix], {
      env: { COORDINATOR_STORE_URL: url },
    });
    expect(stderr).not.toContain(password);
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({ keyPrefix, groups: [] });
    expect(stdout).not.toContain(password);
  });
});
