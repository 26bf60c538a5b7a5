import type { Clock } from '../machines/clock.js';
import type { GroupContext } from '../machines/context.js';
import { mayStayHeld } from '../machines/held-heartbeat.js';
import type { HeartbeatReply, HeartbeatRequest } from '../machines/protocol.js';
import type { GroupEntry } from './group-entry.js';
import { TimerWheel, type WheelSlot } from './timer-wheel.js';

/** How a held heartbeat ended. */
export type HoldEnd =
  /**
   * Its time is up, something changed for the member, or the group is leaving this replica (or
   * the replica stops): decide the request again, on the group as it is then.
   */
  | { readonly kind: 'decide' }
  /** A newer heartbeat of the member came: this one was decided again first, in its turn. */
  | { readonly kind: 'answered'; readonly reply: HeartbeatReply }
  | { readonly kind: 'failed'; readonly error: unknown }
  /** The caller went away: nothing is decided for it. */
  | { readonly kind: 'cancelled' };

/** A held request taken out to be answered by the caller (a newer heartbeat of its member). */
export interface TakenHold {
  /** The request, with its arrival time (`heardAt`). */
  readonly request: HeartbeatRequest;
  readonly end: (result: HoldEnd) => void;
}

interface HeldRequest extends TakenHold {
  readonly entry: GroupEntry;
  slot: WheelSlot;
}

/** Hold timers fire in slots of this many ms (at most this late: the wait is a bound, not a promise). */
export const HOLD_RESOLUTION_MS = 10;

/** Held heartbeats per replica at most; beyond, heartbeats are answered at once. */
export const MAX_HELD_HEARTBEATS = 50_000;

export interface HeldHeartbeatsOptions {
  readonly clock: Clock;
  /** @default MAX_HELD_HEARTBEATS */
  readonly max?: number;
  /** Told the number of held heartbeats whenever it changes (a gauge). */
  readonly onCount?: (held: number) => void;
}

/**
 * The heartbeats held open on this replica (docs/protocol.md, "Held heartbeats"), at most one
 * per member: each ends when its wait is up (one timer wheel for all of them, no timer per
 * request), when a committed change leaves its member something to act on ({@link changed}),
 * when its group leaves this replica or the replica stops ({@link wakeAll}, {@link wakeEverything}:
 * never answered from a state this replica may no longer serve), when a newer heartbeat of the
 * member arrives ({@link take}), or when its caller goes away. Holding, taking and waking one
 * are O(1); a change costs O(held members of the group × their shards).
 */
export class HeldHeartbeats {
  private readonly byEntry = new Map<GroupEntry, Map<string, HeldRequest>>();
  private readonly wheel: TimerWheel<HeldRequest>;
  private readonly max: number;
  private count = 0;

  constructor(private readonly options: HeldHeartbeatsOptions) {
    this.max = options.max ?? MAX_HELD_HEARTBEATS;
    this.wheel = new TimerWheel(options.clock, HOLD_RESOLUTION_MS, (due) => {
      for (const held of due) this.end(held, { kind: 'decide' }, false);
    });
  }

  /** How many heartbeats are held now. */
  get size(): number {
    return this.count;
  }

  /**
   * Holds `request` (its `heardAt` set) for up to `forMs`; resolves with how the hold ended.
   * Null when it cannot be held: no time, the replica holds its maximum, the caller is gone, or
   * the group is leaving this replica (a reply decided in a write its lease was lost under: its
   * leaving woke the holds already, and nothing would wake this one before its time).
   * The caller holds the entry's mailbox and has taken the member's earlier hold ({@link take}).
   */
  hold(
    entry: GroupEntry,
    request: HeartbeatRequest,
    forMs: number,
    signal?: AbortSignal,
  ): Promise<HoldEnd> | null {
    if (forMs <= 0 || this.count >= this.max || signal?.aborted) return null;
    if (entry.phase !== 'owned') return null;
    return new Promise<HoldEnd>((resolve) => {
      const onAbort = () => this.end(held, { kind: 'cancelled' }, true);
      const held: HeldRequest = {
        entry,
        request,
        slot: 0,
        end: (result) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(result);
        },
      };
      // One per member: an earlier one still here is decided again (taken out first).
      this.take(entry, request.memberId)?.end({ kind: 'decide' });
      let members = this.byEntry.get(entry);
      if (!members) {
        members = new Map();
        this.byEntry.set(entry, members);
      }
      members.set(request.memberId, held);
      held.slot = this.wheel.add(this.options.clock.now() + forMs, held);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.counted(+1);
    });
  }

  /** Whether a heartbeat of the member is held now. */
  has(entry: GroupEntry, memberId: string): boolean {
    return this.byEntry.get(entry)?.has(memberId) ?? false;
  }

  /** Takes the member's held heartbeat out (to be answered by the caller); undefined if none. */
  take(entry: GroupEntry, memberId: string): TakenHold | undefined {
    const held = this.byEntry.get(entry)?.get(memberId);
    if (!held) return undefined;
    this.remove(held, true);
    return held;
  }

  /** After a committed change of the group: ends every hold that may not stay held on `ctx`. */
  changed(entry: GroupEntry, ctx: GroupContext): void {
    const members = this.byEntry.get(entry);
    if (!members) return;
    const now = this.options.clock.now();
    for (const held of [...members.values()]) {
      if (!mayStayHeld(ctx, held.request, now)) this.end(held, { kind: 'decide' }, true);
    }
  }

  /** Ends every hold of the group (it is being released, dropped or deleted here). */
  wakeAll(entry: GroupEntry): void {
    const members = this.byEntry.get(entry);
    if (!members) return;
    for (const held of [...members.values()]) this.end(held, { kind: 'decide' }, true);
  }

  /** Ends every hold (the replica stops). */
  wakeEverything(): void {
    for (const entry of [...this.byEntry.keys()]) this.wakeAll(entry);
  }

  private end(held: HeldRequest, result: HoldEnd, unschedule: boolean): void {
    if (!this.remove(held, unschedule)) return;
    held.end(result);
  }

  /** Forgets `held` (and its timer, unless it fired); false if it was gone already. */
  private remove(held: HeldRequest, unschedule: boolean): boolean {
    const members = this.byEntry.get(held.entry);
    if (members?.get(held.request.memberId) !== held) return false;
    members.delete(held.request.memberId);
    if (members.size === 0) this.byEntry.delete(held.entry);
    if (unschedule) this.wheel.remove(held.slot, held);
    this.counted(-1);
    return true;
  }

  private counted(delta: number): void {
    this.count += delta;
    this.options.onCount?.(this.count);
  }
}
