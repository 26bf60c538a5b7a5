/**
 * The consumer's shard lifecycle against a scripted coordinator (an object behind the client's
 * heartbeat interface: the test decides every reply) and a real redis-server holding the shards.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  Consumer,
  CoordinatorUnreachableError,
  ConflictError,
  PermissionDeniedError,
  UnavailableError,
  type ConsumerMessage,
  type ConsumerOptions,
  type FencedEvent,
  type HeartbeatHoldOptions,
  type HeartbeatTransport,
  type StreamsUnreachableEvent,
} from '../../src/client/index.js';
import type { HeartbeatReply, HeartbeatRequest } from '../../src/machines/protocol.js';
import {
  freePort,
  startRedisServer,
  waitFor,
  type RedisServerHandle,
} from '../support/redis-server.js';
import { timed } from '../support/timed.js';

type Script = (request: HeartbeatRequest) => HeartbeatReply | Error;

/** A coordinator whose every reply the test scripts; it records what it was sent. */
class ScriptedCoordinator implements HeartbeatTransport {
  readonly requests: { at: number; body: HeartbeatRequest }[] = [];
  /** While set, heartbeats are recorded and never answered (a coordinator gone silent). */
  silent = false;
  constructor(public script: Script) {}
  async heartbeat(_sp: string, _cg: string, request: HeartbeatRequest): Promise<HeartbeatReply> {
    this.requests.push({ at: Date.now(), body: structuredClone(request) });
    if (this.silent) return new Promise<never>(() => undefined);
    const answer = this.script(request);
    if (answer instanceof Error) throw answer;
    return answer;
  }
  last(): HeartbeatRequest {
    return this.requests.at(-1)!.body;
  }
}

/** A reply naming these shards, at epoch 1 (a join is answered as the member's first epoch). */
function owns(
  shards: Partial<
    Pick<HeartbeatReply, 'assignedShards' | 'revokeShards' | 'retireShards' | 'pendingShards'>
  > = {},
  outcome: HeartbeatReply['outcome'] = 'OK',
): Script {
  return (request) => ({
    outcome,
    memberId: request.memberId,
    memberEpoch: 1,
    assignmentEpoch: 1,
    metadataVersion: 1,
    lifecycleId: 'life',
    shardCount: 4,
    assignedShards: [],
    revokeShards: [],
    retireShards: [],
    pendingShards: [],
    heartbeatIntervalMs: 30,
    ...shards,
  });
}

let server: RedisServerHandle;
let redis: Redis;
let prefix: string;
const consumers: Consumer[] = [];

beforeAll(async () => {
  server = await startRedisServer();
  redis = server.client();
});
afterAll(async () => {
  await server.stop();
});
afterEach(async () => {
  await Promise.all(consumers.splice(0).map((c) => c.close()));
});

function fresh(): string {
  prefix = `orders-${randomBytes(4).toString('hex')}`;
  return prefix;
}

async function produce(shard: number, count: number, tag = 'm'): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    ids.push((await redis.xadd(`${prefix}:${shard}`, '*', 'key', `${tag}-${i}`, 'n', String(i)))!);
  }
  return ids;
}

async function lastEntry(shard: number): Promise<string[]> {
  const [entry] = await redis.xrevrange(`${prefix}:${shard}`, '+', '-', 'COUNT', 1);
  return entry?.[1] ?? [];
}

async function pendingCount(shard: number): Promise<number> {
  const summary = (await redis.xpending(`${prefix}:${shard}`, 'billing')) as [number, ...unknown[]];
  return summary[0];
}

function consumer(
  coordinator: HeartbeatTransport,
  handler: ConsumerOptions['handler'],
  extra: Partial<ConsumerOptions> = {},
): Consumer {
  const c = new Consumer({
    client: coordinator,
    redis: server.url,
    streamPrefix: prefix,
    consumerGroup: 'billing',
    memberId: 'member-a',
    handler,
    blockMs: 50,
    ...extra,
  });
  consumers.push(c);
  return c;
}

/** A handler that records messages and holds those whose key is in `held` until released. */
function recorder() {
  const seen: ConsumerMessage[] = [];
  const held = new Map<string, () => void>();
  const holdKeys = new Set<string>();
  return {
    seen,
    holdKeys,
    release(key: string) {
      held.get(key)?.();
    },
    handler: async (message: ConsumerMessage) => {
      seen.push(message);
      if (message.key !== null && holdKeys.has(message.key)) {
        await new Promise<void>((resolve, reject) => {
          held.set(message.key!, resolve);
          message.signal.addEventListener('abort', () => reject(new Error('aborted')));
        });
      }
    },
  };
}

