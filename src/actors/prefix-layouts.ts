import { randomUUID } from 'node:crypto';
import { CoordinatorError, GroupMovedError, RevisionMismatchError } from '../errors.js';
import type { Clock } from '../machines/clock.js';
import { layoutStep, type LayoutTarget } from '../machines/layout-follow.js';
import { migrationBlocker } from '../machines/refusals.js';
import { refusedByChart } from '../machines/group-machine.js';
import { groupId, type GroupRef, type LayoutRef } from '../machines/types.js';
import { groupLogFields, type Logger } from '../observability/logger.js';
import type { PrefixLayout } from '../store/prefix-layout.js';
import type { Store } from '../store/store.js';
import { commandEvent } from './commands.js';
import { groupOf, isFailedClosed, type GroupEntry } from './group-entry.js';
import type { StoreGuard } from './store-guard.js';
import type { AdminCommand, CommandOutcome } from './types.js';

/** A scale or rollback asked of one group: it moves its whole stream prefix. */
export type LayoutCommand = Extract<AdminCommand, { type: 'SCALE' | 'ROLLBACK' }>;

export interface PrefixLayoutsOptions {
  readonly store: Pick<
    Store,
    'adoptLayout' | 'changeLayout' | 'readLayouts' | 'loadGroup' | 'readFailure'
  >;
  readonly guard: StoreGuard;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Runs `work` on the group's entry with its mailbox held; `GROUP_MOVED` when owned elsewhere. */
  readonly withEntry: <T>(ref: GroupRef, work: (entry: GroupEntry) => Promise<T>) => Promise<T>;
  /** Runs an admin command on an entry whose mailbox the caller holds. */
  readonly run: (entry: GroupEntry, command: AdminCommand) => Promise<CommandOutcome>;
  /** The groups this replica serves now. */
  readonly entries: () => readonly GroupEntry[];
  /** Whether this replica may still serve the group: its lease held, its deadline not passed. */
  readonly mayServe: (ref: GroupRef) => boolean;
  /** How often owned groups look at their prefixes' layouts (0: only when told). */
  readonly intervalMs: number;
}

/**
 * One shard layout per stream prefix (docs/protocol.md#one-shard-layout-per-stream-prefix).
 * A scale or rollback of any group moves the prefix's layout (one compare-and-set in the store)
 * and then the group itself; every other group on the prefix follows in its own actor: at once
 * when this replica serves it, else when its owner next looks (every `intervalMs`). What a
 * group does about a layout is decided by `layoutStep` (`src/machines/layout-follow.ts`).
 */
export class PrefixLayouts {
  /** Prefixes being followed now: a round does not start a second follow of the same group. */
  private readonly following = new Set<string>();

  constructor(private readonly options: PrefixLayoutsOptions) {}

  /** Starts the periodic follow of owned groups; returns the function that stops it. */
  start(): () => void {
    const { clock, intervalMs, logger } = this.options;
    if (intervalMs <= 0) return () => undefined;
    return clock.every(intervalMs, () => {
      this.followOwned().catch((error: unknown) =>
        logger.warn('following prefix layouts failed', { error: String(error) }),
      );
    });
  }

  /**
   * A SCALE or ROLLBACK of `entry`'s group (the caller holds its mailbox). A command the group's
   * chart refuses is run as it is, so the chart answers it; otherwise the prefix's layout moves
   * first (refused while another group on the prefix has not followed the last move), then
   * the group migrates with the new layout. Call {@link followSiblings} after the mailbox is free.
   */
  async change(entry: GroupEntry, command: LayoutCommand): Promise<CommandOutcome> {
    const { store, guard, clock, run } = this.options;
    const now = clock.now();
    const snapshot = entry.snapshot();
    const ctx = snapshot.context;
    if (refusedByChart(snapshot, commandEvent(command, now))) return run(entry, command);
    const group = ctx.group;
    const shardCount =
      command.type === 'SCALE' ? command.shardCount : group.activeMigration!.fromShardCount;
    const layout = await this.layoutOf(entry);
    // The prefix is at that count already (another group moved it): this group just follows.
    if (layout.shardCount === shardCount) return run(entry, { ...command, layout: refOf(layout) });
    // The prefix moves as a whole: every other group must be able to follow it now, and a
    // scale (not a rollback, the way out) waits until they all followed the last move.
    await this.assertSiblings(entry.ref, layout, {
      followed: command.type === 'SCALE',
      movable: true,
    });
    // The layout's write is checked against the layout's version, not the group's fence: a
    // replica that lost the group while it read (paused past its lease) must not move the
    // prefix for a scale the group's fenced write will refuse.
    if (!this.options.mayServe(entry.ref)) throw new GroupMovedError(null);
    let moved: PrefixLayout;
    try {
      moved = await guard(() =>
        store.changeLayout(group.streamPrefix, layout.version, shardCount, now),
      );
    } catch (error) {
      if (!(error instanceof RevisionMismatchError)) throw error;
      throw new CoordinatorError(
        'MIGRATION_IN_PROGRESS',
        `the shard layout of stream prefix ${group.streamPrefix} changed meanwhile; read the group again and retry`,
        { details: { streamPrefix: group.streamPrefix } },
      );
    }
    this.options.logger.info('stream prefix layout moved', {
      streamPrefix: group.streamPrefix,
      shardCount: moved.shardCount,
      layoutVersion: moved.version,
      by: groupId(entry.ref),
    });
    return run(entry, { ...command, layout: refOf(moved) });
  }

