import type { Effect, GroupContext } from '../machines/context.js';
import { haltedShards } from '../machines/halted.js';
import type { Clock } from '../machines/clock.js';
import { memberCount, revokePendingCount } from '../machines/group-state.js';
import { groupId, type GroupRef } from '../machines/types.js';
import type { Metrics } from '../observability/metrics.js';
import type { ActorSnapshot, GroupEntry } from './group-entry.js';
import type { HeldHeartbeats } from './held-heartbeats.js';
import type { GroupTransition, RegionChange, TransitionCause } from './types.js';
import { VersionWaiters } from './version-waiters.js';

type Listener = (transition: GroupTransition) => void;

/** How many transitions each group keeps on its owner (monitoring `…/transitions`). */
export const TRANSITIONS_KEPT = 50;

/**
 * What the host runs on a group while it holds the group's mailbox: the command and its cause,
 * kept with the transitions it brings about. A null cause is a heartbeat's: the member is read
 * off each step (its reply, or the effect that names it).
 */
export interface TransitionOrigin {
  readonly event: string;
  readonly cause: TransitionCause | null;
}

const TIMER: TransitionCause = { kind: 'timer' };
const LOADED: TransitionCause = { kind: 'replica', detail: 'loaded by this replica' };
const NO_MEMBER: TransitionCause = { kind: 'member', memberId: null };
const NONE: readonly never[] = Object.freeze([]);

/**
 * One kept transition; its view is built only when someone reads it. Every group keeps up to
 * {@link TRANSITIONS_KEPT} of these for as long as it is served here, read or not, so each holds
 * as little as it can: no empty array of its own, the others at their exact length (arrays grown
 * by `push` keep room for 17 elements), and a member's cause as the member's id alone.
 */
interface Kept {
  readonly seq: number;
  readonly at: number;
  readonly event: string;
  readonly raised: readonly string[];
  /** State values, shared between the transitions that have the same one. */
  readonly from: unknown;
  readonly to: unknown;
  readonly stateChanged: boolean;
  readonly effects: readonly Effect[];
  /** A string is the id of the member that caused it (`{ kind: 'member', memberId }`). */
  readonly cause: TransitionCause | string;
  readonly metadataVersion: number;
  readonly assignmentEpoch: number;
  readonly status: string;
}

/** A group's recent transitions (oldest first) and the state value it is in. */
interface TransitionLog {
  readonly kept: Kept[];
  last: unknown;
}

/** Distinct state values kept at most (a group has a few dozen; more are simply not shared). */
const SHARED_VALUES = 512;

/**
 * What announcing a step of a batch needs of the snapshot right after it, and nothing more: a
 * batch keeps one per step until its write is done, and a whole snapshot would keep every
 * intermediate group (each with its derived shard index) alive that long.
 */
export interface AnnouncedStep {
  readonly value: ActorSnapshot['value'];
  readonly context: Pick<GroupContext, 'lastEventAt' | 'effects' | 'raised' | 'result'> & {
    readonly group: Pick<GroupContext['group'], 'metadataVersion' | 'assignmentEpoch' | 'status'>;
  };
}

/** The {@link AnnouncedStep} of a snapshot. */
export function announcedStep(snapshot: ActorSnapshot): AnnouncedStep {
  const { lastEventAt, effects, raised, result, group } = snapshot.context;
  const { metadataVersion, assignmentEpoch, status } = group;
  return {
    value: snapshot.value,
    context: {
      lastEventAt,
      effects,
      raised,
      result,
      group: { metadataVersion, assignmentEpoch, status },
    },
  };
}

/**
 * What the world sees of a group once a state is committed: the published snapshot readers
 * get, the routing long polls, the held heartbeats, the events stream listeners, the group's
 * recent transitions and the member gauges.
 */
