import { describe, expect, it, vi } from 'vitest';
import { unwrap } from '../../../src/actors/commands.js';
import {
  DeadlineSweep,
  PARK_AFTER_MS,
  SWEEP_GROUPS_PER_INTERVAL,
} from '../../../src/actors/deadline-sweep.js';
import { groupOf, type GroupEntry } from '../../../src/actors/group-entry.js';
import { TimerWheel } from '../../../src/actors/timer-wheel.js';
import { ManualClock } from '../../../src/machines/clock.js';
import { LivenessTable } from '../../../src/machines/liveness.js';
import { PersistentMap } from '../../../src/collections/persistent-map.js';
import { createLogger, type Logger } from '../../../src/observability/logger.js';
import { EntryDroppedError } from '../../../src/errors.js';
import type { HeartbeatReply } from '../../../src/machines/protocol.js';
import type { MemberLiveness } from '../../../src/machines/types.js';
import type { Committer } from '../../../src/actors/committer.js';
import { joinRequest, nextRequest, partsRig, REF, testSettings } from './actor-harness.js';

const SESSION_TIMEOUT = 10_000; // testSettings()
const T0 = 1_700_000_000_000;

async function rigWithMember() {
  const rig = partsRig();
  const entry = await rig.owned.create(REF, 4);
  const ctx = await rig.committer.dispatch(entry, {
    type: 'HEARTBEAT',
    now: rig.clock.now(),
    request: { ...joinRequest('m1'), sessionTimeoutMs: SESSION_TIMEOUT },
  });
  joined.set(entry, unwrap(ctx) as HeartbeatReply);
  return { ...rig, entry };
}

/**
 * An entry that holds no actor, only the context `context()` gives (a stub of what the sweep
 * reads of a group: its snapshot's context and its own notes), active at T0.
 */
const stubEntry = (context: () => unknown) =>
  ({
    snapshot: () => ({ context: context() }),
    lastActiveAt: T0,
    parked: false,
    sweptLiveness: null,
    sweptBound: Infinity,
  }) as unknown as GroupEntry;

const joined = new WeakMap<object, HeartbeatReply>();
const lastReply = (rig: Awaited<ReturnType<typeof rigWithMember>>) => joined.get(rig.entry)!;

const members = (rig: Awaited<ReturnType<typeof rigWithMember>>) =>
  groupOf(rig.entry).members.keys();

describe('deadline sweep: a silent member expires at its session deadline', () => {
  it('does nothing before any deadline is due', async () => {
    const rig = await rigWithMember();
    const writes = rig.faulty.count('commitGroup');
    rig.clock.advance(SESSION_TIMEOUT - 1);
    await rig.sweeper.sweep();
    expect(members(rig)).toEqual(['m1']);
    expect(rig.faulty.count('commitGroup')).toBe(writes);
  });

  it('expires the member once its session deadline has passed, with one write', async () => {
    const rig = await rigWithMember();
    const writes = rig.faulty.count('commitGroup');
    rig.clock.advance(SESSION_TIMEOUT + 1);
    await rig.sweeper.sweep();
    expect(members(rig)).toEqual([]);
    expect(rig.faulty.count('commitGroup')).toBe(writes + 1);
    expect((await rig.faulty.inner.loadGroup(REF))?.state.members.keys()).toEqual([]);
  });

  it('a tick whose write fails is forgotten and the next sweep expires the member', async () => {
    const rig = await rigWithMember();
    rig.clock.advance(SESSION_TIMEOUT + 1);
    rig.faulty.fail('commitGroup', { times: 1 });
    await rig.sweeper.sweep(); // resolves: one group's failure does not stop the sweep
    expect(members(rig)).toEqual(['m1']);
    await rig.sweeper.sweep();
    expect(members(rig)).toEqual([]);
  });

  it('started, it runs on the clock every sweep interval', async () => {
    const rig = await rigWithMember();
    const stop = rig.sweeper.start();
    rig.clock.advance(SESSION_TIMEOUT + 1_000);
    await vi.waitFor(() => expect(members(rig)).toEqual([]));
    stop();
  });
});