describe('a consumer starts reading a shard only after a reply grants it', () => {
  it('reads the granted shard, not the pending one, until a reply grants that too', async () => {
    fresh();
    await produce(0, 3, 'a');
    await produce(1, 3, 'b');
    const coordinator = new ScriptedCoordinator(owns({ assignedShards: [0], pendingShards: [1] }));
    const rec = recorder();
    const c = consumer(coordinator, rec.handler);
    const assigned: number[][] = [];
    c.on('assigned', (shards) => assigned.push(shards));
    await c.start();
    await waitFor(() => rec.seen.length === 3, { what: 'shard 0 read' });
    await waitFor(() => coordinator.requests.length >= 5, { what: 'more heartbeats' });
    expect(rec.seen.every((m) => m.shard === 0)).toBe(true);
    expect(coordinator.last().currentAssignments).toEqual([0]);
    // Shard 1 was never touched: not even its Redis consumer group exists.
    await expect(redis.xinfo('GROUPS', `${prefix}:1`)).resolves.toEqual([]);

    coordinator.script = owns({ assignedShards: [0, 1] });
    await waitFor(() => rec.seen.length === 6, { what: 'shard 1 read after its grant' });
    expect(rec.seen.slice(3).map((m) => m.key)).toEqual(['b-0', 'b-1', 'b-2']);
    expect(assigned).toEqual([[0], [1]]);
    await waitFor(async () => (await pendingCount(1)) === 0, { what: 'acks' });
  });
});

describe('a consumer stops reading a revoked shard before reporting DONE', () => {
  it('reports DRAINING while its message in hand finishes, reads nothing more, then DONE', async () => {
    fresh();
    await produce(0, 1, 'slow');
    const coordinator = new ScriptedCoordinator(owns({ assignedShards: [0] }));
    const rec = recorder();
    rec.holdKeys.add('slow-0');
    const c = consumer(coordinator, rec.handler);
    await c.start();
    await waitFor(() => rec.seen.length === 1, { what: 'the slow message in hand' });

    coordinator.script = owns({ revokeShards: [0] }, 'REVOKE_PENDING');
    await waitFor(
      () => coordinator.last().revokeProgress.some((p) => p.shard === 0 && p.state === 'DRAINING'),
      { what: 'DRAINING reported' },
    );
    expect(coordinator.last().currentAssignments).toEqual([0]);
    await produce(0, 2, 'late');
    const drainingSince = coordinator.requests.length;
    await waitFor(() => coordinator.requests.length >= drainingSince + 3, { what: 'heartbeats' });
    expect(rec.seen).toHaveLength(1); // stopped reading: the late messages are not taken

    rec.release('slow-0');
    await waitFor(
      () => coordinator.last().revokeProgress.some((p) => p.shard === 0 && p.state === 'DONE'),
      { what: 'DONE reported' },
    );
    expect(coordinator.last().currentAssignments).toEqual([]);
    expect(await pendingCount(0)).toBe(0); // the finished message was acked before DONE
    expect(rec.seen).toHaveLength(1);
  });

  it('abandons the message in hand after the drain timeout: aborted, left pending, DONE', async () => {
    fresh();
    await produce(0, 1, 'stuck');
    const coordinator = new ScriptedCoordinator(owns({ assignedShards: [0] }));
    const rec = recorder();
    rec.holdKeys.add('stuck-0');
    const c = consumer(coordinator, rec.handler, { drainTimeoutMs: 150 });
    await c.start();
    await waitFor(() => rec.seen.length === 1, { what: 'the stuck message in hand' });
    coordinator.script = owns({ revokeShards: [0] }, 'REVOKE_PENDING');
    await waitFor(
      () => coordinator.last().revokeProgress.some((p) => p.shard === 0 && p.state === 'DONE'),
      { what: 'DONE after the drain timeout' },
    );
    expect(rec.seen[0]!.signal.aborted).toBe(true);
    expect(await pendingCount(0)).toBe(1); // the next owner claims it
  });
});

