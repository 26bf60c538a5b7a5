import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { assignTargets } from '../../src/machines/assignor.js';

function countsOf(
  targets: ReadonlyMap<number, string>,
  members: readonly string[],
): Map<string, number> {
  const counts = new Map<string, number>(members.map((m) => [m, 0]));
  for (const member of targets.values()) counts.set(member, (counts.get(member) ?? 0) + 1);
  return counts;
}

function moved(
  before: ReadonlyMap<number, string | null>,
  after: ReadonlyMap<number, string>,
): number[] {
  return [...after]
    .filter(([shard, m]) => before.get(shard) != null && before.get(shard) !== m)
    .map(([s]) => s);
}

const members = (n: number) =>
  Array.from({ length: n }, (_, i) => `m-${String(i).padStart(2, '0')}`);

describe('every member ends within ±1 shard of the mean', () => {
  it('splits 10 shards over 3 members as 4/3/3', () => {
    const targets = assignTargets({ shardCount: 10, members: members(3), current: new Map() });
    expect([...countsOf(targets, members(3)).values()].sort()).toEqual([3, 3, 4]);
    expect([...targets.keys()].sort((a, b) => a - b)).toEqual([...Array(10).keys()]);
  });

  it('leaves members without shards when there are more members than shards', () => {
    const targets = assignTargets({ shardCount: 2, members: members(5), current: new Map() });
    expect(targets.size).toBe(2);
    expect(new Set(targets.values()).size).toBe(2);
  });

  it('assigns nothing when there are no members', () => {
    expect(
      assignTargets({ shardCount: 8, members: [], current: new Map([[0, 'gone']]) }).size,
    ).toBe(0);
  });
});

describe('a member keeps every shard it can keep; moves are the minimum the bound needs', () => {
  it('adding a fourth member to 12 shards moves exactly ⌊12/4⌋ = 3 shards, all to it', () => {
    const before = assignTargets({ shardCount: 12, members: members(3), current: new Map() });
    const after = assignTargets({ shardCount: 12, members: members(4), current: before });
    const moves = moved(before, after);
    expect(moves).toHaveLength(3);
    for (const shard of moves) expect(after.get(shard)).toBe('m-03');
  });

  it('removing a member moves only the shards it had', () => {
    const before = assignTargets({ shardCount: 12, members: members(4), current: new Map() });
    const gone = 'm-01';
    const after = assignTargets({
      shardCount: 12,
      members: members(4).filter((m) => m !== gone),
      current: before,
    });
    for (const [shard, owner] of before) {
      if (owner !== gone) expect(after.get(shard)).toBe(owner);
    }
  });

  it('gives the +1 to the members already holding more, so 7 shards held 4/3 stay put', () => {
    const current = new Map<number, string>([
      [0, 'm-01'],
      [1, 'm-01'],
      [2, 'm-01'],
      [3, 'm-01'],
      [4, 'm-00'],
      [5, 'm-00'],
      [6, 'm-00'],
    ]);
    const after = assignTargets({ shardCount: 7, members: members(2), current });
    expect(moved(current, after)).toEqual([]);
  });

  it('hands unowned shards and preferences of non-members to those below quota', () => {
    const current = new Map<number, string | null>([
      [0, 'm-00'],
      [1, 'gone'],
      [2, null],
      [3, 'm-00'],
    ]);
    const after = assignTargets({ shardCount: 4, members: members(2), current });
    expect(after.get(0)).toBe('m-00');
    expect(after.get(3)).toBe('m-00');
    expect(after.get(1)).toBe('m-01');
    expect(after.get(2)).toBe('m-01');
  });
});

