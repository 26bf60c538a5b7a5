import { performance } from 'node:perf_hooks';
import { setImmediate } from 'node:timers';

/**
 * How much of one turn of the event loop the work that may wait (docs/architecture.md#fairness-between-groups)
 * takes, all of it together: the steps of every busy group's batch, the answers written after a
 * batch's write, and the checks and decisions of heartbeats no steady answer covers (the heartbeat
 * fast path's intake). A steady heartbeat of another group waits for the turn it arrives in:
 * with each kind of work holding its own share (2 ms of steps per busy group, 1 ms of answers),
 * a replica flooded with joins into one group ran turns of 10 to 50 ms, and the other groups'
 * heartbeats waited that long.
 */
export const TURN_BUDGET_MS = 1;

/**
 * How long a piece of work may run in a turn before it yields, even when the turn's budget is
 * spent (by others): with many busy groups, yielding after every single step cost a turn of the
 * loop per step and group; 10,000 groups built in-process took half as long again.
 */
export const OWN_SHARE_MS = 0.25;

/**
 * The one budget per turn that deferrable work draws on, shared by every group on a replica.
 * Work {@link begin}s where it starts, asks {@link spentFor} (a batch's steps) or {@link spent}
 * (the answers) at each point it could stop, and when the answer is yes, continues in a later
 * turn (`nextTurn` in slices.ts). The clock starts with the first work after the loop's check
 * phase and stops at the next one, so between two reads of the sockets the loop runs about
 * twice the budget (once from an I/O callback, once in the check phase) plus, for each other
 * piece of work in progress, its own share ({@link OWN_SHARE_MS}, at least one step) or one
 * answer. Each runs at least that much per turn, so nothing starves.
 */
export class TurnBudget {
  /** When this turn's deferrable work began; null when none did yet. */
  private started: number | null = null;

  /** {@link OWN_SHARE_MS}, never more than the budget. */
  private readonly ownMs: number;

  constructor(
    readonly budgetMs: number = TURN_BUDGET_MS,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.ownMs = Math.min(OWN_SHARE_MS, budgetMs);
  }

  /** The budget's clock (ms). */
  clock(): number {
    return this.now();
  }

  /** Work starts: this turn's clock starts, unless other work already started it. */
  begin(): void {
    if (this.started !== null) return;
    this.started = this.now();
    // Queued before any work that yields this turn, so that such work finds a fresh turn.
    setImmediate(this.endTurn);
  }

  /** Whether this turn's budget is used up: work that can stop should wait for the next turn. */
  spent(): boolean {
    return this.started !== null && this.now() - this.started >= this.budgetMs;
  }

  /**
   * Whether work that has run since `since` (its start in this turn) should wait for the next
   * turn: the turn's budget is used up and so is its own share ({@link OWN_SHARE_MS}).
   */
  spentFor(since: number): boolean {
    return this.spent() && this.now() - since >= this.ownMs;
  }

  private readonly endTurn = (): void => {
    this.started = null;
  };
}

/** The budget of the replica's deferrable work (one event loop, one budget). */
export const replicaTurnBudget = new TurnBudget();
