import { groupLogFields } from '../observability/logger.js';
import { CoordinatorError, GroupMovedError } from '../errors.js';
import { restoreGroupSnapshot } from '../machines/group-machine.js';
import { holdLimitMs, mayStayHeld, tellsNothingNew } from '../machines/held-heartbeat.js';
import { memberCount } from '../machines/group-state.js';
import type { SteadyDecision } from '../machines/heartbeat.js';
import type { HeartbeatReply, HeartbeatRequest } from '../machines/protocol.js';
import type { GroupRef, MigrationRecord, StartAt } from '../machines/types.js';
import { commandEvent, unwrap } from './commands.js';
import { composeHost, type GroupHostOptions, type HostParts } from './compose-host.js';
import { failedClosedAdminError } from './fail-closed.js';
import {
  contextOf,
  groupOf,
  isFailedClosed,
  type GroupEntry,
  type GroupEvent,
} from './group-entry.js';
import { failedShell } from './group-loader.js';
import { UNKNOWN_LIFECYCLE, type ClientClaim, type LostSource } from './lost-groups.js';
import type { HoldEnd, TakenHold } from './held-heartbeats.js';
import type { Settled } from './mailbox.js';
import { snapshotOf } from './snapshots.js';
import { StreamsReader, streamsTargetOf } from '../streams/streams-reader.js';
import { GroupLag, type LagView } from './group-lag.js';
import {
  GroupDeadLetters,
  type DeadLetterSelection,
  type DeadLettersView,
  type PurgeView,
  type ReplayView,
} from './dead-letters.js';
import { PrefixLayouts } from './prefix-layouts.js';
import { RetiredShards } from './retired-shards.js';
import { PositionResets, type PositionsRequest, type PositionsView } from './position-resets.js';
import { statechartView } from './statechart-view.js';
import { TRANSITIONS_KEPT, type TransitionOrigin } from './publication.js';
import type {
  AdminCommand,
  ChangeRequest,
  CommandOrigin,
  CommandOutcome,
  CreateGroupOptions,
  GroupCoordinator,
  GroupSnapshot,
  GroupTransition,
  HeartbeatHold,
  RecoveryRequest,
  SteadyTicket,
  TransitionCause,
  TransitionsView,
} from './types.js';
import {
  assignmentsView,
  groupSummary,
  groupView,
  membersView,
  migrationsView,
  routingView,
  startedMigrationView,
  type GroupView,
} from './views.js';

export type { GroupHostOptions } from './compose-host.js';

/**
 * How far before this replica's clock a new group's `latest` starts when the streams Redis's
 * clock cannot be read: clocks of hosts kept by NTP disagree by far less.
 */
const START_FROM_MARGIN_MS = 5_000;

/** The kind of the heartbeat batches in a group's mailbox. */
const HEARTBEATS = { kind: 'heartbeats' };

/** What lets retiring shards read to their end go: this replica, having looked at them. */
const RETIRED_CAUSE: TransitionCause = {
  kind: 'replica',
  detail: 'retiring shards were read to their end',
};

/** What moves a reset's shards and resumes them: this replica, having moved their positions. */
const RESET_CAUSE: TransitionCause = {
  kind: 'replica',
  detail: 'consumer group positions were moved',
};

/** Heartbeats' transitions: each is caused by the member its step was for. */
const HEARTBEAT_ORIGIN: TransitionOrigin = { event: 'HEARTBEAT', cause: null };

/**
 * An admin command with the request it came from: the origin stays on the command object as
 * the prefix layout passes it on (`{ ...command, layout }`), down to {@link GroupHost.runCommand}.
 */
type Originated = AdminCommand & { readonly origin?: CommandOrigin | undefined };

/** A routing long poll's wait (see `GroupCoordinator.getRouting`). */
interface RoutingWait {
  readonly afterVersion: number;
  readonly waitMs: number;
  readonly signal?: AbortSignal;
}

function adminCause(
  origin: CommandOrigin | undefined,
  requestedBy: string | null,
): TransitionCause {
  return {
    kind: 'admin',
    requestId: origin?.requestId ?? null,
    principal: origin?.principal ?? null,
    requestedBy: requestedBy ?? origin?.requestedBy ?? null,
  };
}

/** What a command's transitions are kept with: its type and who asked for it. */
function commandOrigin(command: Originated): TransitionOrigin {
  if (command.type === 'ADOPT_LAYOUT') {
    return {
      event: command.type,
      cause: { kind: 'replica', detail: "followed the stream prefix's shard layout" },
    };
  }
  const requestedBy = 'requestedBy' in command ? command.requestedBy : null;
  return { event: command.type, cause: adminCause(command.origin, requestedBy) };
}