describe('deadline sweep: a group that left the replica while its tick ran', () => {
  it('is not reported as a failure and not looked at again', async () => {
    const rig = await rigWithMember();
    const errors: unknown[] = [];
    const logger = { error: (...args: unknown[]) => errors.push(args) } as unknown as Logger;
    let entries = [rig.entry];
    let ticks = 0;
    const sweep = new DeadlineSweep({
      clock: rig.clock,
      logger,
      entries: () => entries,
      run: (_entry, work) => work(),
      // The tick finds the entry dropped (its lease lost mid-batch), as Committer.dispatch says.
      committer: {
        dispatch: () => {
          ticks++;
          entries = [];
          return Promise.reject(new EntryDroppedError());
        },
      },
      intervalMs: 250,
    });
    const stop = sweep.start();
    rig.clock.advance(SESSION_TIMEOUT + 1);
    await vi.waitFor(() => expect(ticks).toBe(1));
    for (let i = 0; i < 8; i++) {
      rig.clock.advance(250);
      await new Promise((resolve) => setImmediate(resolve));
    }
    stop();
    expect(ticks).toBe(1);
    expect(errors).toEqual([]);
  });
});

describe('deadline sweep: members are looked at again only when a deadline may have come', () => {
  /** m1 (joined again) and m2 joined and steady. */
  async function twoSteady() {
    const rig = await rigWithMember();
    const beat = (last: HeartbeatReply | null, id: string) =>
      rig.committer.heartbeat(rig.entry, rig.clock.now(), {
        ...(last === null ? joinRequest(id) : nextRequest(id, last)),
        sessionTimeoutMs: SESSION_TIMEOUT,
      });
    let m2 = await beat(null, 'm2');
    rig.clock.advance(rig.entry.actor.getSnapshot().context.config.assignmentDebounceMs);
    await rig.sweeper.sweep();
    let m1 = await beat(null, 'm1');
    for (let i = 0; i < 6; i++) [m1, m2] = [await beat(m1, 'm1'), await beat(m2, 'm2')];
    expect([m1.outcome, m2.outcome]).toEqual(['OK', 'OK']);
    return { rig, beat, m2 };
  }

  it('a silent member expires on time while the other keeps beating steadily', async () => {
    const { rig, beat, m2: first } = await twoSteady();
    const ctx = rig.entry.actor.getSnapshot().context;
    const m1Expires = ctx.liveness.get('m1')!.sessionExpiresAt;
    await rig.sweeper.sweep(); // looks at every member once
    let m2 = first;
    while (rig.clock.now() + 1_000 < m1Expires) {
      rig.clock.advance(1_000);
      m2 = await beat(m2, 'm2'); // steady: the context stays the same object
      await rig.sweeper.sweep();
      expect(rig.entry.actor.getSnapshot().context).toBe(ctx);
    }
    rig.clock.advance(m1Expires - 1 - rig.clock.now());
    await rig.sweeper.sweep();
    expect(members(rig).sort()).toEqual(['m1', 'm2']);
    rig.clock.advance(1);
    await rig.sweeper.sweep();
    expect(members(rig)).toEqual(['m2']);
  });

  it('a deadline brought forward in the liveness table under the same context is kept', async () => {
    const { rig } = await twoSteady();
    const ctx = rig.entry.actor.getSnapshot().context;
    await rig.sweeper.sweep();
    const live = ctx.liveness.get('m1')!;
    ctx.liveness.set('m1', { ...live, sessionExpiresAt: rig.clock.now() + 10 });
    rig.clock.advance(11);
    await rig.sweeper.sweep();
    expect(members(rig)).toEqual(['m2']);
  });
});