describe('moves already decided are kept where the new quotas allow (a recompute while moves are under way)', () => {
  // a holds all 12 shards and has not revoked yet; the last recompute (members a, b) aimed
  // 6..11 at b. Then c joins: quotas 4 each, a keeps 0..3, and 4..11 are handed out.
  const current = new Map(Array.from({ length: 12 }, (_, shard) => [shard, 'a']));
  const decided = new Map(Array.from({ length: 6 }, (_, i) => [6 + i, 'b']));
  const before = new Map(Array.from({ length: 12 }, (_, shard) => [shard, shard < 6 ? 'a' : 'b']));
  const changed = (after: ReadonlyMap<number, string>) =>
    [...after].filter(([shard, m]) => before.get(shard) !== m).map(([shard]) => shard);

  it('b keeps four of the six moves aimed at it; only what c needs is re-aimed', () => {
    const after = assignTargets({ shardCount: 12, members: ['a', 'b', 'c'], current, decided });
    expect([...after].filter(([, m]) => m === 'b').map(([s]) => s)).toEqual([6, 7, 8, 9]);
    expect(changed(after)).toEqual([4, 5, 10, 11]);
  });

  it('without them, the hand-out in id order re-aims six', () => {
    const after = assignTargets({ shardCount: 12, members: ['a', 'b', 'c'], current });
    expect(changed(after)).toEqual([4, 5, 8, 9, 10, 11]);
  });
});

describe('the assignment is deterministic', () => {
  it('does not depend on the order of members or of the preference map', () => {
    const current = new Map<number, string>([
      [5, 'm-02'],
      [1, 'm-00'],
      [3, 'm-02'],
    ]);
    const reversed = new Map([...current].reverse());
    const a = assignTargets({ shardCount: 9, members: members(4), current });
    const b = assignTargets({
      shardCount: 9,
      members: [...members(4)].reverse(),
      current: reversed,
    });
    expect([...b].sort(([x], [y]) => x - y)).toEqual([...a].sort(([x], [y]) => x - y));
  });
});

describe('property: balanced, sticky, minimal and deterministic for 1-20 members × 1-64 shards', () => {
  const scenario = fc
    .record({
      memberCount: fc.integer({ min: 1, max: 20 }),
      shardCount: fc.integer({ min: 1, max: 64 }),
    })
    .chain(({ memberCount, shardCount }) =>
      fc.record({
        memberCount: fc.constant(memberCount),
        shardCount: fc.constant(shardCount),
        // Preferences: a member, a departed member, or none; a few shards beyond the count.
        prefs: fc.array(
          fc.oneof(
            fc
              .integer({ min: 0, max: memberCount - 1 })
              .map((i) => members(memberCount)[i] ?? null),
            fc.constant('departed'),
            fc.constant(null),
          ),
          { minLength: shardCount + 3, maxLength: shardCount + 3 },
        ),
        // Moves already decided: they change only who gets the shards handed out.
        decided: fc.array(
          fc.oneof(
            fc
              .integer({ min: 0, max: memberCount - 1 })
              .map((i) => members(memberCount)[i] ?? null),
            fc.constant('departed'),
            fc.constant(null),
          ),
          { minLength: shardCount, maxLength: shardCount },
        ),
      }),
    );

  it('holds for every scenario', () => {
    fc.assert(
      fc.property(scenario, ({ memberCount, shardCount, prefs, decided }) => {
        const ids = members(memberCount);
        const current = new Map(prefs.map((p, shard) => [shard, p]));
        const targets = assignTargets({
          shardCount,
          members: ids,
          current,
          decided: new Map(decided.map((d, shard) => [shard, d])),
        });

        expect([...targets.keys()].sort((a, b) => a - b)).toEqual([...Array(shardCount).keys()]);
        const counts = countsOf(targets, ids);
        const low = Math.floor(shardCount / memberCount);
        for (const count of counts.values()) {
          expect(count).toBeGreaterThanOrEqual(low);
          expect(count).toBeLessThanOrEqual(Math.ceil(shardCount / memberCount));
        }

        const held = new Map<string, number>(ids.map((id) => [id, 0]));
        for (let shard = 0; shard < shardCount; shard++) {
          const p = current.get(shard);
          if (p != null && held.has(p)) held.set(p, (held.get(p) ?? 0) + 1);
        }
        let kept = 0;
        for (let shard = 0; shard < shardCount; shard++) {
          if (targets.get(shard) === current.get(shard)) kept++;
        }
        // Each member keeps min(held, its count); the +1s go to those holding more than ⌊n/m⌋.
        const heldValues = [...held.values()];
        const optimum =
          heldValues.reduce((sum, h) => sum + Math.min(h, low), 0) +
          Math.min(shardCount % memberCount, heldValues.filter((h) => h > low).length);
        expect(kept).toBe(optimum);
        for (const id of ids) {
          const keptByMember = [...targets].filter(
            ([s, m]) => m === id && current.get(s) === id,
          ).length;
          expect(keptByMember).toBe(Math.min(held.get(id) ?? 0, counts.get(id) ?? 0));
        }

        const again = assignTargets({
          shardCount,
          members: [...ids].reverse(),
          current: new Map([...current].reverse()),
          decided: new Map(
            decided.map((d, shard): [number, string | null] => [shard, d]).reverse(),
          ),
        });
        expect([...again].sort(([a], [b]) => a - b)).toEqual(
          [...targets].sort(([a], [b]) => a - b),
        );
      }),
      { numRuns: 300 },
    );
  });
});

