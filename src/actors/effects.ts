import type { Effect } from '../machines/context.js';
import { groupLogFields, type Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { GroupRef } from '../machines/types.js';

/** Turns what a group actor reports it did into metrics and log lines (never store writes). */
export function applyEffects(
  effects: readonly Effect[],
  metrics: Metrics,
  logger: Logger,
  ref: GroupRef,
): void {
  const group = groupLogFields(ref);
  for (const effect of effects) {
    switch (effect.type) {
      case 'MEMBER_EXPIRED':
        metrics.memberExpiry.inc();
        break;
      case 'MEMBER_FENCED':
        metrics.fencedMembers.inc({ reason: effect.reason });
        break;
      case 'ROLLBACK_SIGNAL':
        metrics.metadataVersionRegression.inc({ source: effect.source });
        logger.warn('client reported a higher version than stored (rollback signal)', {
          ...group,
          ...effect,
        });
        break;
      case 'REBALANCE_COMPLETED':
        metrics.rebalanceDuration.observe(effect.durationMs / 1000);
        break;
      case 'INVARIANT_VIOLATION':
        metrics.invariantViolations.inc({ invariant: effect.invariant });
        logger.error('group invariant violation refused', { ...group, ...effect });
        break;
      case 'EVENT_FAILED':
        logger.error('group event failed', { ...group, ...effect });
        break;
      case 'MIGRATION_STARTED':
        metrics.migrationsStarted.inc({ kind: effect.kind });
        logger.info('migration started', { ...group, ...effect });
        break;
      case 'MIGRATION_CONVERGED':
        metrics.migrationDuration.observe(effect.durationMs / 1000);
        logger.info('migration converged', { ...group, ...effect });
        break;
      case 'MIGRATION_COMPLETED':
        metrics.migrationsCompleted.inc();
        logger.info('migration completed', { ...group, ...effect });
        break;
      case 'MIGRATION_ROLLED_BACK':
        metrics.migrationsRolledBack.inc();
        logger.info('migration rolled back', { ...group, ...effect });
        break;
      default:
        // winston formats a line before its transports filter it by level: ask first.
        if (logger.isDebugEnabled()) logger.debug('group effect', { ...group, ...effect });
        break;
    }
  }
}