describe('a shard changing course while the consumer works on it', () => {
  it('revoked, then retired by a scale-in while draining: read to its end after the drain', async () => {
    fresh();
    await produce(5, 1, 'slow');
    const coordinator = new ScriptedCoordinator(owns({ assignedShards: [5] }));
    const rec = recorder();
    rec.holdKeys.add('slow-0');
    const c = consumer(coordinator, rec.handler);
    await c.start();
    await waitFor(() => rec.seen.length === 1, { what: 'message in hand' });
    coordinator.script = owns({ revokeShards: [5] }, 'REVOKE_PENDING');
    await waitFor(() => coordinator.last().revokeProgress.length === 1, { what: 'draining' });
    coordinator.script = owns({ retireShards: [5] });
    await produce(5, 3, 'tail');
    const told = coordinator.requests.length;
    await waitFor(() => coordinator.requests.length > told + 2, { what: 'retire told' });
    rec.release('slow-0');
    await waitFor(
      () => coordinator.last().revokeProgress.some((p) => p.shard === 5 && p.state === 'DONE'),
      { what: 'retired shard reported DONE' },
    );
    // The tail written after the revoke was read before DONE, not dropped with the drain.
    expect(rec.seen.map((m) => m.key)).toEqual(['slow-0', 'tail-0', 'tail-1', 'tail-2']);
  });

  it('retiring, then granted back by a rollback: one reader goes on reading', async () => {
    fresh();
    await produce(6, 1, 'held');
    const coordinator = new ScriptedCoordinator(owns({ retireShards: [6] }));
    const rec = recorder();
    rec.holdKeys.add('held-0'); // keeps the reader in front of its seal
    const c = consumer(coordinator, rec.handler);
    await c.start();
    await waitFor(() => rec.seen.length === 1, { what: 'retiring shard read' });
    coordinator.script = owns({ assignedShards: [6] });
    const since = coordinator.requests.length;
    await waitFor(() => coordinator.requests.length > since + 2, { what: 'granted back' });
    rec.release('held-0');
    await produce(6, 5, 'again');
    await waitFor(() => rec.seen.length === 6, { what: 'read on past the seal' });
    // The seal of the rolled-back retire is acked, never handed to the handler.
    expect(rec.seen.map((m) => m.key)).toEqual([
      'held-0',
      'again-0',
      'again-1',
      'again-2',
      'again-3',
      'again-4',
    ]);
    // One blocking reader connection is left reading the shard (`cmd=xreadgroup`).
    const clients = String(await redis.client('LIST')).split('\n');
    expect(clients.filter((line) => line.includes('cmd=xreadgroup'))).toHaveLength(1);
    expect(coordinator.last().currentAssignments).toEqual([6]);
    await waitFor(async () => (await pendingCount(6)) === 0, { what: 'all acked, seal too' });
  });

  it('a retiring shard is read up to the seal it appended, and DONE is reported only then', async () => {
    fresh();
    await produce(3, 1, 'held');
    await produce(3, 2, 'before');
    const coordinator = new ScriptedCoordinator((request) => ({
      ...owns({ retireShards: [3] })(request),
      metadataVersion: 7,
    }));
    const rec = recorder();
    rec.holdKeys.add('held-0');
    const c = consumer(coordinator, rec.handler);
    await c.start();
    await waitFor(() => rec.seen.length === 1, { what: 'first entry in hand' });
    // The seal is written at once, behind everything producers had appended.
    await waitFor(async () => (await lastEntry(3))[0] === '__coord_seal', { what: 'sealed' });
    expect(await lastEntry(3)).toEqual(['__coord_seal', 'life', 'version', '7']);
    const held = coordinator.requests.length;
    await waitFor(() => coordinator.requests.length > held + 3, { what: 'heartbeats' });
    expect(coordinator.last().currentAssignments).toEqual([3]); // not DONE while in front of it
    rec.release('held-0');
    await waitFor(
      () => coordinator.last().revokeProgress.some((p) => p.shard === 3 && p.state === 'DONE'),
      { what: 'retired shard reported DONE' },
    );
    expect(rec.seen.map((m) => m.key)).toEqual(['held-0', 'before-0', 'before-1']);
    expect(await pendingCount(3)).toBe(0);
  });
});

describe('a consumer claims the stale pending entries of a shard it takes over', () => {
  it('handles and acks entries a previous owner read and never acked', async () => {
    fresh();
    await produce(2, 4, 'old');
    await redis.xgroup('CREATE', `${prefix}:2`, 'billing', '0');
    await redis.xreadgroup(
      'GROUP',
      'billing',
      'dead-member',
      'COUNT',
      3,
      'STREAMS',
      `${prefix}:2`,
      '>',
    );
    expect(await pendingCount(2)).toBe(3);
    const coordinator = new ScriptedCoordinator(owns({ assignedShards: [2] }));
    const rec = recorder();
    await consumer(coordinator, rec.handler).start();
    await waitFor(() => rec.seen.length === 4, { what: 'claimed and new entries handled' });
    expect(rec.seen.map((m) => m.key)).toEqual(['old-0', 'old-1', 'old-2', 'old-3']);
    await waitFor(async () => (await pendingCount(2)) === 0, { what: 'all acked' });
  });
});

describe('a consumer consumes retiring shards to the end', () => {
  it('reads a retiring shard until it stays empty, then reports DONE and stops listing it', async () => {
    fresh();
    await produce(3, 5, 'tail');
    const coordinator = new ScriptedCoordinator(owns({ assignedShards: [0], retireShards: [3] }));
    const rec = recorder();
    const c = consumer(coordinator, rec.handler);
    const revoked: number[][] = [];
    c.on('revoked', (shards) => revoked.push(shards));
    await c.start();
    await waitFor(
      () => coordinator.last().revokeProgress.some((p) => p.shard === 3 && p.state === 'DONE'),
      { what: 'retired shard reported DONE' },
    );
    expect(rec.seen.filter((m) => m.shard === 3)).toHaveLength(5);
    expect(coordinator.last().currentAssignments).toEqual([0]);
    expect(revoked).toContainEqual([3]);
  });
});