/**
 * The assignor as it was before it became O(shards + members) (a sort of every member by its
 * holdings): replicas of different versions must compute the same targets from the same group.
 */
function assignTargetsBySortingEveryMember(input: {
  shardCount: number;
  members: readonly string[];
  current: ReadonlyMap<number, string | null>;
}): Map<number, string> {
  const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  const ids = [...new Set(input.members)].sort(compare);
  const result = new Map<number, string>();
  if (ids.length === 0 || input.shardCount === 0) return result;
  const held = new Map<string, number[]>(ids.map((id) => [id, []]));
  const free: number[] = [];
  for (let shard = 0; shard < input.shardCount; shard++) {
    const preferred = input.current.get(shard);
    const list = preferred == null ? undefined : held.get(preferred);
    if (list) list.push(shard);
    else free.push(shard);
  }
  const base = Math.floor(input.shardCount / ids.length);
  const extra = input.shardCount % ids.length;
  const count = (id: string) => held.get(id)?.length ?? 0;
  const byHoldings = [...ids].sort((a, b) => count(b) - count(a) || compare(a, b));
  const quota = new Map(byHoldings.map((id, rank) => [id, base + (rank < extra ? 1 : 0)]));
  const deficits: Array<[string, number]> = [];
  for (const id of ids) {
    const mine = held.get(id) ?? [];
    const q = quota.get(id) ?? base;
    for (const shard of mine.slice(0, q)) result.set(shard, id);
    free.push(...mine.slice(q));
    if (mine.length < q) deficits.push([id, q - mine.length]);
  }
  free.sort((a, b) => a - b);
  let next = 0;
  for (const [id, deficit] of deficits) {
    for (let i = 0; i < deficit; i++) {
      const shard = free[next++];
      if (shard !== undefined) result.set(shard, id);
    }
  }
  return result;
}

describe('property: the same targets as sorting every member by holdings', () => {
  it('holds for 1-300 members × 1-128 shards, with departed and missing preferences', () => {
    const scenario = fc
      .record({
        memberCount: fc.integer({ min: 1, max: 300 }),
        shardCount: fc.integer({ min: 1, max: 128 }),
      })
      .chain(({ memberCount, shardCount }) =>
        fc.record({
          ids: fc.constant(members(memberCount)),
          shardCount: fc.constant(shardCount),
          prefs: fc.array(
            fc.oneof(
              // Few holders (as after a burst of joins) as well as many.
              fc.integer({ min: 0, max: Math.min(memberCount - 1, 3) }),
              fc.integer({ min: 0, max: memberCount - 1 }),
              fc.constant(-1),
              fc.constant(-2),
            ),
            { minLength: shardCount, maxLength: shardCount + 3 },
          ),
        }),
      );
    fc.assert(
      fc.property(scenario, ({ ids, shardCount, prefs }) => {
        const current = new Map(
          prefs.map((p, shard) => [shard, p === -1 ? null : p === -2 ? 'departed' : ids[p]!]),
        );
        const input = { shardCount, members: ids, current };
        expect([...assignTargets(input)]).toEqual([...assignTargetsBySortingEveryMember(input)]);
      }),
      { numRuns: 300 },
    );
  });
});
