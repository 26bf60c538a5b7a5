import { randomUUID } from 'node:crypto';
import { createActor, type Actor } from 'xstate';
import type { Settings } from '../config/settings.js';
import { CoordinatorError, StoreUnavailableError } from '../errors.js';
import type { Clock } from '../machines/clock.js';
import { createGroupContext, nextDeadline, type GroupContext } from '../machines/context.js';
import { groupMachine } from '../machines/group-machine.js';
import { newGroupState } from '../machines/new-group.js';
import type { HeartbeatReply, HeartbeatRequest } from '../machines/protocol.js';
import { groupId, type FailureReason, type GroupRef, type GroupState } from '../machines/types.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { diffFields, encodeGroup, isEmptyPatch, type GroupFields } from '../store/codec.js';
import type { FailureRecord, Store, StoredGroup } from '../store/store.js';
import { applyEffects } from './effects.js';
import {
  evidenceOfFields,
  evidenceOfGroup,
  evidenceOfRecord,
  mergeEvidence,
  type Evidence,
} from './evidence.js';
import { membershipConfigFrom } from './membership-config.js';
import type {
  AdminCommand,
  ChangeRequest,
  GroupCoordinator,
  GroupSnapshot,
  GroupTransition,
  RecoveryRequest,
} from './types.js';
import { VersionWaiters } from './version-waiters.js';

type GroupActor = Actor<typeof groupMachine>;
type GroupEvent = Parameters<GroupActor['send']>[0];

/** One owned group: its actor, what was last persisted, and its mailbox. */
interface GroupEntry {
  readonly ref: GroupRef;
  actor: GroupActor;
  /** The encoding last written (or read): diffs are taken against it. */
  persisted: GroupFields;
  revision: number;
  fence: string;
  /** Tail of the mailbox: work on a group runs one at a time. */
  queue: Promise<unknown>;
  /** The group object `observe` last looked at. */
  observed: GroupState | null;
  counts: { members: number; revoking: number };
  /** JSON of the last state value, to tell transitions from steady events. */
  lastValue: string;
  /** The last snapshot whose state is committed: what monitoring and replies show. */
  published: ReturnType<GroupActor['getSnapshot']> | null;
  /** A failure not yet recorded in the store (the write failed): the verify loop retries. */
  unrecorded: { reason: FailureReason; storeRevision: number | null } | null;
  /** A delete was started; it may have happened even if its reply was lost. */
  deleting: boolean;
  /** Evidence from a persisted failure record (what recovery must stay above). */
  floor: Evidence | null;
}

export interface GroupHostOptions {
  readonly store: Store;
  readonly settings: Settings;
  readonly clock: Clock;
  readonly metrics: Metrics;
  readonly logger: Logger;
  readonly replicaId: string;
}

/** Returned by mailbox work that found its entry replaced: the caller retries on the new one. */
const STALE = Symbol('stale entry');

/** Events that come from consumers or producers (503 when failed closed) rather than admins (409). */
const CLIENT_EVENTS = new Set(['HEARTBEAT', 'OBSERVE_VERSION', 'TICK']);

/**
 * The actor system (DESIGN.md §2): one XState actor per group, created on first use from the
 * store. Work on a group runs alone (a per-group mailbox); when an event changes persisted
 * state the host makes ONE fenced, revision-checked write before anyone is answered, and
 * rebuilds the actor from the last persisted state if that write fails. Timers are a deadline
 * sweep; a verify loop notices lost or rolled-back metadata (DESIGN.md §7).
 */
export class GroupHost implements GroupCoordinator {
  private readonly entries = new Map<string, GroupEntry>();
  private readonly loading = new Map<string, Promise<GroupEntry>>();
  private readonly stops: Array<() => void> = [];
  private closing = false;
  private readonly waiters: VersionWaiters;
  private readonly listeners = new Map<string, Set<(transition: GroupTransition) => void>>();
  private readonly config;

  constructor(private readonly options: GroupHostOptions) {
    this.config = membershipConfigFrom(options.settings);
    this.waiters = new VersionWaiters(options.clock, (open) =>
      options.metrics.routingLongPolls.set(open),
    );
  }

