import { groupMachine } from '../machines/group-machine.js';
import { machineDefinition } from '../machines/machine-definition.js';
import { memberMachine, memberState } from '../machines/member-machine.js';
import { activeStateIds, toMermaid } from '../diagrams/mermaid.js';
import type { GroupSnapshot } from './types.js';

let cached: {
  group: ReturnType<typeof machineDefinition>;
  member: ReturnType<typeof machineDefinition>;
  memberMermaid: string;
} | null = null;

/** The definitions are the same for every group: computed once. */
function definitions() {
  if (!cached) {
    const member = machineDefinition(memberMachine);
    cached = {
      group: machineDefinition(groupMachine),
      member,
      memberMermaid: toMermaid(member),
    };
  }
  return cached;
}

/**
 * The states of the migration region as the migrations API names them (IN_PROGRESS, CONVERGED;
 * an idle region has none active: the last one COMPLETED), written inside their boxes so the
 * chart and every list of migrations speak one vocabulary.
 */
const MIGRATION_NOTES: Readonly<Record<string, readonly string[]>> = {
  [`${groupMachine.id}.migration.idle`]: ['no active migration'],
  [`${groupMachine.id}.migration.inProgress`]: ['migration IN_PROGRESS'],
  [`${groupMachine.id}.migration.converged`]: ['migration CONVERGED'],
};

/**
 * The group's statechart as an operator reads it (docs/architecture.md#the-statechart): the machine
 * definition, the group's current state value, a mermaid `stateDiagram-v2` whose edges name events
 * and whose current states are marked (class `current`), each member's state in its own chart, and
 * that chart's definition and diagram.
 */
export function statechartView(snapshot: GroupSnapshot) {
  const { group, member, memberMermaid } = definitions();
  const { context } = snapshot;
  const current = activeStateIds(groupMachine.id, snapshot.stateValue);
  return {
    machineId: groupMachine.id,
    value: snapshot.stateValue,
    definition: group,
    mermaid: toMermaid(group, { current, notes: MIGRATION_NOTES }),
    /** The same diagram once per region, each legible at the width of a page's column. */
    regions: Object.values(group.states).map((region) => ({
      region: region.key,
      mermaid: toMermaid(group, { current, notes: MIGRATION_NOTES, root: region.id }),
    })),
    members: context.group.members
      .keys()
      .sort()
      .map((memberId) => ({ memberId, state: memberState(context, memberId) })),
    departedMembers: context.departures.map((d) => ({ memberId: d.memberId, state: d.state })),
    memberMachine: { machineId: memberMachine.id, definition: member, mermaid: memberMermaid },
  };
}

export type StatechartView = ReturnType<typeof statechartView>;