describe('deadline sweep: a failed-closed group', () => {
  it('has nothing due, and its members are not read by every sweep once their sessions lapsed', async () => {
    const rig = await rigWithMember();
    for (const id of ['m2', 'm3'])
      await rig.committer.dispatch(rig.entry, {
        type: 'HEARTBEAT',
        now: rig.clock.now(),
        request: { ...joinRequest(id), sessionTimeoutMs: SESSION_TIMEOUT },
      });
    await rig.committer.dispatch(rig.entry, {
      type: 'FAIL_CLOSED',
      now: rig.clock.now(),
      reason: 'METADATA_LOST',
    });
    expect(groupOf(rig.entry).status).toBe('FAILED_CLOSED');
    const writes = rig.faulty.count('commitGroup');
    rig.clock.advance(2 * SESSION_TIMEOUT); // every session has lapsed
    await rig.sweeper.sweep();
    const reads = vi.spyOn(PersistentMap.prototype, 'forEach');
    for (let i = 0; i < 10; i++) {
      rig.clock.advance(250);
      await rig.sweeper.sweep();
    }
    expect(reads).not.toHaveBeenCalled();
    reads.mockRestore();
    // Nothing was ticked: its members stay as they were until it is recovered.
    expect(members(rig).sort()).toEqual(['m1', 'm2', 'm3']);
    expect(rig.faulty.count('commitGroup')).toBe(writes);
  });
});

describe('liveness table: the earliest deadline set since the last look', () => {
  const live = (
    sessionExpiresAt: number,
    revokeDeadline: number | null = null,
  ): MemberLiveness => ({
    lastHeartbeatAt: 0,
    sessionExpiresAt,
    revokeDeadline,
    reportedMetadataVersion: 0,
    reportedAssignmentEpoch: 0,
    currentAssignments: [],
    revokeProgress: [],
  });

  it('reports the earliest session expiry or revoke deadline set or restored, then starts over', () => {
    const table = LivenessTable.of([['a', live(100)]]);
    expect(table.takeEarliestSet()).toBe(Infinity);
    table.set('a', live(300));
    table.set('b', live(500, 200));
    expect(table.takeEarliestSet()).toBe(200);
    expect(table.takeEarliestSet()).toBe(Infinity);
    const mark = table.begin();
    table.set('a', live(900));
    expect(table.takeEarliestSet()).toBe(900);
    table.undo(mark); // back to a's 300
    table.end();
    expect(table.takeEarliestSet()).toBe(300);
  });
});

/** Lets queued mailbox work and promise callbacks run (the clock does not move). */
const flush = () => new Promise((resolve) => setImmediate(resolve));

/** The member is still there 1 ms before a session timeout from now, and gone at it. */
async function expectExpiryAfterSession(rig: Awaited<ReturnType<typeof rigWithMember>>) {
  rig.clock.advance(SESSION_TIMEOUT - 1);
  await flush();
  expect(members(rig)).toEqual(['m1']);
  rig.clock.advance(1);
  await flush();
  expect(members(rig)).toEqual([]);
}

