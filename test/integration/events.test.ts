import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHANGE, startTestCoordinator, type TestCoordinator } from '../support/coordinator.js';
import { SimulatedMember } from '../support/members.js';
import { serverSentEvents, type ServerSentEvent } from '../support/server-sent-events.js';

describe('the group events stream (server-sent events)', () => {
  let c: TestCoordinator;
  beforeAll(async () => {
    c = await startTestCoordinator({
      store: 'memory',
      overrides: { 'membership.assignment-debounce': '0ms' },
    });
    await c.call('PUT', '/coord/v1/admin/streams/ev/groups/g', {
      user: 'writer',
      body: { shardCount: 2, ...CHANGE },
    });
  });
  afterAll(async () => c?.close());

  it('sends a snapshot, then each transition with its effects as it happens', async () => {
    const abort = new AbortController();
    const res = await fetch(`${c.url}/coord/v1/monitoring/streams/ev/groups/g/events`, {
      headers: { authorization: `Bearer ${c.token('reader')}` },
      signal: abort.signal,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const stream = serverSentEvents(res.body as ReadableStream<Uint8Array>);
    const events: Array<ServerSentEvent<Record<string, unknown>>> = [];
    const next = async (name: string) => {
      for (;;) {
        const found = events.findIndex((e) => e.event === name);
        if (found >= 0) return events.splice(found, 1)[0]!;
        const arrived = await stream.next();
        if (arrived.done) throw new Error('stream ended');
        events.push(arrived.value);
      }
    };
    const snapshot = await next('snapshot');
    expect(snapshot.data).toMatchObject({ streamPrefix: 'ev', state: { membership: 'empty' } });

    await new SimulatedMember(c, 'a', 'ev', 'g').beat();
    const transition = await next('transition');
    expect(transition.data).toMatchObject({
      stateChanged: true,
      event: 'HEARTBEAT',
      cause: { kind: 'member', memberId: 'a' },
    });
    expect(transition.data.effects).toContainEqual({ type: 'MEMBER_JOINED', memberId: 'a' });
    expect(transition.data.state).not.toMatchObject({ membership: 'empty' });
    abort.abort();
  });

  it('ends, saying why, when the group leaves the replica (here: deleted)', async () => {
    await c.call('PUT', '/coord/v1/admin/streams/ev-gone/groups/g', {
      user: 'writer',
      body: { shardCount: 1, ...CHANGE },
    });
    const res = await fetch(`${c.url}/coord/v1/monitoring/streams/ev-gone/groups/g/events`, {
      headers: { authorization: `Bearer ${c.token('reader')}` },
    });
    const stream = serverSentEvents(res.body as ReadableStream<Uint8Array>);
    const first = await stream.next();
    expect(first.done ? null : first.value.event).toBe('snapshot');
    const deleted = await c.call('DELETE', '/coord/v1/admin/streams/ev-gone/groups/g', {
      user: 'admin',
      body: CHANGE,
    });
    expect(deleted.status).toBeLessThan(300);
    // Not keep-alives for ever: an `end` event, then the end of the stream.
    const names: string[] = [];
    for (let next = await stream.next(); !next.done; next = await stream.next())
      names.push(next.value.event);
    expect(names.at(-1)).toBe('end');
  });

  it('needs READ', async () => {
    const res = await c.call('GET', '/coord/v1/monitoring/streams/ev/groups/g/events', {
      user: 'consumer',
    });
    expect(res.status).toBe(403);
  });
});

describe("the group's recent transitions (GET …/transitions)", () => {
  let c: TestCoordinator;
  const path = '/coord/v1/monitoring/streams/tr/groups/g/transitions';
  beforeAll(async () => {
    c = await startTestCoordinator({
      store: 'memory',
      overrides: { 'membership.assignment-debounce': '0ms' },
    });
    await c.call('PUT', '/coord/v1/admin/streams/tr/groups/g', {
      user: 'writer',
      body: { shardCount: 2, ...CHANGE },
    });
  });
  afterAll(async () => c?.close());

  interface Kept {
    seq: number;
    at: string;
    event: string;
    cause: Record<string, unknown>;
    changes: Array<{ region: string; from: string | null; to: string }>;
    effects: unknown[];
  }
  const kept = async () => {
    const res = await c.call('GET', path, { user: 'reader' });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    return (await res.json()) as { owner: string; capacity: number; transitions: Kept[] };
  };

  it('answers what the owner kept, newest first, with the command and its cause', async () => {
    await new SimulatedMember(c, 'a', 'tr', 'g').beat();
    await c.call('POST', '/coord/v1/admin/streams/tr/groups/g/scale', {
      user: 'writer',
      body: { shardCount: 4, requestedBy: 'ops-dan', reason: 'more' },
    });
    const body = await kept();
    expect(body).toMatchObject({ owner: c.services.replicaId, capacity: 50 });
    const [scale, ...older] = body.transitions;
    expect(scale).toMatchObject({
      event: 'SCALE',
      cause: { kind: 'admin', requestedBy: 'ops-dan' },
    });
    expect(scale?.changes).toContainEqual({ region: 'migration', from: 'idle', to: 'inProgress' });
    const join = older.find((t) => t.event === 'HEARTBEAT');
    expect(join?.cause).toEqual({ kind: 'member', memberId: 'a' });
    expect(join?.effects).toContainEqual({ type: 'MEMBER_JOINED', memberId: 'a' });
    expect(body.transitions.at(-1)).toMatchObject({ event: 'CREATE', from: null });
    const seqs = body.transitions.map((t) => t.seq);
    expect(seqs).toEqual([...seqs].sort((x, y) => y - x));
  });

  it('needs READ, and answers 404 for an unknown group', async () => {
    expect((await c.call('GET', path, { user: 'consumer' })).status).toBe(403);
    expect((await c.call('GET', path)).status).toBe(401);
    const missing = await c.call('GET', '/coord/v1/monitoring/streams/tr/groups/nope/transitions', {
      user: 'reader',
    });
    expect(missing.status).toBe(404);
  });
});
