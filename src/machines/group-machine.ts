/**
 * The group statechart (docs/architecture.md#the-statechart): the model an operator reads. Three
 * parallel regions:
 * - `lifecycle` (active | frozen | failedClosed) moves on FREEZE, UNFREEZE, FAIL_CLOSED and
 *   RECOVER, and refuses what its state does not accept (FREEZE while frozen, any admin change
 *   while failed closed), naming the reason on the transition;
 * - `membership` (empty | stable | rebalancing.revoking | rebalancing.granting) moves on the
 *   events that change it: MEMBER_JOINED, MEMBER_LEFT, MEMBER_EXPIRED, MEMBER_FENCED,
 *   TARGETS_RECOMPUTED, REVOKE_REQUESTED, SHARDS_RELEASED, SHARDS_GRANTED;
 * - `migration` (idle | inProgress | converged) moves on SCALE, ROLLBACK, MIGRATION_CONVERGED
 *   and ROLLBACK_WINDOW_ELAPSED while the group is active; a SCALE while one is in progress is
 *   refused by the chart.
 *
 * Commands from outside (HEARTBEAT, TICK, admin commands) run named, pure steps
 * (`chart-steps.ts`); a step that changed the group names the events it caused, and the chart
 * raises them to itself, so every transition an operator sees names what caused it. Guards ask
 * the pure phase functions, so the state always matches the context. No delayed transitions:
 * deadlines are in the context and the host's sweep sends TICK.
 *
 * An actor is restored with {@link restoreGroupSnapshot} (`resolveState` from the persisted
 * domain fields), never from XState's persisted snapshots.
 */
import { and, assign, enqueueActions, not, setup, stateIn, type SnapshotFrom } from 'xstate';
import type { GroupContext } from './context.js';
import { refuse, steps } from './chart-steps.js';
import type { ChartEventName, GroupEvent, RecoverEvent } from './events.js';
import { ChartEventType, GroupEventType } from './events.js';
import { rollbackRefusal, scaleRefusal, type RefusalReason } from './refusals.js';
import { consumptionPhase, resetRefusal, shardsRefusal } from './consumption.js';
import { expectedStateValue, lifecyclePhase, membershipPhase, migrationPhase } from './phases.js';
import { completeRebalance, startRebalance } from './rebalance.js';

type MembershipGuard =
  'noMembers' | 'allShardsSettled' | 'someShardRevoking' | 'someShardAwaitingGrant';

const { MEMBER_JOINED, MEMBER_LEFT, MEMBER_EXPIRED, MEMBER_FENCED } = ChartEventType;
const { TARGETS_RECOMPUTED, REVOKE_REQUESTED, SHARDS_RELEASED, SHARDS_GRANTED } = ChartEventType;
/** A member is gone: its shards are released and targets recomputed. */
const DEPARTURES = [MEMBER_LEFT, MEMBER_EXPIRED, MEMBER_FENCED] as const;

/**
 * Transitions for membership events: each listed event goes to the first target whose guard
 * holds (the guards read the context the step left, so the state always matches it).
 */
function onMembershipEvents(
  events: readonly ChartEventName[],
  targets: ReadonlyArray<readonly [MembershipGuard, string]>,
) {
  const transitions = targets.map(([guard, target]) => ({ guard, target }));
  return Object.fromEntries(events.map((type) => [type, transitions]));
}

/**
 * A command the state does not accept: answered with why (`reason`, phrased by `refusals.ts`),
 * nothing changes (docs/architecture.md#admin-refusals).
 */
const refused = (reason: RefusalReason) =>
  ({ actions: [{ type: 'refuse', params: { reason } }, 'raiseChanges'] }) as const;

const recovered = (event: GroupEvent) => (event as RecoverEvent).group;
const inFailedClosed = stateIn('#group.lifecycle.failedClosed');
const inActive = stateIn('#group.lifecycle.active');
const inRunning = stateIn('#group.consumption.running');
const inMigrating = stateIn('#group.migration.inProgress');
const shardsExist = ({ context, event }: { context: GroupContext; event: GroupEvent }) =>
  (event.type === 'PAUSE_CONSUMPTION' || event.type === 'RESUME_CONSUMPTION') &&
  shardsRefusal(context.group, event.shards) === null;

