import { describe, expect, it } from 'vitest';
import {
  groupStart,
  heartbeatRequest,
  JOINING,
  planReply,
  versionsAfter,
  type ShardPhase,
} from '../../src/client/member-state.js';
import { backoffDelay, retryPolicy, withRetry } from '../../src/client/retry.js';
import { parseRetryAfter } from '../../src/client/errors.js';
import type { HeartbeatReply } from '../../src/machines/protocol.js';

function reply(overrides: Partial<HeartbeatReply> = {}): HeartbeatReply {
  return {
    outcome: 'OK',
    memberId: 'm1',
    memberEpoch: 3,
    assignmentEpoch: 2,
    metadataVersion: 5,
    lifecycleId: 'life-1',
    shardCount: 8,
    assignedShards: [],
    revokeShards: [],
    retireShards: [],
    pendingShards: [],
    heartbeatIntervalMs: 1000,
    ...overrides,
  };
}

const local = (entries: [number, ShardPhase][]) => new Map(entries);

describe('the consumer starts reading a shard only after a reply grants it', () => {
  it('starts the assigned shards it is not reading, and nothing it is only waiting for', () => {
    const plan = planReply(
      local([[1, 'running']]),
      reply({ assignedShards: [1, 2], pendingShards: [3] }),
    );
    expect(plan.start).toEqual([2]);
    expect(plan.drain).toEqual([]);
    expect(plan.drop).toEqual([]);
  });

  it('starts again a shard it drained when the reply grants it back', () => {
    expect(planReply(local([[4, 'drained']]), reply({ assignedShards: [4] })).start).toEqual([4]);
  });
});

describe('the consumer stops reading a revoked shard before reporting DONE', () => {
  it('drains a revoked shard it is running', () => {
    const plan = planReply(local([[1, 'running']]), reply({ revokeShards: [1] }));
    expect(plan.drain).toEqual([1]);
    expect(plan.start).toEqual([]);
  });

  it('reports a draining shard as listed and DRAINING, a drained one as DONE and unlisted', () => {
    const body = heartbeatRequest(
      { ...JOINING, memberEpoch: 3 },
      local([
        [1, 'draining'],
        [2, 'drained'],
        [3, 'running'],
      ]),
      {},
    );
    expect(body.currentAssignments).toEqual([1, 3]);
    expect(body.revokeProgress).toEqual([
      { shard: 1, state: 'DRAINING' },
      { shard: 2, state: 'DONE' },
    ]);
  });

  it('keeps reporting DONE while the coordinator still lists the shard as revoking', () => {
    const plan = planReply(local([[2, 'drained']]), reply({ revokeShards: [2] }));
    expect(plan).toEqual({ start: [], drain: [], retire: [], drop: [] });
  });

  it('forgets a drained shard once the coordinator stops listing it', () => {
    expect(planReply(local([[2, 'drained']]), reply()).drop).toEqual([2]);
  });
});

describe('ownership is never wider than the coordinator says', () => {
  it('drops at once a running shard no list of the reply names', () => {
    const plan = planReply(
      local([
        [1, 'running'],
        [2, 'running'],
      ]),
      reply({ assignedShards: [2] }),
    );
    expect(plan.drop).toEqual([1]);
  });

  it('a fenced reply resets the member to a join', () => {
    expect(versionsAfter(reply({ outcome: 'FENCED_MEMBER_EPOCH' }))).toEqual(JOINING);
  });

  it('a join reports no versions and no lifecycle', () => {
    const body = heartbeatRequest(JOINING, new Map(), { sessionTimeoutMs: 1000 });
    expect(body).toMatchObject({ memberEpoch: 0, assignmentEpoch: 0, metadataVersion: 0 });
    expect(body).not.toHaveProperty('lifecycleId');
    expect(body.sessionTimeoutMs).toBe(1000);
  });

  it('a member reports the versions and lifecycle of its last reply', () => {
    const versions = versionsAfter(reply());
    expect(heartbeatRequest(versions, new Map(), {})).toMatchObject({
      memberEpoch: 3,
      assignmentEpoch: 2,
      metadataVersion: 5,
      lifecycleId: 'life-1',
    });
  });
});

