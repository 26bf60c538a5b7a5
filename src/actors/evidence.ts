import type { RollbackSignals } from '../machines/context.js';
import type { GroupState } from '../machines/types.js';
import type { GroupFields } from '../store/codec.js';
import type { FailureRecord } from '../store/store.js';

/**
 * What recovery must stay above (docs/operations.md#recovery-procedure): the highest metadata
 * version anyone has seen, and the highest assignment and member epochs ever issued. Versions and
 * epochs only go up, also across a restore or a recreate.
 */
export interface Evidence {
  readonly highestVersionSeen: number;
  readonly assignmentEpoch: number;
  readonly memberEpochSeq: number;
}

export const NO_EVIDENCE: Evidence = {
  highestVersionSeen: 0,
  assignmentEpoch: 0,
  memberEpochSeq: 0,
};

export function mergeEvidence(...all: ReadonlyArray<Evidence | null | undefined>): Evidence {
  let merged = NO_EVIDENCE;
  for (const e of all) {
    if (!e) continue;
    merged = {
      highestVersionSeen: Math.max(merged.highestVersionSeen, e.highestVersionSeen),
      assignmentEpoch: Math.max(merged.assignmentEpoch, e.assignmentEpoch),
      memberEpochSeq: Math.max(merged.memberEpochSeq, e.memberEpochSeq),
    };
  }
  return merged;
}

/** Evidence held by a group's state and the rollback signals clients sent. */
export function evidenceOfGroup(group: GroupState, signals: RollbackSignals | null): Evidence {
  return {
    highestVersionSeen: Math.max(group.metadataVersion, signals?.highestVersionSeen ?? 0),
    assignmentEpoch: group.assignmentEpoch,
    memberEpochSeq: group.memberEpochSeq,
  };
}

export function evidenceOfRecord(record: FailureRecord | null): Evidence | null {
  if (!record) return null;
  return {
    highestVersionSeen: Math.max(record.highestVersionSeen, record.metadataVersion),
    assignmentEpoch: record.assignmentEpoch ?? 0,
    memberEpochSeq: record.memberEpochSeq ?? 0,
  };
}

/** The numbers still readable in a metadata hash that may not decode as a whole (corrupt). */
export function evidenceOfFields(fields: GroupFields | null): Evidence | null {
  if (!fields) return null;
  const n = (name: string) => {
    const value = Number(fields[name]);
    return Number.isSafeInteger(value) && value > 0 ? value : 0;
  };
  return {
    highestVersionSeen: n('metadataVersion'),
    assignmentEpoch: n('assignmentEpoch'),
    memberEpochSeq: n('memberEpochSeq'),
  };
}
