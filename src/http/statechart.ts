import type { GroupSnapshot } from '../actors/types.js';
import { groupMachine } from '../machines/group-machine.js';
import { machineDefinition } from '../machines/machine-definition.js';
import { toMermaid } from '../machines/mermaid.js';

let cached: { definition: unknown; mermaid: string } | null = null;

/** Machine definition (same for every group, computed once), current state value and mermaid text. */
export function statechartView(snapshot: GroupSnapshot) {
  if (!cached) {
    const definition = machineDefinition(groupMachine);
    cached = { definition, mermaid: toMermaid(definition) };
  }
  return {
    machineId: groupMachine.id,
    value: snapshot.stateValue,
    definition: cached.definition,
    mermaid: cached.mermaid,
  };
}
