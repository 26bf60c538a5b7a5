/**
 * What `http/` shows of a group, built here from the machine context so that `http/` only
 * ever sees plain view objects (and a forwarding replica can pass them on as JSON).
 */
import { migrationView, type MigrationView } from '../machines/migration-view.js';
import type {
  CompletedReset,
  GroupState,
  MigrationRecord,
  PositionReset,
} from '../machines/types.js';
import { consumptionPhase } from '../machines/consumption.js';
import { partitionerName, streamNames } from '../machines/routing.js';
import { memberState } from '../machines/member-machine.js';
import type { GroupSnapshot } from './types.js';

const iso = (ms: number | null | undefined) =>
  ms === null || ms === undefined ? null : new Date(ms).toISOString();

/** `{lifecycle: 'active', membership: {rebalancing: 'revoking'}}` → `active/rebalancing.revoking`. */
export function phaseOf(stateValue: unknown): string {
  const flatten = (value: unknown): string =>
    typeof value === 'string'
      ? value
      : Object.entries(value as Record<string, unknown>)
          .map(([k, v]) => (typeof v === 'string' ? `${k}.${v}` : `${k}.${flatten(v)}`))
          .join(',');
  if (typeof stateValue !== 'object' || stateValue === null) return String(stateValue);
  const regions = stateValue as Record<string, unknown>;
  const membership = regions.membership;
  const text = (v: unknown) => (typeof v === 'string' ? v : flatten(v));
  return membership === undefined ? flatten(stateValue) : text(membership);
}

/** One line of the group list. */
export function groupSummary(snapshot: GroupSnapshot) {
  const g = snapshot.context.group;
  return {
    streamPrefix: g.streamPrefix,
    consumerGroup: g.consumerGroup,
    shardCount: g.shardCount,
    metadataVersion: g.metadataVersion,
    assignmentEpoch: g.assignmentEpoch,
    lifecycleId: g.lifecycleId,
    status: g.status,
    phase: phaseOf(snapshot.stateValue),
    memberCount: g.members.size,
    owner: snapshot.owner,
    /** Why the group failed closed (`METADATA_LOST`, ...); null unless it did. */
    failureReason: g.failureReason,
    startAt: g.startAt,
  };
}

/** A group with rollback signals and failure reason (monitoring, admin replies). */
export function groupView(snapshot: GroupSnapshot) {
  const { group: g, signals, storeRevision } = snapshot.context;
  return {
    ...groupSummary(snapshot),
    failureReason: g.failureReason,
    producersPaused: g.producersPaused,
    initialShardCount: g.initialShardCount,
    startFrom: iso(g.startFrom) ?? '',
    layoutId: g.layout.id,
    layoutVersion: g.layout.version,
    storeRevision,
    highestVersionSeen: snapshot.highestVersionSeen,
    createdAt: iso(g.createdAt) ?? '',
    updatedAt: iso(g.updatedAt) ?? '',
    state: snapshot.stateValue,
    consumption: consumptionView(g),
    rollbackSignals: signals
      ? {
          count: signals.count,
          firstAt: iso(signals.firstAt) ?? '',
          lastAt: iso(signals.lastAt) ?? '',
          highestVersionSeen: signals.highestVersionSeen,
          lastSource: signals.lastSource,
        }
      : null,
  };
}

function shardsOf(snapshot: GroupSnapshot, memberId: string, state: string): number[] {
  return Object.values(snapshot.context.group.shards)
    .filter((s) => s.owner === memberId && s.state === state)
    .map((s) => s.shard)
    .sort((a, b) => a - b);
}

function targetOf(snapshot: GroupSnapshot, memberId: string): number[] {
  return Object.values(snapshot.context.group.shards)
    .filter((s) => s.target === memberId && s.state !== 'retiring')
    .map((s) => s.shard)
    .sort((a, b) => a - b);
}

export function membersView(snapshot: GroupSnapshot) {
  const { group: g, liveness } = snapshot.context;
  return {
    members: g.members
      .values()
      .sort((a, b) => a.memberId.localeCompare(b.memberId))
      .map((m) => {
        const live = liveness.get(m.memberId);
        return {
          memberId: m.memberId,
          /** The member's own chart state: joining, stable, revoking or waiting. */
          state: memberState(snapshot.context, m.memberId),
          clientId: m.clientId,
          memberEpoch: m.memberEpoch,
          assignmentEpoch: live?.reportedAssignmentEpoch ?? null,
          metadataVersion: live?.reportedMetadataVersion ?? null,
          lastHeartbeatAt: iso(live?.lastHeartbeatAt),
          sessionExpiresAt: iso(live?.sessionExpiresAt),
          revokeDeadline: iso(live?.revokeDeadline),
          currentAssignments: live?.currentAssignments ?? [],
          revokeProgress: live?.revokeProgress ?? [],
          assignedShards: shardsOf(snapshot, m.memberId, 'assigned'),
          revokeShards: shardsOf(snapshot, m.memberId, 'revoking'),
          retireShards: shardsOf(snapshot, m.memberId, 'retiring'),
          targetShards: targetOf(snapshot, m.memberId),
          sessionTimeoutMs: m.sessionTimeoutMs,
          rebalanceTimeoutMs: m.rebalanceTimeoutMs,
        };
      }),
    /** Members gone lately, newest first, with how they ended: left, expired or fenced. */
    departedMembers: snapshot.context.departures.map((d) => ({
      memberId: d.memberId,
      state: d.state,
      at: iso(d.at),
    })),
  };
}