  /** Starts the deadline sweep and, on a real store, the verify loop. */
  start(): void {
    if (this.stops.length > 0) return;
    const { clock, settings, logger, store } = this.options;
    this.stops.push(
      clock.every(settings.membership['sweep-interval'], () => {
        this.sweep().catch((error: unknown) =>
          logger.error('sweep failed', { error: String(error) }),
        );
      }),
    );
    if (store.kind !== 'memory') {
      this.stops.push(
        clock.every(settings.store['verify-interval'], () => {
          this.verify().catch((error: unknown) =>
            logger.warn('store verification failed', { error: String(error) }),
          );
        }),
      );
    }
  }

  async close(): Promise<void> {
    this.closing = true;
    for (const stop of this.stops.splice(0)) stop();
    await Promise.allSettled([...this.loading.values()]);
    this.waiters.releaseAll();
    await Promise.allSettled([...this.entries.values()].map((e) => e.queue));
    for (const entry of this.entries.values()) entry.actor.stop();
    this.entries.clear();
    this.options.metrics.groupsOwned.set(0);
  }

  /** Ticks every actor whose earliest deadline has passed; resolves when they are done. */
  async sweep(): Promise<void> {
    const now = this.options.clock.now();
    // Deadlines move with every heartbeat (session expiry), so they are read here, not kept.
    const due = [...this.entries.values()].filter((e) => {
      const deadline = nextDeadline(e.actor.getSnapshot().context);
      return deadline !== null && deadline <= now;
    });
    await Promise.allSettled(
      due.map((entry) =>
        this.inMailbox(entry, () =>
          this.dispatch(entry, { type: 'TICK', now: this.options.clock.now() }),
        ),
      ),
    );
  }

  /**
   * Re-reads revision and lifecycle of every owned group in one round trip (DESIGN.md §7), so a
   * lost or rolled-back metadata key is noticed even when nothing is being written. A group
   * written to meanwhile is skipped this round: its write checked the revision itself.
   */
  async verify(): Promise<void> {
    const failed = [...this.entries.values()].filter((e) => e.unrecorded !== null);
    await Promise.allSettled(
      failed.map((entry) => this.inMailbox(entry, () => this.recordFailure(entry))),
    );
    const entries = [...this.entries.values()].filter((e) => !this.failedClosed(e));
    if (entries.length === 0) return;
    const expected = entries.map((e) => e.revision);
    const revisions = await this.options.store.readRevisions(entries.map((e) => e.ref));
    await Promise.allSettled(
      entries.map((entry, i) =>
        this.inMailbox(entry, async () => {
          if (this.failedClosed(entry) || entry.revision !== expected[i]) return;
          const seen = revisions[i] ?? null;
          const { lifecycleId } = entry.actor.getSnapshot().context.group;
          if (seen === null) {
            if (await this.deletedMeanwhile(entry)) this.forget(entry);
            else await this.failClosed(entry, 'METADATA_LOST', null);
          } else if (seen.revision < entry.revision || seen.lifecycleId !== lifecycleId) {
            await this.failClosed(entry, 'STORE_REVISION_REGRESSION', seen.revision);
          }
        }),
      ),
    );
  }

  async assertWritable(): Promise<void> {
    if (this.options.store.kind === 'memory') return;
    await this.options.store.ping();
  }

  async createGroup(ref: GroupRef, shardCount: number): Promise<GroupSnapshot> {
    const id = groupId(ref);
    // A load or create in flight may bring the group: let it finish, then decide. (No await
    // otherwise: the check below and the registration of this create happen in one step.)
    const inFlight = this.loading.get(id);
    if (inFlight) await inFlight.catch(() => undefined);
    const known = this.entries.get(id);
    if (known) {
      // Also after Redis lost everything: a group this process knows is not created anew.
      if (this.failedClosed(known)) this.refuseFailedClosed(known);
      throw new CoordinatorError('GROUP_EXISTS', `group ${id} already exists`);
    }
    const creating = this.create(ref, shardCount);
    // Requests arriving meanwhile wait for the create instead of loading (and re-fencing) it.
    const waiting = creating.catch(() => this.load(ref));
    waiting.catch(() => undefined); // its own waiters see the rejection; nobody else must
    this.loading.set(id, waiting);
    try {
      const entry = await creating;
      this.options.logger.info('group created', { group: id, shardCount });
      return this.snapshotOf(entry);
    } finally {
      if (this.loading.get(id) === waiting) this.loading.delete(id);
    }
  }