describe('a consumer drops everything at once', () => {
  it('when fenced: aborts work in hand, stops reading, rejoins with epoch 0', async () => {
    fresh();
    await produce(0, 1, 'held');
    const coordinator = new ScriptedCoordinator(owns({ assignedShards: [0, 1] }));
    const rec = recorder();
    rec.holdKeys.add('held-0');
    const c = consumer(coordinator, rec.handler);
    const fenced: FencedEvent[] = [];
    c.on('fenced', (event) => fenced.push(event));
    await c.start();
    await waitFor(() => rec.seen.length === 1, { what: 'message in hand' });

    let fencedOnce = false;
    coordinator.script = (request) => {
      if (!fencedOnce) {
        fencedOnce = true;
        return owns({}, 'FENCED_MEMBER_EPOCH')(request);
      }
      return owns({ pendingShards: [0, 1] })(request); // the rejoin gets nothing yet
    };
    await waitFor(() => fenced.length === 1, { what: 'fenced event' });
    expect(fenced[0]).toEqual({ reason: 'FENCED_MEMBER_EPOCH', shards: [0, 1] });
    expect(rec.seen[0]!.signal.aborted).toBe(true);
    expect(c.shards()).toEqual([]);
    const rejoinIndex = () =>
      coordinator.requests.findIndex(
        (r, i) =>
          i > 0 && r.body.memberEpoch === 0 && coordinator.requests[i - 1]!.body.memberEpoch === 1,
      );
    await waitFor(() => rejoinIndex() > 0, { what: 'rejoin' });
    const rejoin = coordinator.requests[rejoinIndex()]!.body;
    expect(rejoin.currentAssignments).toEqual([]);
    // The lifecycle it was fenced in is forgotten: the rejoin joins whatever lifecycle is current.
    expect(coordinator.requests[rejoinIndex() - 1]!.body.lifecycleId).toBe('life');
    expect(rejoin).not.toHaveProperty('lifecycleId');
    await produce(0, 2, 'after');
    const since = coordinator.requests.length;
    await waitFor(() => coordinator.requests.length >= since + 3, { what: 'heartbeats' });
    expect(rec.seen).toHaveLength(1);
    expect(await pendingCount(0)).toBe(1); // the aborted message was not acked
  });

  it('when the coordinator is unreachable for its session timeout', async () => {
    fresh();
    await produce(0, 1, 'x');
    const coordinator = new ScriptedCoordinator(owns({ assignedShards: [0] }));
    const rec = recorder();
    const c = consumer(coordinator, rec.handler, { sessionTimeoutMs: 600 });
    const fenced: FencedEvent[] = [];
    c.on('fenced', (event) => fenced.push(event));
    c.on('error', () => undefined);
    await c.start();
    await waitFor(() => rec.seen.length === 1, { what: 'reading' });
    const cutAt = Date.now();
    coordinator.script = () =>
      new CoordinatorUnreachableError('http://127.0.0.1:1/hb', 'ECONNREFUSED');
    await waitFor(() => fenced.length === 1, { what: 'session lost' });
    // 80% of the session timeout after the last answered heartbeat, never later than the timeout.
    expect(Date.now() - cutAt).toBeLessThan(600);
    expect(fenced[0]!.reason).toBe('SESSION_LOST');
    expect(c.shards()).toEqual([]);
    await produce(0, 1, 'unread');
    await waitFor(() => coordinator.requests.length > 20, { what: 'retries continue' });
    expect(rec.seen).toHaveLength(1);
    expect(coordinator.last().memberEpoch).toBe(0);
  });
});

