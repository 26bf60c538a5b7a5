import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHANGE, useCoordinator, type TestCoordinator } from '../support/coordinator.js';
import type { RedisServerHandle } from '../support/redis-server.js';

/*
 * docs/operations.md#the-audit-log: refusals of callers without a valid token, and every 401 and
 * 403, are audited at most `coordinator.audit.denied-per-minute` times a minute per replica,
 * with a bounded path; the rest are counted and summed in the next record written. Accepted
 * changes are always audited.
 */

const PER_MINUTE = 3;
const LONG = 'x'.repeat(12_000);

interface Record_ {
  requestId: string;
  path: string;
  pathLength?: number;
  status: number;
  outcome: string;
  deniedDropped?: number;
}

describe('an unauthenticated flood of admin requests', () => {
  let c: TestCoordinator;
  let redis: RedisServerHandle;
  let client: Redis;
  useCoordinator(
    { store: 'redis', overrides: { 'audit.denied-per-minute': PER_MINUTE } },
    (coordinator, server) => {
      c = coordinator;
      redis = server!;
    },
  );
  beforeAll(() => {
    client = new Redis(redis.url);
  });
  afterAll(() => client.disconnect());

  const auditLength = () => client.xlen(`${c.keyPrefix}:audit`);
  async function records(): Promise<Record_[]> {
    const res = await c.call('GET', '/coord/v1/monitoring/audit?limit=1000', { user: 'reader' });
    return ((await res.json()) as { records: Record_[] }).records;
  }
  async function dropped(): Promise<number> {
    const text = await (await fetch(`${c.url}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith('coord_audit_denied_dropped_total '));
    return Number(line?.split(' ')[1] ?? NaN);
  }

  it('writes a bounded number of short records, counts the rest, and still audits every change', async () => {
    const before = await auditLength();
    const sent = 10;
    for (let i = 0; i < sent; i++) {
      // No token: a 401 on a real route, a 404 on a path no route matches.
      const path =
        i % 2 === 0
          ? `/coord/v1/admin/streams/s/groups/g/freeze?pad=${LONG}`
          : `/coord/v1/admin/nothing/${LONG}`;
      const res = await c.call('POST', path, {
        body: CHANGE,
        headers: { 'x-request-id': `flood-${i}` },
      });
      expect(res.status).toBe(i % 2 === 0 ? 401 : 404);
    }
    expect(await auditLength()).toBe(before + PER_MINUTE);
    expect(await dropped()).toBe(sent - PER_MINUTE);

    const flood = (await records()).filter((r) => r.requestId.startsWith('flood-'));
    expect(flood).toHaveLength(PER_MINUTE);
    for (const record of flood) {
      expect(record.path.length).toBeLessThanOrEqual(1024);
      expect(record.pathLength).toBeGreaterThan(12_000);
    }

    // A change made now is audited, and its record says how many were left out before it.
    const res = await c.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: 'flooded', consumerGroup: 'g', shardCount: 1, ...CHANGE },
      headers: { 'x-request-id': 'the-change' },
    });
    expect(res.status).toBe(201);
    const change = (await records()).find((r) => r.requestId === 'the-change');
    expect(change).toMatchObject({
      status: 201,
      outcome: 'SUCCEEDED',
      path: '/coord/v1/admin/groups',
      deniedDropped: sent - PER_MINUTE,
    });
    expect(change?.pathLength).toBeUndefined();

    // Refusals of a caller whose token is valid name who asked: never left out.
    for (let i = 0; i < PER_MINUTE + 2; i++) {
      const refused = await c.call('POST', '/coord/v1/admin/groups', {
        user: 'writer',
        body: { streamPrefix: 'flooded', consumerGroup: 'g', shardCount: 0, ...CHANGE },
        headers: { 'x-request-id': `named-${i}` },
      });
      expect(refused.status).toBe(400);
    }
    const named = (await records()).filter((r) => r.requestId.startsWith('named-'));
    expect(named).toHaveLength(PER_MINUTE + 2);
    expect(named.every((r) => r.deniedDropped === undefined)).toBe(true);
  });
});