const { CONSUMPTION_CHANGED } = ChartEventType;
type ConsumptionTarget =
  'running' | 'pausing' | 'paused' | 'resetting.pausing' | 'resetting.moving';
const RESETTING = ['resetting.pausing', 'resetting.moving'] as const;
const CONSUMPTION_GUARDS = {
  running: 'consumptionRunning',
  pausing: 'consumptionPausing',
  paused: 'consumptionPaused',
  'resetting.pausing': 'resetPausing',
  'resetting.moving': 'resetMoving',
} as const;

/**
 * Where the consumption region goes on a change: the first of `targets` whose guard holds (the
 * guards read `consumptionPhase`, so the state always matches the group). Targets are relative
 * to the region.
 */
function consumptionTargets(targets: readonly ConsumptionTarget[]) {
  return targets.map((target) => ({
    guard: CONSUMPTION_GUARDS[target],
    target: `#group.consumption.${target}`,
  }));
}

/**
 * PAUSE_CONSUMPTION, RESUME_CONSUMPTION and RESET_POSITIONS while no reset is under way: run
 * when the shards they name exist (and, for a reset, none is paused by another request).
 */
const controlCommands = {
  [GroupEventType.PAUSE_CONSUMPTION]: [
    { guard: 'shardsAccepted', actions: ['pauseConsumption', 'raiseChanges'] },
    { guard: 'controlOpen', ...refused('shards') },
  ],
  // Resuming is never blocked by a migration (nothing is paused while one runs).
  [GroupEventType.RESUME_CONSUMPTION]: [
    { guard: 'resumeAccepted', actions: ['resumeConsumption', 'raiseChanges'] },
    { guard: 'active', ...refused('shards') },
  ],
  [GroupEventType.RESET_POSITIONS]: [
    { guard: 'resetAccepted', actions: ['resetPositions', 'raiseChanges'] },
    { guard: 'controlOpen', ...refused('reset') },
  ],
  [GroupEventType.CANCEL_RESET]: { guard: 'active', ...refused('noReset') },
} as const;

/** SCALE and ROLLBACK while consumption does not run on every shard. */
function migrationRefused(reason: RefusalReason) {
  return {
    [GroupEventType.SCALE]: { guard: 'active', ...refused(reason) },
    [GroupEventType.ROLLBACK]: { guard: 'active', ...refused(reason) },
  } as const;
}

