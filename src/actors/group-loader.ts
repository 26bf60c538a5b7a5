import { randomUUID } from 'node:crypto';
import { CoordinatorError } from '../errors.js';
import { newGroupState } from '../machines/new-group.js';
import { groupId, type FailureReason, type GroupRef } from '../machines/types.js';
import type { FailureRecord, Store, StoredGroup } from '../store/store.js';
import type { CreateGroupOptions } from './types.js';
import { evidenceOfRecord } from './evidence.js';
import type { DeadlineSweep } from './deadline-sweep.js';
import type { FailClosed } from './fail-closed.js';
import { isFailedClosed, newEntry, type ActorFactory, type GroupEntry } from './group-entry.js';
import type { Ownership } from './group-ownership.js';
import type { GroupTable } from './group-table.js';
import type { LostGroups } from './lost-groups.js';
import type { Publication } from './publication.js';
import type { StoreGuard } from './store-guard.js';

export interface GroupLoaderOptions {
  readonly store: Pick<
    Store,
    'readFailure' | 'loadGroup' | 'isRegistered' | 'createGroup' | 'adoptLayout' | 'readLayouts'
  >;
  readonly guard: StoreGuard;
  readonly factory: ActorFactory;
  readonly table: Pick<GroupTable, 'get' | 'add'>;
  readonly publication: Pick<Publication, 'observe'>;
  readonly failClosed: Pick<FailClosed, 'failClosed'>;
  /** Claims a group (the store increments its fence). */
  readonly ownership: Pick<Ownership, 'claim'>;
  /** Starts the timers of a group taken into the table. */
  readonly deadlines?: Pick<DeadlineSweep, 'track'>;
  /**
   * Asked when the store holds nothing of a group: a group this replica remembers as lost is
   * answered failed closed, never as unknown (docs/operations.md#lost-metadata).
   */
  readonly lost?: Pick<LostGroups, 'confirm'>;
}

/**
 * Brings a group into the table: loaded from the store (taking it over with a new fence),
 * created anew, or adopted failed closed when its failure record or its metadata says so.
 */
export class GroupLoader {
  constructor(private readonly options: GroupLoaderOptions) {}

  /**
   * Whether the store holds nothing of the group (no failure record, no metadata key, not in
   * the group registry) and this replica does not remember it as lost: a lookup then answers
   * `GROUP_NOT_FOUND` without taking the group's lease, so a request for a group that does not
   * exist writes nothing (docs/architecture.md#replicas-leases-and-fences). Read without the
   * lease, which is safe: the answer is a read at one instant, and a create landing after it
   * (on any replica) is simply later; a group found here is loaded under the lease, read again.
   */
  async absent(ref: GroupRef): Promise<boolean> {
    const { store, guard } = this.options;
    // Sent together: one round trip on a Redis connection.
    const [failure, stored, registered] = await Promise.all([
      guard(() => store.readFailure(ref)),
      guard(() => store.loadGroup(ref)).catch((error: unknown) => {
        // A key that cannot be read is there: the load under the lease fails it closed.
        if (error instanceof CoordinatorError && error.code === 'METADATA_CORRUPT') return true;
        throw error;
      }),
      guard(() => store.isRegistered(ref)),
    ]);
    if (failure !== null || stored !== null || registered) return false;
    // Remembered here as lost: its failure record is written now, and the load answers it.
    return !(await this.options.lost?.confirm(ref));
  }

  /**
   * Loads a group this replica owns (the ownership layer decided so) from the store and claims
   * it; `GROUP_NOT_FOUND` when it does not exist.
   */
  async load(ref: GroupRef, again = false): Promise<GroupEntry> {
    const { store, guard, table } = this.options;
    // The failure record first: a group that failed closed stays so, whatever its key holds now.
    const failure = await guard(() => store.readFailure(ref));
    let stored: StoredGroup | null;
    try {
      stored = await guard(() => store.loadGroup(ref));
    } catch (error) {
      if (!(error instanceof CoordinatorError && error.code === 'METADATA_CORRUPT')) throw error;
      return this.adoptFailed(ref, null, 'METADATA_CORRUPT', failure);
    }
    if (failure) return this.adoptFailed(ref, stored, failure.reason, failure);
    if (!stored) {
      if (!(await guard(() => store.isRegistered(ref)))) {
        // Nothing stored, but remembered here as lost: its failure record is written now, and
        // the group is read again (failed closed; or served, if its metadata came back).
        if (!again && (await this.options.lost?.confirm(ref))) return this.load(ref, true);
        throw new CoordinatorError('GROUP_NOT_FOUND', `group ${groupId(ref)} does not exist`);
      }
      // Registered: created meanwhile (read again), or its metadata is lost.
      stored = await guard(() => store.loadGroup(ref));
      if (!stored) return this.adoptFailed(ref, null, 'METADATA_LOST', null);
    }
    // Adopted meanwhile (a create in this process): keep that entry and its fence.
    const adopted = table.get(ref);
    if (adopted) return adopted;
    // Claiming bumps the fence: a writer holding an older token can never write again.
    const owned = await guard(() => this.options.ownership.claim(ref));
    return this.adopt(owned);
  }

