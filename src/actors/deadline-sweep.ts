import type { Clock } from '../machines/clock.js';
import { nextDeadline } from '../machines/context.js';
import type { Logger } from '../observability/logger.js';
import type { Committer } from './committer.js';
import type { GroupEntry } from './group-entry.js';
import type { Stale } from './mailbox.js';

export interface DeadlineSweepOptions {
  readonly clock: Clock;
  readonly logger: Logger;
  /** How often the sweep runs (`membership.sweep-interval`). */
  readonly intervalMs: number;
  /** The entries to look at. */
  readonly entries: () => readonly GroupEntry[];
  /** Runs work in the group's mailbox. */
  readonly run: <T>(entry: GroupEntry, work: () => Promise<T>) => Promise<T | Stale>;
  readonly committer: Pick<Committer, 'dispatch'>;
}

/**
 * The timers of every group: one periodic sweep ticks each actor whose earliest deadline
 * (session expiry, revoke deadline, debounce) has passed.
 */
export class DeadlineSweep {
  constructor(private readonly options: DeadlineSweepOptions) {}

  /** Starts sweeping; returns the function that stops it. */
  start(): () => void {
    const { clock, intervalMs, logger } = this.options;
    return clock.every(intervalMs, () => {
      this.sweep().catch((error: unknown) =>
        logger.error('sweep failed', { error: String(error) }),
      );
    });
  }

  /** Ticks every actor whose earliest deadline has passed; resolves when they are done. */
  async sweep(): Promise<void> {
    const { clock, entries, run, committer } = this.options;
    const now = clock.now();
    // Deadlines move with every heartbeat (session expiry), so they are read here, not kept.
    const due = entries().filter((e) => {
      const deadline = nextDeadline(e.actor.getSnapshot().context);
      return deadline !== null && deadline <= now;
    });
    await Promise.allSettled(
      due.map((entry) =>
        run(entry, () => committer.dispatch(entry, { type: 'TICK', now: clock.now() })),
      ),
    );
  }
}