describe('the consumer consumes retiring shards to the end', () => {
  it('retires a running shard in place and starts one it inherited', () => {
    const plan = planReply(local([[9, 'running']]), reply({ retireShards: [9, 10] }));
    expect(plan.retire).toEqual([9, 10]);
    expect(plan.drop).toEqual([]);
  });

  it('lists a retiring shard until it is read to the end, then reports it DONE', () => {
    const reading = heartbeatRequest(JOINING, local([[9, 'retiring']]), {});
    expect(reading.currentAssignments).toEqual([9]);
    const finished = heartbeatRequest(JOINING, local([[9, 'retired']]), {});
    expect(finished.currentAssignments).toEqual([]);
    expect(finished.revokeProgress).toEqual([{ shard: 9, state: 'DONE' }]);
    expect(planReply(local([[9, 'retired']]), reply({ retireShards: [9] })).retire).toEqual([]);
  });
});

describe('retry with backoff and jitter', () => {
  it('draws each delay below an exponential ceiling capped at maxDelayMs', () => {
    const policy = { baseDelayMs: 100, maxDelayMs: 1000 };
    expect(backoffDelay(0, policy, null, () => 0.999)).toBe(99);
    expect(backoffDelay(3, policy, null, () => 0.999)).toBe(799);
    expect(backoffDelay(10, policy, null, () => 0.999)).toBe(999);
    expect(backoffDelay(10, policy, null, () => 0)).toBe(0);
  });

  it('never retries sooner than Retry-After', () => {
    expect(backoffDelay(0, { baseDelayMs: 100, maxDelayMs: 1000 }, 2000, () => 0.5)).toBe(2000);
    expect(parseRetryAfter('2')).toBe(2000);
    expect(parseRetryAfter(null)).toBeNull();
  });

  it('retries what the classifier allows, up to maxAttempts, and rethrows the last error', async () => {
    let calls = 0;
    const waits: number[] = [];
    const failing = withRetry(
      () => Promise.reject(new Error(`fail ${++calls}`)),
      () => ({ retry: true, retryAfterMs: 5 }),
      retryPolicy({ maxAttempts: 3 }),
      async (ms) => void waits.push(ms),
    );
    await expect(failing).rejects.toThrow('fail 3');
    expect(waits).toHaveLength(2);
    expect(waits.every((ms) => ms >= 5)).toBe(true);
    calls = 0;
    await expect(
      withRetry(
        () => Promise.reject(new Error(`final ${++calls}`)),
        () => ({ retry: false }),
        retryPolicy(),
      ),
    ).rejects.toThrow('final 1');
  });
});

describe('where a Redis consumer group the consumer creates starts', () => {
  const latest = { startAt: 'latest' } as const;

  it('latest starts at startFromMs (the streams Redis clock) on every shard, also one a scale-out added', () => {
    const reply = { ...latest, startFromMs: 40_000, createdAt: 50_000 };
    expect(groupStart(0, reply)).toEqual({ at: 'since', ms: 40_000 });
    expect(groupStart(9, reply)).toEqual({ at: 'since', ms: 40_000 });
  });

  it('without startFromMs, at createdAt less the clock margin; without either, at the end', () => {
    expect(groupStart(3, { ...latest, createdAt: 50_000 })).toEqual({ at: 'since', ms: 45_000 });
    expect(groupStart(3, latest)).toEqual({ at: 'end' });
  });

  it('earliest starts at the beginning; so does a reply without startAt (an older coordinator)', () => {
    expect(groupStart(3, { startAt: 'earliest', createdAt: 1, startFromMs: 1 })).toEqual({
      at: 'beginning',
    });
    expect(groupStart(0, {})).toEqual({ at: 'beginning' });
    expect(groupStart(0, { createdAt: 50_000 })).toEqual({ at: 'beginning' });
  });
});