describe('a consumer keeps its state through answers that change nothing', () => {
  it('503 GROUP_FAILED_CLOSED: keeps reading past its session timeout', async () => {
    fresh();
    const coordinator = new ScriptedCoordinator(owns({ assignedShards: [0] }));
    const rec = recorder();
    const c = consumer(coordinator, rec.handler, { sessionTimeoutMs: 400 });
    const fenced: FencedEvent[] = [];
    c.on('fenced', (event) => fenced.push(event));
    c.on('error', () => undefined);
    await c.start();
    await waitFor(() => c.shards().length === 1, { what: 'reading' });
    const closedAt = Date.now();
    coordinator.script = () =>
      new UnavailableError(503, 'GROUP_FAILED_CLOSED', 'failed closed', 'r', undefined, 100);
    // Refused heartbeats spanning three session timeouts.
    await waitFor(() => coordinator.requests.at(-1)!.at - closedAt > 1_200, {
      timeoutMs: 3_000,
      what: 'failed-closed answers for two sessions',
    });
    await produce(0, 1, 'during');
    await waitFor(() => rec.seen.length === 1, { what: 'still reading while failed closed' });
    expect(fenced).toEqual([]);
    expect(c.shards()).toEqual([0]);
    expect(coordinator.last()).toMatchObject({ memberEpoch: 1, currentAssignments: [0] });
  });

  it('503 while the group moves: keeps its shards and waits Retry-After before asking again', async () => {
    fresh();
    const coordinator = new ScriptedCoordinator(owns({ assignedShards: [0] }));
    const c = consumer(coordinator, recorder().handler);
    c.on('error', () => undefined);
    await c.start();
    let moving = 2;
    const steady = owns({ assignedShards: [0] });
    coordinator.script = (request) =>
      moving-- > 0
        ? new UnavailableError(503, 'GROUP_MOVING', 'moving', 'r', undefined, 250)
        : steady(request);
    const since = coordinator.requests.length;
    await waitFor(() => coordinator.requests.length >= since + 4, { what: 'moved' });
    const times = coordinator.requests.slice(since).map((r) => r.at);
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(245);
    expect(times[2]! - times[1]!).toBeGreaterThanOrEqual(245);
    expect(c.shards()).toEqual([0]);
    expect(coordinator.requests.slice(since).every((r) => r.body.memberEpoch === 1)).toBe(true);
  });
});

describe('a consumer whose membership is refused', () => {
  it('start() rejects with the typed error when the member id belongs to another principal', async () => {
    fresh();
    const coordinator = new ScriptedCoordinator(
      () => new PermissionDeniedError(403, 'MEMBER_ID_IN_USE', 'taken', 'r'),
    );
    const c = consumer(coordinator, recorder().handler);
    await expect(c.start()).rejects.toMatchObject({
      name: 'PermissionDeniedError',
      code: 'MEMBER_ID_IN_USE',
    });
  });

  it('409 GROUP_FULL after joining: drops its shards and keeps asking to join', async () => {
    fresh();
    const coordinator = new ScriptedCoordinator(owns({ assignedShards: [0] }));
    const c = consumer(coordinator, recorder().handler);
    const fenced: FencedEvent[] = [];
    const errors: unknown[] = [];
    c.on('fenced', (event) => fenced.push(event));
    c.on('error', (error) => errors.push(error));
    await c.start();
    await waitFor(() => c.shards().length === 1, { what: 'reading' });
    coordinator.script = () => new ConflictError(409, 'GROUP_FULL', 'full', 'r');
    await waitFor(() => fenced.length === 1, { what: 'dropped' });
    expect(fenced[0]).toEqual({ reason: 'GROUP_FULL', shards: [0] });
    expect(errors[0]).toBeInstanceOf(ConflictError);
    await waitFor(() => coordinator.requests.length >= 6, { what: 'join retried' });
    expect(coordinator.last()).toMatchObject({ memberEpoch: 0, currentAssignments: [] });
  });
});

/**
 * A coordinator that holds held heartbeats (`waitMs`) until released or cancelled, and answers
 * the others at once from the script; it records the wait each heartbeat asked for.
 */
class HoldingCoordinator implements HeartbeatTransport {
  readonly requests: { body: HeartbeatRequest; waitMs: number | undefined }[] = [];
  private release: (() => void) | null = null;
  private fail: ((error: Error) => void) | null = null;
  constructor(public script: Script) {}
  async heartbeat(
    _sp: string,
    _cg: string,
    request: HeartbeatRequest,
    _timeoutMs?: number,
    hold?: HeartbeatHoldOptions,
  ): Promise<HeartbeatReply> {
    this.requests.push({ body: structuredClone(request), waitMs: hold?.waitMs });
    if (hold) {
      await new Promise<void>((resolve, reject) => {
        this.release = resolve;
        this.fail = reject;
        hold.signal?.addEventListener('abort', () => reject(new Error('aborted')));
      });
    }
    const answer = this.script(request);
    if (answer instanceof Error) throw answer;
    return answer;
  }
  /** Answers the heartbeat held now (if any). */
  answerHeld(): void {
    this.release?.();
    this.release = null;
  }
  /** Fails the heartbeat held now (no answer). */
  failHeld(error: Error): void {
    this.fail?.(error);
    this.fail = null;
  }
}

