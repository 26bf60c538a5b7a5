import { randomUUID } from 'node:crypto';
import { createActor, type Actor } from 'xstate';
import type { Settings } from '../config/settings.js';
import { CoordinatorError, StoreUnavailableError } from '../errors.js';
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
import { groupId, type GroupRef } from '../machines/types.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { diffFields, encodeGroup, isEmptyPatch, type GroupFields } from '../store/codec.js';
import type { Store, StoredGroup } from '../store/store.js';
import { membershipConfigFrom } from './membership-config.js';
import type { AdminCommand, ChangeRequest, GroupCoordinator, GroupSnapshot } from './types.js';

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
  private readonly config;

  constructor(private readonly options: GroupHostOptions) {
    this.config = membershipConfigFrom(options.settings);
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

  async putGroup(ref: GroupRef, shardCount: number, _change: ChangeRequest) {
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
    if (group.shardCount === shardCount)
      return { outcome: 'UNCHANGED' as const, snapshot: this.snapshotOf(entry) };
    throw new CoordinatorError('VALIDATION_FAILED', 'changing the shard count needs the scale API');
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
    const context = await this.dispatch(entry, { ...command, now: this.options.clock.now() });
    return { reply: this.unwrap(context), snapshot: this.snapshotOf(entry) };
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
    if (!stored)
      throw new CoordinatorError('GROUP_NOT_FOUND', `group ${groupId(ref)} does not exist`);
    return this.adopt(stored);
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
      if (after.group !== before.group) {
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
        default:
          break;
      }
      if (effect.type !== 'ROLLBACK_SIGNAL') logger.debug('group effect', { ...effect });
    }
  }

  /** Keeps the deadline and the gauges in step with the context. */
  private observe(entry: GroupEntry, context: GroupContext): void {
    entry.deadline = nextDeadline(context);
    const members = Object.keys(context.group.members).length;
    let revoking = 0;
    for (const shard of Object.values(context.group.shards)) {
      if (shard.state === 'revoking' || shard.state === 'retiring') revoking++;
    }
    this.options.metrics.members.inc(members - entry.counts.members);
    this.options.metrics.revokePending.inc(revoking - entry.counts.revoking);
    entry.counts = { members, revoking };
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
