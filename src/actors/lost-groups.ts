import { StoreUnavailableError } from '../errors.js';
import type { Clock } from '../machines/clock.js';
import { groupId, type GroupRef } from '../machines/types.js';
import { groupLogFields, type Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { DeletedLifecycle, FailureRecord, Store } from '../store/store.js';
import { evidenceOfGroup, mergeEvidence } from './evidence.js';
import type { GroupEntry } from './group-entry.js';
import type { StoreGuard } from './store-guard.js';

/**
 * Who remembered a group whose metadata key is gone (`coord_metadata_lost_total{source}`): a
 * replica that held it (its lease lost, a handover, the verify loop, a refused write), the
 * group registry (first use found it registered without its key), or a client that reported
 * its lifecycle or a version (`heartbeat`, `routing`).
 */
export type LostSource = 'replica' | 'registry' | 'heartbeat' | 'routing' | 'admin';

/** The lifecycle of a lost group nobody could name (a client that sent versions only). */
export const UNKNOWN_LIFECYCLE = 'unknown';

/**
 * What this replica remembers of a group whose metadata key went missing
 * (docs/operations.md#lost-metadata): its lifecycle and the last versions anyone here knew.
 * Recovery stays above these numbers.
 */
export interface LostGroup {
  readonly ref: GroupRef;
  readonly lifecycleId: string;
  readonly metadataVersion: number;
  readonly assignmentEpoch: number;
  /** The highest member epoch issued (or reported). */
  readonly memberEpochSeq: number;
  /** The highest metadata version anyone reported. */
  readonly highestVersionSeen: number;
  /** The last store revision this replica saw (0 when only a client remembered the group). */
  readonly storeRevision: number;
  /** Epoch ms when the loss was noticed here. */
  readonly at: number;
  readonly source: LostSource;
}

/**
 * What a caller reports of a group it knew: the lifecycle and the versions it was told
 * (heartbeat fields, or a producer's known routing version).
 */
export interface ClientClaim {
  readonly lifecycleId?: string | undefined;
  readonly metadataVersion?: number | undefined;
  readonly assignmentEpoch?: number | undefined;
  readonly memberEpoch?: number | undefined;
}

/**
 * Whether a caller reports having known the group: a lifecycle, or a version or epoch above 0.
 * A caller that knew nothing (a join with zeros) says nothing about a missing group.
 */
export function claimsKnowledge(claim: ClientClaim): boolean {
  return (
    (claim.lifecycleId !== undefined && claim.lifecycleId !== '') ||
    (claim.metadataVersion ?? 0) > 0 ||
    (claim.assignmentEpoch ?? 0) > 0 ||
    (claim.memberEpoch ?? 0) > 0
  );
}

/** How a group left this replica, for {@link LostGroups.leaving}. */
export interface Leaving {
  /** Its lease was lost (rather than handed over). */
  readonly leaseLost: boolean;
  /** Why the lease was lost, for the log. */
  readonly cause?: unknown;
}

/** Options of {@link LostGroups}. */
export interface LostGroupsOptions {
  readonly store: Pick<
    Store,
    | 'readRevisions'
    | 'readDeletions'
    | 'recordLostGroup'
    | 'recordDeletion'
    | 'readFailure'
    | 'recordFailure'
  >;
  readonly guard: StoreGuard;
  readonly clock: Clock;
  readonly metrics: Pick<Metrics, 'metadataLost' | 'groupsFailedClosed'>;
  readonly logger: Logger;
  /** How long to wait before asking a store that did not answer again. @default 1000 */
  readonly retryMs?: number;
  /**
   * Whether what clients report counts (`fromClient`). Off for the embedded memory store: it is
   * this process's own memory, which a restart empties by design, so a group it does not hold
   * was not lost by a store. @default true
   */
  readonly believeClients?: boolean;
}

/** Groups remembered at most (the oldest recorded ones are forgotten first beyond it). */
const MAX_REMEMBERED = 100_000;

/** A group that left this replica, whose metadata key has not been looked at yet. */
interface Suspect {
  readonly group: LostGroup;
  readonly leaving: Leaving;
  /** It failed closed here for its lost key already (counted then). */
  readonly counted: boolean;
}

/** A group remembered as lost; `recorded` once its failure record is in the store. */
interface Remembered {
  group: LostGroup;
  recorded: boolean;
}

/**
 * The groups whose metadata key is gone while something remembers them
 * (docs/operations.md#lost-metadata). An empty store is never read as "no groups": Redis
 * restarted empty (or flushed) takes the lease keys too, so the owner loses its lease before it
 * re-reads the group. So a group that leaves this replica (its lease lost, or handed over) is
 * looked up in the store once it answers: still there, it simply moved; gone, and not deleted
 * on purpose, it is remembered here as lost (`METADATA_LOST`), counted, and its failure record
 * is written and the group registered again, so every replica and every later process lists
 * and refuses it. A client that reports a lifecycle or a version of a group the store does not
 * hold is remembered the same way. Nothing is re-created from what is remembered: only recovery
 * (a restored backup and RESUME, or RECREATE) brings the group back.
 */
export class LostGroups {
  private readonly suspects = new Map<string, Suspect>();
  private readonly lost = new Map<string, Remembered>();
  /** Lifecycles deleted through this replica, in case their mark could not be written. */
  private readonly deletedHere = new Map<string, Set<string>>();
  private round: Promise<void> | null = null;
  /** Suspects came while a round ran: another round follows. */
  private again = false;
  private cancelRetry: (() => void) | null = null;
  private stopped = false;
  private readonly retryMs: number;

  constructor(private readonly options: LostGroupsOptions) {
    this.retryMs = options.retryMs ?? 1_000;
  }

  /**
   * A group leaves this replica without a delete: its lease was lost, or it was handed over.
   * `entry` is its entry as it leaves (null when none was loaded here). Whether its metadata is
   * still stored is asked at once, and again until the store answers.
   */
  leaving(ref: GroupRef, entry: GroupEntry | null, leaving: Leaving): void {
    if (this.stopped) return;
    if (entry === null || entry.deleting) {
      if (leaving.leaseLost) this.droppedHere(ref, leaving);
      return;
    }
    const { status, failureReason } = entry.snapshot().context.group;
    const counted = status === 'FAILED_CLOSED' && failureReason === 'METADATA_LOST';
    this.suspects.set(groupId(ref), { group: this.lostOfEntry(entry), leaving, counted });
    void this.runRound();
  }

  /**
   * Asked when the store may hold nothing of the group (a load found no metadata, no failure
   * record and no registry entry; a create is about to make it): whether this replica remembers
   * it as lost. If so, its failure record is in the store when
   * this resolves true, and the caller reads the group again (it is then refused as failed
   * closed; or served, if its metadata came back meanwhile). A group that left here moments ago
   * is looked up first. Rejects with `STORE_UNAVAILABLE` when that cannot be decided now.
   */
  async confirm(ref: GroupRef): Promise<boolean> {
    const id = groupId(ref);
    for (let i = 0; i < 2 && this.suspects.has(id); i++) await this.runRound();
    if (this.suspects.has(id)) {
      throw new StoreUnavailableError(
        `whether the metadata of group ${id} is lost cannot be told yet; try again`,
      );
    }
    const known = this.lost.get(id);
    if (!known) return false;
    if (known.recorded) {
      // Recorded before, and the store has no trace of it now: wiped again (write it again),
      // or recovered and deleted on purpose since (forget it).
      const deletions = await this.options.guard(() => this.options.store.readDeletions(ref));
      if (deletions.some((d) => d.at >= known.group.at)) {
        this.lost.delete(id);
        return false;
      }
      known.recorded = false;
    }
    await this.record(known);
    return true;
  }

  /**
   * A client reported `claim` for a group the store does not hold (no metadata, no failure
   * record, not registered). True when that is a loss: the caller knew a lifecycle, or a
   * version above 0, that no delete ended. The group is then remembered, counted under
   * `source`, and its failure record written (the caller reads the group again and answers it
   * failed closed). False when the claim says nothing or names a deleted lifecycle: the group
   * does not exist (404).
   */
  async fromClient(ref: GroupRef, claim: ClientClaim, source: LostSource): Promise<boolean> {
    if (this.stopped || this.options.believeClients === false || !claimsKnowledge(claim)) {
      return false;
    }
    const deletions = await this.options.guard(() => this.options.store.readDeletions(ref));
    if (this.isDeleted(ref, deletions, claim.lifecycleId)) return false;
    const { clock } = this.options;
    const group: LostGroup = {
      ref,
      lifecycleId: claim.lifecycleId || UNKNOWN_LIFECYCLE,
      metadataVersion: claim.metadataVersion ?? 0,
      assignmentEpoch: claim.assignmentEpoch ?? 0,
      memberEpochSeq: Math.max(0, claim.memberEpoch ?? 0),
      highestVersionSeen: claim.metadataVersion ?? 0,
      storeRevision: 0,
      at: clock.now(),
      source,
    };
    await this.record(this.remember(group));
    return true;
  }

  /**
   * Lifecycle `lifecycleId` of the group was deleted on purpose through this replica: it is no
   * loss, here or on any replica (the mark is written to the store; a failure to write it is
   * logged, and this replica still knows).
   */
  async deleted(ref: GroupRef, lifecycleId: string): Promise<void> {
    const id = groupId(ref);
    this.suspects.delete(id);
    this.lost.delete(id);
    let lifecycles = this.deletedHere.get(id);
    if (!lifecycles) {
      if (this.deletedHere.size >= MAX_REMEMBERED) this.deletedHere.clear();
      lifecycles = new Set();
      this.deletedHere.set(id, lifecycles);
    }
    lifecycles.add(lifecycleId);
    const { store, guard, clock, logger } = this.options;
    try {
      await guard(() => store.recordDeletion(ref, lifecycleId, clock.now()));
    } catch (error) {
      logger.warn('could not mark a deleted group as deleted in the store', {
        ...groupLogFields(ref),
        lifecycleId,
        error: String(error),
      });
    }
  }

  /** The group was recovered (RESUME or RECREATE): it is no longer remembered as lost. */
  recovered(ref: GroupRef): void {
    const id = groupId(ref);
    this.suspects.delete(id);
    this.lost.delete(id);
  }

  /** The groups remembered as lost, oldest first (for tests and diagnostics). */
  remembered(): LostGroup[] {
    return [...this.lost.values()].map((known) => known.group);
  }

  /** Stops asking the store (shutdown). */
  stop(): void {
    this.stopped = true;
    this.cancelRetry?.();
    this.cancelRetry = null;
  }

  /** One round over the suspects at a time; suspects that come meanwhile get the next. */
  private runRound(): Promise<void> {
    if (this.round) {
      this.again = true;
      return this.round;
    }
    const round = this.checkSuspects().finally(() => {
      this.round = null;
      if (this.again && !this.stopped) {
        this.again = false;
        void this.runRound();
      }
    });
    this.round = round;
    return round;
  }

  /** Looks up every suspect's metadata key in one read; a store that does not answer is asked again. */
  private async checkSuspects(): Promise<void> {
    const { store, guard } = this.options;
    const batch = [...this.suspects.values()];
    if (batch.length === 0 || this.stopped) return;
    let seen;
    try {
      seen = await guard(() => store.readRevisions(batch.map((s) => s.group.ref)));
    } catch {
      this.retryLater();
      return;
    }
    await Promise.all(
      batch.map(async (suspect, i) => {
        const { ref } = suspect.group;
        const id = groupId(ref);
        if (this.suspects.get(id) !== suspect) return;
        const stored = seen[i] ?? null;
        if (stored !== null && stored.lifecycleId === suspect.group.lifecycleId) {
          // Still stored: the group moved to another owner (or stays here), nothing is lost.
          this.suspects.delete(id);
          if (suspect.leaving.leaseLost) this.droppedHere(ref, suspect.leaving);
          return;
        }
        let deletions: DeletedLifecycle[];
        try {
          deletions = await guard(() => store.readDeletions(ref));
        } catch {
          this.retryLater();
          return;
        }
        if (this.suspects.get(id) !== suspect) return;
        if (this.isDeleted(ref, deletions, suspect.group.lifecycleId)) {
          // Deleted on purpose (and maybe created again since, as a new lifecycle).
          this.suspects.delete(id);
          if (suspect.leaving.leaseLost) this.droppedHere(ref, suspect.leaving);
          return;
        }
        if (stored !== null) {
          // Another lifecycle that no delete explains: the key was lost (the leases with it) and
          // another replica created the group anew before this check ran. It is failed closed
          // as lost, not taken for a move (docs/operations.md#lost-metadata).
          try {
            await this.recordOver(suspect.group, stored.revision);
          } catch {
            this.retryLater();
            return;
          }
          if (this.suspects.get(id) !== suspect) return;
          this.suspects.delete(id);
          this.remember(suspect.group, !suspect.counted).recorded = true;
          return;
        }
        this.suspects.delete(id);
        const known = this.remember(suspect.group, !suspect.counted);
        await this.record(known).catch(() => this.retryLater());
      }),
    );
  }

  /** Asks the store again after `retryMs`: suspects not looked at yet, records not written. */
  private retryLater(): void {
    if (this.stopped || this.cancelRetry) return;
    this.cancelRetry = this.options.clock.after(this.retryMs, () => {
      this.cancelRetry = null;
      void this.runRound();
      for (const known of this.lost.values()) {
        if (!known.recorded) void this.record(known).catch(() => this.retryLater());
      }
    });
  }

  /**
   * Remembers `group` as lost (merged with what was remembered of it), counts it (lost, and
   * failed closed) unless it was counted where it failed closed, and says so at error level:
   * once per group, when it is first noticed here.
   */
  private remember(group: LostGroup, count = true): Remembered {
    const id = groupId(group.ref);
    const known = this.lost.get(id);
    if (known) {
      known.group = mergeLost(known.group, group);
      return known;
    }
    if (this.lost.size >= MAX_REMEMBERED) this.forgetOldestRecorded();
    const fresh: Remembered = { group, recorded: false };
    this.lost.set(id, fresh);
    // Counted once, here, where its failure record is written: a replica that loads the group
    // from that record later does not count it again.
    if (count) {
      this.options.metrics.metadataLost.inc({ source: group.source });
      this.options.metrics.groupsFailedClosed.inc({ reason: 'METADATA_LOST' });
    }
    this.options.logger.error(
      'group metadata lost: the metadata key is gone while this group is remembered; it fails ' +
        'closed (METADATA_LOST) until an operator restores a backup and RESUMEs it, or RECREATEs ' +
        'it (docs/operations.md#lost-metadata)',
      {
        ...groupLogFields(group.ref),
        source: group.source,
        lifecycleId: group.lifecycleId,
        metadataVersion: group.metadataVersion,
        knownRevision: group.storeRevision,
      },
    );
    return fresh;
  }

  /**
   * Writes the group's failure record (and registers it) unless the store has it already.
   * Rejects when the store cannot be reached; the record stays to be written.
   */
  private async record(known: Remembered): Promise<void> {
    if (known.recorded) return;
    const group = known.group;
    const { store, guard, logger } = this.options;
    let outcome: 'recorded' | 'exists';
    try {
      outcome = await guard(() => store.recordLostGroup(group.ref, failureRecordOf(group)));
    } catch (error) {
      logger.warn('could not record the lost metadata of a group; will retry', {
        ...groupLogFields(group.ref),
        error: String(error),
      });
      this.retryLater();
      throw error;
    }
    if (outcome === 'exists') {
      // Its metadata is back (a restore, or a create racing this): the store says again.
      logger.warn('the metadata key of a group remembered as lost is back; not recorded as lost', {
        ...groupLogFields(group.ref),
      });
      this.lost.delete(groupId(group.ref));
      return;
    }
    // Written against the newest of what is remembered, so a merge meanwhile is written next time.
    if (known.group === group) known.recorded = true;
    else await this.record(known);
  }

  /**
   * Writes the failure record of a lost group whose key now holds another lifecycle (created
   * over the loss, at `storeRevision`), merged with a record already there. The new metadata
   * is left alone; the record makes every replica that loads the group refuse it.
   */
  private async recordOver(group: LostGroup, storeRevision: number): Promise<void> {
    const { store, guard } = this.options;
    const earlier = await guard(() => store.readFailure(group.ref));
    const record = { ...failureRecordOf(group), storeRevision };
    await guard(() => store.recordFailure(group.ref, mergeRecords(earlier, record)));
  }

  /** Whether a delete ended the group's lifecycle (any lifecycle, when `lifecycleId` is not known). */
  private isDeleted(
    ref: GroupRef,
    deletions: readonly DeletedLifecycle[],
    lifecycleId: string | undefined,
  ): boolean {
    const here = this.deletedHere.get(groupId(ref));
    if (lifecycleId === undefined || lifecycleId === '' || lifecycleId === UNKNOWN_LIFECYCLE) {
      return deletions.length > 0 || (here !== undefined && here.size > 0);
    }
    return deletions.some((d) => d.lifecycleId === lifecycleId) || here?.has(lifecycleId) === true;
  }

  private droppedHere(ref: GroupRef, leaving: Leaving): void {
    const cause = leaving.cause;
    this.options.logger.warn('group lease lost: the group is dropped here', {
      ...groupLogFields(ref),
      ...(cause === undefined
        ? {}
        : { error: cause instanceof Error ? cause.message : JSON.stringify(cause) }),
    });
  }

  private forgetOldestRecorded(): void {
    for (const [id, known] of this.lost) {
      if (known.recorded) {
        this.lost.delete(id);
        return;
      }
    }
  }

  /** What an entry leaving this replica knows of its group. */
  private lostOfEntry(entry: GroupEntry): LostGroup {
    const { group, signals } = entry.snapshot().context;
    const evidence = mergeEvidence(evidenceOfGroup(group, signals), entry.floor);
    return {
      ref: entry.ref,
      lifecycleId: group.lifecycleId,
      metadataVersion: group.metadataVersion,
      assignmentEpoch: evidence.assignmentEpoch,
      memberEpochSeq: evidence.memberEpochSeq,
      highestVersionSeen: evidence.highestVersionSeen,
      storeRevision: entry.revision,
      at: this.options.clock.now(),
      source: 'replica',
    };
  }
}

/** Two memories of one lost group: the first lifecycle known, the highest numbers, the first time. */
function mergeLost(a: LostGroup, b: LostGroup): LostGroup {
  return {
    ref: a.ref,
    lifecycleId: a.lifecycleId !== UNKNOWN_LIFECYCLE ? a.lifecycleId : b.lifecycleId,
    metadataVersion: Math.max(a.metadataVersion, b.metadataVersion),
    assignmentEpoch: Math.max(a.assignmentEpoch, b.assignmentEpoch),
    memberEpochSeq: Math.max(a.memberEpochSeq, b.memberEpochSeq),
    highestVersionSeen: Math.max(a.highestVersionSeen, b.highestVersionSeen),
    storeRevision: Math.max(a.storeRevision, b.storeRevision),
    at: Math.min(a.at, b.at),
    source: a.source,
  };
}

/** An earlier failure record kept (its reason, time, lifecycle), with the highest numbers of both. */
function mergeRecords(earlier: FailureRecord | null, record: FailureRecord): FailureRecord {
  if (earlier === null) return record;
  return {
    ...earlier,
    lifecycleId:
      earlier.lifecycleId && earlier.lifecycleId !== UNKNOWN_LIFECYCLE
        ? earlier.lifecycleId
        : record.lifecycleId,
    knownRevision: Math.max(earlier.knownRevision, record.knownRevision),
    metadataVersion: Math.max(earlier.metadataVersion, record.metadataVersion),
    highestVersionSeen: Math.max(earlier.highestVersionSeen, record.highestVersionSeen),
    assignmentEpoch: Math.max(earlier.assignmentEpoch, record.assignmentEpoch),
    memberEpochSeq: Math.max(earlier.memberEpochSeq, record.memberEpochSeq),
  };
}

/** The failure record of a lost group (reason `METADATA_LOST`, no revision found in the store). */
export function failureRecordOf(group: LostGroup): FailureRecord {
  return {
    reason: 'METADATA_LOST',
    at: group.at,
    knownRevision: group.storeRevision,
    storeRevision: null,
    lifecycleId: group.lifecycleId,
    metadataVersion: group.metadataVersion,
    highestVersionSeen: Math.max(group.highestVersionSeen, group.metadataVersion),
    assignmentEpoch: group.assignmentEpoch,
    memberEpochSeq: group.memberEpochSeq,
  };
}
