import { randomUUID } from 'node:crypto';
import { createActor, type Actor } from 'xstate';
import type { Settings } from '../config/settings.js';
import { CoordinatorError, RevisionMismatchError, StoreUnavailableError } from '../errors.js';
import type { Clock } from '../machines/clock.js';
import {
  createGroupContext,
  nextDeadline,
  type Effect,
  type GroupContext,
} from '../machines/context.js';
import { groupMachine } from '../machines/group-machine.js';
import { checkInvariants } from '../machines/invariants.js';
import { newGroupState } from '../machines/new-group.js';
import type { HeartbeatReply, HeartbeatRequest } from '../machines/protocol.js';
import { groupId, type FailureReason, type GroupRef, type GroupState } from '../machines/types.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { diffFields, encodeGroup, isEmptyPatch, type GroupFields } from '../store/codec.js';
import type { Store, StoredGroup } from '../store/store.js';
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

/** One owned group: its actor, what was last persisted, and its mailbox. */
interface GroupEntry {
  readonly ref: GroupRef;
  actor: GroupActor;
  /** The encoding last written (or read): diffs are taken against it. */
  persisted: GroupFields;
  revision: number;
  fence: string;
  /** Tail of the mailbox: events run one at a time. */
  queue: Promise<unknown>;
  deadline: number | null;
  counts: { members: number; revoking: number };
  /** JSON of the last state value, to tell transitions from steady events. */
  lastValue: string;
}

export interface GroupHostOptions {
  readonly store: Store;
  readonly settings: Settings;
  readonly clock: Clock;
  readonly metrics: Metrics;
  readonly logger: Logger;
  readonly replicaId: string;
}

/**
 * The actor system (DESIGN.md §2): one XState actor per group, created on first use from the
 * store. Each event runs alone (a per-group mailbox); when it changes persisted state the
 * host makes ONE fenced, revision-checked write before anyone is answered, and rebuilds the
 * actor from the last persisted state if that write fails. Timers are a deadline sweep.
 */
export class GroupHost implements GroupCoordinator {
  private readonly entries = new Map<string, GroupEntry>();
  private readonly loading = new Map<string, Promise<GroupEntry>>();
  private stopSweep: (() => void) | null = null;
  private stopVerify: (() => void) | null = null;
  private readonly waiters: VersionWaiters;
  private readonly listeners = new Map<string, Set<(transition: GroupTransition) => void>>();
  private readonly config;

  constructor(private readonly options: GroupHostOptions) {
    this.config = membershipConfigFrom(options.settings);
    this.waiters = new VersionWaiters(options.clock, (open) =>
      options.metrics.routingLongPolls.set(open),
    );
  }

  /** Starts the deadline sweep. */
  start(): void {
    this.stopSweep ??= this.options.clock.every(
      this.options.settings.membership['sweep-interval'],
      () => {
        this.sweep().catch((error: unknown) =>
          this.options.logger.error('sweep failed', { error: String(error) }),
        );
      },
    );
  }

  async close(): Promise<void> {
    this.stopSweep?.();
    this.stopSweep = null;
    await Promise.allSettled([...this.entries.values()].map((e) => e.queue));
    for (const entry of this.entries.values()) entry.actor.stop();
    this.entries.clear();
    this.options.metrics.groupsOwned.set(0);
  }

  /** Ticks every actor whose earliest deadline has passed; resolves when they are done. */
  async sweep(): Promise<void> {
    const now = this.options.clock.now();
    const due = [...this.entries.values()].filter((e) => e.deadline !== null && e.deadline <= now);
    await Promise.allSettled(
      due.map((entry) => this.dispatch(entry, { type: 'TICK', now: this.options.clock.now() })),
    );
  }

