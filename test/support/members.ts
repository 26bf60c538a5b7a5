import type { HeartbeatReply } from '../../src/machines/protocol.js';
import type { TestCoordinator } from './coordinator.js';

/**
 * A simulated consumer member over real HTTP: it remembers its epoch and what it owns, and
 * reports honestly (revoked shards DONE at once) unless told otherwise.
 */
export class SimulatedMember {
  epoch = 0;
  owned: number[] = [];
  assignmentEpoch = 0;
  metadataVersion = 0;
  last: HeartbeatReply | null = null;

  constructor(
    private readonly c: Pick<TestCoordinator, 'call'>,
    readonly memberId: string,
    private readonly streamPrefix: string,
    private readonly consumerGroup: string,
  ) {}

  /** One heartbeat; `revokeDone` false keeps revoking and retiring shards DRAINING (a stuck member). */
  async beat(options: { revokeDone?: boolean; epoch?: number } = {}): Promise<HeartbeatReply> {
    const revokeDone = options.revokeDone ?? true;
    // Shards to give up: revoked ones (drain) and retiring ones (consumed to the end).
    const revoking = [...(this.last?.revokeShards ?? []), ...(this.last?.retireShards ?? [])];
    const res = await this.c.call(
      'POST',
      `/coord/v1/consumer/streams/${this.streamPrefix}/groups/${this.consumerGroup}/heartbeat`,
      {
        user: 'consumer',
        body: {
          memberId: this.memberId,
          memberEpoch: options.epoch ?? this.epoch,
          assignmentEpoch: this.assignmentEpoch,
          metadataVersion: this.metadataVersion,
          currentAssignments: revokeDone
            ? this.owned.filter((s) => !revoking.includes(s))
            : this.owned,
          revokeProgress: revoking.map((shard) => ({
            shard,
            state: revokeDone ? 'DONE' : 'DRAINING',
          })),
        },
      },
    );
    if (res.status !== 200)
      throw new Error(`heartbeat of ${this.memberId} answered ${res.status}: ${await res.text()}`);
    const reply = (await res.json()) as HeartbeatReply;
    this.last = reply;
    if (reply.outcome === 'FENCED_MEMBER_EPOCH') {
      this.epoch = 0;
      this.owned = [];
    } else if (reply.outcome !== 'SYNC_METADATA') {
      this.epoch = reply.memberEpoch;
      this.owned = [...reply.assignedShards, ...reply.revokeShards, ...reply.retireShards].sort(
        (a, b) => a - b,
      );
    }
    this.assignmentEpoch = reply.assignmentEpoch;
    this.metadataVersion = reply.metadataVersion;
    return reply;
  }

  async leave(): Promise<HeartbeatReply> {
    return this.beat({ epoch: -1 });
  }
}

/**
 * The body of a first heartbeat: `memberId` joins with epoch 0 and reports nothing yet; `extra`
 * fields (such as `revokeProgress: []` or a session timeout) follow.
 */
export function joinBody<E extends object = object>(memberId: string, extra: E = {} as E) {
  return {
    memberId,
    memberEpoch: 0,
    assignmentEpoch: 0,
    metadataVersion: 0,
    currentAssignments: [] as number[],
    ...extra,
  };
}

/**
 * The body of a heartbeat that reports what `member` holds as it stands, with nothing being
 * revoked (for a request sent beside the member's own {@link SimulatedMember.beat}).
 */
export function heartbeatOf(member: SimulatedMember) {
  return {
    memberId: member.memberId,
    memberEpoch: member.epoch,
    assignmentEpoch: member.assignmentEpoch,
    metadataVersion: member.metadataVersion,
    currentAssignments: member.owned,
    revokeProgress: [],
  };
}
