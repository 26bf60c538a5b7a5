import {
  CoordinatorError,
  EntryDroppedError,
  GroupMovedError,
  StoreUnavailableError,
} from '../errors.js';
import { groupId, type GroupRef } from '../machines/types.js';
import { isFailedClosed, type GroupEntry } from './group-entry.js';
import type { GroupLoader } from './group-loader.js';
import type { LostGroups } from './lost-groups.js';
import type { Ownership } from './group-ownership.js';
import type { GroupTable } from './group-table.js';
import { failedClosedAdminError } from './fail-closed.js';
import { STALE, type Settled, type Stale } from './mailbox.js';
import type { CreateGroupOptions } from './types.js';

/** Where a group is served from, as this replica sees it. */
export type GroupLookup =
  | { readonly kind: 'owned'; readonly entry: GroupEntry }
  /** Another replica owns it (`owner`), or it is moving (`owner` null). Nothing was loaded. */
  | { readonly kind: 'elsewhere'; readonly owner: string | null };

/**
 * Work that found its entry dropped while it ran (a batch, between its steps): it comes back
 * here like work queued behind a dropped entry, and the group is looked up again.
 */
const isDropped = (error: unknown) => error instanceof EntryDroppedError;
const staleIfDropped = (error: unknown): Stale => {
  if (isDropped(error)) return STALE;
  throw error;
};
const STALE_ITEM = { ok: true, value: STALE } as const;

export interface OwnedGroupsOptions {
  readonly table: GroupTable;
  readonly loader: Pick<GroupLoader, 'absent' | 'load' | 'create'>;
  readonly ownership: Ownership;
  /**
   * Throws `STORE_UNAVAILABLE` when the store cannot be reached: a group whose owner is unknown
   * because the replica registry cannot be read is a store outage, not a move.
   */
  readonly checkStore: () => Promise<void>;
  /**
   * Told of every group that leaves this replica other than by a delete, so one whose metadata
   * key is gone is remembered as lost rather than forgotten (docs/operations.md#lost-metadata).
   */
  readonly lost?: Pick<LostGroups, 'leaving' | 'confirm'>;
}

/**
 * The entries of the groups this replica owns, through their lifecycle: a group is loaded
 * only when the ownership layer says this replica owns it (acquire, then claim); it is served
 * only while the ownership layer allows; a release drains its mailbox before giving the lease
 * up; a dropped entry sends its queued work back to the caller, which asks the ownership
 * layer again (take it here, or forward with `GROUP_MOVED`).
 */
export class OwnedGroups {
  private closing = false;

  constructor(private readonly options: OwnedGroupsOptions) {
    options.ownership.onLost((ref, cause) => this.drop(ref, cause));
  }

  /** The group's entry if this replica serves it (loading it when it owns it), else who does. */
  async lookup(ref: GroupRef): Promise<GroupLookup> {
    if (this.closing) throw new StoreUnavailableError('the coordinator is shutting down');
    const { table, ownership } = this.options;
    const held = table.get(ref);
    if (held) {
      // Past the lease deadline or being handed over: not served from memory.
      if (held.phase !== 'owned' || !ownership.mayServe(ref))
        return { kind: 'elsewhere', owner: null };
      return { kind: 'owned', entry: held };
    }
    const owner = ownership.ownerOf(ref);
    if (!owner.self) {
      // Nobody known to own it: the registry cannot be read (a store outage) or is still empty.
      if (owner.owner === null) await this.options.checkStore();
      return { kind: 'elsewhere', owner: owner.owner };
    }
    return { kind: 'owned', entry: await this.take(ref) };
  }

  /**
   * The replica {@link lookup} would send a request for the group to, decided at once and with
   * nothing done: another replica's id when this one holds no entry for the group and that one
   * owns it; null when the group is, or may be, served here, nobody is known to own it, or this
   * replica is shutting down (then `lookup` answers).
   */
  servedElsewhere(ref: GroupRef): string | null {
    if (this.closing || this.options.table.get(ref) !== undefined) return null;
    const owner = this.options.ownership.ownerOf(ref);
    return owner.self ? null : owner.owner;
  }