describe('held heartbeats', () => {
  it('a consumer with nothing to report asks for the advised interval as waitMs; the next goes out when it is answered', async () => {
    fresh();
    const coordinator = new HoldingCoordinator(owns({ assignedShards: [0, 1] }));
    const c = consumer(coordinator, recorder().handler);
    await c.start();
    await waitFor(() => coordinator.requests.length === 2, { what: 'the second heartbeat' });
    // The join is not held; the heartbeat after it is, asking for the advised interval.
    expect(coordinator.requests.map((r) => r.waitMs)).toEqual([undefined, 30]);
    expect(coordinator.requests[1]?.body).toMatchObject({ currentAssignments: [0, 1] });
    coordinator.answerHeld();
    await waitFor(() => coordinator.requests.length === 3, { what: 'the next heartbeat' });
    expect(coordinator.requests[2]?.waitMs).toBe(30);
  });

  it('after a heartbeat that did not ask to be held, the next goes out held at once', async () => {
    fresh();
    // A long advised interval: only a next heartbeat sent at once arrives within the test.
    const steady = owns({ assignedShards: [0] });
    const coordinator = new HoldingCoordinator((request) => ({
      ...(steady(request) as HeartbeatReply),
      heartbeatIntervalMs: 20_000,
    }));
    const c = consumer(coordinator, recorder().handler);
    c.on('error', () => undefined);
    await c.start();
    await waitFor(() => coordinator.requests.length === 2, { what: 'a heartbeat held' });
    // No answer: the retry does not ask to be held; its answer (nothing new) is followed by a
    // held heartbeat at once, not after the 20 s interval.
    coordinator.failHeld(new Error('connection reset'));
    await waitFor(() => coordinator.requests.length === 4, { what: 'a held heartbeat again' });
    expect(coordinator.requests.map((r) => r.waitMs)).toEqual([
      undefined,
      20_000,
      undefined,
      20_000,
    ]);
  });

  it('close() cancels the held heartbeat and leaves at once', async () => {
    fresh();
    const coordinator = new HoldingCoordinator(owns({ assignedShards: [0] }));
    const c = consumer(coordinator, recorder().handler);
    await c.start();
    await waitFor(() => coordinator.requests.length === 2, { what: 'a heartbeat held' });
    consumers.splice(consumers.indexOf(c), 1);
    await c.close();
    expect(coordinator.requests.at(-1)?.body).toMatchObject({ memberEpoch: -1 });
  });

  it('a revoke is not held: draining, the consumer heartbeats at the advised interval', async () => {
    fresh();
    const coordinator = new HoldingCoordinator(owns({ assignedShards: [0, 1] }));
    const c = consumer(coordinator, recorder().handler);
    await c.start();
    await waitFor(() => coordinator.requests.length === 2, { what: 'a heartbeat held' });
    coordinator.script = owns({ assignedShards: [0], revokeShards: [1] }, 'REVOKE_PENDING');
    const before = coordinator.requests.length;
    coordinator.answerHeld();
    await waitFor(() => coordinator.requests.length >= before + 3, { what: 'heartbeats' });
    expect(coordinator.requests.slice(before).every((r) => r.waitMs === undefined)).toBe(true);
  });

  it('holdHeartbeats: false never asks for a wait', async () => {
    fresh();
    const coordinator = new HoldingCoordinator(owns({ assignedShards: [0] }));
    const c = consumer(coordinator, recorder().handler, { holdHeartbeats: false });
    await c.start();
    await waitFor(() => coordinator.requests.length >= 5, { what: 'heartbeats' });
    expect(coordinator.requests.every((r) => r.waitMs === undefined)).toBe(true);
  });
});

describe('the assigned event', () => {
  it('gives the newly granted shards and every shard read now', async () => {
    fresh();
    const coordinator = new ScriptedCoordinator(owns({ assignedShards: [0] }));
    const c = consumer(coordinator, recorder().handler);
    const events: [number[], number[]][] = [];
    c.on('assigned', (granted, current) => events.push([granted, current]));
    await c.start();
    await waitFor(() => events.length === 1, { what: 'the first grant' });
    coordinator.script = owns({ assignedShards: [0, 2] });
    await waitFor(() => events.length === 2, { what: 'the second grant' });
    expect(events).toEqual([
      [[0], [0]],
      [[2], [0, 2]],
    ]);
  });
});

