import type { HeartbeatReply } from '../src/machines/protocol.js';

/** What {@link applyReply} reads and updates of a member. */
export interface RepliedMember {
  memberEpoch: number;
  assignmentEpoch: number;
  metadataVersion: number;
  currentAssignments: number[];
}

/** Applies a reply as an honest member does (revoked shards dropped at once); true if anything moved. */
export function applyReply(m: RepliedMember, reply: HeartbeatReply): boolean;