  /**
   * Every other group of `ref`'s prefix that this replica serves follows its layout now; the
   * others follow when their owners next look. Never throws: a group that cannot follow now
   * (frozen, mid-migration, store down) follows on a later round. Returns the other groups.
   */
  async followSiblings(ref: GroupRef): Promise<GroupRef[]> {
    const { store, guard } = this.options;
    const [layout] = await guard(() => store.readLayouts([ref.streamPrefix])).catch(() => [null]);
    if (!layout) return [];
    const siblings = Object.keys(layout.groups)
      .filter((g) => g !== ref.consumerGroup)
      .map((consumerGroup) => ({ streamPrefix: ref.streamPrefix, consumerGroup }));
    for (const sibling of siblings) await this.follow(sibling, layout);
    return siblings;
  }

  /** One round over the groups this replica serves: each follows its prefix's layout. */
  async followOwned(): Promise<void> {
    const { store, guard, clock } = this.options;
    const entries = this.options.entries().filter((e) => !isFailedClosed(e));
    if (entries.length === 0) return;
    const prefixes = [...new Set(entries.map((e) => e.ref.streamPrefix))];
    const layouts = await guard(() => store.readLayouts(prefixes));
    const byPrefix = new Map(prefixes.map((p, i) => [p, layouts[i] ?? null]));
    const now = clock.now();
    for (const entry of entries) {
      const layout = byPrefix.get(entry.ref.streamPrefix) ?? null;
      const group = groupOf(entry);
      const joined = layout !== null && Object.hasOwn(layout.groups, entry.ref.consumerGroup);
      if (joined && layoutStep(group, targetOf(layout), now).kind === 'none') continue;
      await this.follow(entry.ref, null);
    }
  }

  /**
   * `ref` follows its prefix's layout (read again in its mailbox unless given): a group not on
   * the layout yet (created before layouts) joins it first, taking the prefix's count.
   */
  private async follow(ref: GroupRef, known: PrefixLayout | null): Promise<void> {
    const id = groupId(ref);
    if (this.following.has(id)) return;
    this.following.add(id);
    try {
      await this.options.withEntry(ref, async (entry) => {
        if (isFailedClosed(entry)) return;
        const layout = await this.layoutOf(entry, known);
        await this.apply(entry, layout);
      });
    } catch (error) {
      if (error instanceof GroupMovedError) return;
      if (error instanceof CoordinatorError && error.code === 'GROUP_NOT_FOUND') return;
      this.options.logger.info('group does not follow its prefix layout yet', {
        ...groupLogFields(ref),
        reason: error instanceof Error ? error.message : String(error),
      });
    } finally {
      this.following.delete(id);
    }
  }

  /** The step `layoutStep` decides for the group of `entry`, run through its chart. */
  private async apply(entry: GroupEntry, layout: PrefixLayout): Promise<void> {
    const { clock, run, logger } = this.options;
    const group = groupOf(entry);
    const step = layoutStep(group, targetOf(layout), clock.now());
    if (step.kind === 'none') return;
    const change = {
      requestedBy: 'stream-prefix-layout',
      reason: `stream prefix ${group.streamPrefix} has ${layout.shardCount} shards (layout version ${layout.version})`,
    };
    const ref = refOf(layout);
    if (step.kind === 'adopt') {
      await run(entry, { type: 'ADOPT_LAYOUT', layout: ref });
      return;
    }
    logger.info('group follows its prefix layout', {
      ...groupLogFields(entry.ref),
      from: group.shardCount,
      to: layout.shardCount,
      step: step.kind,
    });
    if (step.kind === 'rollback') {
      await run(entry, { type: 'ROLLBACK', migrationId: 'current', layout: ref, ...change });
    } else {
      await run(entry, { type: 'SCALE', shardCount: step.shardCount, layout: ref, ...change });
    }
  }

