import { describe, expect, it } from 'vitest';
import { AuditLog, isDenied } from '../../src/http/audit.js';
import { ManualClock } from '../../src/machines/clock.js';
import type { AuditRecord, Store } from '../../src/store/store.js';

function record(status: number, principal: string | null, requestId: string): AuditRecord {
  return {
    timestamp: '2026-01-01T00:00:00.000Z',
    method: 'POST',
    path: '/coord/v1/admin/groups',
    operation: 'createGroup',
    outcome: status < 400 ? 'SUCCEEDED' : 'DENIED',
    status,
    principal,
    roles: [],
    requestId,
    bodySha256: null,
    clientAddress: '127.0.0.1',
    durationMs: 0,
    streamPrefix: null,
    consumerGroup: null,
    requestedBy: null,
    reason: null,
  };
}

/** An AuditLog over a store that keeps what it is given, failing while `failing` is set. */
function auditLog(perMinute: number) {
  const clock = new ManualClock();
  const written: AuditRecord[] = [];
  const state = { failing: false };
  const store = {
    appendAudit(r: AuditRecord) {
      if (state.failing) return Promise.reject(new Error('store down'));
      written.push(r);
      return Promise.resolve();
    },
  } as unknown as Store;
  return { log: new AuditLog(store, clock, perMinute), clock, written, state };
}

describe('records of denied admin requests are written within a budget', () => {
  it('tells denied records from the others', () => {
    expect(isDenied(record(401, null, 'a'))).toBe(true);
    expect(isDenied(record(403, 'reader', 'a'))).toBe(true);
    expect(isDenied(record(404, null, 'a'))).toBe(true);
    expect(isDenied(record(503, null, 'a'))).toBe(true);
    expect(isDenied(record(400, 'writer', 'a'))).toBe(false);
    expect(isDenied(record(201, 'writer', 'a'))).toBe(false);
    // A change is never dropped, whoever made it (none is made without a token).
    expect(isDenied(record(200, null, 'a'))).toBe(false);
  });

  it('writes perMinute a minute, drops the rest, and the next record says how many', async () => {
    const { log, clock, written } = auditLog(2);
    const results = [];
    for (let i = 0; i < 5; i++) results.push(await log.write(record(401, null, `d${i}`)));
    expect(results).toEqual([true, true, false, false, false]);
    // Written whatever the budget, carrying the count.
    expect(await log.write(record(201, 'writer', 'change'))).toBe(true);
    expect(await log.write(record(400, 'writer', 'named'))).toBe(true);
    expect(written.map((r) => [r.requestId, r.deniedDropped])).toEqual([
      ['d0', undefined],
      ['d1', undefined],
      ['change', 3],
      ['named', undefined],
    ]);
    clock.advance(59_999);
    expect(await log.write(record(403, 'reader', 'late'))).toBe(false);
    clock.advance(1);
    expect(await log.write(record(403, 'reader', 'next-minute'))).toBe(true);
    expect(written.at(-1)).toMatchObject({ requestId: 'next-minute', deniedDropped: 1 });
  });

  it('keeps the count when the record that carries it cannot be written', async () => {
    const { log, written, state } = auditLog(1);
    await log.write(record(401, null, 'd0'));
    await log.write(record(401, null, 'd1'));
    state.failing = true;
    await expect(log.write(record(201, 'writer', 'lost'))).rejects.toThrow('store down');
    state.failing = false;
    await log.write(record(201, 'writer', 'change'));
    expect(written.at(-1)).toMatchObject({ requestId: 'change', deniedDropped: 1 });
  });

  it('starts a new minute when the clock is set back', async () => {
    const { log, clock } = auditLog(1);
    expect(await log.write(record(401, null, 'd0'))).toBe(true);
    clock.set(clock.now() - 3_600_000);
    expect(await log.write(record(401, null, 'd1'))).toBe(true);
  });

  it('writes none with a budget of 0, and counts them all', async () => {
    const { log, written } = auditLog(0);
    expect(await log.write(record(401, null, 'd0'))).toBe(false);
    await log.write(record(201, 'writer', 'change'));
    expect(written).toMatchObject([{ requestId: 'change', deniedDropped: 1 }]);
  });
});
