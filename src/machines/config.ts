/**
 * Membership settings the group statechart needs (README.md#settings). `src/config` maps the
 * `coordinator.membership.*`, `coordinator.coordination-version.*`,
 * `coordinator.migration.rollback-window` and `coordinator.limits.max-members-per-group`
 * settings onto this shape; the machines never read settings themselves.
 */
export interface MembershipConfig {
  /** Default session timeout of a member that asks for none. */
  readonly sessionTimeoutMs: number;
  readonly minSessionTimeoutMs: number;
  readonly maxSessionTimeoutMs: number;
  /** Default time a member gets to finish revoking before it is fenced. */
  readonly rebalanceTimeoutMs: number;
  readonly minRebalanceTimeoutMs: number;
  readonly maxRebalanceTimeoutMs: number;
  /** Heartbeat interval told to members with nothing to wait for. */
  readonly heartbeatIntervalMs: number;
  /** Heartbeat interval while a member revokes or waits, so handoff takes round trips. */
  readonly rebalanceHeartbeatIntervalMs: number;
  /**
   * A join's recompute waits this long, and each further join restarts the wait (a burst of
   * joins costs one assignment epoch); 0 recomputes at once.
   */
  readonly assignmentDebounceMs: number;
  /**
   * The longest a burst of joins defers its recompute, counted from the join that started the
   * wait: joins that keep coming closer together than `assignmentDebounceMs` cost one epoch
   * per this much time.
   */
  readonly assignmentDebounceMaxMs: number;
  readonly coordinationVersionMin: number;
  readonly coordinationVersionMax: number;
  /**
   * How long a CONVERGED migration may still be rolled back before it becomes COMPLETED
   * (`coordinator.migration.rollback-window`).
   */
  readonly rollbackWindowMs: number;
  /**
   * Members one group admits (`coordinator.limits.max-members-per-group`); a join beyond it is
   * refused with GROUP_FULL, a rejoin of a member that is already in the group never is.
   */
  readonly maxMembersPerGroup: number;
}

const SECOND = 1_000;
const MINUTE = 60 * SECOND;

/** The defaults of the settings (README.md#settings). */
export const defaultMembershipConfig: MembershipConfig = Object.freeze({
  sessionTimeoutMs: 45 * SECOND,
  minSessionTimeoutMs: 6 * SECOND,
  maxSessionTimeoutMs: 30 * MINUTE,
  rebalanceTimeoutMs: 60 * SECOND,
  minRebalanceTimeoutMs: 1 * SECOND,
  maxRebalanceTimeoutMs: 30 * MINUTE,
  heartbeatIntervalMs: 3 * SECOND,
  rebalanceHeartbeatIntervalMs: 250,
  assignmentDebounceMs: 100,
  assignmentDebounceMaxMs: SECOND,
  coordinationVersionMin: 1,
  coordinationVersionMax: 1,
  rollbackWindowMs: 30 * MINUTE,
  maxMembersPerGroup: 10_000,
});

/** The session timeout a member gets: what it asked for, held inside the configured bounds. */
export function effectiveSessionTimeout(config: MembershipConfig, requested?: number): number {
  return clamp(
    requested ?? config.sessionTimeoutMs,
    config.minSessionTimeoutMs,
    config.maxSessionTimeoutMs,
  );
}

/** The rebalance timeout a member gets: what it asked for, held inside the configured bounds. */
export function effectiveRebalanceTimeout(config: MembershipConfig, requested?: number): number {
  return clamp(
    requested ?? config.rebalanceTimeoutMs,
    config.minRebalanceTimeoutMs,
    config.maxRebalanceTimeoutMs,
  );
}

function clamp(value: number, min: number, max: number): number {
  // A NaN from a sloppy caller must not become a member that never expires.
  if (Number.isNaN(value)) return min;
  return Math.min(max, Math.max(min, value));
}
