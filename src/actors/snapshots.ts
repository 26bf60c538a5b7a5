import { evidenceOfGroup, mergeEvidence } from './evidence.js';
import type { GroupEntry } from './group-entry.js';
import type { GroupSnapshot } from './types.js';

/** What readers get of a group: its last committed snapshot, owner and highest version seen. */
export function snapshotOf(entry: GroupEntry, owner: string): GroupSnapshot {
  const snapshot = entry.published ?? entry.snapshot();
  const { group, signals } = snapshot.context;
  return {
    context: snapshot.context,
    stateValue: snapshot.value,
    owner,
    highestVersionSeen: mergeEvidence(evidenceOfGroup(group, signals), entry.floor)
      .highestVersionSeen,
  };
}