describe('where a consumer starts a shard whose Redis consumer group it creates', () => {
  /** Replies granting `shards` with the start fields of a newer coordinator. */
  const withStart = (
    shards: number[],
    start: Pick<HeartbeatReply, 'startAt' | 'createdAt' | 'startFromMs'>,
  ): Script => {
    const base = owns({ assignedShards: shards });
    return (request) => ({ ...(base(request) as HeartbeatReply), ...start });
  };
  const groupsOf = async (shard: number) =>
    ((await redis.xinfo('GROUPS', `${prefix}:${shard}`)) as unknown[]).length;

  it('latest skips what was written before the group was created on every shard (one a scale-out added too) and reads an empty stream from its start; earliest reads everything', async () => {
    fresh();
    await produce(0, 3, 'before');
    await produce(4, 2, 'early'); // shard 4: added later by a scale-out, with older entries
    // The streams Redis's clock when the group was created (this host's: the same clock).
    const [seconds, micros] = await redis.time();
    const startFromMs = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) + 1;
    const latest = new ScriptedCoordinator(
      withStart([0, 4, 5], { startAt: 'latest', startFromMs }),
    );
    const earliest = new ScriptedCoordinator(withStart([0], { startAt: 'earliest' }));
    const fromLatest = recorder();
    const fromEarliest = recorder();
    await consumer(latest, fromLatest.handler).start();
    await consumer(earliest, fromEarliest.handler, { consumerGroup: 'audit' }).start();
    await waitFor(async () => (await groupsOf(0)) === 2, { what: 'both consumer groups created' });
    await waitFor(async () => (await groupsOf(5)) === 1, { what: 'the empty shard group' });
    await produce(0, 2, 'after');
    await produce(4, 1, 'late');
    await produce(5, 1, 'new');
    await waitFor(() => fromLatest.seen.length === 4, { what: 'the new entries read (latest)' });
    await waitFor(() => fromEarliest.seen.length === 5, { what: 'every entry read (earliest)' });
    // A shard's entries come in order: had the old ones been delivered, they would come first.
    const keys = (shard: number) =>
      fromLatest.seen.filter((m) => m.shard === shard).map((m) => m.key);
    expect(keys(0)).toEqual(['after-0', 'after-1']);
    expect(keys(4)).toEqual(['late-0']);
    expect(keys(5)).toEqual(['new-0']);
    expect(fromEarliest.seen.map((m) => m.key)).toEqual([
      'before-0',
      'before-1',
      'before-2',
      'after-0',
      'after-1',
    ]);
  });

  it('latest with createdAt: what was written since the group was created is read, not what came before; an existing group keeps its position', async () => {
    fresh();
    await produce(2, 2, 'kept');
    await redis.xgroup('CREATE', `${prefix}:2`, 'billing', '0');
    const createdAt = Date.now() - 5_000;
    // Entries from well before the group existed (explicit ids), then entries written after
    // it was created but before any member got to the shard.
    for (let i = 0; i < 2; i++) {
      await redis.xadd(`${prefix}:1`, `${createdAt - 60_000}-${i}`, 'key', `old-${i}`);
    }
    await produce(1, 2, 'meanwhile');
    const coordinator = new ScriptedCoordinator(
      withStart([1, 2], { startAt: 'latest', createdAt }),
    );
    const rec = recorder();
    await consumer(coordinator, rec.handler).start();
    await waitFor(() => rec.seen.length === 4, { what: 'what was written since' });
    await waitFor(async () => (await pendingCount(1)) === 0, { what: 'acks' });
    const keys = (shard: number) => rec.seen.filter((m) => m.shard === shard).map((m) => m.key);
    expect(keys(1)).toEqual(['meanwhile-0', 'meanwhile-1']);
    expect(keys(2)).toEqual(['kept-0', 'kept-1']);
  });
});

describe('routine answers are not errors', () => {
  it('503 GROUP_MOVED, OWNER_MOVING and OWNER_UNAVAILABLE are retried without an error event', async () => {
    fresh();
    const coordinator = new ScriptedCoordinator(owns({ assignedShards: [0] }));
    const c = consumer(coordinator, recorder().handler);
    const errors: unknown[] = [];
    c.on('error', (error) => errors.push(error));
    await c.start();
    const moves = ['GROUP_MOVED', 'OWNER_MOVING', 'OWNER_UNAVAILABLE', 'GROUP_MOVED'];
    const steady = owns({ assignedShards: [0] });
    let answered = 0;
    coordinator.script = (request) => {
      const code = moves.shift();
      if (code) return new UnavailableError(503, code, 'moving', 'r', { owner: null }, 20);
      answered++;
      return steady(request);
    };
    await waitFor(() => answered >= 2, { what: 'answers after the moves' });
    expect(moves).toEqual([]);
    expect(errors).toEqual([]);
    expect(c.shards()).toEqual([0]);
    expect(coordinator.last()).toMatchObject({ memberEpoch: 1, currentAssignments: [0] });
  });

  it('a leave answered GROUP_MOVED during close() is sent again, quietly, within the close bound', async () => {
    fresh();
    const coordinator = new ScriptedCoordinator(owns({ assignedShards: [0] }));
    const c = consumer(coordinator, recorder().handler);
    const errors: unknown[] = [];
    c.on('error', (error) => errors.push(error));
    await c.start();
    const steady = owns({ assignedShards: [0] });
    let moved = 0;
    coordinator.script = (request) => {
      if (request.memberEpoch === -1 && moved++ === 0) {
        return new UnavailableError(503, 'GROUP_MOVED', 'moving', 'r', { owner: null }, 20);
      }
      return steady(request);
    };
    await c.close();
    const leaves = coordinator.requests.filter((r) => r.body.memberEpoch === -1);
    expect(leaves).toHaveLength(2);
    expect(errors).toEqual([]);
  });

  it('a coordinator out of reach is reported once per episode, not once per retry', async () => {
    fresh();
    const coordinator = new ScriptedCoordinator(owns({ assignedShards: [0] }));
    const c = consumer(coordinator, recorder().handler);
    const errors: unknown[] = [];
    c.on('error', (error) => errors.push(error));
    await c.start();
    const steady = owns({ assignedShards: [0] });
    const outage = (failures: number): Script => {
      let left = failures;
      return (request) =>
        left-- > 0
          ? new CoordinatorUnreachableError('http://coord/hb', 'ECONNREFUSED')
          : steady(request);
    };
    let since = coordinator.requests.length;
    coordinator.script = outage(5);
    await waitFor(() => coordinator.requests.length >= since + 7, { what: 'first outage over' });
    expect(errors).toHaveLength(1);
    since = coordinator.requests.length;
    coordinator.script = outage(4);
    await waitFor(() => coordinator.requests.length >= since + 6, { what: 'second outage over' });
    expect(errors).toHaveLength(2);
    expect(errors.every((e) => e instanceof CoordinatorUnreachableError)).toBe(true);
  });
});