describe('deadline timers: a deadline fires when it comes, not a sweep interval later', () => {
  it('a silent member expires at its session deadline to the millisecond', async () => {
    const rig = await rigWithMember();
    rig.sweeper.start();
    // A heartbeat at an odd time: its deadline falls on no multiple of the sweep interval.
    rig.clock.advance(123);
    const reply = await rig.committer.heartbeat(
      rig.entry,
      rig.clock.now(),
      nextRequest('m1', lastReply(rig)),
    );
    expect(reply.outcome).toBe('OK');
    await expectExpiryAfterSession(rig);
  });

  it('heartbeats push the expiry along without touching the timers; it comes a session after the last one', async () => {
    const rig = await rigWithMember();
    rig.sweeper.start();
    let reply = unwrap(
      await rig.committer.dispatch(rig.entry, {
        type: 'HEARTBEAT',
        now: rig.clock.now(),
        request: nextRequest('m1', lastReply(rig)),
      }),
    ) as HeartbeatReply;
    const add = vi.spyOn(TimerWheel.prototype, 'add');
    for (let beat = 0; beat < 30; beat++) {
      rig.clock.advance(3_000);
      await flush();
      reply = await rig.committer.heartbeat(rig.entry, rig.clock.now(), nextRequest('m1', reply));
      expect(reply.outcome).toBe('OK');
    }
    // Steady heartbeats scheduled nothing; the timer, when it came, found the session moved on
    // and waited again: once per (session - interval), not once per heartbeat.
    expect(add.mock.calls.length).toBeLessThanOrEqual(
      Math.ceil((30 * 3_000) / (SESSION_TIMEOUT - 3_000)),
    );
    add.mockRestore();
    const last = rig.clock.now();
    expect(members(rig)).toEqual(['m1']);
    await expectExpiryAfterSession(rig);
    expect(rig.clock.now()).toBe(last + SESSION_TIMEOUT);
  });

  it('a debounced recompute runs when it falls due, without a heartbeat', async () => {
    const rig = await rigWithMember();
    rig.sweeper.start();
    await rig.committer.dispatch(rig.entry, {
      type: 'HEARTBEAT',
      now: rig.clock.now(),
      request: joinRequest('m2'),
    });
    const epoch = groupOf(rig.entry).assignmentEpoch;
    const debounce = rig.entry.actor.getSnapshot().context.config.assignmentDebounceMs;
    rig.clock.advance(debounce - 1);
    await flush();
    expect(groupOf(rig.entry).assignmentEpoch).toBe(epoch);
    rig.clock.advance(1);
    await flush();
    expect(groupOf(rig.entry).assignmentEpoch).toBe(epoch + 1);
  });

  it('a tick whose write fails is not tried again in a loop; the member expires within a sweep interval', async () => {
    const rig = await rigWithMember();
    rig.sweeper.start();
    const sweepInterval = testSettings().membership['sweep-interval'];
    // A heartbeat at an odd time: the deadline falls between two periodic sweeps.
    rig.clock.advance(123);
    await rig.committer.heartbeat(rig.entry, rig.clock.now(), nextRequest('m1', lastReply(rig)));
    rig.faulty.fail('commitGroup', { times: 1 });
    const writes = rig.faulty.count('commitGroup');
    rig.clock.advance(SESSION_TIMEOUT);
    await flush();
    expect(rig.faulty.count('commitGroup')).toBe(writes + 1);
    expect(members(rig)).toEqual(['m1']);
    rig.clock.advance(100);
    await flush();
    expect(rig.faulty.count('commitGroup')).toBe(writes + 1);
    rig.clock.advance(sweepInterval - 100);
    await flush();
    expect(members(rig)).toEqual([]);
  });

  it('stopped, nothing fires', async () => {
    const rig = await rigWithMember();
    const stop = rig.sweeper.start();
    stop();
    rig.clock.advance(SESSION_TIMEOUT * 2);
    await flush();
    expect(members(rig)).toEqual(['m1']);
  });
});

