/**
 * Public surface of the pure group logic (docs/architecture.md#layers): no I/O anywhere below.
 */
export type { AdminSummary } from './admin.js';
export { applyFreeze, applyPauseProducers, applyResumeProducers, applyUnfreeze } from './admin.js';
export type { Refusal, RefusalReason } from './refusals.js';
export { lifecycleRefusal, refusalFor } from './refusals.js';
export type { AssignInput } from './assignor.js';
export { assignTargets, compareIds } from './assignor.js';
export type { Clock } from './clock.js';
export { ManualClock, systemClock } from './clock.js';
export type { MembershipConfig } from './config.js';
export {
  defaultMembershipConfig,
  effectiveRebalanceTimeout,
  effectiveSessionTimeout,
} from './config.js';
export type {
  CommandResult,
  CreateGroupContextInput,
  Effect,
  FenceReason,
  GroupContext,
  RollbackField,
  RollbackSignals,
} from './context.js';
export { createGroupContext, nextDeadline } from './context.js';
export type {
  AdminEvent,
  CommandEvent,
  FailClosedEvent,
  GroupEvent,
  GroupEventName,
  HeartbeatEvent,
  PersistedEvent,
  RollbackEvent,
  ScaleEvent,
  TickEvent,
} from './events.js';
export { ChartEventType, GroupEventType } from './events.js';
export type { FailClosedReply } from './fail-closed.js';
export { applyFailClosed } from './fail-closed.js';
export type { GroupMachine } from './group-machine.js';
export { groupMachine, refusedByChart, restoreGroupSnapshot } from './group-machine.js';
export type { MemberShards } from './group-state.js';
export { memberShards, shardAt } from './group-state.js';
export type { InvariantName, Violation } from './invariants.js';
export { checkGroupState, checkInvariants, guardInvariants } from './invariants.js';
export type { StateNodeJson, TargetRef, TransitionJson } from './machine-definition.js';
export { machineDefinition } from './machine-definition.js';
export type { TickReport } from './membership.js';
export { applyHeartbeat, applyTick } from './membership.js';
export type { RollbackReply, ScaleReply } from './migration.js';
export {
  MIGRATION_HISTORY_LIMIT,
  applyRollback,
  applyScale,
  completeMigration,
  convergeMigration,
  migrationConverged,
} from './migration.js';
export type { MigrationProgress, MigrationView } from './migration-view.js';
export {
  migrationProgress,
  migrationView,
  migrationsView,
  rollbackAllowed,
} from './migration-view.js';
export { newGroupState } from './new-group.js';
export type { GroupStateValue, LifecyclePhase, MembershipPhase, MigrationPhase } from './phases.js';
export { expectedStateValue, lifecyclePhase, membershipPhase, migrationPhase } from './phases.js';
export type { HeartbeatOutcome, HeartbeatReply, HeartbeatRequest } from './protocol.js';
export { HEARTBEAT_OUTCOMES } from './protocol.js';
export { partitionerName, shardForKey, streamNames } from './routing.js';
export type {
  FailureReason,
  GroupRef,
  GroupState,
  GroupStatus,
  MemberLiveness,
  MemberRecord,
  MigrationKind,
  MigrationRecord,
  MigrationState,
  RevokeProgress,
  RevokeState,
  ShardRecord,
  ShardState,
} from './types.js';
export { groupId } from './types.js';
