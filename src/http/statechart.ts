import type { GroupSnapshot } from '../actors/types.js';
import { groupMachine } from '../machines/group-machine.js';
import { toMermaid } from '../machines/mermaid.js';

let cached: { definition: unknown; mermaid: string } | null = null;

/** Machine definition (same for every group, computed once), current state value and mermaid text. */
export function statechartView(snapshot: GroupSnapshot) {
  if (!cached) {
    const definition = groupMachine.toJSON() as unknown;
    cached = { definition, mermaid: toMermaid(definition as Parameters<typeof toMermaid>[0]) };
  }
  return {
    machineId: groupMachine.id,
    value: snapshot.stateValue,
    definition: cached.definition,
    mermaid: cached.mermaid,
  };
}