  /** The group's entry; `GROUP_MOVED` when this replica does not serve it now. */
  async entry(ref: GroupRef): Promise<GroupEntry> {
    const found = await this.lookup(ref);
    if (found.kind === 'elsewhere') throw new GroupMovedError(found.owner);
    return found.entry;
  }

  /**
   * Runs `work` alone on the group's entry. Work queued behind an entry that got dropped
   * (lease lost, written by another owner, group deleted) comes back here and the group is
   * looked up again: run on the group as it is now, or `GROUP_MOVED` to forward.
   */
  withEntry<T>(ref: GroupRef, work: (entry: GroupEntry) => Promise<T>): Promise<T> {
    // A group served here is queued at once, so work reaches its mailbox in the order it was
    // asked for (heartbeats take the same road, see withEntryBatch).
    const held = this.served(ref);
    if (held) {
      return this.runOn(held, ref, work).then((result) =>
        result !== STALE ? result : this.lookUpAndRun(ref, work, 1),
      );
    }
    return this.lookUpAndRun(ref, work, 0);
  }

  private async lookUpAndRun<T>(
    ref: GroupRef,
    work: (entry: GroupEntry) => Promise<T>,
    attempts: number,
  ): Promise<T> {
    for (let attempt = attempts; attempt < 3; attempt++) {
      const result = await this.runOn(await this.entry(ref), ref, work);
      if (result !== STALE) return result;
    }
    throw new StoreUnavailableError(`group ${groupId(ref)} changed owner repeatedly; try again`);
  }

  private runOn<T>(
    entry: GroupEntry,
    ref: GroupRef,
    work: (entry: GroupEntry) => Promise<T>,
  ): Promise<T | Stale> {
    // Checked again when the work's turn comes: the lease deadline may have passed meanwhile.
    return this.options.table.run<T | Stale>(entry, () =>
      this.options.ownership.mayServe(ref)
        ? work(entry).catch(staleIfDropped)
        : Promise.resolve(STALE),
    );
  }

  /** The entry of a group this replica serves now, found without waiting; else undefined. */
  private served(ref: GroupRef): GroupEntry | undefined {
    if (this.closing) return undefined;
    const held = this.options.table.get(ref);
    return held?.phase === 'owned' && this.options.ownership.mayServe(ref) ? held : undefined;
  }

  /**
   * Like {@link withEntry} for one item of a batch of `kind` (heartbeats): items that queue up on
   * the group together are processed together by `process`, alone on the entry.
   */
  withEntryBatch<I, R>(
    ref: GroupRef,
    kind: object,
    item: I,
    process: (entry: GroupEntry, items: readonly I[]) => Promise<ReadonlyArray<Settled<R>>>,
  ): Promise<R> {
    // The usual case, a group served here, without the asynchronous lookup (a steady
    // heartbeat's road: every promise it saves is one less to collect).
    const held = this.served(ref);
    if (held) {
      return this.batchOn(held, ref, kind, item, process).then((result) =>
        result !== STALE ? result : this.lookUpAndBatch(ref, kind, item, process, 1),
      );
    }
    return this.lookUpAndBatch(ref, kind, item, process, 0);
  }

  private async lookUpAndBatch<I, R>(
    ref: GroupRef,
    kind: object,
    item: I,
    process: (entry: GroupEntry, items: readonly I[]) => Promise<ReadonlyArray<Settled<R>>>,
    attempts: number,
  ): Promise<R> {
    for (let attempt = attempts; attempt < 3; attempt++) {
      const result = await this.batchOn(await this.entry(ref), ref, kind, item, process);
      if (result !== STALE) return result;
    }
    throw new StoreUnavailableError(`group ${groupId(ref)} changed owner repeatedly; try again`);
  }

