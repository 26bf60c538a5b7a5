import { createHash } from 'node:crypto';
import { groupId } from '../../machines/types.js';
import type { GroupRef } from '../../machines/types.js';

/**
 * Rendezvous (highest random weight) hashing: every replica scores every group and the highest
 * score owns it. Each replica computes the same answer from the same live list with
 * no coordination, and when a replica joins or leaves only the groups it wins or held move.
 */

/** Anything with a replica id (a registry record, a test double). */
export interface ReplicaIdentity {
  readonly id: string;
}

/**
 * The weight of `replicaId` for a group: 48 bits of SHA-256 over both names (exact in a JS
 * number). A cryptographic hash because it mixes similar ids (`replica-1`, `replica-2`) well.
 */
export function rendezvousWeight(replicaId: string, group: GroupRef): number {
  return createHash('sha256')
    .update(replicaId)
    .update('\n')
    .update(groupId(group))
    .digest()
    .readUIntBE(0, 6);
}

/**
 * The owner of `group` among `replicas`: the highest weight, ties to the smaller id (so the
 * order of the list never matters). Null when no replica is live.
 */
export function rendezvousOwner<T extends ReplicaIdentity>(
  group: GroupRef,
  replicas: readonly T[],
): T | null {
  let best: T | null = null;
  let bestWeight = -1;
  for (const replica of replicas) {
    const weight = rendezvousWeight(replica.id, group);
    if (weight > bestWeight || (weight === bestWeight && best !== null && replica.id < best.id)) {
      best = replica;
      bestWeight = weight;
    }
  }
  return best;
}