export const groupMachine = setup({
  types: {
    context: {} as GroupContext,
    events: {} as GroupEvent,
    input: {} as GroupContext,
  },
  actions: {
    heartbeat: assign(({ context, event }) => steps.heartbeat(context, event as never)),
    tick: assign(({ context, event }) => steps.tick(context, event as never)),
    observeVersion: assign(({ context, event }) => steps.observeVersion(context, event as never)),
    freeze: assign(({ context, event }) => steps.freeze(context, event as never)),
    unfreeze: assign(({ context, event }) => steps.unfreeze(context, event as never)),
    pauseProducers: assign(({ context, event }) => steps.pauseProducers(context, event as never)),
    resumeProducers: assign(({ context, event }) => steps.resumeProducers(context, event as never)),
    failClosed: assign(({ context, event }) => steps.failClosed(context, event as never)),
    recover: assign(({ context, event }) => steps.recover(context, event as RecoverEvent)),
    scale: assign(({ context, event }) => steps.scale(context, event as never)),
    rollback: assign(({ context, event }) => steps.rollback(context, event as never)),
    adoptLayout: assign(({ context, event }) => steps.adoptLayout(context, event as never)),
    retiredShardsDrained: assign(({ context, event }) =>
      steps.retiredShardsDrained(context, event as never),
    ),
    pauseConsumption: assign(({ context, event }) =>
      steps.pauseConsumption(context, event as never),
    ),
    resumeConsumption: assign(({ context, event }) =>
      steps.resumeConsumption(context, event as never),
    ),
    resetPositions: assign(({ context, event }) => steps.resetPositions(context, event as never)),
    cancelReset: assign(({ context, event }) => steps.cancelReset(context, event as never)),
    shardPositionsMoved: assign(({ context, event }) =>
      steps.shardPositionsMoved(context, event as never),
    ),
    convergeMigration: assign(({ context, event }) => steps.convergeMigration(context, event)),
    completeMigration: assign(({ context, event }) => steps.completeMigration(context, event)),
    /** Answers a command the current state does not accept, with the transition's reason. */
    refuse: assign(({ context, event }, params: { reason: RefusalReason }) =>
      refuse(context, event, params.reason),
    ),
    persisted: assign(({ context, event }) =>
      event.type === 'PERSISTED'
        ? { ...context, storeRevision: event.revision, lastPersistedAt: event.updatedAt }
        : context,
    ),
    /** Raises the chart events the last step called for (see `chart-steps.ts`). */
    raiseChanges: enqueueActions(({ context, enqueue }) => {
      for (const type of context.raised) enqueue.raise({ type });
    }),
    /** After RECOVER the membership region looks at the recovered group afresh. */
    raiseMembershipCheck: enqueueActions(({ enqueue }) => {
      enqueue.raise({ type: ChartEventType.MEMBERSHIP_RESTORED });
    }),
    startRebalance: assign(({ context }) => startRebalance(context)),
    completeRebalance: assign(({ context }) => completeRebalance(context)),
  },
  guards: {
    noMembers: ({ context }) => membershipPhase(context) === 'empty',
    allShardsSettled: ({ context }) => membershipPhase(context) === 'stable',
    someShardRevoking: ({ context }) => membershipPhase(context) === 'revoking',
    someShardAwaitingGrant: ({ context }) => membershipPhase(context) === 'granting',
    /** Only an active group takes an admin change; a frozen or failed-closed one refuses it. */
    active: inActive,
    /** A migration also waits for consumption to run on every shard. */
    migrationOpen: and([inActive, inRunning]),
    /** Consumption control waits for a migration in progress to end. */
    controlOpen: and([inActive, not(inMigrating)]),
    notFailedClosed: not(inFailedClosed),
    shardsAccepted: and([inActive, not(inMigrating), shardsExist]),
    resumeAccepted: and([inActive, shardsExist]),
    resetAccepted: and([
      inActive,
      not(inMigrating),
      ({ context, event }) =>
        event.type === 'RESET_POSITIONS' &&
        resetRefusal(
          context.group,
          event.reset.moves.map((move) => move.shard),
        ) === null,
    ]),
    consumptionRunning: ({ context }) => consumptionPhase(context.group) === 'running',
    consumptionPausing: ({ context }) => consumptionPhase(context.group) === 'pausing',
    consumptionPaused: ({ context }) => consumptionPhase(context.group) === 'paused',
    resetPausing: ({ context }) => consumptionPhase(context.group) === 'resetPausing',
    resetMoving: ({ context }) => consumptionPhase(context.group) === 'resetMoving',
    scaleAccepted: and([
      inActive,
      inRunning,
      ({ context, event }) => event.type === 'SCALE' && scaleRefusal(context, event) === null,
    ]),
    scaleRefused: and([
      inActive,
      inRunning,
      ({ context, event }) => event.type === 'SCALE' && scaleRefusal(context, event) !== null,
    ]),
    rollbackAccepted: and([
      inActive,
      inRunning,
      ({ context, event }) => event.type === 'ROLLBACK' && rollbackRefusal(context, event) === null,
    ]),
    recoveredFrozen: ({ event }) => lifecyclePhase(recovered(event)) === 'frozen',
    recoveredInProgress: ({ event }) => migrationPhase(recovered(event)) === 'inProgress',
    recoveredConverged: ({ event }) => migrationPhase(recovered(event)) === 'converged',
  },
}).createMachine({
  id: 'group',
  type: 'parallel',
  context: ({ input }) => input,
  // Commands every state takes: their steps decide the protocol (a failed-closed group answers
  // heartbeats with 503 itself), and what they change moves the regions by raised events.
  on: {
    [GroupEventType.HEARTBEAT]: { actions: ['heartbeat', 'raiseChanges'] },
    [GroupEventType.TICK]: { actions: ['tick', 'raiseChanges'] },
    [GroupEventType.OBSERVE_VERSION]: { actions: ['observeVersion', 'raiseChanges'] },
    [GroupEventType.RETIRED_SHARDS_DRAINED]: { actions: ['retiredShardsDrained', 'raiseChanges'] },
    [GroupEventType.PERSISTED]: { actions: 'persisted' },
  },
  states: {
    lifecycle: {
      initial: 'active',
      states: {
        active: {
          on: {
            [GroupEventType.FREEZE]: { target: 'frozen', actions: ['freeze', 'raiseChanges'] },
            [GroupEventType.UNFREEZE]: refused('notFrozen'),
            [GroupEventType.PAUSE_PRODUCERS]: { actions: ['pauseProducers', 'raiseChanges'] },
            [GroupEventType.RESUME_PRODUCERS]: { actions: ['resumeProducers', 'raiseChanges'] },
            [GroupEventType.ADOPT_LAYOUT]: { actions: ['adoptLayout', 'raiseChanges'] },
            [GroupEventType.FAIL_CLOSED]: {
              target: 'failedClosed',
              actions: ['failClosed', 'raiseChanges'],
            },
            [GroupEventType.RECOVER]: refused('notFailedClosed'),
          },
        },
        frozen: {
          on: {
            [GroupEventType.UNFREEZE]: { target: 'active', actions: ['unfreeze', 'raiseChanges'] },
            [GroupEventType.FREEZE]: refused('alreadyFrozen'),
            [GroupEventType.PAUSE_PRODUCERS]: refused('frozen'),
            [GroupEventType.RESUME_PRODUCERS]: refused('frozen'),
            [GroupEventType.SCALE]: refused('frozen'),
            [GroupEventType.ROLLBACK]: refused('frozen'),
            [GroupEventType.PAUSE_CONSUMPTION]: refused('frozen'),
            [GroupEventType.RESUME_CONSUMPTION]: refused('frozen'),
            [GroupEventType.RESET_POSITIONS]: refused('frozen'),
            [GroupEventType.CANCEL_RESET]: refused('frozen'),
            // Its shards stay as they are: a frozen group follows its prefix's layout too.
            [GroupEventType.ADOPT_LAYOUT]: { actions: ['adoptLayout', 'raiseChanges'] },
            [GroupEventType.FAIL_CLOSED]: {
              target: 'failedClosed',
              actions: ['failClosed', 'raiseChanges'],
            },
            [GroupEventType.RECOVER]: refused('notFailedClosed'),
          },
        },
        failedClosed: {
          on: {
            [GroupEventType.RECOVER]: [
              {
                guard: 'recoveredFrozen',
                target: 'frozen',
                actions: ['recover', 'raiseChanges', 'raiseMembershipCheck'],
              },
              { target: 'active', actions: ['recover', 'raiseChanges', 'raiseMembershipCheck'] },
            ],
            // Idempotent: the first reason is kept.
            [GroupEventType.FAIL_CLOSED]: { actions: ['failClosed', 'raiseChanges'] },
            [GroupEventType.FREEZE]: refused('failedClosed'),
            [GroupEventType.UNFREEZE]: refused('failedClosed'),
            [GroupEventType.PAUSE_PRODUCERS]: refused('failedClosed'),
            [GroupEventType.RESUME_PRODUCERS]: refused('failedClosed'),
            [GroupEventType.ADOPT_LAYOUT]: refused('failedClosed'),
            [GroupEventType.SCALE]: refused('failedClosed'),
            [GroupEventType.ROLLBACK]: refused('failedClosed'),
            [GroupEventType.PAUSE_CONSUMPTION]: refused('failedClosed'),
            [GroupEventType.RESUME_CONSUMPTION]: refused('failedClosed'),
            [GroupEventType.RESET_POSITIONS]: refused('failedClosed'),
            [GroupEventType.CANCEL_RESET]: refused('failedClosed'),
            [GroupEventType.SHARD_POSITIONS_MOVED]: refused('failedClosed'),
          },
        },
      },
    },
    membership: {
      initial: 'empty',
      on: {
        // After RECOVER the region takes whatever state the recovered group is in.
        [ChartEventType.MEMBERSHIP_RESTORED]: [
          { guard: 'noMembers', target: '.empty' },
          { guard: 'someShardRevoking', target: '.rebalancing.revoking' },
          { guard: 'someShardAwaitingGrant', target: '.rebalancing.granting' },
          { target: '.stable' },
        ],
      },
      states: {
        empty: {
          on: onMembershipEvents(
            [MEMBER_JOINED],
            [
              ['allShardsSettled', 'stable'],
              ['someShardRevoking', 'rebalancing.revoking'],
              ['someShardAwaitingGrant', 'rebalancing.granting'],
            ],
          ),
        },
        stable: {
          on: onMembershipEvents(
            [MEMBER_JOINED, ...DEPARTURES, TARGETS_RECOMPUTED, SHARDS_RELEASED, REVOKE_REQUESTED],
            [
              ['noMembers', 'empty'],
              ['someShardRevoking', 'rebalancing.revoking'],
              ['someShardAwaitingGrant', 'rebalancing.granting'],
            ],
          ),
        },
        rebalancing: {
          initial: 'granting',
          entry: 'startRebalance',
          exit: 'completeRebalance',
          on: {
            ...onMembershipEvents(
              [SHARDS_GRANTED, SHARDS_RELEASED, TARGETS_RECOMPUTED, MEMBER_JOINED],
              [['allShardsSettled', 'stable']],
            ),
            ...onMembershipEvents(DEPARTURES, [
              ['noMembers', 'empty'],
              ['allShardsSettled', 'stable'],
            ]),
          },
          states: {
            revoking: {
              on: onMembershipEvents(
                [SHARDS_RELEASED, SHARDS_GRANTED, ...DEPARTURES, MEMBER_JOINED, TARGETS_RECOMPUTED],
                [['someShardAwaitingGrant', 'granting']],
              ),
            },
            granting: {
              on: onMembershipEvents([REVOKE_REQUESTED], [['someShardRevoking', 'revoking']]),
            },
          },
        },
      },
    },
    consumption: {
      initial: 'running',
      on: {
        // After RECOVER the region takes whatever state the recovered group is in.
        [ChartEventType.MEMBERSHIP_RESTORED]: [
          { guard: 'consumptionPausing', target: '.pausing' },
          { guard: 'consumptionPaused', target: '.paused' },
          { guard: 'resetPausing', target: '.resetting.pausing' },
          { guard: 'resetMoving', target: '.resetting.moving' },
          { target: '.running' },
        ],
      },
      states: {
        running: {
          on: {
            ...controlCommands,
            [CONSUMPTION_CHANGED]: consumptionTargets(['pausing', 'paused', ...RESETTING]),
          },
        },
        pausing: {
          on: {
            ...controlCommands,
            ...migrationRefused('consumptionPaused'),
            [CONSUMPTION_CHANGED]: consumptionTargets(['running', 'paused', ...RESETTING]),
            [SHARDS_RELEASED]: consumptionTargets(['paused']),
          },
        },
        paused: {
          on: {
            ...controlCommands,
            ...migrationRefused('consumptionPaused'),
            [CONSUMPTION_CHANGED]: consumptionTargets(['running', 'pausing', ...RESETTING]),
          },
        },
        resetting: {
          initial: 'pausing',
          on: {
            [GroupEventType.PAUSE_CONSUMPTION]: { guard: 'active', ...refused('resetInProgress') },
            [GroupEventType.RESUME_CONSUMPTION]: { guard: 'active', ...refused('resetInProgress') },
            [GroupEventType.RESET_POSITIONS]: { guard: 'active', ...refused('resetInProgress') },
            // The way out of a reset whose moves keep failing.
            [GroupEventType.CANCEL_RESET]: {
              guard: 'active',
              actions: ['cancelReset', 'raiseChanges'],
            },
            ...migrationRefused('resetInProgress'),
            [CONSUMPTION_CHANGED]: consumptionTargets(['running', 'pausing', 'paused']),
          },
          states: {
            // Its shards are revoked from their members like a rebalance.
            pausing: { on: { [SHARDS_RELEASED]: consumptionTargets(['resetting.moving']) } },
            // The host moves each shard's Redis consumer group and reports it; only now, when
            // no member reads them, are moves taken.
            moving: {
              on: {
                [GroupEventType.SHARD_POSITIONS_MOVED]: {
                  guard: 'notFailedClosed',
                  actions: ['shardPositionsMoved', 'raiseChanges'],
                },
              },
            },
          },
        },
      },
    },
    migration: {
      initial: 'idle',
      on: {
        // A recovered group brings its own migration, whatever the region showed before.
        [GroupEventType.RECOVER]: [
          { guard: and([inFailedClosed, 'recoveredInProgress']), target: '.inProgress' },
          { guard: and([inFailedClosed, 'recoveredConverged']), target: '.converged' },
          { guard: inFailedClosed, target: '.idle' },
        ],
      },
      states: {
        idle: {
          on: {
            [GroupEventType.SCALE]: [
              {
                guard: 'scaleAccepted',
                target: 'inProgress',
                actions: ['scale', 'raiseChanges'],
              },
              { guard: 'migrationOpen', ...refused('scale') },
            ],
            [GroupEventType.ROLLBACK]: { guard: 'migrationOpen', ...refused('rollback') },
          },
        },
        inProgress: {
          on: {
            // One migration at a time: a valid SCALE now is refused (MIGRATION_IN_PROGRESS).
            [GroupEventType.SCALE]: [
              { guard: 'scaleRefused', ...refused('scale') },
              { guard: 'migrationOpen', ...refused('migrationInProgress') },
            ],
            // Consumption is controlled again once the migration converged.
            [GroupEventType.PAUSE_CONSUMPTION]: {
              guard: 'active',
              ...refused('migrationInProgress'),
            },
            [GroupEventType.RESET_POSITIONS]: {
              guard: 'active',
              ...refused('migrationInProgress'),
            },
            [GroupEventType.ROLLBACK]: [
              {
                guard: 'rollbackAccepted',
                target: 'inProgress',
                reenter: true,
                actions: ['rollback', 'raiseChanges'],
              },
              { guard: 'migrationOpen', ...refused('rollback') },
            ],
            [ChartEventType.MIGRATION_CONVERGED]: {
              target: 'converged',
              actions: ['convergeMigration', 'raiseChanges'],
            },
          },
        },
        converged: {
          on: {
            // A SCALE completes the converged migration and starts the next one.
            [GroupEventType.SCALE]: [
              {
                guard: 'scaleAccepted',
                target: 'inProgress',
                actions: ['scale', 'raiseChanges'],
              },
              { guard: 'migrationOpen', ...refused('scale') },
            ],
            [GroupEventType.ROLLBACK]: [
              {
                guard: 'rollbackAccepted',
                target: 'inProgress',
                actions: ['rollback', 'raiseChanges'],
              },
              { guard: 'migrationOpen', ...refused('rollback') },
            ],
            [ChartEventType.ROLLBACK_WINDOW_ELAPSED]: {
              target: 'idle',
              actions: ['completeMigration', 'raiseChanges'],
            },
          },
        },
      },
    },
  },
});