/** A heartbeat waiting in its group's batch: the request and how it may be held. */
interface HeartbeatItem {
  readonly request: HeartbeatRequest;
  readonly hold: HeartbeatHold | undefined;
}

/** A heartbeat decided in a batch: its reply, and its hold when it is held. */
interface DecidedHeartbeat {
  readonly reply: HeartbeatReply;
  readonly held: { readonly ended: Promise<HoldEnd>; readonly request: HeartbeatRequest } | null;
}

/**
 * The actor system (docs/architecture.md#the-actor-layer): one XState actor per group, composed of
 * one-job parts (wired in `compose-host.ts`). Owned groups go through the ownership seam (loaded
 * only when this replica owns them); each entry has a mailbox; the committer makes ONE fenced write
 * per change before anyone is answered; the deadline sweep and the verify loop run on the clock;
 * fail-closed handling, recovery and publication (readers, long polls, events) are their own. What
 * `http/` gets back are view objects, never the machine context.
 */
export class GroupHost implements GroupCoordinator {
  private readonly stops: Array<() => void> = [];

  private readonly parts: HostParts;
  /** One shard layout per stream prefix: scales move the prefix, siblings follow. */
  private readonly layouts: PrefixLayouts;
  /** How far the groups served here are behind on their streams. */
  private readonly lag: GroupLag;
  /** Retiring shards no member reads: sealed, and let go once read to their end. */
  private readonly retired: RetiredShards;
  /** Position resets: planned, and their shards moved once every member let go of them. */
  private readonly resets: PositionResets;
  /** The data streams, when the coordinator knows where they are. */
  private readonly reader: StreamsReader | null;
  /** The dead letters of the groups served here. */
  private readonly deadLetters: GroupDeadLetters;

  /** Held heartbeats being answered (see {@link releaseHeld}). */
  private readonly holding = new Set<Promise<HeartbeatReply>>();
  /** Set once the replica stops: no heartbeat is held any more. */
  private holdsClosed = false;

  constructor(private readonly options: GroupHostOptions) {
    this.parts = composeHost(options);
    const { parts } = this;
    this.layouts = new PrefixLayouts({
      store: options.store,
      guard: parts.guard,
      clock: options.clock,
      logger: options.logger,
      withEntry: (ref, work) => this.withEntry(ref, work),
      run: (entry, command) => this.runCommand(entry, command),
      entries: () => parts.table.all(),
      mayServe: (ref) => parts.ownership.mayServe(ref),
      intervalMs: options.settings.store['verify-interval'],
    });
    const { streams } = options.settings;
    const target = options.streams === undefined ? streamsTargetOf(options.settings) : null;
    const reader = options.streams ?? (target ? new StreamsReader(target) : null);
    this.reader = reader;
    this.deadLetters = new GroupDeadLetters(reader);
    /** What the replica does to the groups it serves on its own, and why (kept per transition). */
    const replicaWork = (cause: TransitionCause) => ({
      reader,
      clock: options.clock,
      logger: options.logger,
      entries: () => parts.table.all(),
      withEntry: <T>(ref: GroupRef, work: (entry: GroupEntry) => Promise<T>) =>
        this.withEntry(ref, work),
      // Kept with the group's transitions as the replica's doing (not a deadline's).
      dispatch: (entry: GroupEntry, event: GroupEvent) =>
        parts.publication.during(entry.ref, { event: event.type, cause }, () =>
          parts.committer.dispatch(entry, event),
        ),
    });
    this.retired = new RetiredShards(replicaWork(RETIRED_CAUSE));
    this.resets = new PositionResets(replicaWork(RESET_CAUSE));
    // A reset whose shards were all given up is moved as soon as the change that did it is
    // committed (and, should a move fail, at the next sweep).
    parts.publication.afterChange = (entry) => {
      if (this.resets.ready(entry)) setImmediate(() => void this.resets.check(entry.ref));
    };
    this.lag = new GroupLag({
      reader,
      clock: options.clock,
      metrics: options.metrics,
      logger: options.logger,
      cacheMs: streams['lag-cache'],
      intervalMs: streams['lag-interval'],
      budget: streams['lag-budget'],
      shardMetrics: streams['lag-shard-metrics'],
      registry: (page) => parts.guard(() => options.store.listGroups(page)),
      owns: (ref) => parts.ownership.ownerOf(ref).self,
      // Through the owned-groups path, as any request would load it (a group owned elsewhere
      // is never loaded here).
      entryOf: async (ref) => {
        const found = await parts.owned.lookup(ref);
        return found.kind === 'owned' ? found.entry : null;
      },
      entries: () => parts.table.all(),
      snapshotOf: (entry) => this.snapshotOf(entry),
    });
    parts.table.afterRemove = (entry) => this.lag.forget(entry.ref);
  }

