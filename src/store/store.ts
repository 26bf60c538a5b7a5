import type { FailureReason, GroupRef, GroupState } from '../machines/types.js';
import type { FieldPatch, GroupFields } from './codec.js';

/** A group as read from the store: its state plus the store-owned fields. */
export interface StoredGroup {
  readonly state: GroupState;
  /** +1 on every write (DESIGN.md §4). */
  readonly revision: number;
  /** Fencing token of the owner allowed to write. */
  readonly fence: string;
}

/** What the verify loop reads for each owned group (DESIGN.md §7). */
export interface GroupRevision {
  readonly revision: number;
  readonly lifecycleId: string;
}

/**
 * A fail-closed decision (DESIGN.md §7), kept in its own key `kp:G:failure` so it survives a
 * coordinator restart without touching the metadata key it is about.
 */
export interface FailureRecord {
  readonly reason: FailureReason;
  /** Epoch ms of the decision. */
  readonly at: number;
  /** Store revision the owner had seen when it failed the group closed. */
  readonly knownRevision: number;
  /** Revision found in the store (null when the key was missing). */
  readonly storeRevision: number | null;
  readonly lifecycleId: string;
  readonly metadataVersion: number;
  /** Highest metadataVersion any client (or this coordinator) had seen: RESUME needs at least it. */
  readonly highestVersionSeen: number;
  /** Highest assignment epoch and member epoch issued: recovery continues above them. */
  readonly assignmentEpoch: number;
  readonly memberEpochSeq: number;
}

export type AuditOutcome = 'SUCCEEDED' | 'REJECTED' | 'DENIED' | 'FAILED';

/** One audit record (DESIGN.md §9). Never holds passwords or tokens. */
export interface AuditRecord {
  readonly timestamp: string;
  readonly method: string;
  readonly path: string;
  readonly operation: string;
  readonly outcome: AuditOutcome;
  readonly status: number;
  readonly principal: string | null;
  readonly roles: readonly string[];
  readonly requestId: string;
  readonly bodySha256: string | null;
  readonly clientAddress: string | null;
  readonly durationMs: number;
  readonly streamPrefix: string | null;
  readonly consumerGroup: string | null;
  readonly requestedBy: string | null;
  readonly reason: string | null;
}

export interface AuditQuery {
  readonly streamPrefix?: string;
  readonly consumerGroup?: string;
  /** At most this many records, newest first. */
  readonly limit: number;
}

export interface GroupPage {
  readonly groups: readonly GroupRef[];
  /** Opaque cursor of the next page; null on the last page. */
  readonly nextCursor: string | null;
}

export type StoreHealth = 'UP' | 'DOWN' | 'NOT_CONFIGURED';

/**
 * The store contract: domain verbs only. Every group write is fenced and revision-checked:
 * it fails with `FenceMismatchError` / `RevisionMismatchError` and changes nothing when the
 * caller's fence or expected revision is stale, and with `StoreUnavailableError` when the
 * store cannot be reached. `CoordinatorError('GROUP_NOT_FOUND')` when the metadata key is gone.
 */
export interface Store {
  readonly kind: 'memory' | 'redis' | 'redis-cluster';

  /** Creates the metadata key and registers the group; `GROUP_EXISTS` if either exists. */
  createGroup(state: GroupState, fence: string): Promise<StoredGroup>;
  /** The group's metadata, or null when the metadata key does not exist. */
  loadGroup(ref: GroupRef): Promise<StoredGroup | null>;
  /** Applies `patch` if fence and revision match; returns the new revision. */
  commitGroup(
    ref: GroupRef,
    fence: string,
    expectedRevision: number,
    patch: FieldPatch,
  ): Promise<number>;
  /** Removes metadata key and registry entry if fence and revision match. */
  deleteGroup(ref: GroupRef, fence: string, expectedRevision: number): Promise<void>;
  /**
   * Atomically replaces the fence token of an existing group (a new owner takes over), bumping
   * the revision, and returns the group as now stored. `GROUP_NOT_FOUND` if the key is missing.
   */
  takeOwnership(ref: GroupRef, newFence: string): Promise<StoredGroup>;
  /** Whether the registry lists the group (it may exist there while its metadata key is lost). */
  isRegistered(ref: GroupRef): Promise<boolean>;
  /** Registry listing in a stable order. */
  listGroups(options: { cursor?: string | undefined; limit: number }): Promise<GroupPage>;
  /** One round trip for many groups: revision and lifecycle, or null where the key is missing. */
  readRevisions(refs: readonly GroupRef[]): Promise<Array<GroupRevision | null>>;

  /** Raw metadata fields for backups (including store-owned fields); null when missing. */
  exportGroup(ref: GroupRef): Promise<GroupFields | null>;
  /** Writes raw metadata fields back (restore) and registers the group. Not fenced: disaster recovery only. */
  importGroup(ref: GroupRef, fields: GroupFields): Promise<void>;

  /** Records why a group failed closed (overwrites an earlier record). */
  recordFailure(ref: GroupRef, record: FailureRecord): Promise<void>;
  readFailure(ref: GroupRef): Promise<FailureRecord | null>;
  /** Removes the failure record (after recovery). */
  clearFailure(ref: GroupRef): Promise<void>;

  appendAudit(record: AuditRecord): Promise<void>;
  queryAudit(query: AuditQuery): Promise<AuditRecord[]>;

  /** Resolves when the store answers; rejects with `StoreUnavailableError` otherwise. */
  ping(): Promise<void>;
  /** Last known health, without a round trip. */
  health(): StoreHealth;
  close(): Promise<void>;
}
