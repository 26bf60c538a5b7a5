import { describe, expect, it } from 'vitest';
import { LivenessTable } from '../../src/machines/liveness.js';
import type { MemberLiveness } from '../../src/machines/types.js';

const T0 = Date.UTC(2026, 0, 1);
const beat = (table: LivenessTable, at: number, assignments: readonly number[] = [1]) =>
  table.refresh('m-1', at, at + 45_000, null, 3, 4, assignments, []);

describe('liveness table: refreshed in place, undone with a journal', () => {
  it('a heartbeat outside a journal writes into the record the member has', () => {
    const table = new LivenessTable();
    beat(table, T0);
    const record = table.get('m-1');
    beat(table, T0 + 1_000, [1, 2]);
    expect(table.get('m-1')).toBe(record);
    expect(record).toMatchObject({
      lastHeartbeatAt: T0 + 1_000,
      sessionExpiresAt: T0 + 46_000,
      currentAssignments: [1, 2],
    });
  });

  it('toRecord is a copy as of now: later heartbeats do not change it', () => {
    const table = new LivenessTable();
    beat(table, T0);
    const before = table.toRecord();
    beat(table, T0 + 1_000);
    expect(before['m-1']?.lastHeartbeatAt).toBe(T0);
    expect(table.toRecord()['m-1']?.lastHeartbeatAt).toBe(T0 + 1_000);
  });

  it('inside a journal a heartbeat replaces the record, and undo brings the old one back', () => {
    const table = new LivenessTable();
    beat(table, T0);
    const record = table.get('m-1') as MemberLiveness;
    const mark = table.begin();
    beat(table, T0 + 1_000);
    table.refresh('m-2', T0, T0 + 1, null, 0, 0, [], []);
    expect(table.get('m-1')).not.toBe(record);
    table.undo(mark);
    table.end();
    expect(table.get('m-1')).toBe(record);
    expect(record.lastHeartbeatAt).toBe(T0);
    expect(table.get('m-2')).toBeUndefined();
    // Closed again: in place once more.
    beat(table, T0 + 2_000);
    expect(table.get('m-1')).toBe(record);
  });
});