  /** Starts the deadline sweep and, on a real store, the verify loop. */
  start(): void {
    if (this.stops.length > 0) return;
    this.stops.push(this.parts.sweeper.start());
    this.stops.push(this.lag.start());
    if (this.options.store.kind !== 'memory') this.stops.push(this.parts.verifier.start());
    // A group follows its prefix's layout within a verify interval when another replica moved
    // it, or when it could not follow at once; retiring shards nobody reads are checked then too.
    this.stops.push(this.layouts.start());
    this.stops.push(
      this.options.clock.every(this.options.settings.store['verify-interval'], () => {
        void this.retired.sweep();
        void this.resets.sweep();
      }),
    );
  }

  async close(): Promise<void> {
    await this.releaseHeld();
    for (const stop of this.stops.splice(0)) stop();
    this.parts.lost.stop();
    await this.parts.owned.stop();
    this.parts.publication.releaseAll();
    await this.idle();
    this.parts.table.clear();
    await this.lag.close();
  }

  /**
   * Resolves once every group's mailbox has run what was queued on it so far (timer work and
   * writes in flight included) and is idle: a barrier for tests and for close.
   */
  async idle(): Promise<void> {
    await Promise.allSettled(this.parts.table.all().map((e) => e.mailbox.idle()));
  }

  /**
   * Hands a group over (docs/architecture.md#replicas-leases-and-fences): its mailbox drains, then
   * its lease is given up.
   */
  release(ref: GroupRef): Promise<void> {
    return this.parts.owned.release(ref);
  }

  /** Ticks every actor whose earliest deadline has passed; resolves when they are done. */
  sweep(): Promise<void> {
    return this.parts.sweeper.sweep();
  }

  /** One round of the verify loop (docs/architecture.md#failure-detection). */
  verify(): Promise<void> {
    return this.parts.verifier.verify();
  }

  async assertWritable(): Promise<void> {
    if (this.options.store.kind === 'memory') return;
    await this.options.store.ping();
  }

  /** Creates a group (a bare number is its shard count). */
  async createGroup(
    ref: GroupRef,
    options: CreateGroupOptions | number,
    origin?: CommandOrigin,
    requestedBy: string | null = null,
  ): Promise<GroupView> {
    const given = typeof options === 'number' ? { shardCount: options } : options;
    await this.layouts.assertCreatable(ref);
    const spec = { ...given, startFrom: await this.startFrom() };
    const created = { event: 'CREATE', cause: adminCause(origin, requestedBy) };
    const entry = await this.parts.publication.during(ref, created, () =>
      this.parts.owned.create(ref, spec),
    );
    const { shardCount, startAt } = groupOf(entry);
    this.options.logger.info('group created', { ...groupLogFields(ref), shardCount, startAt });
    return groupView(this.snapshotOf(entry));
  }

  /** Layouts of this replica's groups' prefixes, followed now (tests; the loop does it on its own). */
  followLayouts(): Promise<void> {
    return this.layouts.followOwned();
  }