  private batchOn<I, R>(
    entry: GroupEntry,
    ref: GroupRef,
    kind: object,
    item: I,
    process: (entry: GroupEntry, items: readonly I[]) => Promise<ReadonlyArray<Settled<R>>>,
  ): Promise<R | Stale> {
    return this.options.table.runBatch<I, R | Stale>(entry, kind, item, (items) =>
      // Checked again when the batch's turn comes: the lease deadline may have passed meanwhile.
      this.options.ownership.mayServe(ref)
        ? process(entry, items).then((results) =>
            results.map((r): Settled<R | Stale> => (!r.ok && isDropped(r.error) ? STALE_ITEM : r)),
          )
        : Promise.resolve(items.map(() => STALE_ITEM)),
    );
  }

  /**
   * Runs `work` on the group's entry at once when that is exactly what {@link withEntry} would
   * do next: this replica serves the group from memory now (owned, within its lease) and its
   * mailbox is idle, so nothing queued before could run first. Null otherwise (also when the
   * group is not loaded here): the caller takes {@link withEntry}.
   */
  withEntryNow<T>(ref: GroupRef, work: (entry: GroupEntry) => T): T | null {
    if (this.closing) return null;
    const entry = this.options.table.get(ref);
    if (entry === undefined || entry.phase !== 'owned' || !entry.mailbox.isIdle()) return null;
    if (!this.options.ownership.mayServe(ref)) return null;
    return work(entry);
  }

  /**
   * Whether `entry` is served here now and idle, as {@link withEntryNow} asks of the entry it
   * finds (the entry of a group dropped or released since is no longer `owned`); `serving`
   * from {@link servingCheck}.
   */
  servesNow(entry: GroupEntry, serving: () => boolean): boolean {
    return !this.closing && entry.phase === 'owned' && entry.mailbox.isIdle() && serving();
  }

  /**
   * The ownership layer's `mayServe` for the entry's group, bound to its lease as held now
   * (`Ownership.servingCheck`), for {@link servesNow}.
   */
  servingCheck(entry: GroupEntry): () => boolean {
    if (entry.serving !== null) return entry.serving;
    const { ownership } = this.options;
    const check = ownership.servingCheck?.(entry.ref) ?? (() => ownership.mayServe(entry.ref));
    // Kept only once it says yes (a check made before the lease is held would stay false).
    if (check()) entry.serving = check;
    return check;
  }

  /**
   * Creates a group this replica owns (a bare number is its shard count). A load or create in flight may bring the group: it is
   * let finish first. Requests arriving meanwhile wait for the create instead of loading it.
   */
  async create(ref: GroupRef, options: CreateGroupOptions | number): Promise<GroupEntry> {
    const { table, loader, ownership } = this.options;
    const spec = typeof options === 'number' ? { shardCount: options } : options;
    const id = groupId(ref);
    const owner = ownership.ownerOf(ref);
    if (!owner.self) {
      if (owner.owner === null) await this.options.checkStore();
      throw new GroupMovedError(owner.owner);
    }
    // A group remembered here as lost has its failure record written first, so the create
    // below is refused: it is never created anew over a loss (docs/operations.md#lost-metadata).
    await this.options.lost?.confirm(ref);
    const inFlight = table.loading.get(id);
    if (inFlight) await inFlight.catch(() => undefined);
    // (No await from here: the check and the registration of this create happen in one step.)
    const known = table.get(ref);
    if (known) {
      // Also after Redis lost everything: a group this process knows is not created anew.
      if (isFailedClosed(known)) throw failedClosedAdminError(known);
      throw new CoordinatorError('GROUP_EXISTS', `group ${id} already exists`);
    }
    const creating = ownership
      .acquire(ref)
      .then(() => loader.create(ref, spec))
      .then((entry) => this.servable(entry))
      .catch(async (error: unknown) => {
        await this.releaseUnheld(ref);
        throw error;
      });
    const waiting = creating.catch(() => this.acquireAndLoad(ref));
    waiting.catch(() => undefined); // its own waiters see the rejection; nobody else must
    table.loading.set(id, waiting);
    try {
      return await creating;
    } finally {
      if (table.loading.get(id) === waiting) table.loading.delete(id);
    }
  }