export class Publication {
  private readonly waiters: VersionWaiters;
  private readonly listeners = new Map<string, Set<Listener>>();
  /** The recent transitions of each group served here; gone with its entry. */
  private readonly logs = new WeakMap<GroupEntry, TransitionLog>();
  /** What the host is running on each group now (see {@link during}). */
  private readonly origins = new Map<string, TransitionOrigin>();
  /** State values by their JSON, so that kept transitions share them. */
  private readonly values = new Map<string, unknown>();
  private seq = 0;

  constructor(
    clock: Clock,
    private readonly metrics: Pick<
      Metrics,
      'members' | 'revokePending' | 'pausedShards' | 'routingLongPolls'
    >,
    /** The held heartbeats, told of every committed change of a group. */
    private readonly holds?: Pick<HeldHeartbeats, 'changed'>,
  ) {
    this.waiters = new VersionWaiters(clock, (open) => metrics.routingLongPolls.set(open));
  }

  /** Told of every committed change of a group's state (the host moves reset shards then). */
  afterChange: ((entry: GroupEntry, context: GroupContext) => void) | null = null;

  /** Keeps the gauges, long polls and event listeners in step with the context. */
  observe(entry: GroupEntry, context: GroupContext): void {
    // What readers see: only states whose write has committed (observe runs after the commit).
    entry.published = entry.snapshot();
    this.announce(entry, entry.published.value, context);
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
    const paused = haltedShards(context.group).length;
    this.metrics.pausedShards.inc(paused - entry.counts.paused);
    entry.counts = { members, revoking, paused };
    this.afterChange?.(entry, context);
  }

  /** Follows the group's transitions; returns the unsubscribe function. */
  subscribe(entry: GroupEntry, listener: Listener): () => void {
    const id = groupId(entry.ref);
    let set = this.listeners.get(id);
    if (!set) {
      set = new Set();
      this.listeners.set(id, set);
    }
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
    this.announce(entry, step.value, step.context);
  }

  /**
   * Runs `work` (which holds the group's mailbox) with `origin` as the command and cause of the
   * transitions it brings about. Without one, a transition is taken for the deadline sweep's
   * (TICK, caused by the timer): any other part that sends a group events says what it is here.
   */
  async during<T>(ref: GroupRef, origin: TransitionOrigin, work: () => Promise<T>): Promise<T> {
    const id = groupId(ref);
    const outer = this.origins.get(id);
    this.origins.set(id, origin);
    try {
      return await work();
    } finally {
      if (outer) this.origins.set(id, outer);
      else this.origins.delete(id);
    }
  }

  /** The group's recent transitions, newest first (at most {@link TRANSITIONS_KEPT}). */
  transitions(entry: GroupEntry): GroupTransition[] {
    const kept = this.logs.get(entry)?.kept ?? [];
    return kept.map(transitionView).reverse();
  }

  /**
   * Keeps a transition of the group (a change of state, effects, chart events raised, or an
   * admin command done) and tells the events stream listeners.
   */
  private announce(
    entry: GroupEntry,
    value: ActorSnapshot['value'],
    context: AnnouncedStep['context'],
  ): void {
    const json = JSON.stringify(value);
    const first = entry.lastValue === '';
    const changed = json !== entry.lastValue;
    entry.lastValue = json;
    let log = this.logs.get(entry);
    if (!log) {
      log = { kept: [], last: null };
      this.logs.set(entry, log);
    }
    const from = log.last;
    const to = this.shared(json, value);
    log.last = to;
    const id = groupId(entry.ref);
    const origin = this.origins.get(id);
    const adminDone = origin?.cause?.kind === 'admin' && context.result?.ok === true;
    const quiet = context.effects.length === 0 && context.raised.length === 0;
    if (!first && !changed && quiet && !adminDone) return;
    const { event, cause } = describe(first, origin, context);
    const kept: Kept = {
      seq: ++this.seq,
      at: context.lastEventAt,
      event,
      raised: compact(context.raised),
      from: first ? null : from,
      to,
      stateChanged: changed,
      effects: compact(context.effects),
      cause: cause.kind === 'member' && cause.memberId !== null ? cause.memberId : cause,
      metadataVersion: context.group.metadataVersion,
      assignmentEpoch: context.group.assignmentEpoch,
      status: context.group.status,
    };
    log.kept.push(kept);
    if (log.kept.length > TRANSITIONS_KEPT) log.kept.shift();
    const listeners = this.listeners.get(id);
    if (!listeners) return;
    const transition = transitionView(kept);
    for (const listener of listeners) listener(transition);
  }

