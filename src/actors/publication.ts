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

/** A follower of a group's transitions, told when the group leaves this replica. */
interface Subscriber {
  readonly listener: Listener;
  readonly onEnd: () => void;
}

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

/**
 * One kept transition, as the JSON of a {@link KeptTuple}; its view is built only when someone
 * reads it. Every group keeps up to {@link TRANSITIONS_KEPT} of these for as long as it is
 * served here, read or not: one flat string each (about 80 bytes) costs a third of an object
 * holding its fields, their arrays, effect objects and boxed numbers.
 */
type Kept = string;

/**
 * What a kept transition holds, in order: seq, at, event, raised, from, to, stateChanged (0 or
 * 1), effects, cause, metadataVersion, assignmentEpoch, status. A state value is its index among
 * the shared values (a number), or itself when not shared; a member's cause is the member's id
 * alone (`{ kind: 'member', memberId }`). In the kept JSON, the event, raised, cause, status and
 * each effect that names no member are written as their index among the shared pieces when
 * they are one (see {@link Publication.piece}): most transitions of every group repeat them.
 */
type KeptTuple = readonly [
  seq: number,
  at: number,
  event: string,
  raised: readonly string[],
  from: unknown,
  to: unknown,
  stateChanged: 0 | 1,
  effects: readonly Effect[],
  cause: TransitionCause | string,
  metadataVersion: number,
  assignmentEpoch: number,
  status: string,
];

/** A group's recent transitions (oldest first) and the state value it is in. */
interface TransitionLog {
  readonly kept: Kept[];
  /** The state value it is in, as a kept transition writes it (see {@link KeptTuple}). */
  lastRef: unknown;
}