  async putGroup(
    ref: GroupRef,
    shardCount: number,
    change: ChangeRequest & { readonly startAt?: StartAt | undefined },
    origin?: CommandOrigin,
  ) {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.withEntry(ref, async (entry) => {
          const group = groupOf(entry);
          if (group.status === 'FAILED_CLOSED') throw failedClosedAdminError(entry);
          if (group.shardCount === shardCount) {
            const group = groupView(this.snapshotOf(entry));
            return { outcome: 'UNCHANGED' as const, group, migration: null };
          }
          const { requestedBy, reason } = change;
          const scale = { type: 'SCALE' as const, shardCount, requestedBy, reason, origin };
          const started = await this.layouts.change(entry, scale);
          return { outcome: 'MIGRATION_STARTED' as const, ...started };
        }).then(async (result) => {
          if (result.outcome === 'MIGRATION_STARTED') await this.afterPrefixMove(ref);
          return result;
        });
      } catch (error) {
        if (!(error instanceof CoordinatorError && error.code === 'GROUP_NOT_FOUND')) throw error;
        try {
          const { startAt } = change;
          const group = await this.createGroup(
            ref,
            { shardCount, startAt },
            origin,
            change.requestedBy,
          );
          return { outcome: 'CREATED' as const, group, migration: null };
        } catch (createError) {
          // Created by a request racing this one: decide again against the group as it is.
          const exists =
            createError instanceof CoordinatorError && createError.code === 'GROUP_EXISTS';
          if (!exists || attempt > 0) throw createError;
        }
      }
    }
  }

  async getGroup(ref: GroupRef) {
    const snapshot = await this.read(ref);
    return { ...groupView(snapshot), hints: this.lag.hints(snapshot) };
  }

  async getMembers(ref: GroupRef) {
    return membersView(await this.read(ref));
  }

  async getAssignments(ref: GroupRef) {
    return assignmentsView(await this.read(ref));
  }

  async getMigrations(ref: GroupRef) {
    return migrationsView(await this.read(ref), this.options.clock.now());
  }

  /** The group's lag on its streams (docs/operations.md#lag), read by its owner. */
  async getLag(ref: GroupRef): Promise<LagView> {
    return this.lag.read(await this.read(ref));
  }

  /** The group's dead letters (docs/protocol.md#dead-letters), read by its owner. */
  async listDeadLetters(ref: GroupRef, select: DeadLetterSelection): Promise<DeadLettersView> {
    return this.deadLetters.list(await this.read(ref), select);
  }

  /** Sends the chosen dead letters back through the group's routing, or says which it would. */
  async replayDeadLetters(
    ref: GroupRef,
    select: DeadLetterSelection & { readonly dryRun: boolean },
  ): Promise<ReplayView> {
    return this.deadLetters.replay(await this.read(ref), select);
  }

  /** Deletes the chosen dead letters of the group. */
  async purgeDeadLetters(
    ref: GroupRef,
    select: { readonly shards?: readonly number[] | undefined; readonly ids?: readonly string[] },
  ): Promise<PurgeView> {
    return this.deadLetters.purge(await this.read(ref), select);
  }

  /**
   * After a scale or rollback moved `ref`'s prefix: the other groups on it served here follow,
   * and shards the moves retired with no member to read them are sealed at once.
   */
  private async afterPrefixMove(ref: GroupRef): Promise<void> {
    const siblings = await this.layouts.followSiblings(ref);
    for (const group of [ref, ...siblings]) await this.retired.check(group);
  }

  /**
   * Where a new group's `latest` starts (docs/protocol.md#start-position): the streams Redis's
   * own clock, which makes the stream ids; without it (streams unknown or unreachable), this
   * replica's clock less a margin for clocks that disagree (a few entries read twice at worst).
   */
  private async startFrom(): Promise<number> {
    const now = this.options.clock.now();
    if (this.reader === null) return now - START_FROM_MARGIN_MS;
    try {
      return await this.reader.time();
    } catch {
      return now - START_FROM_MARGIN_MS;
    }
  }

  /** One round of the retiring-shard check (tests; the loop runs it every verify interval). */
  sweepRetired(): Promise<void> {
    return this.retired.sweep();
  }

  /** One round of the lag metrics refresh (tests; the loop runs it every lag-interval). */
  refreshLag(): Promise<void> {
    return this.lag.refresh();
  }

  async getStatechart(ref: GroupRef) {
    return statechartView(await this.read(ref));
  }

  /** The group's recent transitions, kept here as its owner (newest first). */
  async getTransitions(ref: GroupRef): Promise<TransitionsView> {
    const entry = await this.entry(ref);
    return {
      owner: this.parts.ownership.replicaId,
      capacity: TRANSITIONS_KEPT,
      transitions: this.parts.publication.transitions(entry),
    };
  }

  getRouting(ref: GroupRef, wait?: RoutingWait) {
    // A producer that knew a version of a group the store no longer holds: lost, not unknown.
    const claim = { metadataVersion: wait?.afterVersion };
    return this.unlessLost(ref, claim, 'routing', () => this.routing(ref, wait));
  }

  private async routing(ref: GroupRef, wait?: RoutingWait) {
    const entry = await this.entry(ref);
    // Decided on what readers are served (the published state), not on a batch still running.
    const group = (entry.published ?? entry.snapshot()).context.group;
    if (
      wait &&
      // A group already leaving this replica is not waited on: its leaving woke the waits.
      (entry.phase === 'owned' || entry.phase === 'loading') &&
      group.metadataVersion <= wait.afterVersion &&
      group.status !== 'FAILED_CLOSED' &&
      wait.waitMs > 0
    ) {
      await this.parts.publication.waitForVersion(ref, wait.afterVersion, wait.waitMs, wait.signal);
    }
    const snapshot = await this.read(ref);
    const { status, failureReason } = snapshot.context.group;
    if (status === 'FAILED_CLOSED') {
      throw new CoordinatorError(
        'GROUP_FAILED_CLOSED',
        'the group failed closed; routing is withheld until recovery',
        { details: { failureReason } },
      );
    }
    return routingView(snapshot);
  }

  async listGroups(options: { cursor?: string | undefined; limit: number }) {
    const page = await this.parts.guard(() => this.options.store.listGroups(options));
    const groups = [];
    for (const ref of page.groups) {
      try {
        groups.push(groupSummary(await this.read(ref)));
      } catch (error) {
        if (error instanceof GroupMovedError) {
          // Owned elsewhere: read from the store (reading never takes a group).
          const stored = await this.storedSummary(ref, error.owner);
          if (stored) groups.push(stored);
          continue;
        }
        if (!(error instanceof CoordinatorError && error.code === 'GROUP_NOT_FOUND')) throw error;
      }
    }
    return { groups, nextCursor: page.nextCursor };
  }

  async deleteGroup(ref: GroupRef, options: { force: boolean }): Promise<void> {
    await this.withEntry(ref, (entry) => this.parts.deletion.delete(entry, options));
  }

  async command(ref: GroupRef, given: AdminCommand, origin?: CommandOrigin) {
    const command: Originated = origin ? { ...given, origin } : given;
    if (command.type !== 'SCALE' && command.type !== 'ROLLBACK') {
      return this.withEntry(ref, (entry) => this.runCommand(entry, command));
    }
    // A scale or rollback moves the whole stream prefix; the other groups on it follow once
    // this group's mailbox is free again (a sibling's own move may be waiting on it).
    const outcome = await this.withEntry(ref, (entry) => this.layouts.change(entry, command));
    await this.afterPrefixMove(ref);
    return outcome;
  }

  /**
   * Plans a position reset and, unless `dryRun`, starts it (docs/operations.md#replay-or-skip);
   * `resetId` is the request's id, so a repeat answers the same reset.
   */
  async resetPositions(
    ref: GroupRef,
    request: PositionsRequest,
    origin: CommandOrigin,
  ): Promise<PositionsView> {
    const view = await this.resets.request(
      await this.entry(ref),
      request,
      origin.requestId,
      (work) => this.withEntry(ref, work),
      (entry, event) =>
        this.runCommand(entry, { type: 'RESET_POSITIONS', reset: event.reset, origin }),
    );
    // With no member holding the shards, they can be moved at once; a forwarded request is
    // answered first (the moves may outlast its forward deadline), its moves go on here.
    if (view.reset && request.planWithinMs != null) void this.resets.check(ref);
    else if (view.reset) await this.resets.check(ref);
    return view;
  }

  /** One round of position moves (tests; the loop runs it every verify interval). */
  sweepResets(): Promise<void> {
    return this.resets.sweep();
  }

  steadyTicket(ref: GroupRef, request: HeartbeatRequest): SteadyTicket | null {
    return this.parts.owned.withEntryNow(ref, (entry) => {
      // A member with a held heartbeat takes heartbeat(): the held one is decided first.
      if (this.parts.holds.has(entry, request.memberId)) return null;
      const decision = this.parts.committer.decideSteady(entry, this.options.clock.now(), request);
      if (decision === null) return null;
      const ticket = new HostTicket(entry, decision, this.parts.owned.servingCheck(entry));
      // Kept alive by the entry, for its current group state only (the HTTP layer holds it weakly).
      let kept = entry.steadyTickets;
      if (kept === null || kept.group !== decision.group)
        kept = entry.steadyTickets = { group: decision.group, byMember: new Map() };
      kept.byMember.set(request.memberId, ticket);
      return ticket;
    });
  }

  servedElsewhere(ref: GroupRef): string | null {
    return this.parts.owned.servedElsewhere(ref);
  }

  steadyAgain(ticket: SteadyTicket): boolean {
    if (!(ticket instanceof HostTicket)) return false;
    const { entry, decision, serving } = ticket;
    const { owned, holds, committer } = this.parts;
    return (
      owned.servesNow(entry, serving) &&
      !holds.has(entry, decision.member.memberId) &&
      committer.repeatSteady(entry, this.options.clock.now(), decision)
    );
  }

  async heartbeat(
    ref: GroupRef,
    request: HeartbeatRequest,
    hold?: HeartbeatHold,
  ): Promise<HeartbeatReply> {
    const { clock } = this.options;
    const { committer } = this.parts;
    // Heartbeats that queue up on the group while it is busy are decided together when its
    // turn comes, with one write for all they changed (heartbeatBatch).
    const first = await this.memberHeartbeat(ref, request, () =>
      this.parts.owned.withEntryBatch(ref, HEARTBEATS, { request, hold }, this.runHeartbeats),
    );
    if (!first.held || !hold) return first.reply;
    const held = first.held;
    hold.onHeld?.();
    const answer = (async () => {
      const end = await held.ended;
      if (end.kind === 'answered') return end.reply;
      if (end.kind === 'failed') throw this.withFailureReason(ref, end.error);
      // The caller went away: nobody to answer, nothing more to decide for it.
      if (end.kind === 'cancelled' || hold.signal?.aborted) return first.reply;
      // Decided again on the group as it is now, wherever it is served (never from memory a
      // replica may no longer serve); its session still counts from its arrival.
      return this.memberHeartbeat(ref, held.request, () =>
        this.withEntry(ref, (entry) =>
          this.parts.publication.during(entry.ref, HEARTBEAT_ORIGIN, () =>
            committer.heartbeat(entry, clock.now(), held.request),
          ),
        ),
      );
    })();
    this.holding.add(answer);
    try {
      return await answer;
    } finally {
      this.holding.delete(answer);
    }
  }

  /**
   * Answers every held heartbeat now, deciding each on the group as it is, and holds no new one
   * (shutdown: before the connections are closed). Resolves when they are answered.
   */
  async releaseHeld(): Promise<void> {
    this.holdsClosed = true;
    this.parts.holds.wakeEverything();
    await Promise.allSettled([...this.holding]);
  }

  /** Holds the reply to `request` when it tells nothing new and may stay held; else null. */
  private hold(
    entry: GroupEntry,
    request: HeartbeatRequest,
    reply: HeartbeatReply,
    hold: HeartbeatHold,
  ): { readonly ended: Promise<HoldEnd>; readonly request: HeartbeatRequest } | null {
    if (this.holdsClosed || hold.waitMs <= 0 || !tellsNothingNew(request, reply)) return null;
    const ctx = entry.snapshot().context;
    if (!mayStayHeld(ctx, request, this.options.clock.now())) return null;
    const member = ctx.group.members.get(request.memberId);
    if (!member) return null;
    const forMs = holdLimitMs(hold.waitMs, member.sessionTimeoutMs);
    const ended = this.parts.holds.hold(entry, request, forMs, hold.signal);
    return ended && { ended, request };
  }

  private readonly runHeartbeats = (entry: GroupEntry, items: readonly HeartbeatItem[]) =>
    this.parts.publication.during(entry.ref, HEARTBEAT_ORIGIN, () =>
      this.heartbeatBatch(entry, items),
    );

  /**
   * The heartbeats that queued up on a group, decided in arrival order (the group's mailbox is
   * held): in runs of consecutive heartbeats decided together (`Committer.heartbeats`: one
   * write for what they changed). A run ends before a member's second heartbeat and before a
   * heartbeat whose member has one held, which is decided first, on the group as the heartbeats
   * before it left it: each member's heartbeats are decided one after another, as they came.
   */
  private async heartbeatBatch(
    entry: GroupEntry,
    items: readonly HeartbeatItem[],
  ): Promise<Array<Settled<DecidedHeartbeat>>> {
    const { committer, holds } = this.parts;
    const results: Array<Settled<DecidedHeartbeat>> = [];
    let run: HeartbeatItem[] = [];
    const inRun = new Set<string>();
    const decideRun = async () => {
      if (run.length === 0) return;
      const decided = await committer.heartbeats(
        entry,
        run.map((item) => item.request),
      );
      decided.forEach((outcome, i) => {
        const { request, hold } = run[i]!;
        if (!outcome.ok) {
          results.push(outcome);
          return;
        }
        const { reply, now } = outcome.value;
        const held = hold ? this.hold(entry, { ...request, heardAt: now }, reply, hold) : null;
        results.push({ ok: true, value: { reply, held } });
      });
      run = [];
      inRun.clear();
    };
    for (const item of items) {
      const { memberId } = item.request;
      if (inRun.has(memberId)) await decideRun();
      // The member's earlier heartbeat is still held: it is decided first, in this turn.
      const earlier = holds.take(entry, memberId);
      if (earlier) {
        await decideRun();
        await this.decideTaken(entry, earlier);
      }
      run.push(item);
      inRun.add(memberId);
    }
    await decideRun();
    return results;
  }

  /** Decides a held heartbeat taken out by a newer one of its member, and answers it. */
  private async decideTaken(entry: GroupEntry, taken: TakenHold): Promise<void> {
    try {
      const now = this.options.clock.now();
      taken.end({
        kind: 'answered',
        reply: await this.parts.committer.heartbeat(entry, now, taken.request),
      });
    } catch (error) {
      taken.end({ kind: 'failed', error });
    }
  }

  async observeVersion(
    ref: GroupRef,
    version: number,
    source: 'routing',
    lifecycleId?: string,
  ): Promise<void> {
    const claim = { metadataVersion: version, ...(lifecycleId ? { lifecycleId } : {}) };
    await this.unlessLost(ref, claim, source, () =>
      this.withEntry(ref, async (entry) => {
        const group = groupOf(entry);
        // Versions of another lifecycle (the group deleted and created again, or recreated)
        // cannot be compared with this one's: no signal, and no evidence for a RESUME. A group
        // failed closed without knowing its lifecycle takes every report as evidence.
        const comparable =
          lifecycleId === undefined ||
          lifecycleId === group.lifecycleId ||
          group.lifecycleId === UNKNOWN_LIFECYCLE;
        if (!comparable) return;
        if (version <= group.metadataVersion) return;
        const now = this.options.clock.now();
        const reported = { event: 'OBSERVE_VERSION', cause: { kind: 'producer' as const } };
        await this.parts.publication.during(entry.ref, reported, () =>
          this.parts.committer.dispatch(entry, {
            type: 'OBSERVE_VERSION',
            now,
            source,
            version,
          }),
        );
      }),
    );
  }

  /**
   * Decides a member's heartbeat by `decide`. A member that reports a lifecycle or a version of
   * a group the store no longer holds knew it: the group is lost, not unknown
   * (docs/operations.md#lost-metadata). A refusal because the group failed closed names why.
   */
  private async memberHeartbeat<T>(
    ref: GroupRef,
    request: HeartbeatRequest,
    decide: () => Promise<T>,
  ): Promise<T> {
    try {
      return await this.unlessLost(ref, request, 'heartbeat', decide);
    } catch (error) {
      throw this.withFailureReason(ref, error);
    }
  }

  /**
   * An admin request reported what it knows of the group (`X-Observed-Lifecycle-Id`,
   * `X-Observed-Metadata-Version`): for a group whose metadata is missing, that is a loss as
   * a client's report is (docs/operations.md#lost-metadata), and the request that follows is
   * refused as for any failed-closed group. Best effort: never throws.
   */
  async reportObserved(ref: GroupRef, claim: ClientClaim): Promise<void> {
    await this.unlessLost(ref, claim, 'admin', () => this.entry(ref)).catch(() => undefined);
  }

  /**
   * Runs `work`; when it finds no such group although the caller reports a lifecycle or a
   * version of it, that is a loss (`LostGroups.fromClient`: remembered, counted, its failure
   * record written) and `work` runs again, on the group now failed closed. Without such a
   * claim, or for a deleted lifecycle, the group stays unknown (404).
   */
  private async unlessLost<T>(
    ref: GroupRef,
    claim: ClientClaim,
    source: LostSource,
    work: () => Promise<T>,
  ): Promise<T> {
    try {
      return await work();
    } catch (error) {
      const notFound = error instanceof CoordinatorError && error.code === 'GROUP_NOT_FOUND';
      if (!notFound || !(await this.parts.lost.fromClient(ref, claim, source))) throw error;
      return work();
    }
  }

  /**
   * A heartbeat refused because the group failed closed names why (`details.failureReason`,
   * e.g. `METADATA_LOST`), as routing and admin refusals do.
   */
  private withFailureReason(ref: GroupRef, error: unknown): unknown {
    if (!(error instanceof CoordinatorError) || error.code !== 'GROUP_FAILED_CLOSED') return error;
    if (error.details !== undefined) return error;
    const entry = this.parts.table.get(ref);
    if (!entry || !isFailedClosed(entry)) return error;
    return new CoordinatorError(error.code, error.message, {
      details: { failureReason: groupOf(entry).failureReason },
    });
  }

  async recover(
    ref: GroupRef,
    request: RecoveryRequest,
    origin?: CommandOrigin,
  ): Promise<GroupView> {
    // A new lifecycle joins its prefix's layout like a new group.
    if (request.action === 'RECREATE') await this.layouts.assertCreatable(ref);
    return this.withEntry(ref, async (entry) => {
      const recovering = { event: 'RECOVER', cause: adminCause(origin, request.requestedBy) };
      await this.parts.publication.during(entry.ref, recovering, () =>
        this.parts.recovery.recover(entry, request),
      );
      this.parts.sweeper.track(entry);
      return groupView(this.snapshotOf(entry));
    });
  }

  /**
   * Follows a group's transitions (the monitoring events stream): `listener` gets every change
   * of state value and every event with effects; `onEnd` is called when the group leaves this
   * replica. Resolves with the unsubscribe function.
   */
  async subscribe(
    ref: GroupRef,
    listener: (transition: GroupTransition) => void,
    onEnd?: () => void,
  ): Promise<() => void> {
    return this.parts.publication.subscribe(await this.entry(ref), listener, onEnd);
  }

  groupsOwned(): number {
    return this.parts.table.all().length;
  }

  /** The groups this replica has entries for (handover looks at them). */
  heldGroups(): GroupRef[] {
    return this.parts.owned.held();
  }

  /**
   * A group's list line as stored, for a group another replica owns; null if it is gone. A
   * group with a failure record is listed failed closed, also when its metadata key is lost
   * (docs/operations.md#lost-metadata).
   */
  private async storedSummary(ref: GroupRef, owner: string | null) {
    const { guard, factory } = this.parts;
    const { store } = this.options;
    const [failure, stored] = await Promise.all([
      guard(() => store.readFailure(ref)),
      guard(() => store.loadGroup(ref)),
    ]);
    if (!stored && !failure) return null;
    const found = contextOf(factory, stored ?? failedShell(ref, failure, this.options.clock.now()));
    const context = failure
      ? {
          ...found,
          group: {
            ...found.group,
            status: 'FAILED_CLOSED' as const,
            failureReason: failure.reason,
          },
        }
      : found;
    const snapshot = restoreGroupSnapshot(context);
    // Owner '' while the group moves between replicas (no owner known this instant).
    return groupSummary({
      context,
      stateValue: snapshot.value,
      owner: owner ?? '',
      highestVersionSeen: 0,
    });
  }

  /** An admin command on an entry whose mailbox the caller holds. */
  private async runCommand(entry: GroupEntry, command: Originated): Promise<CommandOutcome> {
    const { origin: _origin, ...plain } = command;
    const event = commandEvent(plain, this.options.clock.now());
    const after = await this.parts.publication.during(entry.ref, commandOrigin(command), () =>
      this.parts.committer.dispatch(entry, event),
    );
    const reply = unwrap(after) as {
      migration?: MigrationRecord;
    };
    const snapshot = this.snapshotOf(entry);
    const migration = reply.migration ? startedMigrationView(reply.migration, snapshot) : null;
    return { group: groupView(snapshot), migration };
  }

  /** The group as readers see it (its last committed state). */
  private async read(ref: GroupRef): Promise<GroupSnapshot> {
    return this.snapshotOf(await this.entry(ref));
  }

  /** The group's entry; `GROUP_MOVED` when another replica serves it (never loaded here). */
  private entry(ref: GroupRef): Promise<GroupEntry> {
    return this.parts.owned.entry(ref);
  }

  private withEntry<T>(ref: GroupRef, work: (entry: GroupEntry) => Promise<T>): Promise<T> {
    return this.parts.owned.withEntry(ref, work);
  }

  private snapshotOf(entry: GroupEntry): GroupSnapshot {
    return snapshotOf(entry, this.parts.ownership.replicaId);
  }
}

/** A steady heartbeat's decision on one entry (see `GroupCoordinator.steadyTicket`). */
class HostTicket implements SteadyTicket {
  constructor(
    readonly entry: GroupEntry,
    readonly decision: SteadyDecision,
    /** Whether the group may be served now (`OwnedGroups.servingCheck`). */
    readonly serving: () => boolean,
  ) {}

  get reply(): HeartbeatReply {
    return this.decision.reply;
  }

  get outcome(): HeartbeatReply['outcome'] {
    return this.decision.outcome;
  }

  get groupSize(): number {
    return memberCount(this.decision.group);
  }
}