export function assignmentsView(snapshot: GroupSnapshot) {
  const g = snapshot.context.group;
  const members = membersView(snapshot).members;
  return {
    shardCount: g.shardCount,
    metadataVersion: g.metadataVersion,
    assignmentEpoch: g.assignmentEpoch,
    shards: Object.values(g.shards)
      .sort((a, b) => a.shard - b.shard)
      .map((s) => ({
        shard: s.shard,
        state: s.state,
        owner: s.owner,
        target: s.target,
        ownerEpoch: s.ownerEpoch,
      })),
    members: members.map((m) => ({
      memberId: m.memberId,
      currentAssignments: m.currentAssignments,
      revokeProgress: m.revokeProgress,
      assignedShards: m.assignedShards,
      revokeShards: m.revokeShards,
      retireShards: m.retireShards,
      targetShards: m.targetShards,
    })),
  };
}

export function routingView(snapshot: GroupSnapshot) {
  const g = snapshot.context.group;
  return {
    streamPrefix: g.streamPrefix,
    consumerGroup: g.consumerGroup,
    lifecycleId: g.lifecycleId,
    shardCount: g.shardCount,
    metadataVersion: g.metadataVersion,
    streams: streamNames(g.streamPrefix, g.shardCount),
    partitioner: partitionerName,
    producersPaused: g.producersPaused,
    layoutId: g.layout.id,
    layoutVersion: g.layout.version,
  };
}

/** The migrations of a group: the active one with progress, and history (newest first). */
export function migrationsView(snapshot: GroupSnapshot, now: number) {
  const { group } = snapshot.context;
  return {
    active: group.activeMigration
      ? migrationView(group.activeMigration, snapshot.context, now)
      : null,
    migrations: group.migrations.map((m) => migrationView(m, null, now)),
  };
}

/** A migration an admin request just started, as monitoring shows it. */
export function startedMigrationView(
  migration: MigrationRecord,
  snapshot: GroupSnapshot,
): MigrationView {
  return migrationView(migration, snapshot.context, snapshot.context.lastEventAt);
}

export type GroupSummaryView = ReturnType<typeof groupSummary>;
export type GroupView = ReturnType<typeof groupView>;
export type MembersView = ReturnType<typeof membersView>;
export type AssignmentsView = ReturnType<typeof assignmentsView>;
export type MigrationsView = ReturnType<typeof migrationsView>;
export type RoutingView = ReturnType<typeof routingView>;
export type { MigrationView };

/**
 * Consumption control as operators see it (docs/operations.md#pausing-consumption): the region's
 * state, the paused shards, and the position reset under way with its progress.
 */
export function consumptionView(g: GroupState) {
  const phase = consumptionPhase(g);
  const reset = g.positionReset ?? null;
  return {
    state: phase === 'resetPausing' || phase === 'resetMoving' ? 'resetting' : phase,
    pausedShards: [...(g.pausedShards ?? [])],
    reset: reset === null ? null : resetView(reset, phase === 'resetMoving' ? 'moving' : 'pausing'),
    lastReset: g.lastPositionReset
      ? {
          ...resetView(g.lastPositionReset, 'done'),
          completedAt: iso(g.lastPositionReset.completedAt) ?? '',
          cancelled: g.lastPositionReset.cancelled === true,
        }
      : null,
  };
}

/** A position reset: what it moves where, and how far it got. */
export function resetView(reset: PositionReset, stage: 'pausing' | 'moving' | 'done') {
  return {
    resetId: reset.resetId,
    to: reset.to,
    stage,
    requestedBy: reset.requestedBy,
    reason: reset.reason,
    startedAt: iso(reset.startedAt) ?? '',
    // A reset that ended on its own moved every shard; a cancelled one those it recorded.
    moves: reset.moves.map((m) => ({
      ...m,
      moved:
        reset.moved.includes(m.shard) ||
        (stage === 'done' && (reset as Partial<CompletedReset>).cancelled !== true),
    })),
  };
}
