import { describe, expect, it } from 'vitest';
import { setup } from 'xstate';
import { groupMachine } from '../../src/machines/group-machine.js';
import { machineDefinition } from '../../src/machines/machine-definition.js';
import { activeStateIds, toMermaid } from '../../src/diagrams/mermaid.js';

/** The text with each label on one line (labels are wrapped with `<br/>`). */
const flat = (text: string) => text.replace(/<br\/>/g, ' ');

/** Ids declared with `state "…" as id` and ids used by edges. */
function parse(text: string) {
  const declared = new Set(
    [...text.matchAll(/state "[^"]*" as ([A-Za-z0-9_]+)/g)].map((m) => m[1]),
  );
  const edges = [...text.matchAll(/^\s*(\S+) --> (\S+)(?: : (.*))?$/gm)].map((m) => ({
    from: m[1] ?? '',
    to: m[2] ?? '',
    label: m[3] ?? '',
  }));
  return { declared, edges };
}

describe('toMermaid renders the group statechart as stateDiagram-v2', () => {
  const text = toMermaid(machineDefinition(groupMachine));
  const oneLine = flat(text);

  it('starts with the diagram type and the initial state of the machine', () => {
    expect(text.split('\n')[0]).toBe('stateDiagram-v2');
    expect(text).toContain('  [*] --> group\n');
  });

  it('nests states in `state X{ }` blocks with balanced braces', () => {
    expect(text).toContain('state "membership" as group_membership{');
    expect(text).toContain('state "rebalancing" as group_membership_rebalancing{');
    expect(text.split('{').length).toBe(text.split('}').length);
  });

  it('separates the parallel regions with `--`', () => {
    expect(text.match(/^\s*--$/gm)).toHaveLength(3);
  });

  it('marks the initial state of every compound state with [*]', () => {
    for (const initial of [
      'group_lifecycle_active',
      'group_membership_empty',
      'group_membership_rebalancing_granting',
      'group_migration_idle',
    ]) {
      expect(text).toContain(`[*] --> ${initial}`);
    }
  });

  it('labels every transition with the events that cause it (and its guard)', () => {
    expect(text).toContain('group_lifecycle_active --> group_lifecycle_frozen : FREEZE\n');
    expect(text).toContain('group_lifecycle_frozen --> group_lifecycle_active : UNFREEZE\n');
    expect(text).toContain('group_lifecycle_active --> group_lifecycle_failedClosed : FAIL_CLOSED');
    expect(text).toContain('group_lifecycle_failedClosed --> group_lifecycle_active : RECOVER\n');
    expect(oneLine).toContain(
      'group_membership_rebalancing_granting --> group_membership_rebalancing_revoking : REVOKE_REQUESTED [someShardRevoking]',
    );
    expect(oneLine).toMatch(
      /group_membership_rebalancing --> group_membership_stable : SHARDS_GRANTED, [A-Z_, ]+ \[allShardsSettled\]/,
    );
    // Every edge names at least one event: nothing is derived by eventless guards any more.
    for (const { label } of parse(text).edges.filter((e) => e.from !== '[*]')) {
      expect(label).toMatch(/^[A-Z_]+/);
    }
  });

  it('does not draw refusals: a state that does not accept an event has no edge for it', () => {
    const inside = (id: string) =>
      [...text.matchAll(new RegExp(`^\\s*${id} : (.*)$`, 'gm'))].map((m) => m[1]).join(' ');
    expect(inside('group_lifecycle_frozen')).not.toContain('UNFREEZE');
    expect(inside('group_lifecycle_frozen')).not.toMatch(/\bFREEZE/);
    expect(inside('group_lifecycle_active')).not.toContain('UNFREEZE');
    expect(inside('group_migration_inProgress')).not.toContain('SCALE');
    // Accepted without a change of state: written inside the state, not drawn as a self-loop
    // (whose label mermaid lays over its neighbours').
    expect(inside('group_lifecycle_active')).toBe(
      '↻ PAUSE_PRODUCERS, RESUME_PRODUCERS, ADOPT_LAYOUT',
    );
    expect(text).not.toMatch(/^\s*(\S+) --> \1 :/m);
  });

  it('wraps long labels into lines, breaking between names, never inside one', () => {
    const labels = parse(text).edges.map((e) => e.label);
    for (const label of labels) {
      for (const line of label.split('<br/>')) {
        // A line is one name (however long), or several that fit in about 24 characters.
        if (/, \S/.test(line)) expect(line.length, line).toBeLessThanOrEqual(24);
        expect(line).not.toMatch(/^,|[A-Z]_$/);
      }
    }
    expect(labels.some((l) => l.includes('<br/>'))).toBe(true);
  });

  it('draws one edge per pair of states: the same events under other guards join with `or`', () => {
    expect(oneLine).toContain(
      'group_membership_empty --> group_membership_rebalancing : MEMBER_JOINED [someShardRevoking or someShardAwaitingGrant]',
    );
    expect(oneLine).toContain(
      'group_migration_converged --> group_migration_inProgress : SCALE [scaleAccepted] ROLLBACK [rollbackAccepted]',
    );
    const pairs = parse(text).edges.map((e) => `${e.from} ${e.to}`);
    expect(new Set(pairs).size).toBe(pairs.length);
  });

  it('draws one region on its own, its states at the top level', () => {
    const region = toMermaid(machineDefinition(groupMachine), {
      root: 'group.lifecycle',
      current: activeStateIds('group', { lifecycle: 'frozen', migration: 'idle' }),
      notes: { 'group.lifecycle.frozen': ['admin changes refused'] },
    });
    expect(region.split('\n')[1]).toBe('  [*] --> group_lifecycle_active');
    expect(region).not.toContain('group_migration');
    expect(region).not.toContain('group_lifecycle{');
    expect(region).toContain('group_lifecycle_active --> group_lifecycle_frozen : FREEZE');
    expect(region).toContain('group_lifecycle_frozen : admin changes refused');
    // Only the current state of this region is marked.
    expect(region.match(/^\s*class /gm)).toEqual(['  class ']);
    expect(region).toContain('class group_lifecycle_frozen current');
  });

  it('shows the migration phases and the events that move them', () => {
    expect(text).toContain(
      'group_migration_idle --> group_migration_inProgress : SCALE [scaleAccepted]',
    );
    expect(text).toContain(
      'group_migration_inProgress --> group_migration_converged : MIGRATION_CONVERGED',
    );
    expect(text).toContain(
      'group_migration_converged --> group_migration_idle : ROLLBACK_WINDOW_ELAPSED',
    );
    expect(text).toContain(
      'group_migration_converged --> group_migration_inProgress : SCALE [scaleAccepted]',
    );
  });

  it('draws an edge into a nested state to its composite, as mermaid requires', () => {
    const { declared, edges } = parse(text);
    for (const { from, to } of edges) {
      if (from !== '[*]') expect(declared).toContain(from);
      expect(declared).toContain(to);
    }
  });

  it('marks the current states with the `current` class, and only when asked', () => {
    expect(text).not.toContain('classDef current');
    const marked = toMermaid(machineDefinition(groupMachine), {
      current: activeStateIds('group', {
        lifecycle: 'frozen',
        membership: { rebalancing: 'revoking' },
        migration: 'idle',
      }),
    });
    expect(marked).toContain('classDef current');
    expect(marked).toContain('class group_lifecycle_frozen current');
    expect(marked).toContain('class group_membership_rebalancing_revoking current');
    expect(marked).toContain('class group_migration_idle current');
    expect(marked.match(/^\s*class /gm)).toHaveLength(3);
  });

  it('gives the same text for machine.toJSON() and for its JSON round trip', () => {
    expect(toMermaid(groupMachine.toJSON())).toBe(text);
    expect(
      toMermaid(
        JSON.parse(JSON.stringify(machineDefinition(groupMachine))) as ReturnType<
          typeof machineDefinition
        >,
      ),
    ).toBe(text);
  });
});

describe('toMermaid handles any machine definition', () => {
  const machine = setup({ guards: { 'is-ready': () => true } }).createMachine({
    id: 'job-runner',
    initial: 'idle',
    states: {
      idle: { on: { 'job.start': { target: 'busy.working', guard: 'is-ready' }, PING: {} } },
      busy: {
        initial: 'working',
        states: { working: { on: { 'job:pause': 'paused' } }, paused: {} },
        on: { STOP: 'idle' },
      },
    },
  });
  const text = toMermaid(machine.toJSON());

  it('turns ids into mermaid-safe ones and keeps keys as labels', () => {
    expect(text).toContain('state "busy" as job_runner_busy{');
    expect(text).toContain('state "working" as job_runner_busy_working');
  });

  it('lifts cross-composite edges and appends the guard to the event', () => {
    expect(text).toContain('job_runner_idle --> job_runner_busy : job.start [is-ready]');
    expect(text).toContain('job_runner_busy --> job_runner_idle : STOP');
  });

  it('writes targetless transitions of atomic states inside the state', () => {
    expect(text).toContain('job_runner_idle : ↻ PING');
    expect(text).not.toContain('job_runner_idle --> job_runner_idle');
  });

  it('keeps `:` out of labels, where mermaid would end them', () => {
    expect(text).toContain('job_runner_busy_working --> job_runner_busy_paused : job pause');
  });
});