/** Distinct pieces of transitions shared at most (see {@link Publication.piece}). */
const SHARED_PIECES = 1_024;

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
  private readonly listeners = new Map<string, Set<Subscriber>>();
  /** The recent transitions of each group served here; gone with its entry. */
  private readonly logs = new WeakMap<GroupEntry, TransitionLog>();
  /** What the host is running on each group now (see {@link during}). */
  private readonly origins = new Map<string, TransitionOrigin>();
  /** State values by their JSON, so that kept transitions share them: their index in `valueList`. */
  private readonly values = new Map<string, number>();
  private readonly valueList: unknown[] = [];
  /** The JSON of each shared value: what an entry keeps as its `lastValue`, one string for all. */
  private readonly valueJson: string[] = [];
  /** Pieces of kept transitions by their JSON: their index in `pieceList`. */
  private readonly pieces = new Map<string, number>();
  private readonly pieceList: unknown[] = [];
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

  /**
   * Follows the group's transitions; returns the unsubscribe function. `onEnd` is called once
   * the group leaves this replica ({@link ended}), at once if it has already begun to.
   */
  subscribe(
    entry: GroupEntry,
    listener: Listener,
    onEnd: () => void = () => undefined,
  ): () => void {
    if (entry.phase !== 'owned' && entry.phase !== 'loading') {
      onEnd();
      return () => undefined;
    }
    const id = groupId(entry.ref);
    let set = this.listeners.get(id);
    if (!set) {
      set = new Set();
      this.listeners.set(id, set);
    }
    const subscriber = { listener, onEnd };
    set.add(subscriber);
    const subscribers = set;
    return () => {
      subscribers.delete(subscriber);
      if (subscribers.size === 0 && this.listeners.get(id) === subscribers)
        this.listeners.delete(id);
    };
  }

  /**
   * The group of `entry` leaves this replica (released, dropped, deleted, shut down): its
   * transitions will be announced elsewhere or nowhere, so its followers are told and forgotten.
   */
  ended(entry: GroupEntry): void {
    const id = groupId(entry.ref);
    // A routing long poll is decided again where the group is now (404 if deleted, forwarded
    // if moved): never held to the end of its wait by a group this replica no longer serves.
    this.waiters.wakeGroup(id);
    const subscribers = this.listeners.get(id);
    if (!subscribers) return;
    this.listeners.delete(id);
    for (const { onEnd } of subscribers) onEnd();
  }

  /**
   * Resolves when the group's version passes `afterVersion` (or it fails closed, or leaves this
   * replica), after `waitMs`, or when `signal` aborts (the client went away).
   */
  waitForVersion(
    ref: GroupRef,
    afterVersion: number,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<void> {
    return this.waiters.wait(groupId(ref), afterVersion, waitMs, signal);
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
    return kept.map((json) => this.decode(json)).reverse();
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
    let log = this.logs.get(entry);
    if (!log) {
      log = { kept: [], lastRef: null };
      this.logs.set(entry, log);
    }
    const fromRef = log.lastRef;
    const index = this.shared(json, value);
    const toRef = index ?? value;
    entry.lastValue = index === null ? json : this.valueJson[index]!;
    log.lastRef = toRef;
    const id = groupId(entry.ref);
    const origin = this.origins.get(id);
    const adminDone = origin?.cause?.kind === 'admin' && context.result?.ok === true;
    const quiet = context.effects.length === 0 && context.raised.length === 0;
    if (!first && !changed && quiet && !adminDone) return;
    const { event, cause } = describe(first, origin, context);
    const seq = ++this.seq;
    const tuple: KeptTuple = [
      seq,
      context.lastEventAt,
      event,
      context.raised,
      first ? null : fromRef,
      toRef,
      changed ? 1 : 0,
      context.effects,
      cause.kind === 'member' && cause.memberId !== null ? cause.memberId : cause,
      context.group.metadataVersion,
      context.group.assignmentEpoch,
      context.group.status,
    ];
    log.kept.push(this.encode(tuple));
    if (log.kept.length > TRANSITIONS_KEPT) log.kept.shift();
    const listeners = this.listeners.get(id);
    if (!listeners) return;
    const transition = transitionView(
      tuple,
      first ? null : this.valueOf(fromRef),
      this.valueOf(toRef),
    );
    for (const { listener } of listeners) listener(transition);
  }

  /** The JSON a transition is kept as, its repeated pieces written as their index. */
  private encode(tuple: KeptTuple): Kept {
    const [seq, at, event, raised, from, to, changed, effects, cause, mv, epoch, status] = tuple;
    return flat(
      JSON.stringify([
        seq,
        at,
        this.piece(event),
        this.piece(raised),
        from,
        to,
        changed,
        effects.map((effect) => ('memberId' in effect ? effect : this.piece(effect))),
        typeof cause === 'string' ? cause : this.piece(cause),
        mv,
        epoch,
        this.piece(status),
      ]),
    );
  }

  /** The view of a kept transition. */
  private decode(json: Kept): GroupTransition {
    const kept = JSON.parse(json) as unknown[];
    const tuple = [
      kept[0],
      kept[1],
      this.pieceOf(kept[2]),
      none(this.pieceOf(kept[3]) as readonly string[]),
      kept[4],
      kept[5],
      kept[6],
      none((kept[7] as unknown[]).map((effect) => this.pieceOf(effect))),
      this.pieceOf(kept[8]),
      kept[9],
      kept[10],
      this.pieceOf(kept[11]),
    ] as unknown as KeptTuple;
    return transitionView(tuple, this.valueOf(tuple[4]), this.valueOf(tuple[5]));
  }

  /**
   * `value` as a kept transition writes it: its index among the shared pieces (shared from now
   * on while there is room), or itself. Pieces that name a member are kept out: member ids are
   * many and seldom repeat across groups.
   */
  private piece(value: unknown): unknown {
    const json = JSON.stringify(value);
    const known = this.pieces.get(json);
    if (known !== undefined) return known;
    if (this.pieceList.length >= SHARED_PIECES) return value;
    this.pieces.set(json, this.pieceList.length);
    this.pieceList.push(value);
    return this.pieceList.length - 1;
  }

  /** A piece as kept: the shared piece its index names, or itself. */
  private pieceOf(kept: unknown): unknown {
    return typeof kept === 'number' ? this.pieceList[kept] : kept;
  }

  /** A state value as a kept transition writes it: its shared value, or itself. */
  private valueOf(ref: unknown): unknown {
    return typeof ref === 'number' ? this.valueList[ref] : ref;
  }

  /** The index of the shared value equal to `value` (JSON `json`); null when not shared. */
  private shared(json: string, value: unknown): number | null {
    const known = this.values.get(json);
    if (known !== undefined) return known;
    if (this.valueList.length >= SHARED_VALUES) return null;
    this.values.set(json, this.valueList.length);
    this.valueList.push(value);
    this.valueJson.push(json);
    return this.valueList.length - 1;
  }
}

const NONE: readonly never[] = Object.freeze([]);

/**
 * `text` as one flat string. `JSON.stringify` hands back a string made of the pieces it was
 * built from (a rope: about 70 bytes more for a kept transition's few dozen characters), which
 * stays so for as long as it is kept.
 */
function flat(text: string): string {
  return Buffer.from(text, 'utf8').toString('utf8');
}

/** `items`, or the shared empty array when empty (a read of many transitions makes no more). */
function none<T>(items: readonly T[]): readonly T[] {
  return items.length === 0 ? NONE : items;
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

function transitionView(tuple: KeptTuple, from: unknown, to: unknown): GroupTransition {
  const [seq, at, event, raised, , , stateChanged, effects, cause] = tuple;
  return {
    at: new Date(at).toISOString(),
    state: to,
    stateChanged: stateChanged === 1,
    effects,
    metadataVersion: tuple[9],
    assignmentEpoch: tuple[10],
    status: tuple[11],
    seq,
    event,
    raised,
    from,
    changes: regionChanges(from, to),
    cause: typeof cause === 'string' ? { kind: 'member', memberId: cause } : cause,
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
