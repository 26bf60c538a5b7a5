import { describe, expect, it } from 'vitest';
import { LivenessTable, type KeptRefresh } from '../../src/machines/liveness.js';
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

  describe('repeat: a kept steady refresh written again in place', () => {
    const keptOf = (table: LivenessTable, revokeTimeoutMs: number | null = null): KeptRefresh => ({
      liveness: table,
      record: table.get('m-1') ?? null,
      version: table.version,
      sessionTimeoutMs: 45_000,
      revokeTimeoutMs,
      reportedMetadataVersion: 3,
      reportedAssignmentEpoch: 4,
      currentAssignments: [1],
      revokeProgress: [],
    });

    it('writes what refresh writes for the same heartbeat, in the same record', () => {
      const table = new LivenessTable();
      beat(table, T0);
      const kept = keptOf(table);
      const record = table.get('m-1');
      table.takeEarliestSet();
      expect(table.repeat(kept, T0 + 2_000)).toBe(true);
      expect(table.get('m-1')).toBe(record);
      const other = new LivenessTable();
      beat(other, T0);
      beat(other, T0 + 2_000);
      expect(table.get('m-1')).toEqual(other.get('m-1'));
      expect(table.takeEarliestSet()).toBe(T0 + 47_000);
    });

    it('keeps a revoke deadline once set, and clears it when nothing is left to revoke', () => {
      const table = new LivenessTable();
      beat(table, T0);
      expect(table.repeat(keptOf(table, 30_000), T0 + 1_000)).toBe(true);
      expect(table.get('m-1')?.revokeDeadline).toBe(T0 + 31_000);
      expect(table.repeat(keptOf(table, 30_000), T0 + 2_000)).toBe(true);
      expect(table.get('m-1')?.revokeDeadline).toBe(T0 + 31_000);
      expect(table.repeat(keptOf(table), T0 + 3_000)).toBe(true);
      expect(table.get('m-1')?.revokeDeadline).toBeNull();
    });

    it('refuses, writing nothing, once a record was put in, replaced, removed or undone', () => {
      const table = new LivenessTable();
      beat(table, T0);
      const changes: Array<(t: LivenessTable) => void> = [
        (t) => t.refresh('m-2', T0, T0 + 1, null, 0, 0, [], []),
        (t) => t.set('m-1', { ...(t.get('m-1') as MemberLiveness) }),
        (t) => t.delete('m-2'),
      ];
      for (const change of changes) {
        const kept = keptOf(table);
        change(table);
        const before = { ...table.get('m-1') };
        expect(table.repeat(kept, T0 + 9_000)).toBe(false);
        expect({ ...table.get('m-1') }).toEqual(before);
        // A heartbeat refreshed in place does not move the version.
        beat(table, T0 + 1_000);
        expect(table.repeat(keptOf(table), T0 + 2_000)).toBe(true);
      }
    });

    it('refuses a record kept inside a journal once its change is undone', () => {
      const table = new LivenessTable();
      beat(table, T0);
      const mark = table.begin();
      beat(table, T0 + 500);
      const kept = keptOf(table);
      table.undo(mark);
      table.end();
      const before = { ...table.get('m-1') };
      expect(table.repeat(kept, T0 + 9_000)).toBe(false);
      expect({ ...table.get('m-1') }).toEqual(before);
    });

    it("after another request of the member wrote in place, writes its own request's values", () => {
      const table = new LivenessTable();
      beat(table, T0);
      const kept = keptOf(table);
      const progress = [{ shard: 2, state: 'DRAINING' as const }];
      table.refresh('m-1', T0 + 500, T0 + 45_500, T0 + 9_000, 7, 8, [1, 2], progress);
      expect(table.repeat(kept, T0 + 1_000)).toBe(true);
      const other = new LivenessTable();
      beat(other, T0 + 1_000);
      // The revoke deadline carries on from the record (the kept request has nothing to revoke:
      // cleared), every other value is the kept request's.
      expect(table.get('m-1')).toEqual(other.get('m-1'));
    });

    it('refuses while a journal is open (a step that may be thrown away)', () => {
      const table = new LivenessTable();
      beat(table, T0);
      const kept = keptOf(table);
      table.begin();
      expect(table.repeat(kept, T0 + 1_000)).toBe(false);
      table.end();
      expect(table.repeat(kept, T0 + 1_000)).toBe(true);
    });

    it("never repeats a refresh that was not kept, nor another table's", () => {
      const table = new LivenessTable();
      beat(table, T0);
      expect(table.repeat({ ...keptOf(table), record: null }, T0 + 1_000)).toBe(false);
      const other = new LivenessTable();
      beat(other, T0);
      expect(table.repeat(keptOf(other), T0 + 1_000)).toBe(false);
      expect(other.get('m-1')?.lastHeartbeatAt).toBe(T0);
    });
  });
});