  /**
   * The layout of `entry`'s prefix with the group on it: a group created before layouts (or
   * whose prefix lost its layout) joins it here, adopting the prefix's count or, when the prefix
   * has none, setting it to the group's own.
   */
  private async layoutOf(entry: GroupEntry, known?: PrefixLayout | null): Promise<PrefixLayout> {
    const { store, guard, clock } = this.options;
    const group = groupOf(entry);
    const layout = known ?? (await guard(() => store.readLayouts([group.streamPrefix])))[0];
    if (layout && Object.hasOwn(layout.groups, group.consumerGroup)) return layout;
    return guard(() =>
      store.adoptLayout(entry.ref, {
        shardCount: group.shardCount,
        mode: 'adopt',
        now: clock.now(),
        newId: randomUUID(),
      }),
    );
  }

  /**
   * A group may be created (or recreated) on `ref`'s prefix only while no other group on it is
   * still migrating: a scale-in leaves retiring shards that the groups already there read to
   * their end, and a group that joined meanwhile would never read what was written to them.
   * 409 MIGRATION_IN_PROGRESS naming the group; nothing when the prefix has no layout.
   */
  async assertCreatable(ref: GroupRef): Promise<void> {
    const { store, guard } = this.options;
    const [layout] = await guard(() => store.readLayouts([ref.streamPrefix]));
    // A layout that never moved has no group migrating to it (every migration moves the
    // layout): nothing to read, however many groups share the prefix.
    if (layout && layout.version > 1) {
      await this.assertSiblings(ref, layout, { followed: true, movable: false });
    }
  }

  /**
   * Checks every other group on the prefix, read from the store: with `movable`, none may be
   * frozen, failed closed, paused or being reset (it could not follow the move); with `followed`, each must have
   * followed the layout's last move and have no migration in progress.
   */
  private async assertSiblings(
    ref: GroupRef,
    layout: PrefixLayout,
    check: { readonly followed: boolean; readonly movable: boolean },
  ): Promise<void> {
    const { store, guard } = this.options;
    const why = `it shares stream prefix ${ref.streamPrefix}, whose shards every group on it reads`;
    for (const consumerGroup of Object.keys(layout.groups)) {
      if (consumerGroup === ref.consumerGroup) continue;
      const sibling = { streamPrefix: ref.streamPrefix, consumerGroup };
      const details = { streamPrefix: ref.streamPrefix, consumerGroup };
      const [stored, failure] = await Promise.all([
        guard(() => store.loadGroup(sibling)),
        check.movable ? guard(() => store.readFailure(sibling)) : Promise.resolve(null),
      ]);
      if (check.movable && (failure || (stored && stored.state.status === 'FAILED_CLOSED'))) {
        throw new CoordinatorError(
          'GROUP_FAILED_CLOSED_ADMIN',
          `group ${groupId(sibling)} is failed closed (${failure?.reason ?? 'see its view'}); recover it first (${why})`,
          { details: { ...details, failureReason: failure?.reason ?? null } },
        );
      }
      // Gone from the store but still on the layout: deleted (or its key lost, which its
      // failure record says once a replica noticed): nothing to wait for.
      if (!stored) continue;
      const group = stored.state;
      const blocked = check.movable ? migrationBlocker(group) : null;
      if (blocked) {
        throw new CoordinatorError(blocked.code, `${blocked.message} (${why})`, { details });
      }
      if (!check.followed) continue;
      const behind = group.layout.id !== layout.id || group.layout.version < layout.version;
      const migrating = group.activeMigration?.state === 'IN_PROGRESS';
      if (behind || migrating) {
        throw new CoordinatorError(
          'MIGRATION_IN_PROGRESS',
          `group ${groupId(sibling)} on the same stream prefix is still migrating to ${layout.shardCount} shards; try again once it converged`,
          {
            details: {
              ...details,
              shardCount: layout.shardCount,
              ...(group.activeMigration ? { migrationId: group.activeMigration.migrationId } : {}),
            },
          },
        );
      }
    }
  }
}

function refOf(layout: PrefixLayout): LayoutRef {
  return { id: layout.id, version: layout.version };
}

function targetOf(layout: PrefixLayout): LayoutTarget {
  return { id: layout.id, version: layout.version, shardCount: layout.shardCount };
}