  /**
   * Creates a group that does not exist, on its stream prefix's shard layout
   * (docs/protocol.md#one-shard-layout-per-stream-prefix); refused when a failure record says it
   * failed closed.
   */
  async create(ref: GroupRef, spec: CreateGroupOptions): Promise<GroupEntry> {
    const { store, guard, factory } = this.options;
    const failure = await guard(() => store.readFailure(ref));
    if (failure) {
      throw new CoordinatorError(
        'GROUP_FAILED_CLOSED_ADMIN',
        'the group failed closed; only recovery is allowed',
        { details: { failureReason: failure.reason } },
      );
    }
    const now = factory.clock.now();
    const layout = await this.joinLayout(ref, spec.shardCount, now);
    const state = newGroupState(ref, {
      shardCount: layout.shardCount,
      lifecycleId: randomUUID(),
      now,
      layout: { id: layout.id, version: layout.version },
      startAt: spec.startAt ?? 'latest',
      ...(spec.startFrom === undefined ? {} : { startFrom: spec.startFrom }),
    });
    const stored = await guard(() => store.createGroup(state));
    return this.adopt(stored);
  }

  /** The layout a new group joins: its prefix's, or a new one of `shardCount`. */
  private async joinLayout(ref: GroupRef, shardCount: number | undefined, now: number) {
    const { store, guard } = this.options;
    if (shardCount !== undefined) {
      return guard(() =>
        store.adoptLayout(ref, { shardCount, mode: 'exact', now, newId: randomUUID() }),
      );
    }
    const [current] = await guard(() => store.readLayouts([ref.streamPrefix]));
    if (!current) {
      throw new CoordinatorError(
        'VALIDATION_FAILED',
        `shardCount is required: stream prefix ${ref.streamPrefix} has no group yet`,
      );
    }
    return guard(() =>
      store.adoptLayout(ref, {
        shardCount: current.shardCount,
        mode: 'adopt',
        now,
        newId: randomUUID(),
      }),
    );
  }

  /** Adds an entry for a group as stored (or keeps the one adopted meanwhile). */
  adopt(stored: StoredGroup): GroupEntry {
    const { table, factory, publication } = this.options;
    const ref = {
      streamPrefix: stored.state.streamPrefix,
      consumerGroup: stored.state.consumerGroup,
    };
    // Adopted meanwhile (a create racing a first heartbeat): checked before an actor is started.
    const existing = table.get(ref);
    if (existing) return existing;
    const entry = table.add(newEntry(factory, stored));
    publication.observe(entry, entry.snapshot().context);
    this.options.deadlines?.track(entry);
    return entry;
  }

  /** Adopts a group that must stay failed closed: its stored state if readable, else a shell. */
  private async adoptFailed(
    ref: GroupRef,
    stored: StoredGroup | null,
    reason: FailureReason,
    failure: FailureRecord | null,
  ): Promise<GroupEntry> {
    const entry = this.adopt(stored ?? failedShell(ref, failure, this.options.factory.clock.now()));
    entry.floor = evidenceOfRecord(failure);
    if (!isFailedClosed(entry)) {
      // Registered without its key, and no record yet: the registry remembered the group.
      const lostBy = reason === 'METADATA_LOST' && !failure && !stored ? 'registry' : undefined;
      await this.options.failClosed.failClosed(
        entry,
        reason,
        stored?.revision ?? null,
        lostBy,
        failure !== null,
      );
    }
    return entry;
  }
}

/**
 * What stands in for a failed-closed group whose metadata cannot be read (lost, corrupt): no
 * shards and no members, with the lifecycle and the last versions its failure record names
 * (what monitoring shows of it; recovery stays above them).
 */
export function failedShell(
  ref: GroupRef,
  failure: FailureRecord | null,
  now: number,
): StoredGroup {
  const state = newGroupState(ref, {
    shardCount: 0,
    lifecycleId: failure?.lifecycleId ?? 'unknown',
    now,
    ...(failure
      ? {
          metadataVersion: Math.max(1, failure.metadataVersion),
          assignmentEpoch: failure.assignmentEpoch ?? 0,
          memberEpochSeq: failure.memberEpochSeq ?? 0,
        }
      : {}),
  });
  return { state, revision: failure?.knownRevision ?? 0, fence: 0 };
}
