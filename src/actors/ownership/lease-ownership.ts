import { GroupMovedError } from '../../errors.js';
import { groupId, type GroupRef } from '../../machines/types.js';
import type { ReplicaRecord, Store, StoredGroup } from '../../store/store.js';
import type { OwnerOf, Ownership } from '../group-ownership.js';
import type { LeaseManager, LeaseStatus } from './lease.js';
import { rendezvousOwner } from './rendezvous.js';

/** What {@link LeaseOwnership} needs of the lease manager. */
export type Leases = Pick<
  LeaseManager,
  'acquire' | 'status' | 'mayServe' | 'servingCheck' | 'release' | 'heldGroups'
>;

/** Options of {@link LeaseOwnership}. */
export interface LeaseOwnershipOptions {
  readonly replicaId: string;
  readonly store: Pick<Store, 'claimGroup' | 'ping'>;
  /** The live replicas as of the registry's last refresh (`ReplicaRegistry.live`). */
  readonly live: () => readonly ReplicaRecord[];
  readonly leases: Leases;
}

/**
 * Ownership of several replicas (README.md, "Running several replicas"): the owner of a group is
 * the rendezvous choice among the live replicas of the registry; the owner holds the group's
 * Redlock lease, claims the group under it (the store checks the lease holder and moves the
 * integer fence on), and answers from memory only before its monotonic lease deadline. A lost
 * lease drops the group.
 */
export class LeaseOwnership implements Ownership {
  readonly replicaId: string;
  private readonly lostHandlers: Array<(ref: GroupRef, cause?: unknown) => void> = [];
  /**
   * Owners decided so far, by group id, for the live ids in {@link ownersIds}: the heartbeat
   * asks on every request (`X-Coord-Owner`), and the rendezvous choice hashes every live
   * replica with SHA-256. The owner depends on the live ids only, so the cache is kept until
   * they change (the registry's list is a new array on every refresh, with the same ids).
   */
  private readonly owners = new Map<string, OwnerOf>();
  private ownersLive: readonly ReplicaRecord[] | null = null;
  private ownersIds = '';
  /** Moves on whenever the live ids change: see {@link ownersVersion}. */
  private ownersGeneration = 0;
  private static readonly OWNERS_MAX = 100_000;

  constructor(private readonly options: LeaseOwnershipOptions) {
    this.replicaId = options.replicaId;
  }

  /**
   * A number that changes whenever {@link ownerOf} may answer otherwise than before (the live
   * replicas' ids changed): an answer kept with the version it was given at still holds while
   * the version is the same.
   */
  ownersVersion(): number {
    this.liveNow();
    return this.ownersGeneration;
  }

  ownerOf(ref: GroupRef): OwnerOf {
    const live = this.liveNow();
    const id = groupId(ref);
    let known = this.owners.get(id);
    if (known === undefined) {
      known = this.decideOwner(ref, live);
      if (this.owners.size >= LeaseOwnership.OWNERS_MAX) this.owners.clear();
      this.owners.set(id, known);
    }
    return known;
  }

  /** The live replicas; forgets the owners decided when their ids changed. */
  private liveNow(): readonly ReplicaRecord[] {
    const live = this.options.live();
    if (live !== this.ownersLive) {
      const ids = live.map((replica) => replica.id).join('\n');
      if (ids !== this.ownersIds) {
        this.owners.clear();
        this.ownersGeneration++;
      }
      this.ownersLive = live;
      this.ownersIds = ids;
    }
    return live;
  }

  private decideOwner(ref: GroupRef, live: readonly ReplicaRecord[]): OwnerOf {
    const owner = rendezvousOwner(ref, live);
    // Not registered yet (or the registry cannot be read): nobody is known to own it.
    if (owner === null) return { self: false, owner: null };
    if (owner.id === this.replicaId) return { self: true };
    return { self: false, owner: owner.id };
  }

  /** The advertised URL of a live replica, or null. */
  urlOf(replicaId: string): string | null {
    return this.options.live().find((replica) => replica.id === replicaId)?.url ?? null;
  }

  async acquire(ref: GroupRef): Promise<void> {
    const lease = await this.options.leases.acquire(ref);
    if (lease !== null) return;
    // The store is down (STORE_UNAVAILABLE), or the lease is still held elsewhere (the old
    // owner hands over, or its lease has not expired yet): moving, retry shortly.
    await this.options.store.ping();
    throw new GroupMovedError(null);
  }

  claim(ref: GroupRef): Promise<StoredGroup> {
    const lease: LeaseStatus | null = this.options.leases.status(ref);
    if (lease === null) return Promise.reject(new GroupMovedError(null));
    return this.options.store.claimGroup(ref, lease.value);
  }

  mayServe(ref: GroupRef): boolean {
    return this.options.leases.mayServe(ref);
  }

  servingCheck(ref: GroupRef): () => boolean {
    return this.options.leases.servingCheck(ref);
  }

  release(ref: GroupRef): Promise<void> {
    return this.options.leases.release(ref);
  }

  onLost(drop: (ref: GroupRef, cause?: unknown) => void): void {
    this.lostHandlers.push(drop);
  }

  /** Called by the lease manager when a held lease is lost (any renew error, as `cause`). */
  lost(ref: GroupRef, cause?: unknown): void {
    for (const drop of this.lostHandlers) drop(ref, cause);
  }

  /** The groups whose lease this replica holds but whose rendezvous owner is now another. */
  misplaced(): GroupRef[] {
    return this.options.leases.heldGroups().filter((ref) => !this.ownerOf(ref).self);
  }
}