  /**
   * Drops the group at once (lease lost): queued work goes back to its callers. Whether its
   * metadata is still stored is asked next (`LostGroups.leaving`): gone, the group is
   * remembered as lost, not dropped and forgotten.
   */
  drop(ref: GroupRef, cause?: unknown): void {
    const entry = this.options.table.get(ref);
    this.options.lost?.leaving(ref, entry ?? null, { leaseLost: true, cause });
    if (entry) this.options.table.remove(entry);
  }

  /** Hands the group over: no new work, the mailbox drains, the entry goes, the lease is given up. */
  async release(ref: GroupRef): Promise<void> {
    const { table, ownership } = this.options;
    // A load or create in flight would otherwise add its entry after the lease was given up:
    // an entry nobody renews or drops, answering GROUP_MOVED with no owner for good.
    const inFlight = table.loading.get(groupId(ref));
    if (inFlight) await inFlight.catch(() => undefined);
    const entry = table.get(ref);
    if (entry) {
      table.beginRelease(entry);
      await entry.mailbox.idle();
      if (!this.closing) this.options.lost?.leaving(ref, entry, { leaseLost: false });
      table.remove(entry);
      // Dropped while it drained (its lease lost) and taken again here since: the lease held
      // now is that later entry's (or load's), served and renewed; giving it up would leave an
      // entry that may never serve. A later hand-over pass gives it up if it must go.
      if (table.get(ref) !== undefined || table.loading.has(groupId(ref))) return;
    }
    await ownership.release(ref);
  }

  /** The groups this replica has entries for. */
  held(): GroupRef[] {
    return this.options.table.all().map((entry) => entry.ref);
  }

  /**
   * Acquires the group's lease and loads it (claiming it under the lease). A group the store
   * holds nothing of is answered `GROUP_NOT_FOUND` first, without taking its lease.
   */
  private async acquireAndLoad(ref: GroupRef): Promise<GroupEntry> {
    const { loader, ownership } = this.options;
    if (await loader.absent(ref)) {
      throw new CoordinatorError('GROUP_NOT_FOUND', `group ${groupId(ref)} does not exist`);
    }
    return ownership
      .acquire(ref)
      .then(() => loader.load(ref))
      .then((entry) => this.servable(entry))
      .catch(async (error: unknown) => {
        // Not found, or not claimed: the lease taken for it must not stay held (and renewed).
        await this.releaseUnheld(ref);
        throw error;
      });
  }

  /**
   * The entry just loaded or created, if its lease still allows serving it; otherwise (the
   * lease was lost or handed over while it loaded) the entry goes and the caller forwards.
   */
  private servable(entry: GroupEntry): GroupEntry {
    if (this.options.ownership.mayServe(entry.ref)) return entry;
    if (this.options.table.get(entry.ref) === entry) this.options.table.remove(entry);
    throw new GroupMovedError(null);
  }

  /** Gives the group's lease up unless an entry holds it (a failed load or create). */
  private async releaseUnheld(ref: GroupRef): Promise<void> {
    if (this.options.table.get(ref)) return;
    await this.options.ownership.release(ref).catch(() => undefined);
  }

  /** Refuses new work and waits for the loads in flight (shutdown). */
  async stop(): Promise<void> {
    this.closing = true;
    await Promise.allSettled([...this.options.table.loading.values()]);
  }

  /** Loads a group this replica owns (one load per group at a time): acquire, then claim. */
  private take(ref: GroupRef): Promise<GroupEntry> {
    const { table } = this.options;
    const id = groupId(ref);
    let pending = table.loading.get(id);
    if (!pending) {
      pending = this.acquireAndLoad(ref).finally(() => table.loading.delete(id));
      table.loading.set(id, pending);
    }
    return pending;
  }
}