  private shared(json: string, value: unknown): unknown {
    const known = this.values.get(json);
    if (known !== undefined) return known;
    if (this.values.size < SHARED_VALUES) this.values.set(json, value);
    return value;
  }
}

/** The command and cause of a kept transition. */
function describe(
  first: boolean,
  origin: TransitionOrigin | undefined,
  context: AnnouncedStep['context'],
): { event: string; cause: TransitionCause } {
  if (first) return { event: origin?.event ?? 'LOADED', cause: origin?.cause ?? LOADED };
  const failed = context.effects.find(
    (e): e is Extract<Effect, { type: 'FAILED_CLOSED' }> => e.type === 'FAILED_CLOSED',
  );
  if (failed) {
    return {
      event: 'FAIL_CLOSED',
      cause: { kind: 'replica', detail: `failure detected: ${failed.reason}` },
    };
  }
  if (!origin) return { event: 'TICK', cause: TIMER };
  if (origin.cause) return { event: origin.event, cause: origin.cause };
  const memberId = memberOf(context);
  return {
    event: origin.event,
    cause: memberId === null ? NO_MEMBER : { kind: 'member', memberId },
  };
}

/** `items` as a kept transition holds them: the shared empty array, or a copy of exact length. */
function compact<T>(items: readonly T[]): readonly T[] {
  return items.length === 0 ? NONE : items.slice();
}

/** The member a heartbeat's step was for: its reply names it, or an effect does. */
function memberOf(context: AnnouncedStep['context']): string | null {
  const reply: unknown = context.result?.ok ? context.result.reply : undefined;
  if (typeof reply === 'object' && reply !== null && 'memberId' in reply) {
    const { memberId } = reply;
    if (typeof memberId === 'string') return memberId;
  }
  for (const effect of context.effects) if ('memberId' in effect) return effect.memberId;
  return null;
}

function transitionView(kept: Kept): GroupTransition {
  return {
    at: new Date(kept.at).toISOString(),
    state: kept.to,
    stateChanged: kept.stateChanged,
    effects: kept.effects,
    metadataVersion: kept.metadataVersion,
    assignmentEpoch: kept.assignmentEpoch,
    status: kept.status,
    seq: kept.seq,
    event: kept.event,
    raised: kept.raised,
    from: kept.from,
    changes: regionChanges(kept.from, kept.to),
    cause: typeof kept.cause === 'string' ? { kind: 'member', memberId: kept.cause } : kept.cause,
  };
}

/** `{membership: {rebalancing: 'granting'}}` → `membership` → `rebalancing.granting`. */
function regionsOf(value: unknown): Map<string, string> {
  const path = (node: unknown): string =>
    typeof node === 'object' && node !== null
      ? Object.entries(node)
          .map(([key, child]) => `${key}.${path(child)}`)
          .join(',')
      : String(node);
  if (typeof value !== 'object' || value === null) return new Map([['', path(value)]]);
  return new Map(Object.entries(value).map(([region, child]) => [region, path(child)]));
}

function regionChanges(from: unknown, to: unknown): RegionChange[] {
  const before = from === null ? null : regionsOf(from);
  const changes: RegionChange[] = [];
  for (const [region, state] of regionsOf(to)) {
    const was = before?.get(region) ?? null;
    if (was !== state) changes.push({ region, from: was, to: state });
  }
  return changes;
}
