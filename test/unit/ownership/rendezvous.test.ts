import { describe, expect, it } from 'vitest';
import { rendezvousOwner, rendezvousWeight } from '../../../src/actors/ownership/rendezvous.js';
import type { GroupRef } from '../../../src/machines/types.js';

const replicas = (...ids: string[]) => ids.map((id) => ({ id, url: `http://${id}:8080` }));
const groups: GroupRef[] = Array.from({ length: 3_000 }, (_, i) => ({
  streamPrefix: `stream-${i % 7}`,
  consumerGroup: `group-${i}`,
}));

function owners(live: ReturnType<typeof replicas>): string[] {
  return groups.map((group) => rendezvousOwner(group, live)?.id ?? 'none');
}

function counts(ids: readonly string[]): Map<string, number> {
  const result = new Map<string, number>();
  for (const id of ids) result.set(id, (result.get(id) ?? 0) + 1);
  return result;
}

describe('the owner of a group is the highest-weight live replica', () => {
  it('is the same on every replica: independent of the order of the live list', () => {
    const a = owners(replicas('r-1', 'r-2', 'r-3'));
    const b = owners(replicas('r-3', 'r-1', 'r-2'));
    expect(b).toEqual(a);
    const group = groups[0] as GroupRef;
    const owner = rendezvousOwner(group, replicas('r-1', 'r-2', 'r-3'));
    for (const other of ['r-1', 'r-2', 'r-3'].filter((id) => id !== owner?.id)) {
      expect(rendezvousWeight(owner?.id ?? '', group)).toBeGreaterThan(
        rendezvousWeight(other, group),
      );
    }
  });

  it('is null when no replica is live, and the only replica when there is one', () => {
    expect(rendezvousOwner(groups[0] as GroupRef, [])).toBeNull();
    expect(owners(replicas('solo')).every((id) => id === 'solo')).toBe(true);
  });

  it('spreads groups evenly: each of 3 replicas owns within 10% of a third', () => {
    const spread = counts(owners(replicas('replica-1', 'replica-2', 'replica-3')));
    expect([...spread.keys()].sort()).toEqual(['replica-1', 'replica-2', 'replica-3']);
    for (const owned of spread.values()) {
      expect(Math.abs(owned - 1_000)).toBeLessThan(100);
    }
  });
});

describe('a replica joining or leaving moves only the groups it wins or held', () => {
  const before = owners(replicas('replica-1', 'replica-2', 'replica-3'));

  it('a joining replica takes about its share, and only from the others onto itself', () => {
    const after = owners(replicas('replica-1', 'replica-2', 'replica-3', 'replica-4'));
    const moved = groups.map((_, i) => i).filter((i) => before[i] !== after[i]);
    for (const i of moved) expect(after[i]).toBe('replica-4');
    expect(Math.abs(moved.length - 750)).toBeLessThan(100);
  });

  it("a leaving replica's groups, and only those, move to the others", () => {
    const after = owners(replicas('replica-1', 'replica-3'));
    groups.forEach((_, i) => {
      if (before[i] === 'replica-2') expect(after[i]).not.toBe('replica-2');
      else expect(after[i]).toBe(before[i]);
    });
    const spread = counts(after);
    expect(Math.abs((spread.get('replica-1') ?? 0) - 1_500)).toBeLessThan(150);
  });
});
