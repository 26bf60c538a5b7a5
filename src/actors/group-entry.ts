import { createActor, type Actor } from 'xstate';
import type { Clock } from '../machines/clock.js';
import type { MembershipConfig } from '../machines/config.js';
import { createGroupContext, type GroupContext } from '../machines/context.js';
import { groupMachine, restoreGroupSnapshot } from '../machines/group-machine.js';
import type { LivenessTable } from '../machines/liveness.js';
import type { FailureReason, GroupRef, GroupState } from '../machines/types.js';
import type { Logger } from '../observability/logger.js';
import type { StoredGroup } from '../store/store.js';
import type { Evidence } from './evidence.js';
import { Mailbox } from './mailbox.js';

export type GroupActor = Actor<typeof groupMachine>;
export type GroupEvent = Parameters<GroupActor['send']>[0];
export type ActorSnapshot = ReturnType<GroupActor['getSnapshot']>;

/**
 * Where a group entry is in its life on this replica: `loading` (being read and claimed),
 * `owned` (serving), `releasing` (no new work; the mailbox drains before the lease is given
 * up), `dropped` (gone: work that reaches it goes back to its caller, to retry or forward).
 */
export type EntryPhase = 'loading' | 'owned' | 'releasing' | 'dropped';

/** One owned group: its actor, what was last persisted, and its mailbox. */
export interface GroupEntry {
  readonly ref: GroupRef;
  phase: EntryPhase;
  /**
   * The group's actor. An idle group's actor is parked (see {@link park}): asking for it
   * starts one again from the snapshot it left, as a load from the store would
   * (`restoreGroupSnapshot`).
   */
  actor: GroupActor;
  /** The actor's current snapshot, without starting a parked actor. */
  snapshot(): ActorSnapshot;
  /**
   * Stops the actor and keeps only its snapshot (an idle group holds no actor,
   * about 4 KB each). The caller holds the mailbox.
   */
  park(): void;
  /** Whether the actor is parked. */
  readonly parked: boolean;
  /** When the actor was last asked for (clock time), to park idle ones. */
  readonly lastActiveAt: number;
  /** Stops the actor for good (the entry is dropped). */
  stopActor(): void;
  /** The group last written (or read): write patches are taken against it. */
  persisted: GroupState;
  revision: number;
  fence: number;
  /** Work on a group runs one at a time. */
  readonly mailbox: Mailbox;
  /** The group object `observe` last looked at. */
  observed: GroupContext['group'] | null;
  counts: { members: number; revoking: number; paused: number };
  /** JSON of the last state value, to tell transitions from steady events. */
  lastValue: string;
  /** The last snapshot whose state is committed: what monitoring and replies show. */
  published: ActorSnapshot | null;
  /** A failure not yet recorded in the store (the write failed): the verify loop retries. */
  unrecorded: { reason: FailureReason; storeRevision: number | null } | null;
  /** A delete was started; it may have happened even if its reply was lost. */
  deleting: boolean;
  /** Evidence from a persisted failure record (what recovery must stay above). */
  floor: Evidence | null;
  /**
   * The deadline sweep's note (`DeadlineSweep`): the liveness table it last read whole, and a
   * time no deadline of the group's members comes before. Kept on the entry, not in a map: the
   * sweep reads it for every group four times a second.
   */
  sweptLiveness: LivenessTable | null;
  sweptBound: number;
  /**
   * Whether the group may be served now, bound to the lease it was loaded under
   * (`OwnedGroups.servingCheck`, made once): an owned entry keeps its lease until it is dropped
   * or released.
   */
  serving: (() => boolean) | null;
  /**
   * The steady tickets given out on the group's current state, by member
   * (`GroupCoordinator.steadyTicket`): they live as long as the entry and that state; the HTTP
   * layer holds them weakly, so a dropped or deleted group, or a group state replaced, takes its
   * tickets with it.
   */
  steadyTickets: {
    readonly group: GroupContext['group'];
    readonly byMember: Map<string, object>;
  } | null;
}

/** What building actors needs: the membership timings, a clock and a logger. */
export interface ActorFactory {
  readonly config: MembershipConfig;
  readonly clock: Clock;
  readonly logger: Logger;
}

/** Starts a group actor on `context`, with an error subscriber so a throwing action is logged. */
export function startActor(factory: ActorFactory, context: GroupContext): GroupActor {
  const actor = createActor(groupMachine, {
    snapshot: restoreGroupSnapshot(context),
    input: context,
  });
  const { streamPrefix, consumerGroup } = context.group;
  // Without an error subscriber a throwing action would crash the process.
  actor.subscribe({
    error: (error: unknown) =>
      factory.logger.error('group actor failed', {
        streamPrefix,
        consumerGroup,
        error: String(error),
      }),
  });
  actor.start();
  return actor;
}

/** The machine context of a group as stored. */
export function contextOf(factory: ActorFactory, stored: StoredGroup): GroupContext {
  return createGroupContext({
    group: stored.state,
    config: factory.config,
    now: factory.clock.now(),
    storeRevision: stored.revision,
  });
}

/** A fresh entry for a group as stored, its actor started. */
export function newEntry(factory: ActorFactory, stored: StoredGroup): GroupEntry {
  return new Entry(factory, stored);
}

class Entry implements GroupEntry {
  readonly ref: GroupRef;
  phase: EntryPhase = 'loading';
  persisted: GroupState;
  revision: number;
  fence: number;
  readonly mailbox = new Mailbox();
  observed: GroupContext['group'] | null = null;
  counts = { members: 0, revoking: 0, paused: 0 };
  lastValue = '';
  published: ActorSnapshot | null = null;
  unrecorded: GroupEntry['unrecorded'] = null;
  deleting = false;
  floor: Evidence | null = null;
  sweptLiveness: LivenessTable | null = null;
  sweptBound = Infinity;
  serving: (() => boolean) | null = null;
  steadyTickets: GroupEntry['steadyTickets'] = null;
  lastActiveAt: number;
  private live: GroupActor | null;
  /** The snapshot a parked actor left; null while it runs. */
  private rest: ActorSnapshot | null = null;

  constructor(
    private readonly factory: ActorFactory,
    stored: StoredGroup,
  ) {
    this.ref = {
      streamPrefix: stored.state.streamPrefix,
      consumerGroup: stored.state.consumerGroup,
    };
    this.persisted = stored.state;
    this.revision = stored.revision;
    this.fence = stored.fence;
    this.live = startActor(factory, contextOf(factory, stored));
    this.lastActiveAt = factory.clock.now();
  }

  get actor(): GroupActor {
    this.lastActiveAt = this.factory.clock.now();
    if (this.live === null) {
      this.live = startActor(this.factory, this.rest!.context);
      this.rest = null;
    }
    return this.live;
  }

  set actor(actor: GroupActor) {
    this.lastActiveAt = this.factory.clock.now();
    this.live = actor;
    this.rest = null;
  }

  get parked(): boolean {
    return this.live === null;
  }

  snapshot(): ActorSnapshot {
    return this.live !== null ? this.live.getSnapshot() : this.rest!;
  }

  park(): void {
    if (this.live === null || this.live.getSnapshot().status !== 'active') return;
    this.rest = this.live.getSnapshot();
    this.live.stop();
    this.live = null;
  }

  stopActor(): void {
    this.live?.stop();
  }
}

/** The group as the entry's actor holds it now. */
export function groupOf(entry: GroupEntry): GroupContext['group'] {
  return entry.snapshot().context.group;
}

export function isFailedClosed(entry: GroupEntry): boolean {
  return groupOf(entry).status === 'FAILED_CLOSED';
}
