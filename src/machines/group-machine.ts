/**
 * The group statechart (DESIGN.md §2, §13). Three parallel regions:
 * - `lifecycle` follows `group.status`: active | frozen | failedClosed;
 * - `membership`: empty | stable | rebalancing (revoking | granting);
 * - `migration` follows `group.activeMigration`: idle | inProgress | converged.
 *
 * All decisions live in the pure reducer; the chart's states are derived from the context by
 * guarded eventless transitions, so the state value always matches the context, and an actor
 * created from any context (`createActor(groupMachine, { input: context })`) lands in the right
 * state. No delayed transitions: deadlines are in the context and the host's sweep sends TICK.
 */
import { assign, setup } from 'xstate';
import type { GroupContext } from './context.js';
import type { GroupEvent } from './events.js';
import { GroupEventType } from './events.js';
import { reduceGroupEvent } from './group-reducer.js';
import { lifecyclePhase, membershipPhase, migrationPhase } from './phases.js';
import { completeRebalance, startRebalance } from './rebalance.js';

const apply = { actions: 'applyEvent' } as const;

/** The group statechart; its input is the full context (see `createGroupContext`). */
export const groupMachine = setup({
  types: {
    context: {} as GroupContext,
    events: {} as GroupEvent,
    input: {} as GroupContext,
  },
  actions: {
    applyEvent: assign(({ context, event }) => reduceGroupEvent(context, event)),
    startRebalance: assign(({ context }) => startRebalance(context)),
    completeRebalance: assign(({ context }) => completeRebalance(context)),
  },
  guards: {
    statusActive: ({ context }) => lifecyclePhase(context.group) === 'active',
    statusFrozen: ({ context }) => lifecyclePhase(context.group) === 'frozen',
    statusFailedClosed: ({ context }) => lifecyclePhase(context.group) === 'failedClosed',
    noMembers: ({ context }) => membershipPhase(context) === 'empty',
    allShardsSettled: ({ context }) => membershipPhase(context) === 'stable',
    someShardRevoking: ({ context }) => membershipPhase(context) === 'revoking',
    someShardAwaitingGrant: ({ context }) => membershipPhase(context) === 'granting',
    noActiveMigration: ({ context }) => migrationPhase(context.group) === 'idle',
    migrationInProgress: ({ context }) => migrationPhase(context.group) === 'inProgress',
    migrationConverged: ({ context }) => migrationPhase(context.group) === 'converged',
  },
}).createMachine({
  id: 'group',
  type: 'parallel',
  context: ({ input }) => input,
  on: {
    [GroupEventType.HEARTBEAT]: apply,
    [GroupEventType.TICK]: apply,
    [GroupEventType.SCALE]: apply,
    [GroupEventType.ROLLBACK]: apply,
    [GroupEventType.FAIL_CLOSED]: apply,
    [GroupEventType.OBSERVE_VERSION]: apply,
    [GroupEventType.PERSISTED]: apply,
  },
  states: {
    lifecycle: {
      initial: 'active',
      // Refusals (freezing a frozen group, anything while failed closed) are decided by the
      // reducer; only the transitions that succeed in a state carry a target.
      on: {
        [GroupEventType.FREEZE]: apply,
        [GroupEventType.UNFREEZE]: apply,
        [GroupEventType.PAUSE_PRODUCERS]: apply,
        [GroupEventType.RESUME_PRODUCERS]: apply,
      },
      states: {
        active: {
          on: { [GroupEventType.FREEZE]: { target: 'frozen', actions: 'applyEvent' } },
          always: [
            { guard: 'statusFrozen', target: 'frozen' },
            { guard: 'statusFailedClosed', target: 'failedClosed' },
          ],
        },
        frozen: {
          on: { [GroupEventType.UNFREEZE]: { target: 'active', actions: 'applyEvent' } },
          always: [
            { guard: 'statusActive', target: 'active' },
            { guard: 'statusFailedClosed', target: 'failedClosed' },
          ],
        },
        failedClosed: {
          always: [
            { guard: 'statusActive', target: 'active' },
            { guard: 'statusFrozen', target: 'frozen' },
          ],
        },
      },
    },
    membership: {
      initial: 'empty',
      states: {
        empty: {
          always: [
            { guard: 'allShardsSettled', target: 'stable' },
            { guard: 'someShardRevoking', target: 'rebalancing.revoking' },
            { guard: 'someShardAwaitingGrant', target: 'rebalancing.granting' },
          ],
        },
        stable: {
          always: [
            { guard: 'noMembers', target: 'empty' },
            { guard: 'someShardRevoking', target: 'rebalancing.revoking' },
            { guard: 'someShardAwaitingGrant', target: 'rebalancing.granting' },
          ],
        },
        rebalancing: {
          initial: 'granting',
          entry: 'startRebalance',
          exit: 'completeRebalance',
          always: [
            { guard: 'noMembers', target: 'empty' },
            { guard: 'allShardsSettled', target: 'stable' },
          ],
          states: {
            revoking: { always: { guard: 'someShardAwaitingGrant', target: 'granting' } },
            granting: { always: { guard: 'someShardRevoking', target: 'revoking' } },
          },
        },
      },
    },
    // SCALE and ROLLBACK are applied at the root (a refused one changes nothing); the region
    // follows the active migration, whichever event moved it: a heartbeat converges it, a
    // TICK completes it, a SCALE may complete one and start the next in one step.
    migration: {
      initial: 'idle',
      states: {
        idle: {
          always: [
            { guard: 'migrationInProgress', target: 'inProgress' },
            { guard: 'migrationConverged', target: 'converged' },
          ],
        },
        inProgress: {
          always: [
            { guard: 'migrationConverged', target: 'converged' },
            { guard: 'noActiveMigration', target: 'idle' },
          ],
        },
        converged: {
          always: [
            { guard: 'noActiveMigration', target: 'idle' },
            { guard: 'migrationInProgress', target: 'inProgress' },
          ],
        },
      },
    },
  },
});

/** The machine's type, for hosts that keep actors of it. */
export type GroupMachine = typeof groupMachine;
