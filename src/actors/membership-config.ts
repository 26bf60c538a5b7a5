import type { Settings } from '../config/settings.js';
import { defaultMembershipConfig, type MembershipConfig } from '../machines/config.js';

/** The membership timings of the settings, in the machine's terms. */
export function membershipConfigFrom(settings: Settings): MembershipConfig {
  const m = settings.membership;
  return {
    ...defaultMembershipConfig,
    sessionTimeoutMs: m['session-timeout'],
    heartbeatIntervalMs: m['heartbeat-interval'],
    rebalanceTimeoutMs: m['rebalance-timeout'],
    rebalanceHeartbeatIntervalMs: m['rebalance-heartbeat-interval'],
    assignmentDebounceMs: m['assignment-debounce'],
    assignmentDebounceMaxMs: m['assignment-debounce-max'],
    minSessionTimeoutMs: Math.min(
      defaultMembershipConfig.minSessionTimeoutMs,
      m['session-timeout'],
    ),
    minRebalanceTimeoutMs: Math.min(
      defaultMembershipConfig.minRebalanceTimeoutMs,
      m['rebalance-timeout'],
    ),
    rollbackWindowMs: settings.migration['rollback-window'],
    coordinationVersionMin: settings['coordination-version'].min,
    coordinationVersionMax: settings['coordination-version'].max,
    maxMembersPerGroup: settings.limits['max-members-per-group'],
  };
}