describe('deadline timers: a group woken by its own deadlines is not read whole', () => {
  const live = (sessionExpiresAt: number): MemberLiveness => ({
    lastHeartbeatAt: T0,
    sessionExpiresAt,
    revokeDeadline: null,
    reportedMetadataVersion: 0,
    reportedAssignmentEpoch: 0,
    currentAssignments: [],
    revokeProgress: [],
  });

  /**
   * One group of 100 members whose sessions end at T0 + 10 s, with a recompute due in 100 ms
   * that every tick puts 100 ms further (joins that keep coming): each tick makes a new context
   * over the same liveness table, as a committed event does. A tick expires the members whose
   * session has ended. `reads` counts the looks at every member.
   */
  function joiningGroup() {
    const clock = new ManualClock(T0);
    const liveness = new LivenessTable();
    const ids = Array.from({ length: 100 }, (_, i) => `m${i}`);
    for (const id of ids) liveness.set(id, live(T0 + 10_000));
    const state = { reads: 0, ticks: [] as number[] };
    const members = {
      forEach(visit: (member: unknown, id: string) => void) {
        state.reads++;
        for (const id of ids) visit(undefined, id);
      },
    };
    let context = {
      group: { status: 'STABLE', members, activeMigration: null },
      recomputeAt: (T0 + 100) as number | null,
      liveness,
    };
    const entry = stubEntry(() => context);
    const tick = () => {
      const now = clock.now();
      state.ticks.push(now);
      for (const id of [...ids])
        if (liveness.get(id)!.sessionExpiresAt <= now) {
          liveness.delete(id);
          ids.splice(ids.indexOf(id), 1);
        }
      context = { ...context, recomputeAt: now < T0 + 2_000 ? now + 100 : null };
      return Promise.resolve(context);
    };
    const sweep = new DeadlineSweep({
      clock,
      logger: createLogger({ level: 'error', format: 'text' }),
      intervalMs: 60_000,
      entries: () => [entry],
      run: (_entry, work) => work(),
      committer: { dispatch: tick } as unknown as Pick<Committer, 'dispatch'>,
    });
    return { clock, liveness, state, sweep, ids };
  }

  it('a recompute that keeps falling due ticks the group without reading its members', async () => {
    const { clock, state, sweep } = joiningGroup();
    sweep.start();
    expect(state.reads).toBe(1);
    for (let i = 0; i < 20; i++) {
      clock.advance(100);
      await flush();
    }
    expect(state.ticks).toEqual(Array.from({ length: 20 }, (_, i) => T0 + 100 * (i + 1)));
    expect(state.reads).toBe(1);
    // The periodic sweep looks at it the same way.
    await sweep.sweep();
    expect(state.reads).toBe(1);
  });

  it('the members are read again when their bound comes, and expire on time', async () => {
    const { clock, liveness, state, sweep, ids } = joiningGroup();
    /** Moves the clock on `ms`, letting each timer's work finish before the next one. */
    const pass = async (ms: number) => {
      for (const end = clock.now() + ms; clock.now() < end;) {
        clock.advance(Math.min(50, end - clock.now()));
        await flush();
      }
    };
    sweep.start();
    // Every member but m0 beats once: its session moves on; the bound stays at m0's.
    await pass(1_000);
    for (const id of ids.slice(1)) liveness.set(id, live(clock.now() + 10_000));
    await pass(9_000 - 1);
    expect(state.ticks).toHaveLength(20); // the recompute's, until it stopped at T0 + 2 s
    expect(state.reads).toBe(1);
    expect(ids).toContain('m0');
    // The timers keep deadlines to the millisecond: one fires within 1 ms after it.
    await pass(2);
    // Read whole when the bound came (m0's deadline, due: ticked), and once after the tick.
    expect(ids).not.toContain('m0');
    expect(ids).toHaveLength(99);
    expect(state.ticks.at(-1)).toBeGreaterThanOrEqual(T0 + 10_000);
    expect(state.reads).toBe(3);
    // The next wake is the others' deadline, exactly: nothing before it.
    const ticks = state.ticks.length;
    await pass(1_000 - 3);
    expect(state.ticks).toHaveLength(ticks);
    await pass(2);
    expect(ids).toEqual([]);
    expect(state.reads).toBe(5);
  });
});

