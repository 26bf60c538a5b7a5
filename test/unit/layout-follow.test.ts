import { describe, expect, it } from 'vitest';
import { layoutStep } from '../../src/machines/layout-follow.js';
import type { GroupState, MigrationRecord } from '../../src/machines/types.js';
import { FIXTURE_TIME, makeGroupState, makeMigration } from '../support/fixtures.js';

const LAYOUT = { id: 'layout-1', version: 5, shardCount: 8 };
const NOW = FIXTURE_TIME;

function group(overrides: Partial<GroupState> = {}): GroupState {
  return makeGroupState({
    shardCount: 4,
    activeMigration: null,
    layout: { id: 'layout-1', version: 4 },
    ...overrides,
  });
}

function migration(overrides: Partial<MigrationRecord>): MigrationRecord {
  return makeMigration({ fromShardCount: 8, toShardCount: 4, ...overrides });
}

describe('a group follows the shard layout of its stream prefix', () => {
  it('does nothing when it follows the layout already', () => {
    expect(layoutStep(group({ layout: { id: 'layout-1', version: 5 } }), LAYOUT, NOW)).toEqual({
      kind: 'none',
    });
  });

  it('scales to the layout count when it has another', () => {
    expect(layoutStep(group(), LAYOUT, NOW)).toEqual({ kind: 'scale', shardCount: 8 });
  });

  it('adopts a layout of its own count without a migration (also a layout of another id)', () => {
    const same = group({ shardCount: 8, layout: { id: '', version: 0 } });
    expect(layoutStep(same, LAYOUT, NOW)).toEqual({ kind: 'adopt' });
  });

  it('rolls back its own migration when the prefix went back to where it came from', () => {
    const inProgress = migration({ state: 'IN_PROGRESS', rollbackAllowedUntil: null });
    expect(layoutStep(group({ activeMigration: inProgress }), LAYOUT, NOW)).toEqual({
      kind: 'rollback',
    });
    const converged = migration({ state: 'CONVERGED', rollbackAllowedUntil: NOW + 1 });
    expect(layoutStep(group({ activeMigration: converged }), LAYOUT, NOW)).toEqual({
      kind: 'rollback',
    });
  });

  it('scales instead once the rollback window of that migration has passed', () => {
    const late = migration({ state: 'CONVERGED', rollbackAllowedUntil: NOW - 1 });
    expect(layoutStep(group({ activeMigration: late }), LAYOUT, NOW)).toEqual({
      kind: 'scale',
      shardCount: 8,
    });
  });

  it('waits while a migration of its own to another count is in progress', () => {
    const elsewhere = migration({ state: 'IN_PROGRESS', fromShardCount: 2, toShardCount: 4 });
    expect(layoutStep(group({ activeMigration: elsewhere }), LAYOUT, NOW)).toEqual({
      kind: 'none',
    });
  });

  it('never acts for a failed-closed group', () => {
    const failed = group({ status: 'FAILED_CLOSED', failureReason: 'METADATA_LOST' });
    expect(layoutStep(failed, LAYOUT, NOW)).toEqual({ kind: 'none' });
  });
});