  /**
   * Re-reads revision and lifecycle of every owned group in one round trip (DESIGN.md §7), so
   * a lost or rolled-back metadata key is noticed even when nothing is being written.
   */
  async verify(): Promise<void> {
    const entries = [...this.entries.values()].filter((e) => !this.failedClosed(e));
    if (entries.length === 0) return;
    const revisions = await this.options.store.readRevisions(entries.map((e) => e.ref));
    await Promise.allSettled(
      entries.map((entry, i) =>
        this.enqueue(entry, async () => {
          const seen = revisions[i] ?? null;
          if (this.failedClosed(entry) || this.entries.get(groupId(entry.ref)) !== entry) return;
          const { lifecycleId } = entry.actor.getSnapshot().context.group;
          if (seen === null) this.failClosed(entry, 'METADATA_LOST');
          else if (seen.revision < entry.revision || seen.lifecycleId !== lifecycleId) {
            this.failClosed(entry, 'STORE_REVISION_REGRESSION', seen.revision);
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
    const state = newGroupState(ref, {
      shardCount,
      lifecycleId: randomUUID(),
      now: this.options.clock.now(),
    });
    const stored = await this.options.store.createGroup(state, this.newFence());
    const entry = this.adopt(stored);
    this.options.logger.info('group created', { group: groupId(ref), shardCount });
    return this.snapshotOf(entry);
  }

  async putGroup(ref: GroupRef, shardCount: number, change: ChangeRequest) {
    let entry: GroupEntry;
    try {
      entry = await this.entry(ref);
    } catch (error) {
      if (error instanceof CoordinatorError && error.code === 'GROUP_NOT_FOUND') {
        return { outcome: 'CREATED' as const, snapshot: await this.createGroup(ref, shardCount) };
      }
      throw error;
    }
    const group = entry.actor.getSnapshot().context.group;
    if (group.status === 'FAILED_CLOSED') this.refuseFailedClosed(entry);
    if (group.shardCount === shardCount) {
      return { outcome: 'UNCHANGED' as const, snapshot: this.snapshotOf(entry) };
    }
    const { reply, snapshot } = await this.command(ref, { type: 'SCALE', shardCount, ...change });
    return {
      outcome: 'MIGRATION_STARTED' as const,
      snapshot,
      migration: (reply as { migration: unknown }).migration,
    };
  }

  async getGroup(ref: GroupRef): Promise<GroupSnapshot> {
    return this.snapshotOf(await this.entry(ref));
  }

  async listGroups(options: { cursor?: string | undefined; limit: number }) {
    const page = await this.options.store.listGroups(options);
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
    const entry = await this.entry(ref);
    await this.enqueue(entry, async () => {
      const { group } = entry.actor.getSnapshot().context;
      if (group.status === 'FROZEN')
        throw new CoordinatorError('GROUP_FROZEN', 'the group is frozen');
      if (group.status === 'FAILED_CLOSED')
        throw new CoordinatorError(
          'GROUP_FAILED_CLOSED_ADMIN',
          'the group failed closed; use the recovery API',
        );
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
      await this.guardStore(() => this.options.store.deleteGroup(ref, entry.fence, entry.revision));
      this.forget(entry);
      this.options.logger.info('group deleted', { group: groupId(ref), force: options.force });
    });
  }

  async command(
    ref: GroupRef,
    command: AdminCommand,
  ): Promise<{ reply: unknown; snapshot: GroupSnapshot }> {
    const entry = await this.entry(ref);
    const now = this.options.clock.now();
    const event =
      command.type === 'SCALE'
        ? { ...command, now, migrationId: randomUUID() }
        : command.type === 'ROLLBACK'
          ? { ...command, now, newMigrationId: randomUUID() }
          : { ...command, now };
    const context = await this.dispatch(entry, event);
    return { reply: this.unwrap(context), snapshot: this.snapshotOf(entry) };
  }

  async recover(ref: GroupRef, request: RecoveryRequest): Promise<GroupSnapshot> {
    const entry = await this.entry(ref);
    return this.enqueue(entry, async () => {
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
      const highest = Math.max(
        before.signals?.highestVersionSeen ?? 0,
        before.group.metadataVersion,
      );
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
        stored = await this.guardStore(() =>
          this.options.store.takeOwnership(ref, this.newFence()),
        );
      } else {
        stored = await this.recreate(ref, before.group, highest, request.shardCount);
      }
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

  async observeVersion(ref: GroupRef, version: number, source: 'routing'): Promise<void> {
    const entry = await this.entry(ref);
    if (version <= entry.actor.getSnapshot().context.group.metadataVersion) return;
    await this.dispatch(entry, {
      type: 'OBSERVE_VERSION',
      now: this.options.clock.now(),
      source,
      version,
    });
  }

  async heartbeat(ref: GroupRef, request: HeartbeatRequest): Promise<HeartbeatReply> {
    const entry = await this.entry(ref);
    const context = await this.dispatch(entry, {
      type: 'HEARTBEAT',
      now: this.options.clock.now(),
      request,
    });
    return this.unwrap(context) as HeartbeatReply;
  }

  /** The actor of a group, loading it from the store on first use. */
  private async entry(ref: GroupRef): Promise<GroupEntry> {
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
    const stored = await this.guardStore(async () => {
      const found = await this.options.store.loadGroup(ref);
      if (!found) return null;
      // Taking ownership bumps the fence: a writer holding an older token can never write again.
      return this.options.store.takeOwnership(ref, this.newFence());
    });
    if (stored) return this.adopt(stored);
    if (await this.guardStore(() => this.options.store.isRegistered(ref))) {
      // The registry knows the group but its metadata is gone: fail closed, never recreate it.
      const placeholder = newGroupState(ref, {
        shardCount: 0,
        lifecycleId: 'unknown',
        now: this.options.clock.now(),
      });
      const entry = this.adopt({ state: placeholder, revision: 0, fence: '' });
      this.failClosed(entry, 'METADATA_LOST');
      return entry;
    }
    throw new CoordinatorError('GROUP_NOT_FOUND', `group ${groupId(ref)} does not exist`);
  }

  private adopt(stored: StoredGroup): GroupEntry {
    const ref = {
      streamPrefix: stored.state.streamPrefix,
      consumerGroup: stored.state.consumerGroup,
    };
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
      deadline: null,
      counts: { members: 0, revoking: 0 },
      lastValue: '',
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
    entry.actor.stop();
    this.entries.delete(groupId(entry.ref));
    this.options.metrics.groupsOwned.set(this.entries.size);
    this.options.metrics.members.dec(entry.counts.members);
    this.options.metrics.revokePending.dec(entry.counts.revoking);
  }

  private enqueue<T>(entry: GroupEntry, work: () => Promise<T>): Promise<T> {
    const run = entry.queue.then(work, work);
    entry.queue = run.catch(() => undefined);
    return run;
  }

  /**
   * Runs one event through the group's actor and persists what it changed; resolves with the
   * context after the event (and after the write committed).
   */
  private dispatch(
    entry: GroupEntry,
    event: Parameters<GroupActor['send']>[0],
  ): Promise<GroupContext> {
    return this.enqueue(entry, async () => {
      const before = entry.actor.getSnapshot().context;
      entry.actor.send(event);
      const snapshot = entry.actor.getSnapshot();
      if (snapshot.status === 'error') {
        entry.actor = this.startActor(before);
        throw new CoordinatorError(
          'INTERNAL',
          'the group actor failed; it was rebuilt from the last persisted state',
        );
      }
      const after = snapshot.context;
      this.checkInvariants(entry, before, after);
      // A failed-closed group is never written: lost metadata is not recreated, restored metadata
      // stays as the operator put it (DESIGN.md §7).
      if (after.group !== before.group && after.group.status !== 'FAILED_CLOSED') {
        const fields = encodeGroup(after.group);
        const patch = diffFields(entry.persisted, fields);
        if (!isEmptyPatch(patch)) {
          const now = this.options.clock.now();
          const set = { ...patch.set, updatedAt: String(now) };
          try {
            entry.revision = await this.guardStore(() =>
              this.options.store.commitGroup(entry.ref, entry.fence, entry.revision, {
                set,
                del: patch.del,
              }),
            );
          } catch (error) {
            // Nothing was written: forget the event, as if it never happened.
            entry.actor.stop();
            entry.actor = this.startActor(before);
            this.onCommitRefused(entry, error);
            throw error;
          }
          entry.persisted = { ...fields, updatedAt: String(now) };
          entry.actor.send({ type: 'PERSISTED', revision: entry.revision, updatedAt: now });
        }
      }
      this.applyEffects(after.effects);
      const latest = entry.actor.getSnapshot().context;
      this.observe(entry, latest);
      return latest;
    });
  }

  private checkInvariants(entry: GroupEntry, before: GroupContext, after: GroupContext): void {
    for (const violation of checkInvariants(before, after)) {
      this.options.metrics.invariantViolations.inc({ invariant: violation.invariant });
      this.options.logger.error('group invariant violated', {
        group: groupId(entry.ref),
        ...violation,
      });
    }
  }

  private applyEffects(effects: readonly Effect[]): void {
    const { metrics, logger } = this.options;
    for (const effect of effects) {
      switch (effect.type) {
        case 'MEMBER_EXPIRED':
          metrics.memberExpiry.inc();
          break;
        case 'MEMBER_FENCED':
          metrics.fencedMembers.inc({ reason: effect.reason });
          break;
        case 'ROLLBACK_SIGNAL':
          metrics.metadataVersionRegression.inc({ source: effect.source });
          logger.warn('client reported a higher version than stored (rollback signal)', {
            ...effect,
          });
          break;
        case 'REBALANCE_COMPLETED':
          metrics.rebalanceDuration.observe(effect.durationMs / 1000);
          break;
        case 'INVARIANT_VIOLATION':
          metrics.invariantViolations.inc({ invariant: effect.invariant });
          logger.error('group invariant violation refused', { ...effect });
          break;
        case 'EVENT_FAILED':
          logger.error('group event failed', { ...effect });
          break;
        case 'MIGRATION_STARTED':
          metrics.migrationsStarted.inc({ kind: effect.kind });
          logger.info('migration started', { ...effect });
          break;
        case 'MIGRATION_CONVERGED':
          metrics.migrationDuration.observe(effect.durationMs / 1000);
          logger.info('migration converged', { ...effect });
          break;
        case 'MIGRATION_COMPLETED':
          metrics.migrationsCompleted.inc();
          logger.info('migration completed', { ...effect });
          break;
        case 'MIGRATION_ROLLED_BACK':
          metrics.migrationsRolledBack.inc();
          logger.info('migration rolled back', { ...effect });
          break;
        default:
          break;
      }
      if (effect.type !== 'ROLLBACK_SIGNAL') logger.debug('group effect', { ...effect });
    }
  }

  /** Keeps the deadline and the gauges in step with the context. */
  private observe(entry: GroupEntry, context: GroupContext): void {
    entry.deadline = nextDeadline(context);
    this.announce(entry, context);
    this.waiters.notify(groupId(entry.ref), context.group.metadataVersion);
    const members = Object.keys(context.group.members).length;
    let revoking = 0;
    for (const shard of Object.values(context.group.shards)) {
      if (shard.state === 'revoking' || shard.state === 'retiring') revoking++;
    }
    this.options.metrics.members.inc(members - entry.counts.members);
    this.options.metrics.revokePending.inc(revoking - entry.counts.revoking);
    entry.counts = { members, revoking };
  }

  /**
   * Subscribes to a group's transitions (the monitoring events stream): `listener` gets every
   * change of state value and every event with effects. Returns the unsubscribe function.
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
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(id);
    };
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

  private failedClosed(entry: GroupEntry): boolean {
    return entry.actor.getSnapshot().context.group.status === 'FAILED_CLOSED';
  }

  private refuseFailedClosed(entry: GroupEntry): never {
    throw new CoordinatorError(
      'GROUP_FAILED_CLOSED_ADMIN',
      'the group failed closed; only recovery is allowed',
      {
        details: { failureReason: entry.actor.getSnapshot().context.group.failureReason },
      },
    );
  }

  /**
   * Fails a group closed (DESIGN.md §7), in memory only: nothing is written, so lost metadata
   * is never recreated and restored metadata is left as the operator put it.
   */
  private failClosed(entry: GroupEntry, reason: FailureReason, seenRevision?: number): void {
    const { metrics, logger, clock } = this.options;
    if (reason === 'STORE_REVISION_REGRESSION') metrics.storeRevisionRegression.inc();
    metrics.groupsFailedClosed.inc({ reason });
    logger.error('group failed closed', {
      group: groupId(entry.ref),
      reason,
      knownRevision: entry.revision,
      ...(seenRevision === undefined ? {} : { storeRevision: seenRevision }),
    });
    entry.actor.send({ type: 'FAIL_CLOSED', now: clock.now(), reason });
    const after = entry.actor.getSnapshot().context;
    this.applyEffects(after.effects);
    this.observe(entry, after);
    this.waiters.notify(groupId(entry.ref), after.group.metadataVersion, true);
  }

  /** A refused write tells what happened to the stored metadata. */
  private onCommitRefused(entry: GroupEntry, error: unknown): void {
    if (!(error instanceof CoordinatorError)) return;
    if (error.code === 'GROUP_NOT_FOUND') this.failClosed(entry, 'METADATA_LOST');
    else if (error instanceof RevisionMismatchError && error.actual < entry.revision) {
      this.failClosed(entry, 'STORE_REVISION_REGRESSION', error.actual);
    } else if (error.code === 'FENCED_WRITE' || error.code === 'STALE_REVISION') {
      // Someone else owns or wrote the group: drop the actor; the next request reloads it.
      this.options.logger.warn('group write refused; reloading on next use', {
        group: groupId(entry.ref),
        code: error.code,
      });
      this.forget(entry);
    }
  }

  /** Writes a new lifecycle over the group (RECREATE): versions and epochs keep going up. */
  private async recreate(
    ref: GroupRef,
    previous: GroupState,
    highest: number,
    shardCount: number,
  ): Promise<StoredGroup> {
    const old = (await this.guardStore(() => this.options.store.loadGroup(ref)))?.state;
    const state = newGroupState(ref, {
      shardCount,
      lifecycleId: randomUUID(),
      now: this.options.clock.now(),
      metadataVersion: Math.max(highest, old?.metadataVersion ?? 0, previous.metadataVersion) + 1,
      assignmentEpoch: Math.max(old?.assignmentEpoch ?? 0, previous.assignmentEpoch) + 1,
      memberEpochSeq: Math.max(old?.memberEpochSeq ?? 0, previous.memberEpochSeq) + 1,
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
    this.observe(entry, entry.actor.getSnapshot().context);
    this.waiters.notify(groupId(entry.ref), stored.state.metadataVersion, true);
  }

  private unwrap(context: GroupContext): unknown {
    const result = context.result;
    if (!result) throw new CoordinatorError('INTERNAL', 'the group actor gave no result');
    if (!result.ok)
      throw new CoordinatorError(
        result.code,
        result.message,
        result.details ? { details: result.details } : {},
      );
    return result.reply;
  }

  private snapshotOf(entry: GroupEntry): GroupSnapshot {
    const snapshot = entry.actor.getSnapshot();
    return { context: snapshot.context, stateValue: snapshot.value, owner: this.options.replicaId };
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
