import { describe, expect, it } from 'vitest';
import { parseDesiredState } from '../../src/cli/gitops/desired-state.js';
import { planChanges, renderPlan, type CurrentGroup } from '../../src/cli/gitops/plan.js';

const FILE = `requestedBy: platform-gitops
reason: "quarterly capacity review"
groups:
  - streamPrefix: orders
    consumerGroup: billing
    shardCount: 16
  - streamPrefix: payments
    consumerGroup: audit
    shardCount: 4
  - streamPrefix: new
    consumerGroup: g
    shardCount: 2
`;
const current: CurrentGroup[] = [
  { streamPrefix: 'orders', consumerGroup: 'billing', shardCount: 16, status: 'ACTIVE' },
  { streamPrefix: 'payments', consumerGroup: 'audit', shardCount: 8, status: 'FROZEN' },
  { streamPrefix: 'legacy', consumerGroup: 'g', shardCount: 3, status: 'ACTIVE' },
];

describe('the desired-state file', () => {
  it('reads the YAML of the documented example', () => {
    expect(parseDesiredState(FILE, 'desired.yaml')).toMatchObject({
      requestedBy: 'platform-gitops',
      reason: 'quarterly capacity review',
      groups: [{ streamPrefix: 'orders', consumerGroup: 'billing', shardCount: 16 }, {}, {}],
    });
  });
  it('names every problem with its path: missing fields, bad names, unknown keys', () => {
    const bad = `requestedBy: x
groups:
  - {streamPrefix: orders, consumerGroup: g, shardCount: 0}
  - {streamPrefix: "-x", consumerGroup: g, shardCount: 1, extra: 1}
`;
    expect(() => parseDesiredState(bad, 'd.yaml')).toThrow(
      /d\.yaml is not a valid desired-state file:[\s\S]*reason: [\s\S]*groups\.0\.shardCount: [\s\S]*groups\.1\.streamPrefix: must match[\s\S]*groups\.1: .*extra/,
    );
  });
  it('a group listed twice is refused', () => {
    const twice = `requestedBy: x
reason: y
groups:
  - {streamPrefix: orders, consumerGroup: g, shardCount: 2}
  - {streamPrefix: orders, consumerGroup: g, shardCount: 3}
`;
    expect(() => parseDesiredState(twice, 'd.yaml')).toThrow(/groups\.1: orders:g is listed twice/);
  });
  it('groups of one stream prefix with different shard counts are refused', () => {
    const split = `requestedBy: x
reason: y
groups:
  - {streamPrefix: orders, consumerGroup: billing, shardCount: 16}
  - {streamPrefix: orders, consumerGroup: emails, shardCount: 4}
`;
    expect(() => parseDesiredState(split, 'd.yaml')).toThrow(
      /groups\.1\.shardCount: 4 differs from orders:billing \(16\): every group on stream prefix orders has the same shard count/,
    );
  });
  it('a file without groups is refused: an empty list is written out (with --prune it deletes every group)', () => {
    const none = `requestedBy: x
reason: y
`;
    expect(() => parseDesiredState(none, 'd.yaml')).toThrow(/groups: /);
    const empty = `requestedBy: x
reason: y
groups: []
`;
    expect(parseDesiredState(empty, 'd.yaml').groups).toEqual([]);
  });
  it('says when the text is not YAML at all', () => {
    expect(() => parseDesiredState('groups: [', 'd.yaml')).toThrow(/d\.yaml is not valid YAML/);
  });
});

describe('plan: the difference between the file and the coordinator', () => {
  const desired = parseDesiredState(FILE, 'desired.yaml');

  it('scales what differs, then creates what is missing, leaves what matches', () => {
    const plan = planChanges(desired, current, { prune: false });
    expect(plan.changes.map((c) => [c.action, c.group.consumerGroup, c.group.shardCount])).toEqual([
      ['scale', 'audit', 4],
      ['create', 'g', 2],
    ]);
    expect(plan.unchanged.map((g) => g.consumerGroup)).toEqual(['billing']);
  });
  it('a group missing from the file is reported, never deleted unless prune', () => {
    const kept = planChanges(desired, current, { prune: false });
    expect(kept.unmanaged.map((g) => g.streamPrefix)).toEqual(['legacy']);
    expect(kept.changes.some((c) => c.action === 'delete')).toBe(false);
    const pruned = planChanges(desired, current, { prune: true });
    expect(pruned.unmanaged).toEqual([]);
    expect(pruned.changes.at(-1)).toMatchObject({
      action: 'delete',
      group: { streamPrefix: 'legacy' },
    });
  });
  it('nothing to do when the coordinator matches the file', () => {
    const same = planChanges(
      { ...desired, groups: desired.groups.slice(0, 1) },
      current.slice(0, 1),
      {
        prune: true,
      },
    );
    expect(same.changes).toEqual([]);
  });
  it('renders one line per change, the kept groups, a warning for a group that is not ACTIVE, and a summary', () => {
    const text = renderPlan(planChanges(desired, current, { prune: false }), 'desired.yaml');
    expect(text).toBe(
      [
        '~ scale  payments:audit from 8 to 4 shards (status FROZEN: the coordinator will refuse until it is ACTIVE)',
        '+ create new:g with 2 shards',
        '! keep   legacy:g (3 shards): not in desired.yaml; only --prune deletes it',
        'plan: 1 to create, 1 to scale, 0 to delete, 1 unchanged, 1 not in the file',
        '',
      ].join('\n'),
    );
  });
  it('warns when another group on the prefix a scale moves is not ACTIVE: the coordinator refuses the move', () => {
    const file = parseDesiredState(
      `requestedBy: x
reason: y
groups:
  - {streamPrefix: orders, consumerGroup: billing, shardCount: 8}
  - {streamPrefix: orders, consumerGroup: emails, shardCount: 8}
`,
      'd.yaml',
    );
    const now: CurrentGroup[] = [
      { streamPrefix: 'orders', consumerGroup: 'billing', shardCount: 4, status: 'ACTIVE' },
      { streamPrefix: 'orders', consumerGroup: 'emails', shardCount: 4, status: 'FAILED_CLOSED' },
    ];
    const lines = renderPlan(planChanges(file, now, { prune: false }), 'd.yaml').split('\n');
    expect(lines[0]).toBe(
      '~ scale  orders:billing from 4 to 8 shards (orders:emails on its stream prefix is FAILED_CLOSED: the coordinator will refuse until it is ACTIVE)',
    );
    expect(lines[1]).toBe(
      '~ scale  orders:emails from 4 to 8 shards (status FAILED_CLOSED: the coordinator will refuse until it is ACTIVE)',
    );
  });
});