describe('deadline sweep: an idle group holds no actor', () => {
  const longSession = async () => {
    const rig = partsRig();
    const entry = await rig.owned.create(REF, 4);
    const request = { ...joinRequest('m1'), sessionTimeoutMs: 3_600_000 };
    const joined = unwrap(
      await rig.committer.dispatch(entry, { type: 'HEARTBEAT', now: rig.clock.now(), request }),
    ) as HeartbeatReply;
    return { ...rig, entry, joined };
  };

  it('parks the actor of a group idle for PARK_AFTER_MS, keeping its snapshot', async () => {
    const rig = await longSession();
    rig.clock.advance(PARK_AFTER_MS - 1);
    await rig.sweeper.sweep();
    expect(rig.entry.parked).toBe(false);
    const before = rig.entry.snapshot();
    rig.clock.advance(1);
    await rig.sweeper.sweep();
    expect(rig.entry.parked).toBe(true);
    expect(rig.entry.snapshot()).toBe(before);
  });

  it('a steady heartbeat is answered from the parked snapshot without starting the actor', async () => {
    const rig = await longSession();
    const steady = nextRequest('m1', rig.joined);
    const first = await rig.committer.heartbeat(rig.entry, rig.clock.now(), steady);
    rig.clock.advance(PARK_AFTER_MS);
    await rig.sweeper.sweep();
    expect(rig.entry.parked).toBe(true);
    const reply = await rig.committer.heartbeat(rig.entry, rig.clock.now(), steady);
    expect(reply).toEqual(first);
    expect(rig.entry.parked).toBe(true);
  });

  it('the next event starts the actor again in the state it was parked in', async () => {
    const rig = await longSession();
    rig.clock.advance(PARK_AFTER_MS);
    await rig.sweeper.sweep();
    const parked = rig.entry.snapshot();
    const joined = unwrap(
      await rig.committer.dispatch(rig.entry, {
        type: 'HEARTBEAT',
        now: rig.clock.now(),
        request: { ...joinRequest('m2'), sessionTimeoutMs: 3_600_000 },
      }),
    ) as HeartbeatReply;
    expect(joined.memberEpoch).toBeGreaterThan(rig.joined.memberEpoch);
    expect(rig.entry.parked).toBe(false);
    expect(groupOf(rig.entry).members.keys().sort()).toEqual(['m1', 'm2']);
    // Restored, the chart was where the parked snapshot said, and moved on from there.
    expect(parked.value).toEqual({
      lifecycle: 'active',
      membership: 'stable',
      consumption: 'running',
      migration: 'idle',
    });
    expect(rig.entry.snapshot().value).toEqual({
      lifecycle: 'active',
      membership: { rebalancing: 'granting' },
      consumption: 'running',
      migration: 'idle',
    });
  });
});

describe('deadline sweep: the periodic sweep looks at many groups a share per interval', () => {
  /** Entries that only record when the sweep looks at them (nothing is ever due). */
  const stubEntries = (count: number, looked: number[]) =>
    Array.from({ length: count }, (_, i) => {
      const context = {
        group: { status: 'STABLE', members: PersistentMap.empty(), activeMigration: null },
        recomputeAt: null,
        liveness: {
          takeEarliestSet: () => {
            looked.push(i);
            return Infinity;
          },
        },
      };
      return stubEntry(() => context);
    });

  const sweepOf = (entries: GroupEntry[]) =>
    new DeadlineSweep({
      clock: new ManualClock(T0),
      logger: createLogger({ level: 'error', format: 'text' }),
      intervalMs: 250,
      entries: () => entries,
      run: () => Promise.reject(new Error('nothing is due')),
      committer: { dispatch: () => Promise.reject(new Error('nothing is due')) },
    });

  it(`looks at every group each interval up to ${SWEEP_GROUPS_PER_INTERVAL}`, async () => {
    const looked: number[] = [];
    const sweep = sweepOf(stubEntries(SWEEP_GROUPS_PER_INTERVAL, looked));
    await sweep.sweepShare();
    await sweep.sweepShare();
    expect(looked).toHaveLength(2 * SWEEP_GROUPS_PER_INTERVAL);
  });

  it('beyond that, the next share each interval, round robin, every group once per pass', async () => {
    const looked: number[] = [];
    const count = 2 * SWEEP_GROUPS_PER_INTERVAL + 500;
    const sweep = sweepOf(stubEntries(count, looked));
    const shares: number[][] = [];
    for (let i = 0; i < 4; i++) {
      await sweep.sweepShare();
      shares.push(looked.splice(0));
    }
    expect(shares.map((share) => share.length)).toEqual([
      SWEEP_GROUPS_PER_INTERVAL,
      SWEEP_GROUPS_PER_INTERVAL,
      500,
      SWEEP_GROUPS_PER_INTERVAL,
    ]);
    expect(new Set(shares.slice(0, 3).flat()).size).toBe(count);
    expect(shares[3]![0]).toBe(0);
    // A full sweep (`sweep()`) still looks at every group.
    await sweep.sweep();
    expect(looked).toHaveLength(count);
  });
});
