/*
 * What a simulated bench member does with a heartbeat reply, in plain JavaScript so that the
 * benchmarks run by tsx (bench/support.ts) and the children run under plain node on dist/
 * (bench/host-child.mjs) share one copy. Types: member-reply.d.mts.
 */

/**
 * `coordinator.membership.heartbeat-interval` (the default, which the benchmarks keep): the
 * interval a reply advises when the group waits for nothing. A shorter one means a recompute is
 * pending, a revoke is in progress or a retiring shard is still owned: the group will move.
 */
export const STEADY_INTERVAL_MS = 3_000;

/**
 * Applies a reply as an honest member does (revoked shards dropped at once); true if anything
 * moved, or may still move (the reply advises the short interval: a settle loop that stopped
 * then would take a group waiting on its debounced recompute as steady).
 */
export function applyReply(m, reply) {
  const fenced = reply.outcome === 'FENCED_MEMBER_EPOCH';
  const next = fenced ? [] : [...reply.assignedShards];
  const changed =
    reply.outcome !== 'OK' ||
    reply.heartbeatIntervalMs !== STEADY_INTERVAL_MS ||
    reply.memberEpoch !== m.memberEpoch ||
    next.join() !== m.currentAssignments.join();
  m.memberEpoch = fenced ? 0 : reply.memberEpoch;
  m.assignmentEpoch = reply.assignmentEpoch;
  m.metadataVersion = reply.metadataVersion;
  m.currentAssignments = next;
  return changed;
}