describe('a consumer that cannot read its streams', () => {
  it('leaves the group within streamsUnreachableMs and reports it once', async () => {
    fresh();
    const coordinator = new ScriptedCoordinator(owns({ assignedShards: [0, 1] }));
    const c = consumer(coordinator, recorder().handler, {
      redis: `redis://127.0.0.1:${await freePort()}`,
      streamsUnreachableMs: 400,
    });
    const unreachable: StreamsUnreachableEvent[] = [];
    const errors: unknown[] = [];
    c.on('streamsUnreachable', (event) => unreachable.push(event));
    c.on('error', (error) => errors.push(error));
    await c.start();
    const grantedAt = Date.now();
    await waitFor(() => unreachable.length === 1, { what: 'the shards given back' });
    expect(Date.now() - grantedAt).toBeGreaterThanOrEqual(380);
    expect(unreachable[0]!.shards).toEqual([0, 1]);
    expect(unreachable[0]!.cause).toContain('ECONNREFUSED');
    expect(unreachable[0]!.cause).not.toContain('\n');
    await waitFor(() => coordinator.last().memberEpoch === -1, { what: 'the leave heartbeat' });
    expect(Date.now() - grantedAt).toBeLessThan(2_000);
    expect(coordinator.last().currentAssignments).toEqual([]);
    expect(c.shards()).toEqual([]);
    // Reconnects kept failing all along (a connection for commands, one per shard for reads):
    // one error event for all of them.
    expect(errors).toHaveLength(1);
    expect(String((errors[0] as Error).message)).toContain('ECONNREFUSED');
  });
});

describe('close() ends within closeTimeoutMs', () => {
  it('with a coordinator that does not answer: gives the leave up and disconnects', async () => {
    fresh();
    const coordinator = new ScriptedCoordinator(owns({ assignedShards: [0] }));
    const c = consumer(coordinator, recorder().handler, { closeTimeoutMs: 600 });
    await c.start();
    await waitFor(() => c.shards().length === 1, { what: 'reading' });
    const readers = async () =>
      String(await redis.client('LIST'))
        .split('\n')
        .filter((line) => line.includes('cmd=xreadgroup')).length;
    await waitFor(async () => (await readers()) === 1, { what: 'the blocking read' });
    const sent = coordinator.requests.length;
    coordinator.silent = true;
    await waitFor(() => coordinator.requests.length > sent, { what: 'a heartbeat left hanging' });
    consumers.splice(consumers.indexOf(c), 1);
    const took = await timed(c.close(), 3_000, 'close()');
    expect(took).toBeLessThan(600 + 300);
    expect(coordinator.last().memberEpoch).toBe(-1); // the leave was tried
    // The connections the consumer owns are gone: only the test's own client is left.
    await waitFor(
      async () =>
        String(await redis.client('LIST'))
          .trim()
          .split('\n').length === 1,
      {
        what: 'the consumer disconnected',
      },
    );
  });

  it('with the streams Redis unreachable: gives the drain up and still leaves', async () => {
    fresh();
    const coordinator = new ScriptedCoordinator(owns({ assignedShards: [0, 1] }));
    const c = consumer(coordinator, recorder().handler, {
      redis: `redis://127.0.0.1:${await freePort()}`,
      closeTimeoutMs: 800,
      streamsUnreachableMs: 60_000,
    });
    c.on('error', () => undefined);
    await c.start();
    await waitFor(() => coordinator.requests.length >= 3, { what: 'heartbeats with shards' });
    expect(c.shards()).toEqual([0, 1]);
    consumers.splice(consumers.indexOf(c), 1);
    const took = await timed(c.close(), 3_000, 'close()');
    expect(took).toBeLessThan(800 + 300);
    expect(coordinator.last()).toMatchObject({ memberEpoch: -1, currentAssignments: [] });
  });
});