  private async create(ref: GroupRef, shardCount: number): Promise<GroupEntry> {
    const failure = await this.guardStore(() => this.options.store.readFailure(ref));
    if (failure) {
      throw new CoordinatorError(
        'GROUP_FAILED_CLOSED_ADMIN',
        'the group failed closed; only recovery is allowed',
        {
          details: { failureReason: failure.reason },
        },
      );
    }
    const state = newGroupState(ref, {
      shardCount,
      lifecycleId: randomUUID(),
      now: this.options.clock.now(),
    });
    const stored = await this.guardStore(() =>
      this.options.store.createGroup(state, this.newFence()),
    );
    return this.adopt(stored);
  }

  async putGroup(ref: GroupRef, shardCount: number, change: ChangeRequest) {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.withEntry(ref, async (entry) => {
          const group = entry.actor.getSnapshot().context.group;
          if (group.status === 'FAILED_CLOSED') this.refuseFailedClosed(entry);
          if (group.shardCount === shardCount) {
            return { outcome: 'UNCHANGED' as const, snapshot: this.snapshotOf(entry) };
          }
          const { reply, snapshot } = await this.runCommand(entry, {
            type: 'SCALE',
            shardCount,
            ...change,
          });
          return {
            outcome: 'MIGRATION_STARTED' as const,
            snapshot,
            migration: (reply as { migration: unknown }).migration,
          };
        });
      } catch (error) {
        if (!(error instanceof CoordinatorError && error.code === 'GROUP_NOT_FOUND')) throw error;
        try {
          return { outcome: 'CREATED' as const, snapshot: await this.createGroup(ref, shardCount) };
        } catch (createError) {
          // Created by a request racing this one: decide again against the group as it is.
          const exists =
            createError instanceof CoordinatorError && createError.code === 'GROUP_EXISTS';
          if (!exists || attempt > 0) throw createError;
        }
      }
    }
  }

  async getGroup(ref: GroupRef): Promise<GroupSnapshot> {
    return this.snapshotOf(await this.entry(ref));
  }

  async listGroups(options: { cursor?: string | undefined; limit: number }) {
    const page = await this.guardStore(() => this.options.store.listGroups(options));
    const groups: GroupSnapshot[] = [];
    for (const ref of page.groups) {
      try {
        groups.push(await this.getGroup(ref));
      } catch (error) {
        if (!(error instanceof CoordinatorError && error.code === 'GROUP_NOT_FOUND')) throw error;
      }
    }
    return { groups, nextCursor: page.nextCursor };
  }

  async deleteGroup(ref: GroupRef, options: { force: boolean }): Promise<void> {
    await this.withEntry(ref, async (entry) => {
      const { group } = entry.actor.getSnapshot().context;
      if (group.status === 'FROZEN')
        throw new CoordinatorError('GROUP_FROZEN', 'the group is frozen');
      if (group.status === 'FAILED_CLOSED') this.refuseFailedClosed(entry);
      const members = Object.keys(group.members).length;
      if (members > 0 && !options.force) {
        throw new CoordinatorError(
          'GROUP_HAS_MEMBERS',
          `the group has ${members} live members; pass force=true`,
          {
            details: { members },
          },
        );
      }
      // Marked first: if the reply of a delete that did happen is lost, a retry (or the verify
      // loop) finds the group gone and unregistered, and knows that is this delete, not a loss.
      entry.deleting = true;
      try {
        await this.guardStore(() =>
          this.options.store.deleteGroup(ref, entry.fence, entry.revision),
        );
      } catch (error) {
        if (!(await this.deletedMeanwhile(entry, error))) {
          throw await this.onWriteRefused(entry, 'DELETE', error);
        }
      }
      this.forget(entry);
      this.options.logger.info('group deleted', { group: groupId(ref), force: options.force });
    });
  }

  async command(
    ref: GroupRef,
    command: AdminCommand,
  ): Promise<{ reply: unknown; snapshot: GroupSnapshot }> {
    return this.withEntry(ref, (entry) => this.runCommand(entry, command));
  }

  /** An admin command on an entry whose mailbox the caller holds. */
  private async runCommand(
    entry: GroupEntry,
    command: AdminCommand,
  ): Promise<{ reply: unknown; snapshot: GroupSnapshot }> {
    const now = this.options.clock.now();
    const event: GroupEvent =
      command.type === 'SCALE'
        ? { ...command, now, migrationId: randomUUID() }
        : command.type === 'ROLLBACK'
          ? { ...command, now, newMigrationId: randomUUID() }
          : { ...command, now };
    const context = await this.dispatch(entry, event);
    return { reply: this.unwrap(context), snapshot: this.snapshotOf(entry) };
  }

  async heartbeat(ref: GroupRef, request: HeartbeatRequest): Promise<HeartbeatReply> {
    return this.withEntry(ref, async (entry) => {
      const context = await this.dispatch(entry, {
        type: 'HEARTBEAT',
        now: this.options.clock.now(),
        request,
      });
      return this.unwrap(context) as HeartbeatReply;
    });
  }

  async observeVersion(ref: GroupRef, version: number, source: 'routing'): Promise<void> {
    await this.withEntry(ref, async (entry) => {
      if (version <= entry.actor.getSnapshot().context.group.metadataVersion) return;
      await this.dispatch(entry, {
        type: 'OBSERVE_VERSION',
        now: this.options.clock.now(),
        source,
        version,
      });
    });
  }

  async waitForVersion(
    ref: GroupRef,
    afterVersion: number,
    waitMs: number,
  ): Promise<GroupSnapshot> {
    const entry = await this.entry(ref);
    const { group } = entry.actor.getSnapshot().context;
    if (group.metadataVersion <= afterVersion && group.status !== 'FAILED_CLOSED' && waitMs > 0) {
      await this.waiters.wait(groupId(ref), afterVersion, waitMs);
    }
    return this.getGroup(ref);
  }

  async recover(ref: GroupRef, request: RecoveryRequest): Promise<GroupSnapshot> {
    return this.withEntry(ref, async (entry) => {
      const before = entry.actor.getSnapshot().context;
      if (before.group.status !== 'FAILED_CLOSED') {
        throw new CoordinatorError(
          'GROUP_NOT_FAILED_CLOSED',
          'recovery applies only to a failed-closed group',
          {
            details: { status: before.group.status },
          },
        );
      }
      const recorded = await this.guardStore(() => this.options.store.readFailure(ref));
      const evidence = mergeEvidence(
        evidenceOfGroup(before.group, before.signals),
        entry.floor,
        evidenceOfRecord(recorded),
      );
      const highest = evidence.highestVersionSeen;
      let stored: StoredGroup;
      if (request.action === 'RESUME') {
        const found = await this.guardStore(() => this.options.store.loadGroup(ref));
        if (!found) {
          throw new CoordinatorError(
            'RESUME_REFUSED',
            'the metadata key is missing: restore a backup first, or RECREATE',
          );
        }
        if (found.state.metadataVersion < highest) {
          throw new CoordinatorError(
            'RESUME_REFUSED',
            `the stored metadataVersion ${found.state.metadataVersion} is below the highest version seen (${highest}): RECREATE instead`,
            {
              details: {
                storedMetadataVersion: found.state.metadataVersion,
                highestVersionSeen: highest,
              },
            },
          );
        }
        const owned = await this.guardStore(() =>
          this.options.store.takeOwnership(ref, this.newFence()),
        );
        stored = await this.raiseEpochs(ref, owned, evidence);
      } else {
        stored = await this.recreate(ref, evidence, request.shardCount);
      }
      await this.guardStore(() => this.options.store.clearFailure(ref));
      this.replaceActor(entry, stored, before);
      this.options.logger.warn('group recovered', {
        group: groupId(ref),
        action: request.action,
        requestedBy: request.requestedBy,
        lifecycleId: stored.state.lifecycleId,
      });
      return this.snapshotOf(entry);
    });
  }

  /**
   * Follows a group's transitions (the monitoring events stream): `listener` gets every change
   * of state value and every event with effects. Resolves with the unsubscribe function.
   */
  async subscribe(
    ref: GroupRef,
    listener: (transition: GroupTransition) => void,
  ): Promise<() => void> {
    const entry = await this.entry(ref);
    const id = groupId(entry.ref);
    let set = this.listeners.get(id);
    if (!set) {
      set = new Set();
      this.listeners.set(id, set);
    }
    if (set.size === 0) entry.lastValue = JSON.stringify(entry.actor.getSnapshot().value);
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(id);
    };
  }

  /** The entry of a group, loading it from the store on first use. */
  private async entry(ref: GroupRef): Promise<GroupEntry> {
    if (this.closing) throw new StoreUnavailableError('the coordinator is shutting down');
    const id = groupId(ref);
    const existing = this.entries.get(id);
    if (existing) return existing;
    let pending = this.loading.get(id);
    if (!pending) {
      pending = this.load(ref).finally(() => this.loading.delete(id));
      this.loading.set(id, pending);
    }
    return pending;
  }

  private async load(ref: GroupRef): Promise<GroupEntry> {
    const { store } = this.options;
    // The failure record first: a group that failed closed stays so, whatever its key holds now.
    const failure = await this.guardStore(() => store.readFailure(ref));
    let stored: StoredGroup | null;
    try {
      stored = await this.guardStore(() => store.loadGroup(ref));
    } catch (error) {
      if (!(error instanceof CoordinatorError && error.code === 'METADATA_CORRUPT')) throw error;
      return this.adoptFailed(ref, null, 'METADATA_CORRUPT', failure);
    }
    if (failure) return this.adoptFailed(ref, stored, failure.reason, failure);
    if (!stored) {
      if (!(await this.guardStore(() => store.isRegistered(ref)))) {
        throw new CoordinatorError('GROUP_NOT_FOUND', `group ${groupId(ref)} does not exist`);
      }
      // Registered: created meanwhile (read again), or its metadata is lost.
      stored = await this.guardStore(() => store.loadGroup(ref));
      if (!stored) return this.adoptFailed(ref, null, 'METADATA_LOST', null);
    }
    // Adopted meanwhile (a create in this process): keep that entry and its fence.
    const adopted = this.entries.get(groupId(ref));
    if (adopted) return adopted;
    // Taking ownership bumps the fence: a writer holding an older token can never write again.
    const owned = await this.guardStore(() => store.takeOwnership(ref, this.newFence()));
    return this.adopt(owned);
  }

  /** Adopts a group that must stay failed closed: its stored state if readable, else a shell. */
  private async adoptFailed(
    ref: GroupRef,
    stored: StoredGroup | null,
    reason: FailureReason,
    failure: FailureRecord | null,
  ): Promise<GroupEntry> {
    const shell = newGroupState(ref, {
      shardCount: 0,
      lifecycleId: failure?.lifecycleId ?? 'unknown',
      now: this.options.clock.now(),
    });
    const entry = this.adopt(
      stored ?? { state: shell, revision: failure?.knownRevision ?? 0, fence: '' },
    );
    entry.floor = evidenceOfRecord(failure);
    if (!this.failedClosed(entry)) await this.failClosed(entry, reason, stored?.revision ?? null);
    return entry;
  }

  private adopt(stored: StoredGroup): GroupEntry {
    const ref = {
      streamPrefix: stored.state.streamPrefix,
      consumerGroup: stored.state.consumerGroup,
    };
    const existing = this.entries.get(groupId(ref));
    if (existing) return existing; // adopted meanwhile (a create racing a first heartbeat)
    const context = createGroupContext({
      group: stored.state,
      config: this.config,
      now: this.options.clock.now(),
      storeRevision: stored.revision,
    });
    const entry: GroupEntry = {
      ref,
      actor: this.startActor(context),
      persisted: encodeGroup(stored.state),
      revision: stored.revision,
      fence: stored.fence,
      queue: Promise.resolve(),
      observed: null,
      counts: { members: 0, revoking: 0 },
      lastValue: '',
      floor: null,
      deleting: false,
      unrecorded: null,
      published: null,
    };
    this.entries.set(groupId(ref), entry);
    this.options.metrics.groupsOwned.set(this.entries.size);
    this.observe(entry, entry.actor.getSnapshot().context);
    return entry;
  }

  private startActor(context: GroupContext): GroupActor {
    const actor = createActor(groupMachine, { input: context });
    // Without an error subscriber a throwing action would crash the process (DESIGN.md §13).
    actor.subscribe({
      error: (error: unknown) =>
        this.options.logger.error('group actor failed', { error: String(error) }),
    });
    actor.start();
    return actor;
  }

  private forget(entry: GroupEntry): void {
    if (this.entries.get(groupId(entry.ref)) !== entry) return;
    entry.actor.stop();
    this.entries.delete(groupId(entry.ref));
    this.options.metrics.groupsOwned.set(this.entries.size);
    this.options.metrics.members.dec(entry.counts.members);
    this.options.metrics.revokePending.dec(entry.counts.revoking);
  }

  /** Runs `work` alone on the group; skips it if the entry was dropped meanwhile. */
  private inMailbox<T>(entry: GroupEntry, work: () => Promise<T>): Promise<T | typeof STALE> {
    const run = async () => (this.entries.get(groupId(entry.ref)) === entry ? work() : STALE);
    const result = entry.queue.then(run, run);
    entry.queue = result.catch(() => undefined);
    return result;
  }

  /**
   * Runs `work` alone on the group's current entry. Work that was queued behind an entry that
   * got dropped (ownership lost, group deleted) runs again on the group as it is now, instead
   * of on a stopped actor.
   */
  private async withEntry<T>(ref: GroupRef, work: (entry: GroupEntry) => Promise<T>): Promise<T> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const entry = await this.entry(ref);
      const result = await this.inMailbox(entry, () => work(entry));
      if (result !== STALE) return result;
    }
    throw new StoreUnavailableError(`group ${groupId(ref)} changed owner repeatedly; try again`);
  }

  /**
   * Runs one event through the group's actor (inside its mailbox) and persists what it changed;
   * resolves with the context after the event and after the write committed.
   */
  private async dispatch(entry: GroupEntry, event: GroupEvent): Promise<GroupContext> {
    const before = entry.actor.getSnapshot().context;
    entry.actor.send(event);
    const snapshot = entry.actor.getSnapshot();
    if (snapshot.status !== 'active') {
      entry.actor = this.startActor(before);
      throw new CoordinatorError(
        'INTERNAL',
        'the group actor failed; it was rebuilt from the last persisted state',
      );
    }
    const after = snapshot.context;
    // A failed-closed group is never written: lost metadata is not recreated, restored metadata
    // stays as the operator put it (DESIGN.md §7).
    if (after.group !== before.group && after.group.status !== 'FAILED_CLOSED') {
      const fields = encodeGroup(after.group);
      const patch = diffFields(entry.persisted, fields);
      if (!isEmptyPatch(patch)) {
        const now = this.options.clock.now();
        try {
          entry.revision = await this.guardStore(() =>
            this.options.store.commitGroup(entry.ref, entry.fence, entry.revision, {
              set: { ...patch.set, updatedAt: String(now) },
              del: patch.del,
            }),
          );
        } catch (error) {
          // Nothing was written: forget the event, as if it never happened.
          entry.actor.stop();
          entry.actor = this.startActor(before);
          throw await this.onWriteRefused(entry, event.type, error);
        }
        entry.persisted = { ...fields, updatedAt: String(now) };
        entry.actor.send({ type: 'PERSISTED', revision: entry.revision, updatedAt: now });
      }
    }
    applyEffects(after.effects, this.options.metrics, this.options.logger);
    const latest = entry.actor.getSnapshot().context;
    this.observe(entry, latest);
    return latest;
  }

  /**
   * A refused write tells what happened to the stored metadata: gone or older than what we
   * wrote fails the group closed (and the caller is told so); newer means another owner wrote,
   * so the actor is dropped and the next request reloads it. Returns the error to throw.
   */
  private async onWriteRefused(
    entry: GroupEntry,
    eventType: string,
    error: unknown,
  ): Promise<unknown> {
    if (!(error instanceof CoordinatorError)) return error;
    if (!['GROUP_NOT_FOUND', 'FENCED_WRITE', 'STALE_REVISION'].includes(error.code)) return error;
    // The fence is checked before the revision, so a restored backup (older fence) also lands
    // here as FENCED_WRITE: look at what is stored before deciding.
    const [seen] = await this.guardStore(() => this.options.store.readRevisions([entry.ref]));
    const { lifecycleId } = entry.actor.getSnapshot().context.group;
    if (!seen) await this.failClosed(entry, 'METADATA_LOST', null);
    else if (seen.revision < entry.revision || seen.lifecycleId !== lifecycleId) {
      await this.failClosed(entry, 'STORE_REVISION_REGRESSION', seen.revision);
    } else {
      this.options.logger.warn('group written by another owner; reloading on next use', {
        group: groupId(entry.ref),
        code: error.code,
      });
      this.forget(entry);
      return error;
    }
    return CLIENT_EVENTS.has(eventType)
      ? new CoordinatorError(
          'GROUP_FAILED_CLOSED',
          'the group failed closed; nothing was changed',
          {
            details: { failureReason: entry.actor.getSnapshot().context.group.failureReason },
          },
        )
      : this.failedClosedAdminError(entry);
  }

  /** Keeps the gauges, long polls and event listeners in step with the context. */
  private observe(entry: GroupEntry, context: GroupContext): void {
    // What readers see: only states whose write has committed (observe runs after the commit).
    entry.published = entry.actor.getSnapshot();
    if (this.listeners.has(groupId(entry.ref))) this.announce(entry, context);
    // The rest depends on the group only, which a steady-state heartbeat leaves as it was.
    if (context.group === entry.observed) return;
    entry.observed = context.group;
    this.waiters.notify(
      groupId(entry.ref),
      context.group.metadataVersion,
      context.group.status === 'FAILED_CLOSED',
    );
    const members = Object.keys(context.group.members).length;
    let revoking = 0;
    for (const shard of Object.values(context.group.shards)) {
      if (shard.state === 'revoking' || shard.state === 'retiring') revoking++;
    }
    this.options.metrics.members.inc(members - entry.counts.members);
    this.options.metrics.revokePending.inc(revoking - entry.counts.revoking);
    entry.counts = { members, revoking };
  }

  private announce(entry: GroupEntry, context: GroupContext): void {
    const value = entry.actor.getSnapshot().value;
    const json = JSON.stringify(value);
    const changed = json !== entry.lastValue;
    entry.lastValue = json;
    const listeners = this.listeners.get(groupId(entry.ref));
    if (!listeners || (!changed && context.effects.length === 0)) return;
    const transition: GroupTransition = {
      at: new Date(context.lastEventAt).toISOString(),
      state: value,
      stateChanged: changed,
      effects: context.effects,
      metadataVersion: context.group.metadataVersion,
      assignmentEpoch: context.group.assignmentEpoch,
      status: context.group.status,
    };
    for (const listener of listeners) listener(transition);
  }

  /** Whether a group whose delete was started is gone: no metadata and no registry entry. */
  private async deletedMeanwhile(entry: GroupEntry, error?: unknown): Promise<boolean> {
    if (!entry.deleting) return false;
    if (
      error !== undefined &&
      !(error instanceof CoordinatorError && error.code === 'GROUP_NOT_FOUND')
    ) {
      return false;
    }
    const { store } = this.options;
    return (
      !(await this.guardStore(() => store.isRegistered(entry.ref))) &&
      !(await this.guardStore(() => store.loadGroup(entry.ref)))
    );
  }

  private failedClosed(entry: GroupEntry): boolean {
    return entry.actor.getSnapshot().context.group.status === 'FAILED_CLOSED';
  }

  private failedClosedAdminError(entry: GroupEntry): CoordinatorError {
    return new CoordinatorError(
      'GROUP_FAILED_CLOSED_ADMIN',
      'the group failed closed; only recovery is allowed',
      {
        details: { failureReason: entry.actor.getSnapshot().context.group.failureReason },
      },
    );
  }

  private refuseFailedClosed(entry: GroupEntry): never {
    throw this.failedClosedAdminError(entry);
  }

  /**
   * Fails a group closed (DESIGN.md §7). The metadata key is left alone (never recreated, never
   * edited); the decision is recorded in the group's own failure key so it survives a restart.
   */
  private async failClosed(
    entry: GroupEntry,
    reason: FailureReason,
    storeRevision: number | null,
  ): Promise<void> {
    const { metrics, logger, clock } = this.options;
    if (reason === 'STORE_REVISION_REGRESSION') metrics.storeRevisionRegression.inc();
    metrics.groupsFailedClosed.inc({ reason });
    logger.error('group failed closed', {
      group: groupId(entry.ref),
      reason,
      knownRevision: entry.revision,
      storeRevision,
    });
    entry.actor.send({ type: 'FAIL_CLOSED', now: clock.now(), reason });
    const after = entry.actor.getSnapshot().context;
    applyEffects(after.effects, metrics, logger);
    this.observe(entry, after);
    entry.unrecorded = { reason, storeRevision };
    await this.recordFailure(entry);
  }

  /**
   * Writes (merges) the failure record of a failed-closed group. On a store error it stays to do:
   * the verify loop tries again, so the decision reaches the store once it can.
   */
  private async recordFailure(entry: GroupEntry): Promise<void> {
    const pending = entry.unrecorded;
    if (!pending) return;
    const { store, clock, logger } = this.options;
    const { group, signals } = entry.actor.getSnapshot().context;
    try {
      // Merged with an earlier record: its first reason and the highest evidence are kept.
      const earlier = await store.readFailure(entry.ref);
      const evidence = mergeEvidence(
        evidenceOfGroup(group, signals),
        entry.floor,
        evidenceOfRecord(earlier),
      );
      entry.floor = evidence;
      await store.recordFailure(entry.ref, {
        reason: earlier?.reason ?? pending.reason,
        at: earlier?.at ?? clock.now(),
        knownRevision: Math.max(entry.revision, earlier?.knownRevision ?? 0),
        storeRevision: earlier ? earlier.storeRevision : pending.storeRevision,
        lifecycleId: earlier?.lifecycleId ?? group.lifecycleId,
        metadataVersion: Math.max(group.metadataVersion, earlier?.metadataVersion ?? 0),
        ...evidence,
      });
      entry.unrecorded = null;
    } catch (error) {
      logger.error('could not record the failure of a group; will retry', {
        group: groupId(entry.ref),
        error: String(error),
      });
    }
  }

  /**
   * RESUME takes the restored metadata as it is, except that epochs continue above everything
   * issued before: a process still holding an epoch from before the restore is fenced, never
   * taken for a member that rejoined (ONE fenced write).
   */
  private async raiseEpochs(
    ref: GroupRef,
    owned: StoredGroup,
    evidence: Evidence,
  ): Promise<StoredGroup> {
    const state: GroupState = {
      ...owned.state,
      assignmentEpoch: Math.max(owned.state.assignmentEpoch, evidence.assignmentEpoch + 1),
      memberEpochSeq: Math.max(owned.state.memberEpochSeq, evidence.memberEpochSeq + 1),
    };
    const patch = diffFields(encodeGroup(owned.state), encodeGroup(state));
    if (isEmptyPatch(patch)) return owned;
    const revision = await this.guardStore(() =>
      this.options.store.commitGroup(ref, owned.fence, owned.revision, patch),
    );
    return { ...owned, state, revision };
  }

  /** Writes a new lifecycle over the group (RECREATE): versions and epochs keep going up. */
  private async recreate(ref: GroupRef, known: Evidence, shardCount: number): Promise<StoredGroup> {
    // Whatever is still readable in the current key counts too, even if it does not decode.
    const raw = await this.guardStore(() => this.options.store.exportGroup(ref));
    const evidence = mergeEvidence(known, evidenceOfFields(raw));
    const state = newGroupState(ref, {
      shardCount,
      lifecycleId: randomUUID(),
      now: this.options.clock.now(),
      metadataVersion: evidence.highestVersionSeen + 1,
      assignmentEpoch: evidence.assignmentEpoch + 1,
      memberEpochSeq: evidence.memberEpochSeq + 1,
    });
    const fields = { ...encodeGroup(state), storeRevision: '1', fence: this.newFence() };
    await this.guardStore(() => this.options.store.importGroup(ref, fields));
    return this.guardStore(() => this.options.store.takeOwnership(ref, this.newFence()));
  }

  /** Swaps a recovered group's actor for one built from the store, keeping its rollback signals. */
  private replaceActor(entry: GroupEntry, stored: StoredGroup, before: GroupContext): void {
    entry.actor.stop();
    const context = createGroupContext({
      group: stored.state,
      config: this.config,
      now: this.options.clock.now(),
      storeRevision: stored.revision,
    });
    entry.actor = this.startActor({ ...context, signals: before.signals });
    entry.persisted = encodeGroup(stored.state);
    entry.revision = stored.revision;
    entry.fence = stored.fence;
    entry.floor = null;
    this.observe(entry, entry.actor.getSnapshot().context);
  }

  private unwrap(context: GroupContext): unknown {
    const result = context.result;
    if (!result) throw new CoordinatorError('INTERNAL', 'the group actor gave no result');
    if (!result.ok) {
      throw new CoordinatorError(
        result.code,
        result.message,
        result.details ? { details: result.details } : {},
      );
    }
    return result.reply;
  }

  private snapshotOf(entry: GroupEntry): GroupSnapshot {
    const snapshot = entry.published ?? entry.actor.getSnapshot();
    const { group, signals } = snapshot.context;
    return {
      context: snapshot.context,
      stateValue: snapshot.value,
      owner: this.options.replicaId,
      highestVersionSeen: mergeEvidence(evidenceOfGroup(group, signals), entry.floor)
        .highestVersionSeen,
    };
  }

  private newFence(): string {
    return `${this.options.replicaId}:${randomUUID()}`;
  }

  /** Store calls: typed errors pass through, anything else is a store outage (counted). */
  private async guardStore<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      if (error instanceof CoordinatorError && error.code !== 'STORE_UNAVAILABLE') throw error;
      this.options.metrics.storeErrors.inc();
      throw error instanceof CoordinatorError
        ? error
        : new StoreUnavailableError('the store is unavailable', { cause: error });
    }
  }
}
