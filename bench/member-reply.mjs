/*
 * What a simulated bench member does with a heartbeat reply, in plain JavaScript so that the
 * benchmarks run by tsx (bench/support.ts) and the children run under plain node on dist/
 * (bench/host-child.mjs) share one copy. Types: member-reply.d.mts.
 */

/** Applies a reply as an honest member does (revoked shards dropped at once); true if anything moved. */
export function applyReply(m, reply) {
  const fenced = reply.outcome === 'FENCED_MEMBER_EPOCH';
  const next = fenced ? [] : [...reply.assignedShards];
  const changed =
    reply.outcome !== 'OK' ||
    reply.memberEpoch !== m.memberEpoch ||
    next.join() !== m.currentAssignments.join();
  m.memberEpoch = fenced ? 0 : reply.memberEpoch;
  m.assignmentEpoch = reply.assignmentEpoch;
  m.metadataVersion = reply.metadataVersion;
  m.currentAssignments = next;
  return changed;
}
