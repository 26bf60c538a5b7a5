import { describe, expect, it } from 'vitest';
import { LeaseOwnership, type Leases } from '../../../src/actors/ownership/lease-ownership.js';
import type { LeaseStatus } from '../../../src/actors/ownership/lease.js';
import { rendezvousOwner } from '../../../src/actors/ownership/rendezvous.js';
import { newGroupState } from '../../../src/machines/new-group.js';
import { groupId, type GroupRef } from '../../../src/machines/types.js';
import { MemoryStore } from '../../../src/store/memory-store.js';
import type { ReplicaRecord, StoredGroup } from '../../../src/store/store.js';

const A: ReplicaRecord = { id: 'replica-a', url: 'http://a:8080' };
const B: ReplicaRecord = { id: 'replica-b', url: 'http://b:8080' };

/** Leases held in memory, with a deadline the test moves (no Redis, no timers). */
class FakeLeases implements Leases {
  readonly held = new Map<string, { ref: GroupRef; status: LeaseStatus }>();
  now = 0;
  grant = true;
  acquire(ref: GroupRef): Promise<LeaseStatus | null> {
    if (!this.grant) return Promise.resolve(null);
    const status = { value: `lease-${groupId(ref)}`, acquiredAt: 0, renewedAt: 0, deadline: 800 };
    this.held.set(groupId(ref), { ref, status });
    return Promise.resolve(status);
  }
  status(ref: GroupRef): LeaseStatus | null {
    return this.held.get(groupId(ref))?.status ?? null;
  }
  mayServe(ref: GroupRef): boolean {
    const lease = this.held.get(groupId(ref));
    return lease !== undefined && this.now < lease.status.deadline;
  }
  servingCheck(ref: GroupRef): () => boolean {
    return () => this.mayServe(ref);
  }
  release(ref: GroupRef): Promise<void> {
    this.held.delete(groupId(ref));
    return Promise.resolve();
  }
  heldGroups(): GroupRef[] {
    return [...this.held.values()].map((h) => h.ref);
  }
}

/** A group that replica A owns among {A, B}, and one that B owns. */
function refsOwnedBy(): { ofA: GroupRef; ofB: GroupRef } {
  let ofA: GroupRef | null = null;
  let ofB: GroupRef | null = null;
  for (let i = 0; (ofA === null || ofB === null) && i < 100; i++) {
    const ref = { streamPrefix: 'orders', consumerGroup: `g${i}` };
    if (rendezvousOwner(ref, [A, B])?.id === A.id) ofA ??= ref;
    else ofB ??= ref;
  }
  if (!ofA || !ofB) throw new Error('no spread');
  return { ofA, ofB };
}

function rig(live: ReplicaRecord[] = [A, B]) {
  const store = new MemoryStore({ keyPrefix: 'test', auditMaxLen: 100 });
  const leases = new FakeLeases();
  const claims: Array<string | null> = [];
  const ownership = new LeaseOwnership({
    replicaId: A.id,
    live: () => live,
    leases,
    store: {
      ping: () => store.ping(),
      claimGroup: (ref, lease): Promise<StoredGroup> => {
        claims.push(lease);
        return store.claimGroup(ref, lease);
      },
    },
  });
  return { store, leases, ownership, claims, live };
}

describe('lease ownership: the rendezvous choice among live replicas owns a group', () => {
  it('names itself for its groups and the other replica for the rest', () => {
    const { ofA, ofB } = refsOwnedBy();
    const { ownership } = rig();
    expect(ownership.ownerOf(ofA)).toEqual({ self: true });
    expect(ownership.ownerOf(ofB)).toEqual({ self: false, owner: B.id });
    expect(ownership.urlOf(B.id)).toBe(B.url);
  });

  it('knows no owner before the registry lists anyone', () => {
    const { ofA } = refsOwnedBy();
    expect(rig([]).ownership.ownerOf(ofA)).toEqual({ self: false, owner: null });
  });

  it('follows every change of the live set, whichever owners it worked out before', () => {
    const { ofA, ofB } = refsOwnedBy();
    let live: ReplicaRecord[] = [A, B];
    const moving = new LeaseOwnership({
      replicaId: A.id,
      live: () => live,
      leases: new FakeLeases(),
      store: { ping: () => Promise.resolve(), claimGroup: () => Promise.reject(new Error('no')) },
    });
    expect(moving.ownerOf(ofB)).toEqual({ self: false, owner: B.id });
    // The owners' version (what the heartbeat fast path keeps an owner with) moves on with them.
    const versions = [moving.ownersVersion()];
    // A refresh with the same replicas (a new list): the same answers, the same version.
    live = [{ ...A }, { ...B, url: 'http://b:9090' }];
    expect(moving.ownerOf(ofA)).toEqual({ self: true });
    expect(moving.ownerOf(ofB)).toEqual({ self: false, owner: B.id });
    expect(moving.ownersVersion()).toBe(versions[0]);
    // B left: A owns everything.
    live = [A];
    versions.push(moving.ownersVersion());
    expect(moving.ownerOf(ofB)).toEqual({ self: true });
    // Nobody listed: no owner known. B alone: B owns everything.
    live = [];
    versions.push(moving.ownersVersion());
    expect(moving.ownerOf(ofA)).toEqual({ self: false, owner: null });
    live = [B];
    expect(moving.ownerOf(ofA)).toEqual({ self: false, owner: B.id });
    versions.push(moving.ownersVersion());
    expect(new Set(versions).size).toBe(4);
  });
});

describe('lease ownership: claim under the lease, serve only before its deadline', () => {
  it('claims with the value of the lease it holds', async () => {
    const { ofA } = refsOwnedBy();
    const { ownership, store, claims } = rig();
    await store.createGroup(newGroupState(ofA, { shardCount: 2, lifecycleId: 'l-1', now: 0 }));
    await ownership.acquire(ofA);
    const claimed = await ownership.claim(ofA);
    expect(claims).toEqual([`lease-${groupId(ofA)}`]);
    expect(claimed.fence).toBeGreaterThan(0);
  });

  it('a lease it cannot get (held elsewhere) is GROUP_MOVED, not a claim', async () => {
    const { ofA } = refsOwnedBy();
    const { ownership, leases, claims } = rig();
    leases.grant = false;
    await expect(ownership.acquire(ofA)).rejects.toMatchObject({ code: 'GROUP_MOVED' });
    await expect(ownership.claim(ofA)).rejects.toMatchObject({ code: 'GROUP_MOVED' });
    expect(claims).toEqual([]);
  });

  it('stops serving from memory at the lease deadline', async () => {
    const { ofA } = refsOwnedBy();
    const { ownership, leases } = rig();
    await ownership.acquire(ofA);
    leases.now = 799;
    expect(ownership.mayServe(ofA)).toBe(true);
    leases.now = 800;
    expect(ownership.mayServe(ofA)).toBe(false);
  });

  it('a lost lease drops the group through every handler', () => {
    const { ofA } = refsOwnedBy();
    const { ownership } = rig();
    const dropped: string[] = [];
    ownership.onLost((ref) => dropped.push(groupId(ref)));
    ownership.lost(ofA);
    expect(dropped).toEqual([groupId(ofA)]);
  });

  it('lists the groups it holds whose owner is now another replica (to hand over)', async () => {
    const { ofA, ofB } = refsOwnedBy();
    const live = [A, B];
    const { ownership } = rig(live);
    await ownership.acquire(ofA);
    await ownership.acquire(ofB); // e.g. taken while B was down
    expect(ownership.misplaced()).toEqual([ofB]);
  });
});
