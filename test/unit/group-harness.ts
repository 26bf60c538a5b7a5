/**
 * A group actor driven exactly as the actor host drives it (one event at a time, time on the
 * event, numeric time, no sleeps), plus the members' side of the conversation: what each was
 * told last. Shared by the rule-by-rule unit tests of the group statechart.
 */
import { expect } from 'vitest';
import type { Actor } from 'xstate';
import { createActor } from 'xstate';
import { ManualClock } from '../../src/machines/clock.js';
import type { MembershipConfig } from '../../src/machines/config.js';
import { defaultMembershipConfig } from '../../src/machines/config.js';
import type { CommandResult, Effect, GroupContext } from '../../src/machines/context.js';
import { createGroupContext } from '../../src/machines/context.js';
import type { GroupEvent } from '../../src/machines/events.js';
import { groupMachine, restoreGroupSnapshot } from '../../src/machines/group-machine.js';
import { checkInvariants } from '../../src/machines/invariants.js';
import { newGroupState } from '../../src/machines/new-group.js';
import { expectedStateValue } from '../../src/machines/phases.js';
import type { HeartbeatReply, HeartbeatRequest } from '../../src/machines/protocol.js';
import type { GroupState } from '../../src/machines/types.js';

export const T0 = Date.UTC(2026, 0, 1);

export interface BeatOptions extends Partial<HeartbeatRequest> {
  /** Report every shard being revoked as DONE. */
  readonly done?: boolean;
  /** Report every shard being retired as DONE (consumed to its end). */
  readonly retired?: boolean;
}

/** A group actor plus the members' side of the conversation (what each was told last). */
export class Harness {
  readonly clock = new ManualClock(T0);
  readonly config: MembershipConfig;
  readonly replies = new Map<string, HeartbeatReply>();
  actor: Actor<typeof groupMachine>;

  constructor(
    options: { shardCount?: number; config?: Partial<MembershipConfig>; group?: GroupState } = {},
  ) {
    this.config = { ...defaultMembershipConfig, ...options.config };
    const group =
      options.group ??
      newGroupState(
        { streamPrefix: 'orders', consumerGroup: 'billing' },
        { shardCount: options.shardCount ?? 4, lifecycleId: 'life-1', now: this.clock.now() },
      );
    this.actor = this.start(group);
  }

  get ctx(): GroupContext {
    return this.actor.getSnapshot().context;
  }

  get effects(): readonly Effect[] {
    return this.ctx.effects;
  }

  /** Sends one event and checks what every step must satisfy. */
  send(event: GroupEvent): GroupContext {
    const before = this.ctx;
    this.actor.send(event);
    const after = this.ctx;
    expect(checkInvariants(before, after)).toEqual([]);
    expect(this.actor.getSnapshot().value).toEqual(expectedStateValue(after));
    return after;
  }

  heartbeat(request: HeartbeatRequest): CommandResult {
    const result = this.send({ type: 'HEARTBEAT', now: this.clock.now(), request }).result;
    if (result?.ok) this.replies.set(request.memberId, result.reply as HeartbeatReply);
    return result ?? { ok: false, code: 'INTERNAL', message: 'no result' };
  }

  /**
   * A heartbeat built from what the member was last told, as an honest consumer sends it: it
   * lists every shard it works on (assigned, revoking, retiring) and reports progress on the
   * revoked and retired ones (DRAINING unless `done`/`retired`). `options` override any field.
   */
  beat(memberId: string, options: BeatOptions = {}): HeartbeatReply {
    const result = this.attempt(memberId, options);
    if (!result.ok) throw new Error(`heartbeat failed: ${result.code} ${result.message}`);
    return result.reply as HeartbeatReply;
  }

  /** Like {@link beat}, but hands back the result, refusals included. */
  attempt(memberId: string, options: BeatOptions = {}): CommandResult {
    const last = this.replies.get(memberId);
    const { done, retired, ...overrides } = options;
    const revoking = last?.revokeShards ?? [];
    const retiring = last?.retireShards ?? [];
    return this.heartbeat({
      memberId,
      memberEpoch: last?.memberEpoch ?? 0,
      assignmentEpoch: last?.assignmentEpoch ?? 0,
      metadataVersion: last?.metadataVersion ?? 0,
      currentAssignments: [...(last?.assignedShards ?? []), ...revoking, ...retiring],
      revokeProgress: [
        ...revoking.map((shard) => ({ shard, state: done ? 'DONE' : 'DRAINING' }) as const),
        ...retiring.map((shard) => ({ shard, state: retired ? 'DONE' : 'DRAINING' }) as const),
      ],
      ...overrides,
    });
  }

  join(memberId: string, options: BeatOptions = {}): HeartbeatReply {
    return this.beat(memberId, {
      memberEpoch: 0,
      currentAssignments: [],
      revokeProgress: [],
      ...options,
    });
  }

  tick(): GroupContext {
    return this.send({ type: 'TICK', now: this.clock.now() });
  }

  /** Rebuilds the actor from the persisted group, as the host does after a restart. */
  restart(): void {
    this.actor.stop();
    this.actor = this.start(this.ctx.group);
  }

  /** Lets the debounce window pass and sweeps, so a pending recompute runs. */
  settleRecompute(): void {
    this.clock.advance(this.config.assignmentDebounceMs);
    this.tick();
  }

  private start(group: GroupState): Actor<typeof groupMachine> {
    const context = createGroupContext({
      group,
      config: this.config,
      now: this.clock.now(),
      storeRevision: 1,
    });
    const actor = createActor(groupMachine, {
      snapshot: restoreGroupSnapshot(context),
      input: context,
    });
    actor.start();
    expect(actor.getSnapshot().value).toEqual(expectedStateValue(actor.getSnapshot().context));
    return actor;
  }
}
