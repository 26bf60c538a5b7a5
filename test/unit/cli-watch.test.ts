import { describe, expect, it } from 'vitest';
import { CoordinatorClient } from '../../src/client/index.js';
import { CliApi } from '../../src/cli/api.js';
import { CliError } from '../../src/cli/cli-error.js';
import type { Migration, Migrations } from '../../src/cli/monitoring.js';
import { watchMigration } from '../../src/cli/watch-migration.js';

const group = { streamPrefix: 'orders', consumerGroup: 'billing' };

function migration(state: Migration['state'], shardsConverged: number): Migration {
  return {
    migrationId: 'm-1',
    kind: 'SCALE',
    fromShardCount: 2,
    toShardCount: 4,
    state,
    rollbackAllowed: state !== 'ROLLED_BACK',
    rollbackAllowedUntil: null,
    startedAt: '2026-01-01T00:00:00.000Z',
    requestedBy: 'ops',
    reason: 'test',
    progress: {
      shardsConverged,
      shardsTotal: 4,
      removedShardsRemaining: [],
      removedShardsReported: [],
      membersReporting: 1,
      membersTotal: 1,
    },
  };
}

/** A CliApi whose migration reads answer `answers` in turn (the last one repeats). */
function apiAnswering(answers: Migrations[]): CliApi {
  const api = new CliApi(new CoordinatorClient({ url: 'http://h:1' }), 'http://h:1/');
  let i = 0;
  api.get = <T>() => Promise.resolve(answers[Math.min(i++, answers.length - 1)] as T);
  return api;
}

/** A manual clock: sleeping advances it. */
function manualClock() {
  let now = 0;
  return { now: () => now, sleep: (ms: number) => Promise.resolve(void (now += ms)) };
}

describe('scale --watch: progress until converged', () => {
  it('prints each change of progress once and returns the converged migration', async () => {
    const lines: string[] = [];
    const api = apiAnswering([
      { active: migration('IN_PROGRESS', 2), migrations: [] },
      { active: migration('IN_PROGRESS', 2), migrations: [] },
      { active: migration('IN_PROGRESS', 3), migrations: [] },
      { active: migration('CONVERGED', 4), migrations: [] },
    ]);
    const result = await watchMigration(api, group, 'm-1', {
      intervalMs: 1_000,
      timeoutMs: 60_000,
      ...manualClock(),
      progress: (line) => lines.push(line),
    });
    expect(result.state).toBe('CONVERGED');
    expect(lines).toEqual([
      'IN_PROGRESS: shards 2/4 converged, members 1/1 reporting',
      'IN_PROGRESS: shards 3/4 converged, members 1/1 reporting',
      'CONVERGED: shards 4/4 converged, members 1/1 reporting',
    ]);
  });

  it('a migration found in history as COMPLETED counts as converged', async () => {
    const api = apiAnswering([{ active: null, migrations: [migration('COMPLETED', 4)] }]);
    const clock = manualClock();
    await expect(
      watchMigration(api, group, 'm-1', {
        intervalMs: 10,
        timeoutMs: 100,
        ...clock,
        progress: () => {},
      }),
    ).resolves.toMatchObject({ state: 'COMPLETED' });
  });

  it('gives up with exit code 3 after the timeout, saying what to do', async () => {
    const api = apiAnswering([{ active: migration('IN_PROGRESS', 2), migrations: [] }]);
    const error = await watchMigration(api, group, 'm-1', {
      intervalMs: 1_000,
      timeoutMs: 5_000,
      ...manualClock(),
      progress: () => {},
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CliError);
    expect(error).toMatchObject({ exitCode: 3 });
    expect((error as Error).message).toMatch(
      /not converged after 5000 ms[\s\S]*coordctl rollback orders:billing/,
    );
  });

  it('a migration rolled back meanwhile ends the watch with exit code 1', async () => {
    const api = apiAnswering([{ active: null, migrations: [migration('ROLLED_BACK', 2)] }]);
    await expect(
      watchMigration(api, group, 'm-1', {
        intervalMs: 10,
        timeoutMs: 100,
        ...manualClock(),
        progress: () => {},
      }),
    ).rejects.toMatchObject({
      exitCode: 1,
      message: expect.stringMatching(/was rolled back/) as unknown,
    });
  });
});
