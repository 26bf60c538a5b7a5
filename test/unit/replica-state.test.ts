/**
 * The replica's state file (docs/operations.md#lost-metadata): a replica that saw groups in its
 * store remembers so outside the store, and says loudly at startup when the store holds none.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ReplicaState } from '../../src/actors/replica-state.js';
import { ManualClock } from '../../src/machines/clock.js';
import { newGroupState } from '../../src/machines/new-group.js';
import { Metrics } from '../../src/observability/metrics.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { captureLogs } from '../support/logs.js';

const REF = { streamPrefix: 'orders', consumerGroup: 'billing' };
const dirs: string[] = [];

function stateDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'coord-state-test-'));
  dirs.push(dir);
  return join(dir, 'state'); // not there yet: the first write makes it
}

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** One replica process's view: a state file in `dir` about `store`. */
function replica(dir: string, store: MemoryStore, storeName = 'redis-a:6379') {
  const logs = captureLogs('warn');
  const metrics = new Metrics();
  const clock = new ManualClock();
  const state = new ReplicaState({
    dir,
    storeName,
    keyPrefix: 'kp',
    store,
    clock,
    logger: logs.logger,
    metrics,
    intervalMs: 1_000,
  });
  const emptied = async () => (await metrics.storeEmptied.get()).values[0]?.value ?? 0;
  return { state, logs, clock, emptied };
}

const storeEmptiedLine = (lines: ReadonlyArray<{ level: string; message: string }>) =>
  lines.filter((line) => line.level === 'error' && /holds no group/.test(line.message));

async function withGroup(): Promise<MemoryStore> {
  const store = new MemoryStore({ keyPrefix: 'kp', auditMaxLen: 100 });
  await store.createGroup(newGroupState(REF, { shardCount: 2, lifecycleId: 'l1', now: 1 }));
  return store;
}

describe('the replica state file', () => {
  it('a store found empty after this replica saw groups in it: one error line naming the store and what to do', async () => {
    const dir = stateDir();
    const first = replica(dir, await withGroup());
    const stop = await first.state.start();
    stop();
    expect(JSON.parse(readFileSync(first.state.file, 'utf8'))).toMatchObject({
      store: 'redis-a:6379',
      keyPrefix: 'kp',
    });
    expect(storeEmptiedLine(first.logs.lines)).toEqual([]);

    // The store comes back empty (no persistence), and the replica starts again.
    const second = replica(dir, new MemoryStore({ keyPrefix: 'kp', auditMaxLen: 100 }));
    (await second.state.start())();
    const [line, ...more] = storeEmptiedLine(second.logs.lines);
    expect(more).toEqual([]);
    expect(line?.message).toContain('redis-a:6379');
    expect(line?.message).toContain('coordctl restore');
    expect(line?.message).toContain('RECREATE');
    expect(line?.message).toContain(second.state.file);
    expect(line).toMatchObject({ store: 'redis-a:6379', keyPrefix: 'kp' });
    expect(await second.emptied()).toBe(1);
    // It keeps saying so at each start until groups are back or the file is removed.
    const third = replica(dir, new MemoryStore({ keyPrefix: 'kp', auditMaxLen: 100 }));
    (await third.state.start())();
    expect(storeEmptiedLine(third.logs.lines)).toHaveLength(1);
  });

  it('a first start on an empty store says nothing, and records groups once they appear', async () => {
    const dir = stateDir();
    const store = new MemoryStore({ keyPrefix: 'kp', auditMaxLen: 100 });
    const fresh = replica(dir, store);
    const stop = await fresh.state.start();
    expect(fresh.logs.lines).toEqual([]);
    expect(await fresh.emptied()).toBe(0);
    expect(existsSync(fresh.state.file)).toBe(false);
    await store.createGroup(newGroupState(REF, { shardCount: 2, lifecycleId: 'l1', now: 1 }));
    fresh.clock.advance(1_000);
    await expect.poll(() => existsSync(fresh.state.file)).toBe(true);
    stop();
  });

  it('another store (or key prefix) has a file of its own', async () => {
    const dir = stateDir();
    (await replica(dir, await withGroup(), 'redis-a:6379').state.start())();
    const other = replica(
      dir,
      new MemoryStore({ keyPrefix: 'kp', auditMaxLen: 100 }),
      'redis-b:6379',
    );
    (await other.state.start())();
    expect(storeEmptiedLine(other.logs.lines)).toEqual([]);
  });

  it('a store that does not answer at startup is checked once it does', async () => {
    const dir = stateDir();
    (await replica(dir, await withGroup()).state.start())();
    const empty = new MemoryStore({ keyPrefix: 'kp', auditMaxLen: 100 });
    let down = true;
    const flaky = {
      listGroups: (options: { limit: number }) =>
        down ? Promise.reject(new Error('ECONNREFUSED')) : empty.listGroups(options),
    } as unknown as MemoryStore;
    const later = replica(dir, flaky);
    const stop = await later.state.start();
    expect(storeEmptiedLine(later.logs.lines)).toEqual([]);
    down = false;
    later.clock.advance(1_000);
    await expect.poll(() => storeEmptiedLine(later.logs.lines).length).toBe(1);
    stop();
  });
});
