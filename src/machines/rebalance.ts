/**
 * Rebalance bookkeeping for the `rebalancing` state's entry and exit: when it started and how
 * long it took (the `coord_rebalance_duration_seconds` histogram).
 */
import type { GroupContext } from './context.js';
import { withEffects } from './context.js';

/** Entry of `rebalancing`. Keeps a start time it already has (an actor restored mid-rebalance). */
export function startRebalance(ctx: GroupContext): GroupContext {
  if (ctx.rebalanceStartedAt !== null) return ctx;
  return withEffects(
    { ...ctx, rebalanceStartedAt: ctx.lastEventAt },
    { type: 'REBALANCE_STARTED' },
  );
}

/** Exit of `rebalancing`. */
export function completeRebalance(ctx: GroupContext): GroupContext {
  const startedAt = ctx.rebalanceStartedAt ?? ctx.lastEventAt;
  const durationMs = Math.max(0, ctx.lastEventAt - startedAt);
  return withEffects(
    { ...ctx, rebalanceStartedAt: null },
    { type: 'REBALANCE_COMPLETED', durationMs },
  );
}
