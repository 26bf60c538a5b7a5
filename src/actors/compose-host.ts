import type { Settings } from '../config/settings.js';
import type { Clock } from '../machines/clock.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { Store } from '../store/store.js';
import type { StreamsReader } from '../streams/streams-reader.js';
import { Committer } from './committer.js';
import { DeadlineSweep } from './deadline-sweep.js';
import { FailClosed } from './fail-closed.js';
import { groupOf, type ActorFactory, type GroupEntry } from './group-entry.js';
import { GroupDeletion } from './group-deletion.js';
import { GroupLoader } from './group-loader.js';
import { SingleReplicaOwnership, type Ownership } from './group-ownership.js';
import { GroupTable } from './group-table.js';
import { HeldHeartbeats } from './held-heartbeats.js';
import { LostGroups } from './lost-groups.js';
import { membershipConfigFrom } from './membership-config.js';
import { OwnedGroups } from './owned-groups.js';
import { Publication } from './publication.js';
import { Recovery } from './recovery.js';
import { storeGuard, type StoreGuard } from './store-guard.js';
import type { TurnBudget } from './turn-budget.js';
import { VerifyLoop } from './verify-loop.js';
import { WriteRefusal } from './write-refusal.js';

export interface GroupHostOptions {
  readonly store: Store;
  readonly settings: Settings;
  readonly clock: Clock;
  readonly metrics: Metrics;
  readonly logger: Logger;
  readonly replicaId: string;
  /** Who owns which group; by default this replica owns every group. */
  readonly ownership?: Ownership;
  /**
   * Reads the data streams for lag; by default made from `coordinator.streams.*` (or the
   * store's Redis), null for none.
   */
  readonly streams?: StreamsReader | null;
  /** The share of each turn of the event loop that batches may take; the replica's by default (tests). */
  readonly turnBudget?: TurnBudget;
}

/** The one-job parts a {@link GroupHost} is made of. */
export interface HostParts {
  readonly table: GroupTable;
  readonly guard: StoreGuard;
  readonly publication: Publication;
  readonly committer: Committer;
  readonly deletion: GroupDeletion;
  readonly recovery: Recovery;
  readonly sweeper: DeadlineSweep;
  readonly holds: HeldHeartbeats;
  readonly verifier: VerifyLoop;
  readonly owned: OwnedGroups;
  readonly ownership: Ownership;
  readonly factory: ActorFactory;
  /** The groups whose metadata key is gone while this replica or a client remembers them. */
  readonly lost: LostGroups;
}

/** Wires the parts of the host together: which part may call which is visible here only. */
export function composeHost(options: GroupHostOptions): HostParts {
  const { store, settings, clock, metrics, logger } = options;
  const factory: ActorFactory = { config: membershipConfigFrom(settings), clock, logger };
  const ownership = options.ownership ?? new SingleReplicaOwnership(store, options.replicaId);
  const holds = new HeldHeartbeats({
    clock,
    onCount: (held) => metrics.heldHeartbeats.set(held),
  });
  // The sweep ticks through the committer (built below), which tells the sweep of deadlines.
  const sweeper: DeadlineSweep = new DeadlineSweep({
    clock,
    logger,
    entries: () => table.all(),
    run: (entry, work) => table.run(entry, work),
    committer: { dispatch: (entry, event) => committer.dispatch(entry, event) },
    intervalMs: settings.membership['sweep-interval'],
  });
  // A group leaving this replica: nothing held is answered from it, its timers stop.
  const table = new GroupTable(metrics, (entry) => {
    holds.wakeAll(entry);
    sweeper.forget(entry);
    publication.ended(entry);
  });
  // A dropped group (deleted, or written by another owner) keeps no lease here either.
  const drop = (entry: GroupEntry) => {
    const current = table.isCurrent(entry);
    table.remove(entry);
    if (current) void ownership.release(entry.ref).catch(() => undefined);
  };
  const run = <T>(entry: GroupEntry, work: () => Promise<T>) => table.run(entry, work);
  const entries = () => table.all();
  const guard = storeGuard(metrics);
  const publication = new Publication(clock, metrics, holds);
  // An empty store is never read as "no groups" (docs/operations.md#lost-metadata).
  const lost = new LostGroups({
    store,
    guard,
    clock,
    metrics,
    logger,
    believeClients: store.kind !== 'memory',
  });
  const failClosed = new FailClosed({ store, clock, metrics, logger, publication });
  const refusal = new WriteRefusal({ store, guard, failClosed, drop, logger });
  const committer: Committer = new Committer({
    store,
    guard,
    clock,
    metrics,
    logger,
    factory,
    publication,
    refusal,
    deadlines: sweeper,
    ...(options.turnBudget === undefined ? {} : { turnBudget: options.turnBudget }),
  });
  const loader = new GroupLoader({
    store,
    guard,
    factory,
    table,
    publication,
    failClosed,
    ownership,
    deadlines: sweeper,
    lost,
  });
  const deletion = new GroupDeletion({ store, guard, refusal, drop, logger, lost });
  return {
    table,
    guard,
    publication,
    committer,
    deletion,
    recovery: new Recovery({ store, guard, factory, publication, ownership, logger, lost }),
    owned: new OwnedGroups({
      table,
      loader,
      ownership,
      checkStore: () => guard(() => store.ping()),
      lost,
    }),
    sweeper,
    holds,
    verifier: new VerifyLoop({
      store,
      clock,
      logger,
      entries,
      run,
      failClosed,
      drop,
      intervalMs: settings.store['verify-interval'],
      deletedMeanwhile: async (entry) => {
        if (!(await deletion.deletedMeanwhile(entry))) return false;
        await lost.deleted(entry.ref, groupOf(entry).lifecycleId);
        return true;
      },
    }),
    ownership,
    factory,
    lost,
  };
}
