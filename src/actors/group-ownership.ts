import type { GroupRef } from '../machines/types.js';
import type { Store, StoredGroup } from '../store/store.js';

/** Who owns a group, as this replica sees it now. */
export type OwnerOf =
  | { readonly self: true }
  /** Another replica (its id), or nobody known yet (`null`: the group is moving). */
  | { readonly self: false; readonly owner: string | null };

/**
 * The ownership seam (docs/architecture.md#replicas-leases-and-fences): the only place that decides
 * which groups this replica takes. The host asks it before loading a group (reading a group never
 * takes it), claims through it, asks it before answering from memory, and is told through `onLost`
 * when a group must be dropped. One replica owns everything ({@link SingleReplicaOwnership}); the
 * registry, rendezvous hashing and Redlock leases implement this same interface.
 */
export interface Ownership {
  /** This replica's id (what `owner` shows, `X-Coord-Owner`). */
  readonly replicaId: string;
  /** Whether this replica owns `ref` (or should take it), and if not, who does. No I/O. */
  ownerOf(ref: GroupRef): OwnerOf;
  /** Takes the group's lease; rejects when it cannot (another replica holds it). */
  acquire(ref: GroupRef): Promise<void>;
  /**
   * Claims a group that exists under the lease just acquired (`Store.claimGroup` with the lease
   * value): the store's integer fence moves on (a writer holding an older fence can never write
   * again). Returns the group as now stored, its new fence included.
   */
  claim(ref: GroupRef): Promise<StoredGroup>;
  /**
   * Whether the group may be answered from memory right now: the local monotonic lease
   * deadline has not passed. False means stop serving (refuse or forward) until renewed.
   */
  mayServe(ref: GroupRef): boolean;
  /**
   * {@link mayServe} for `ref` bound to what it reads now (the lease held now), to be asked
   * again without looking the group up: false from the moment `mayServe(ref)` would be false
   * for this holding (its deadline passed, the lease released or lost). Optional: without it
   * the host asks `mayServe(ref)` each time.
   */
  servingCheck?(ref: GroupRef): () => boolean;
  /** Gives the group's lease up (handover, shutdown); its mailbox has drained. */
  release(ref: GroupRef): Promise<void>;
  /**
   * Registers the callback for a lost lease: the host drops the group at once (and asks whether
   * its metadata is still stored). `cause` says why the lease was lost, for the log.
   */
  onLost(drop: (ref: GroupRef, cause?: unknown) => void): void;
}

/**
 * One replica (embedded mode, or a single coordinator): it owns every group, has no lease,
 * always may serve, and claims without a lease: the store lets an unleased claim through only
 * while no replica holds the group's lease, so it can never take a group from a lease holder.
 */
export class SingleReplicaOwnership implements Ownership {
  constructor(
    private readonly store: Pick<Store, 'claimGroup'>,
    readonly replicaId: string,
  ) {}

  ownerOf(): OwnerOf {
    return { self: true };
  }

  acquire(): Promise<void> {
    return Promise.resolve();
  }

  claim(ref: GroupRef): Promise<StoredGroup> {
    return this.store.claimGroup(ref, null);
  }

  mayServe(): boolean {
    return true;
  }

  servingCheck(): () => boolean {
    return ALWAYS;
  }

  release(): Promise<void> {
    return Promise.resolve();
  }

  onLost(): void {
    // A single replica never loses a group.
  }
}

const ALWAYS = () => true;
