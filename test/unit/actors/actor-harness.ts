/**
 * A GroupHost on a fault-injecting store and a manual clock, with no HTTP and no Redis: the
 * actor layer on its own. `ownership` may be replaced (see {@link TestOwnership}).
 */
import { TurnBudget } from '../../../src/actors/turn-budget.js';
import { composeHost } from '../../../src/actors/compose-host.js';
import { GroupHost } from '../../../src/actors/group-host.js';
import type { Ownership, OwnerOf } from '../../../src/actors/group-ownership.js';
import { loadSettings } from '../../../src/config/load.js';
import type { Settings } from '../../../src/config/settings.js';
import { ManualClock } from '../../../src/machines/clock.js';
import type { HeartbeatReply, HeartbeatRequest } from '../../../src/machines/protocol.js';
import { groupId, type GroupRef } from '../../../src/machines/types.js';
import type { StoredGroup } from '../../../src/store/store.js';
import { createLogger } from '../../../src/observability/logger.js';
import { Metrics } from '../../../src/observability/metrics.js';
import { FaultyStore } from '../../support/faulty-store.js';
import { joinBody } from '../../support/members.js';

export const T0 = Date.UTC(2026, 0, 1);
export const REF: GroupRef = { streamPrefix: 'orders', consumerGroup: 'billing' };

export function testSettings(): Settings {
  return loadSettings({
    env: {},
    overrides: { 'store.type': 'memory', 'membership.session-timeout': 10_000 },
  });
}

export const silentLogger = () => createLogger({ level: 'error', format: 'text', silent: true });

export interface ActorRig {
  readonly host: GroupHost;
  readonly faulty: FaultyStore;
  readonly clock: ManualClock;
  readonly metrics: Metrics;
  readonly settings: Settings;
}

/**
 * The rigs run a batch without cutting it by real time (the replica's turn budget): time here
 * is a manual clock, and a step that took over 1 ms on a loaded machine would add a turn of the
 * event loop where a test waits for one. The budget has its own tests (committer.test.ts).
 */
const DETERMINISTIC_BUDGET_MS = Number.POSITIVE_INFINITY;

export function actorRig(
  options: { ownership?: (faulty: FaultyStore) => Ownership; storeKind?: 'memory' | 'redis' } = {},
): ActorRig {
  const faulty = new FaultyStore(options.storeKind ?? 'memory');
  const clock = new ManualClock(T0);
  const metrics = new Metrics();
  const settings = testSettings();
  const host = new GroupHost({
    store: faulty.store,
    settings,
    clock,
    metrics,
    logger: silentLogger(),
    replicaId: 'replica-a',
    turnBudget: new TurnBudget(DETERMINISTIC_BUDGET_MS),
    ...(options.ownership ? { ownership: options.ownership(faulty) } : {}),
  });
  return { host, faulty, clock, metrics, settings };
}

/** A first heartbeat of a new member. */
export function joinRequest(memberId: string): HeartbeatRequest {
  return joinBody(memberId, { revokeProgress: [] });
}

/** The steady reply the host gives at once (its ticket's), or null. */
export function steadyReply(
  host: GroupHost,
  ref: GroupRef,
  request: HeartbeatRequest,
): HeartbeatReply | null {
  return host.steadyTicket(ref, request)?.reply ?? null;
}

/** The next heartbeat of a member, from what it was told last. */
export function nextRequest(memberId: string, last: HeartbeatReply): HeartbeatRequest {
  return {
    memberId,
    memberEpoch: last.memberEpoch,
    assignmentEpoch: last.assignmentEpoch,
    metadataVersion: last.metadataVersion,
    currentAssignments: last.assignedShards,
    revokeProgress: [],
  };
}

/**
 * An ownership layer driven by the test: who owns which group, whether the lease allows
 * serving, and a lease loss on demand. Claims go to the store as the single replica's do.
 */
export class TestOwnership implements Ownership {
  readonly replicaId = 'replica-a';
  readonly owners = new Map<string, string>();
  readonly unservable = new Set<string>();
  readonly log: string[] = [];
  private lost: (ref: GroupRef) => void = () => undefined;

  constructor(private readonly faulty: FaultyStore) {}

  ownerOf(ref: GroupRef): OwnerOf {
    const owner = this.owners.get(groupId(ref)) ?? this.replicaId;
    return owner === this.replicaId ? { self: true } : { self: false, owner };
  }

  acquire(ref: GroupRef): Promise<void> {
    this.log.push(`acquire ${groupId(ref)}`);
    return Promise.resolve();
  }

  claim(ref: GroupRef): Promise<StoredGroup> {
    this.log.push(`claim ${groupId(ref)}`);
    return this.faulty.store.claimGroup(ref, null);
  }

  mayServe(ref: GroupRef): boolean {
    return !this.unservable.has(groupId(ref));
  }

  release(ref: GroupRef): Promise<void> {
    this.log.push(`release ${groupId(ref)}`);
    return Promise.resolve();
  }

  onLost(drop: (ref: GroupRef) => void): void {
    this.lost = drop;
  }

  /** The lease of `ref` is lost and another replica now owns it. */
  lose(ref: GroupRef, newOwner: string): void {
    this.owners.set(groupId(ref), newOwner);
    this.lost(ref);
  }
}

/** The host's parts wired as in production, to drive one of them on its own. */
export function partsRig(
  options: { storeKind?: 'memory' | 'redis'; budgetMs?: number; turnBudget?: TurnBudget } = {},
) {
  const faulty = new FaultyStore(options.storeKind ?? 'memory');
  const clock = new ManualClock(T0);
  const metrics = new Metrics();
  const parts = composeHost({
    store: faulty.store,
    settings: testSettings(),
    clock,
    metrics,
    logger: silentLogger(),
    replicaId: 'replica-a',
    turnBudget: options.turnBudget ?? new TurnBudget(options.budgetMs ?? DETERMINISTIC_BUDGET_MS),
  });
  return { ...parts, faulty, clock, metrics };
}