/** The machine's type, for hosts that keep actors of it. */
export type GroupMachine = typeof groupMachine;

/**
 * The snapshot of a group actor built from persisted domain fields: the state value the context
 * belongs in, resolved by the machine (`resolveState`). A group restored mid-rebalance counts
 * its rebalance from the restore, so the rebalance-duration histogram never loses a start.
 */
export function restoreGroupSnapshot(context: GroupContext) {
  const value = expectedStateValue(context);
  const rebalancing = typeof value.membership === 'object';
  const restored =
    rebalancing && context.rebalanceStartedAt === null
      ? { ...context, rebalanceStartedAt: context.lastEventAt }
      : context;
  return groupMachine.resolveState({ value: { ...value }, context: restored });
}

/**
 * Whether the chart, in `snapshot`'s state, refuses `event` (the transition it would take names
 * a refusal), read from the chart without running it: for callers that must know before they
 * act around the group (a stream prefix's layout moves before its group migrates).
 */
export function refusedByChart(snapshot: SnapshotFrom<GroupMachine>, event: GroupEvent): boolean {
  return groupMachine
    .getTransitionData(snapshot, event)
    .some((transition) =>
      transition.actions.some(
        (action) => typeof action === 'object' && action !== null && action.type === 'refuse',
      ),
    );
}
