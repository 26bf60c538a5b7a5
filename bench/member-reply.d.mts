import type { HeartbeatReply } from '../src/machines/protocol.js';

/** What {@link applyReply} reads and updates of a member. */
export interface RepliedMember {
  memberEpoch: number;
  assignmentEpoch: number;
  metadataVersion: number;
  currentAssignments: number[];
}

/** `coordinator.membership.heartbeat-interval` (default): the interval of a reply that waits for nothing. */
export const STEADY_INTERVAL_MS: number;

/** Applies a reply as an honest member does; true if anything moved or may still move (the short interval). */
export function applyReply(m: RepliedMember, reply: HeartbeatReply): boolean;
