/**
 * The heartbeat fast path's intake (docs/architecture.md#fairness-between-groups), over real
 * HTTP on an in-process coordinator: while the replica's turn budget is spent, a heartbeat that
 * needs a decision waits for a later turn of the event loop, and a steady one is answered first;
 * a member's heartbeats still go in the order they came; one whose connection closed is not
 * decided; what waits rests between its turns once a steady heartbeat was answered at once, and
 * only then; and a shutdown answers what waited. The budget is held spent by replacing its
 * `spent()`, as while another group's batch of joins runs.
 */
import { connect, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { BUSY_SHARE, replicaTurnBudget } from '../../src/actors/turn-budget.js';
import type { Role } from '../../src/http/auth/roles.js';
import type { RunningCoordinator } from '../../src/server.js';
import {
  CHANGE,
  mintToken,
  startTestCoordinator,
  type TestCoordinator,
} from '../support/coordinator.js';
import { heartbeatOf, SimulatedMember } from '../support/members.js';

const token = (roles: Role[]) => mintToken('intake', roles);
// The test user the simulated members beat as: the same principal, so remembered answers hold.
const CONSUMER = mintToken('consumer', ['CONSUMER']);

/** An in-process coordinator, memory store, fast path as shipped, joins recomputed at once. */
const start = () =>
  startTestCoordinator({
    store: 'memory',
    overrides: { 'membership.assignment-debounce': '0ms' },
  });

async function createGroup(c: RunningCoordinator, group: string): Promise<string> {
  const res = await fetch(`${c.url}/coord/v1/admin/groups`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token(['WRITE'])}` },
    body: JSON.stringify({ streamPrefix: 'in', consumerGroup: group, shardCount: 2, ...CHANGE }),
  });
  expect(res.status).toBe(201);
  return `/coord/v1/consumer/streams/in/groups/${group}/heartbeat`;
}

interface Answer {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

/** The bytes of a heartbeat POST. */
function request(path: string, body: unknown): string {
  const json = JSON.stringify(body);
  return (
    `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${CONSUMER}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}`
  );
}

/**
 * Writes `requests` in one write on a new connection (pipelined: the server reads them in one
 * turn) and resolves with their answers, in order.
 */
function pipelined(c: RunningCoordinator, requests: readonly string[]): Promise<Answer[]> {
  return new Promise((resolve, reject) => {
    const socket: Socket = connect(c.port, '127.0.0.1', () => socket.write(requests.join('')));
    let buffer = Buffer.alloc(0);
    const answers: Answer[] = [];
    socket.on('error', reject);
    socket.on('close', () => reject(new Error(`closed after ${answers.length} answers`)));
    socket.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        const end = buffer.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buffer.subarray(0, end).toString();
        const length = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (buffer.length < end + 4 + length) return;
        const body = buffer.subarray(end + 4, end + 4 + length).toString();
        buffer = buffer.subarray(end + 4 + length);
        answers.push({
          status: Number(head.split(' ')[1]),
          body: JSON.parse(body) as Record<string, unknown>,
        });
        if (answers.length === requests.length) {
          socket.removeAllListeners('close');
          socket.destroy();
          resolve(answers);
        }
      }
    });
  });
}

const JOIN = { memberEpoch: 0, assignmentEpoch: 0, metadataVersion: 0, currentAssignments: [] };

/** `memberId` joined and beaten until its answer repeats: the body of its steady heartbeat. */
/** `memberId` of `group` beaten until its answer repeats: the body of its steady heartbeat. */
async function steadyMember(c: TestCoordinator, group: string, memberId: string) {
  const member = new SimulatedMember(c, memberId, 'in', group);
  for (let i = 0; i < 5; i++) await member.beat();
  return heartbeatOf(member);
}

/** The join bodies of members `<prefix>-0` .. `<prefix>-<n-1>`. */
const joins = (prefix: string, n: number) =>
  Array.from({ length: n }, (_, i) => ({ ...JOIN, memberId: `${prefix}-${i}` }));

async function deferredCount(c: RunningCoordinator): Promise<number> {
  const text = await (await fetch(`${c.url}/metrics`)).text();
  return Number(/^coord_heartbeats_deferred_total (\d+)$/m.exec(text)?.[1]);
}

async function restedSeconds(c: RunningCoordinator): Promise<number> {
  const text = await (await fetch(`${c.url}/metrics`)).text();
  return Number(/^coord_deferred_work_rest_seconds_total (\S+)$/m.exec(text)?.[1]);
}

const spendBudget = () => vi.spyOn(replicaTurnBudget, 'spent').mockReturnValue(true);

/**
 * Creates `group` with member `steadyId` steady in it, holds the budget spent, and sends four
 * joins, that member's steady heartbeat and four more joins in one write: their answers in
 * order, and the seconds rested before them.
 */
async function joinsAroundSteady(c: TestCoordinator, group: string, steadyId: string) {
  const path = await createGroup(c, group);
  const steady = await steadyMember(c, group, steadyId);
  const restedBefore = await restedSeconds(c);
  spendBudget();
  const answers = await pipelined(c, [
    ...joins('early', 4).map((body) => request(path, body)),
    request(path, steady),
    ...joins('late', 4).map((body) => request(path, body)),
  ]);
  return { answers, restedBefore };
}

describe('heartbeat intake', () => {
  let c: TestCoordinator;

  beforeAll(async () => {
    c = await start();
  });
  afterAll(async () => {
    await c?.close();
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });

  /** The order in which the coordinator was asked: steady answers again, and decisions. */
  function watchDecisions(): string[] {
    const order: string[] = [];
    const again = c.host.steadyAgain.bind(c.host);
    const ticket = c.host.steadyTicket.bind(c.host);
    vi.spyOn(c.host, 'steadyAgain').mockImplementation((t) => {
      order.push('steady again');
      return again(t);
    });
    vi.spyOn(c.host, 'steadyTicket').mockImplementation((ref, heartbeat) => {
      order.push(`decide ${heartbeat.memberId}`);
      return ticket(ref, heartbeat);
    });
    return order;
  }

  it('with the budget spent, a join read with a steady heartbeat is decided after it, in a later turn', async () => {
    const path = await createGroup(c, 'spent');
    const steady = await steadyMember(c, 'spent', 'steady-1');
    const before = await deferredCount(c);
    const order = watchDecisions();
    spendBudget();
    const [joined, repeated] = await pipelined(c, [
      request(path, { ...JOIN, memberId: 'joiner-1' }),
      request(path, steady),
    ]);
    // Read first, decided second; both answered, the join as any join is.
    expect(order).toEqual(['steady again', 'decide joiner-1']);
    expect(joined!.status).toBe(200);
    expect(joined!.body.memberEpoch).toBeGreaterThan(0);
    expect(repeated!.body).toMatchObject({ outcome: 'OK', memberId: 'steady-1' });
    expect((await deferredCount(c)) - before).toBe(1);
  });

  it('with budget left, a join is decided in the turn its body ends, before what is read after it', async () => {
    const path = await createGroup(c, 'left');
    const steady = await steadyMember(c, 'left', 'steady-2');
    const before = await deferredCount(c);
    const order = watchDecisions();
    const [joined] = await pipelined(c, [
      request(path, { ...JOIN, memberId: 'joiner-2' }),
      request(path, steady),
    ]);
    // (The steady one is then decided anew: the join moved the group's shards.)
    expect(order.slice(0, 2)).toEqual(['decide joiner-2', 'steady again']);
    expect(joined!.body.memberEpoch).toBeGreaterThan(0);
    expect(await deferredCount(c)).toBe(before);
  });

  it('a join whose connection closed while it waited in the intake is not decided', async () => {
    const path = await createGroup(c, 'ghost');
    spendBudget();
    // The connection drops in the very turn the join is put in the intake.
    const order = watchDecisions();
    let connection: Socket | null = null;
    c.server.once('request', (req: { socket: Socket }) => (connection = req.socket));
    vi.spyOn(c.services.metrics.deferredHeartbeats, 'inc').mockImplementation(() => {
      connection?.destroy();
    });
    await expect(pipelined(c, [request(path, { ...JOIN, memberId: 'ghost' })])).rejects.toThrow(
      'closed after 0 answers',
    );
    vi.restoreAllMocks();
    // A member that does join after it is decided; the ghost never was.
    await pipelined(c, [request(path, { ...JOIN, memberId: 'real' })]);
    expect(order).toEqual([]);
    const res = await fetch(`${c.url}/coord/v1/monitoring/streams/in/groups/ghost/members`, {
      headers: { authorization: `Bearer ${token(['READ'])}` },
    });
    const members = JSON.stringify(await res.json());
    expect(members).toContain('"real"');
    expect(members).not.toContain('"ghost"');
  });

  it("a member's steady heartbeat waits behind its own heartbeat in the intake: decided in the order they came", async () => {
    const path = await createGroup(c, 'order');
    const steady = await steadyMember(c, 'order', 'leaver');
    spendBudget();
    const [left, after] = await pipelined(c, [
      request(path, { ...steady, memberEpoch: -1 }),
      request(path, steady),
    ]);
    expect(left!.status).toBe(200);
    expect(left!.body.memberEpoch).toBe(-1);
    // Decided after the leave, as with budget left: the member is gone, not told it is fine.
    expect(after!.body.outcome).toBe('FENCED_MEMBER_EPOCH');
  });

  it('joins that wait rest between their turns once a steady heartbeat was answered at once', async () => {
    const { answers, restedBefore } = await joinsAroundSteady(c, 'rest', 'steady-3');
    expect(answers.map((a) => a.status)).toEqual(Array(9).fill(200));
    expect(answers[4]!.body).toMatchObject({ memberId: 'steady-3' });
    expect(answers.filter((a) => Number(a.body.memberEpoch) > 0)).toHaveLength(9);
    expect(await restedSeconds(c)).toBeGreaterThan(restedBefore);
  });

  it('joins alone do not rest: no steady heartbeat was answered', async () => {
    const path = await createGroup(c, 'alone');
    // No rest of the test before is still under way.
    await vi.waitFor(() => expect(replicaTurnBudget.spent()).toBe(false));
    const before = await restedSeconds(c);
    spendBudget();
    const answers = await pipelined(
      c,
      joins('alone', 8).map((body) => request(path, body)),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(8).fill(200));
    expect(await restedSeconds(c)).toBe(before);
  });
});

describe('heartbeat intake at shutdown', () => {
  it('a join waiting in the intake when the replica closes is decided and answered first', async () => {
    const c = await start();
    try {
      const path = await createGroup(c, 'closing');
      spendBudget();
      // The replica closes in the very turn the join is put in the intake.
      const closing: Array<Promise<void>> = [];
      vi.spyOn(c.services.metrics.deferredHeartbeats, 'inc').mockImplementation(() => {
        closing.push(c.close());
      });
      const [joined] = await pipelined(c, [request(path, { ...JOIN, memberId: 'last' })]);
      expect(joined!.status).toBe(200);
      expect(joined!.body.memberEpoch).toBeGreaterThan(0);
      expect(closing).toHaveLength(1);
      await Promise.all(closing);
    } finally {
      vi.restoreAllMocks();
      await c.close();
    }
  });
});

describe('coordinator.fairness.busy-share', () => {
  it('at 1, joins that wait never rest, even while steady heartbeats are answered at once', async () => {
    expect(replicaTurnBudget.busyShare).toBe(BUSY_SHARE);
    const c = await startTestCoordinator({
      store: 'memory',
      overrides: { 'membership.assignment-debounce': '0ms', 'fairness.busy-share': 1 },
    });
    try {
      expect(replicaTurnBudget.busyShare).toBe(1);
      const { answers, restedBefore } = await joinsAroundSteady(c, 'whole-loop', 'steady-1');
      expect(answers.filter((a) => Number(a.body.memberEpoch) > 0)).toHaveLength(9);
      expect(await restedSeconds(c)).toBe(restedBefore);
    } finally {
      vi.restoreAllMocks();
      await c.close();
    }
    // The process's budget is left as the coordinator found it.
    expect(replicaTurnBudget.busyShare).toBe(BUSY_SHARE);
  });
});
