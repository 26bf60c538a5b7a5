import { CoordinatorError } from '../errors.js';
import type { Clock } from '../machines/clock.js';
import type { GroupContext } from '../machines/context.js';
import { steadyHeartbeat } from '../machines/heartbeat.js';
import type { HeartbeatReply, HeartbeatRequest } from '../machines/protocol.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { diffGroups, isEmptyPatch } from '../store/codec.js';
import type { Store } from '../store/store.js';
import { unwrap } from './commands.js';
import type { DeadlineSweep } from './deadline-sweep.js';
import { applyEffects } from './effects.js';
import { startActor, type ActorFactory, type GroupEntry, type GroupEvent } from './group-entry.js';
import type { Publication } from './publication.js';
import type { StoreGuard } from './store-guard.js';
import type { WriteRefusal } from './write-refusal.js';

export interface CommitterOptions {
  readonly store: Pick<Store, 'commitGroup'>;
  readonly guard: StoreGuard;
  readonly clock: Clock;
  readonly metrics: Metrics;
  readonly logger: Logger;
  readonly factory: ActorFactory;
  readonly publication: Publication;
  readonly refusal: WriteRefusal;
  /** Told of the deadlines an event or a steady heartbeat may have brought forward. */
  readonly deadlines?: Pick<DeadlineSweep, 'noteChanges' | 'noteMember'>;
}

/**
 * Runs one event through a group's actor and persists what it changed: ONE fenced,
 * revision-checked write before anyone is answered. A refused write rebuilds the actor from
 * the last persisted state, as if the event never happened. The caller holds the mailbox.
 */
export class Committer {
  constructor(private readonly options: CommitterOptions) {}

  /**
   * A heartbeat (DESIGN.md §12): one that changes nothing but its member's liveness is
   * answered from memory, decided in O(1) in the size of the group before the chart is asked
   * (no macrostep, no write, nothing to publish); any other takes the chart's road through
   * {@link dispatch}, which answers a steady heartbeat with the same reply.
   */
  async heartbeat(
    entry: GroupEntry,
    now: number,
    request: HeartbeatRequest,
  ): Promise<HeartbeatReply> {
    const steady = this.steady(entry, now, request);
    if (steady !== null) return steady;
    return unwrap(
      await this.dispatch(entry, { type: 'HEARTBEAT', now, request }),
    ) as HeartbeatReply;
  }

  /** The reply to a steady heartbeat, decided in O(1) (no chart, no write); null: not steady. */
  steady(entry: GroupEntry, now: number, request: HeartbeatRequest): HeartbeatReply | null {
    const ctx = entry.snapshot().context;
    const steady = steadyHeartbeat(ctx, request, now);
    // Its member's deadlines moved (later, normally): O(1) for the timers.
    if (steady !== null)
      this.options.deadlines?.noteMember(entry, ctx.liveness.get(request.memberId));
    return steady;
  }

  /** Resolves with the context after the event and after its write committed. */
  async dispatch(entry: GroupEntry, event: GroupEvent): Promise<GroupContext> {
    const before = entry.actor.getSnapshot().context;
    // Liveness is kept outside the context (machines/liveness.ts): what the event changed in
    // it is undone with the event when the actor fails or the write is refused.
    const mark = before.liveness.begin();
    try {
      return await this.run(entry, event, before, mark);
    } finally {
      before.liveness.end();
    }
  }

  private async run(
    entry: GroupEntry,
    event: GroupEvent,
    before: GroupContext,
    mark: number,
  ): Promise<GroupContext> {
    const { factory, clock, store, guard, metrics, logger, publication } = this.options;
    entry.actor.send(event);
    const snapshot = entry.actor.getSnapshot();
    if (snapshot.status !== 'active') {
      before.liveness.undo(mark);
      entry.actor = startActor(factory, before);
      throw new CoordinatorError(
        'INTERNAL',
        'the group actor failed; it was rebuilt from the last persisted state',
      );
    }
    const after = snapshot.context;
    // A failed-closed group is never written: lost metadata is not recreated, restored metadata
    // stays as the operator put it (DESIGN.md §7).
    if (after.group !== before.group && after.group.status !== 'FAILED_CLOSED') {
      const patch = diffGroups(entry.persisted, after.group);
      if (!isEmptyPatch(patch)) {
        const now = clock.now();
        try {
          entry.revision = await guard(() =>
            store.commitGroup(entry.ref, entry.fence, entry.revision, {
              set: { ...patch.set, updatedAt: String(now) },
              del: patch.del,
            }),
          );
        } catch (error) {
          // Nothing was written: forget the event, as if it never happened.
          before.liveness.undo(mark);
          entry.actor.stop();
          entry.actor = startActor(factory, before);
          throw await this.options.refusal.explain(entry, event.type, error);
        }
        entry.persisted = { ...after.group, updatedAt: now };
        entry.actor.send({ type: 'PERSISTED', revision: entry.revision, updatedAt: now });
      }
    }
    applyEffects(after.effects, metrics, logger, entry.ref);
    const latest = entry.actor.getSnapshot().context;
    this.options.deadlines?.noteChanges(entry, latest, before.liveness.changedSince(mark));
    publication.observe(entry, latest);
    return latest;
  }
}
