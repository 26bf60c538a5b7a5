/**
 * Each member's own statechart (docs/architecture.md#the-statechart): `joining`, `stable`,
 * `revoking`, `waiting`, then `left`, `expired` or `fenced`. It is a small machine of its own,
 * shown per member in monitoring, not thousands of spawned child actors: a member's state is
 * resolved from the group (`memberState`) by this machine, so the diagram and the values cannot
 * disagree.
 */
import { setup } from 'xstate';
import type { GroupContext } from './context.js';
import { allShards } from './group-state.js';

/** What a member is doing now, as its own chart names it. */
export type MemberState = 'joining' | 'stable' | 'revoking' | 'waiting';

/** How a member ended (kept for a while after it is gone). */
export type MemberEnd = 'left' | 'expired' | 'fenced';

export const MemberEventType = {
  TARGETS_ASSIGNED: 'TARGETS_ASSIGNED',
  SHARDS_GRANTED: 'SHARDS_GRANTED',
  REVOKE_REQUESTED: 'REVOKE_REQUESTED',
  SHARDS_RELEASED: 'SHARDS_RELEASED',
  LEFT: 'LEFT',
  EXPIRED: 'EXPIRED',
  FENCED: 'FENCED',
} as const;

type MemberEvent = { type: (typeof MemberEventType)[keyof typeof MemberEventType] };

const gone = {
  [MemberEventType.LEFT]: 'left',
  [MemberEventType.EXPIRED]: 'expired',
} as const;

/**
 * The member chart. A member leaves (its own leave or epoch-0 rejoin), expires (silent for its
 * session timeout) or is fenced (still revoking at its rebalance timeout).
 */
export const memberMachine = setup({ types: { events: {} as MemberEvent } }).createMachine({
  id: 'member',
  initial: 'joining',
  states: {
    joining: {
      on: {
        [MemberEventType.TARGETS_ASSIGNED]: 'waiting',
        [MemberEventType.SHARDS_GRANTED]: 'stable',
        ...gone,
      },
    },
    stable: {
      on: {
        [MemberEventType.REVOKE_REQUESTED]: 'revoking',
        [MemberEventType.TARGETS_ASSIGNED]: 'waiting',
        ...gone,
      },
    },
    revoking: {
      on: {
        [MemberEventType.SHARDS_RELEASED]: 'stable',
        [MemberEventType.FENCED]: 'fenced',
        ...gone,
      },
    },
    waiting: {
      on: {
        [MemberEventType.SHARDS_GRANTED]: 'stable',
        [MemberEventType.REVOKE_REQUESTED]: 'revoking',
        ...gone,
      },
    },
    left: { type: 'final' },
    expired: { type: 'final' },
    fenced: { type: 'final' },
  },
});

/**
 * A live member's state: `revoking` while it holds a shard it was asked to give up, `waiting`
 * while a shard targeted at it is still with someone else (or not yet granted), `joining` while
 * its first assignment is not computed yet (a debounced recompute is pending and nothing targets
 * it), `stable` otherwise. O(shards); monitoring calls it, the heartbeat does not.
 */
export function memberState(ctx: GroupContext, memberId: string): MemberState {
  let targeted = false;
  let waiting = false;
  for (const record of allShards(ctx.group)) {
    if (record.owner === memberId && record.state === 'revoking') return 'revoking';
    if (record.target !== memberId || record.shard >= ctx.group.shardCount) continue;
    targeted = true;
    if (record.owner !== memberId || record.state !== 'assigned') waiting = true;
  }
  if (waiting) return 'waiting';
  if (!targeted && ctx.recomputeAt !== null) return 'joining';
  return 'stable';
}

/** How members ended, newest first (kept in memory, at most {@link DEPARTURES_KEPT}). */
export interface MemberDeparture {
  readonly memberId: string;
  readonly state: MemberEnd;
  readonly at: number;
}

export const DEPARTURES_KEPT = 20;

// Every value `memberState` gives is a state of the chart (resolveState throws otherwise).
for (const state of ['joining', 'stable', 'revoking', 'waiting', 'left', 'expired', 'fenced']) {
  memberMachine.resolveState({ value: state });
}
