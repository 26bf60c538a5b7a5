import { setImmediate as flushIo } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { ReplicaRegistry } from '../../../src/actors/ownership/registry.js';
import { ManualClock } from '../../../src/machines/clock.js';
import { MemoryStore } from '../../../src/store/memory-store.js';
import type { ReplicaRecord } from '../../../src/store/store.js';

/** Lets the store promises a timer started settle (MemoryStore answers in microtasks). */
const settle = async () => {
  for (let i = 0; i < 5; i++) await flushIo();
};

function setup() {
  const store = new MemoryStore({ keyPrefix: 'test:coord', auditMaxLen: 10 });
  const clock = new ManualClock();
  const changes: string[][] = [];
  const registry = (id: string) =>
    new ReplicaRegistry({
      store,
      self: { id, url: `http://${id}:8080` },
      clock,
      refreshIntervalMs: 1_000,
      ttlMs: 5_000,
      onChange: (live: readonly ReplicaRecord[]) => changes.push(live.map((r) => r.id)),
    });
  return { store, clock, changes, registry };
}

describe('a replica registers on start, refreshes on its interval and deregisters on stop', () => {
  it('is listed with its advertised URL once started', async () => {
    const { store, registry } = setup();
    const a = registry('replica-a');
    await a.start();
    // Each refresh also says when it was made (the replica listing's lastHeartbeatAt).
    expect(await store.listReplicas()).toEqual([
      { id: 'replica-a', url: 'http://replica-a:8080', heartbeatAt: '2026-01-01T00:00:00.000Z' },
    ]);
    expect(a.live()).toEqual([
      { id: 'replica-a', url: 'http://replica-a:8080', heartbeatAt: '2026-01-01T00:00:00.000Z' },
    ]);
    await a.stop();
  });

  it('learns of a joining replica on its next refresh and reports the change once', async () => {
    const { clock, changes, registry } = setup();
    const a = registry('replica-a');
    await a.start();
    const b = registry('replica-b');
    await b.start();
    expect(a.live().map((r) => r.id)).toEqual(['replica-a']);
    clock.advance(1_000);
    await settle();
    expect(a.live().map((r) => r.id)).toEqual(['replica-a', 'replica-b']);
    clock.advance(1_000);
    await settle();
    // a: [a] then [a, b]; b: [a, b]. No change reported for a refresh that changed nothing.
    expect(changes).toEqual([
      ['replica-a'],
      ['replica-a', 'replica-b'],
      ['replica-a', 'replica-b'],
    ]);
    await b.stop();
    clock.advance(1_000);
    await settle();
    expect(a.live().map((r) => r.id)).toEqual(['replica-a']);
    await a.stop();
  });

  it('stop removes the entry at once and no refresh brings it back', async () => {
    const { store, clock, registry } = setup();
    const a = registry('replica-a');
    await a.start();
    await a.stop();
    expect(await store.listReplicas()).toEqual([]);
    clock.advance(10_000);
    await settle();
    expect(await store.listReplicas()).toEqual([]);
  });

  it('a failed refresh is reported and the next one still runs', async () => {
    const { store, clock } = setup();
    const errors: unknown[] = [];
    let failNext = false;
    const flaky = {
      registerReplica: (record: ReplicaRecord, ttlMs: number) =>
        failNext ? Promise.reject(new Error('store down')) : store.registerReplica(record, ttlMs),
      listReplicas: () => store.listReplicas(),
      deregisterReplica: (id: string) => store.deregisterReplica(id),
    };
    const a = new ReplicaRegistry({
      store: flaky,
      self: { id: 'replica-a', url: 'http://a:1' },
      clock,
      onError: (error) => errors.push(error),
    });
    await a.start();
    await store.deregisterReplica('replica-a');
    failNext = true;
    clock.advance(1_000);
    await settle();
    expect(errors).toHaveLength(1);
    expect(await store.listReplicas()).toEqual([]);
    failNext = false;
    clock.advance(1_000);
    await settle();
    expect(await store.listReplicas()).toEqual([
      { id: 'replica-a', url: 'http://a:1', heartbeatAt: '2026-01-01T00:00:02.000Z' },
    ]);
    await a.stop();
  });

  it('counts as registered only while its last written entry has not expired', async () => {
    const { store, clock } = setup();
    let failing = false;
    const refusing = {
      registerReplica: (record: ReplicaRecord, ttlMs: number) =>
        failing ? Promise.reject(new Error('READONLY')) : store.registerReplica(record, ttlMs),
      listReplicas: () => store.listReplicas(),
      deregisterReplica: (id: string) => store.deregisterReplica(id),
    };
    const a = new ReplicaRegistry({
      store: refusing,
      self: { id: 'replica-a', url: 'http://a:1' },
      clock,
      refreshIntervalMs: 1_000,
      ttlMs: 5_000,
      monotonicNow: () => clock.now(),
      onError: () => undefined,
    });
    expect(a.registered()).toBe(false);
    await a.start();
    expect(a.registered()).toBe(true);
    failing = true;
    clock.advance(4_000);
    await settle();
    // The list as last read still shows it; its entry, written 4 s ago, has 1 s left.
    expect(a.live().map((r) => r.id)).toEqual(['replica-a']);
    expect(a.registered()).toBe(true);
    clock.advance(1_000);
    await settle();
    expect(a.live().map((r) => r.id)).toEqual(['replica-a']);
    expect(a.registered()).toBe(false);
    failing = false;
    clock.advance(1_000);
    await settle();
    expect(a.registered()).toBe(true);
    await a.stop();
    expect(a.registered()).toBe(false);
  });

  it('refuses a TTL that a single refresh interval could outlast', () => {
    const { store } = setup();
    expect(
      () =>
        new ReplicaRegistry({
          store,
          self: { id: 'r', url: 'http://r:1' },
          refreshIntervalMs: 1_000,
          ttlMs: 1_000,
        }),
    ).toThrow(RangeError);
  });
});
