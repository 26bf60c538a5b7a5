import type { GroupContext } from '../machines/context.js';
import type { Clock } from '../machines/clock.js';
import { memberCount, revokePendingCount } from '../machines/group-state.js';
import { groupId, type GroupRef } from '../machines/types.js';
import type { Metrics } from '../observability/metrics.js';
import type { ActorSnapshot, GroupEntry } from './group-entry.js';
import type { HeldHeartbeats } from './held-heartbeats.js';
import type { GroupTransition } from './types.js';
import { VersionWaiters } from './version-waiters.js';

type Listener = (transition: GroupTransition) => void;

/**
 * What announcing a step of a batch needs of the snapshot right after it, and nothing more: a
 * batch keeps one per step until its write is done, and a whole snapshot would keep every
 * intermediate group (each with its derived shard index) alive that long.
 */
export interface AnnouncedStep {
  readonly value: ActorSnapshot['value'];
  readonly context: Pick<GroupContext, 'lastEventAt' | 'effects'> & {
    readonly group: Pick<GroupContext['group'], 'metadataVersion' | 'assignmentEpoch' | 'status'>;
  };
}

/** The {@link AnnouncedStep} of a snapshot. */
export function announcedStep(snapshot: ActorSnapshot): AnnouncedStep {
  const { lastEventAt, effects, group } = snapshot.context;
  const { metadataVersion, assignmentEpoch, status } = group;
  return {
    value: snapshot.value,
    context: { lastEventAt, effects, group: { metadataVersion, assignmentEpoch, status } },
  };
}

/**
 * What the world sees of a group once a state is committed: the published snapshot readers
 * get, the routing long polls, the held heartbeats, the events stream listeners and the member
 * gauges.
 */
export class Publication {
  private readonly waiters: VersionWaiters;
  private readonly listeners = new Map<string, Set<Listener>>();

  constructor(
    clock: Clock,
    private readonly metrics: Pick<Metrics, 'members' | 'revokePending' | 'routingLongPolls'>,
    /** The held heartbeats, told of every committed change of a group. */
    private readonly holds?: Pick<HeldHeartbeats, 'changed'>,
  ) {
    this.waiters = new VersionWaiters(clock, (open) => metrics.routingLongPolls.set(open));
  }

  /** Keeps the gauges, long polls and event listeners in step with the context. */
  observe(entry: GroupEntry, context: GroupContext): void {
    // What readers see: only states whose write has committed (observe runs after the commit).
    entry.published = entry.snapshot();
    if (this.listeners.has(groupId(entry.ref))) {
      this.announce(entry, entry.published.value, context);
    }
    // The rest depends on the group only, which a steady-state heartbeat leaves as it was.
    if (context.group === entry.observed) return;
    entry.observed = context.group;
    this.holds?.changed(entry, context);
    this.waiters.notify(
      groupId(entry.ref),
      context.group.metadataVersion,
      context.group.status === 'FAILED_CLOSED',
    );
    const members = memberCount(context.group);
    const revoking = revokePendingCount(context.group);
    this.metrics.members.inc(members - entry.counts.members);
    this.metrics.revokePending.inc(revoking - entry.counts.revoking);
    entry.counts = { members, revoking };
  }

  /** Follows the group's transitions; returns the unsubscribe function. */
  subscribe(entry: GroupEntry, listener: Listener): () => void {
    const id = groupId(entry.ref);
    let set = this.listeners.get(id);
    if (!set) {
      set = new Set();
      this.listeners.set(id, set);
    }
    if (set.size === 0)
      entry.lastValue = JSON.stringify((entry.published ?? entry.snapshot()).value);
    set.add(listener);
    const listeners = set;
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0) this.listeners.delete(id);
    };
  }

  /** Resolves when the group's version passes `afterVersion` (or it fails closed), or after `waitMs`. */
  waitForVersion(ref: GroupRef, afterVersion: number, waitMs: number): Promise<void> {
    return this.waiters.wait(groupId(ref), afterVersion, waitMs);
  }

  /** Wakes every long poll (shutdown). */
  releaseAll(): void {
    this.waiters.releaseAll();
  }

  /**
   * Announces one committed step of a batch to the events stream listeners, with the state and
   * effects right after it (the batch's last step is announced by {@link observe}).
   */
  announceStep(entry: GroupEntry, step: AnnouncedStep): void {
    if (this.listeners.has(groupId(entry.ref))) this.announce(entry, step.value, step.context);
  }

  private announce(
    entry: GroupEntry,
    value: ActorSnapshot['value'],
    context: AnnouncedStep['context'],
  ): void {
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
}
