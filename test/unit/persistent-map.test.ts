import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { INDEXED_SIZE, PersistentMap } from '../../src/collections/persistent-map.js';

/** FNV-1a, as the map hashes keys: used here only to find keys whose hashes collide. */
function fnv(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** Two keys with the same full 32-bit hash, found by brute force (a birthday search). */
function collidingPair(): [string, string] {
  const seen = new Map<number, string>();
  for (let i = 0; ; i++) {
    const key = `c-${i}`;
    const other = seen.get(fnv(key));
    if (other !== undefined) return [other, key];
    seen.set(fnv(key), key);
  }
}

const [COLLIDE_A, COLLIDE_B] = collidingPair();

/** Keys from a small universe (so sets and deletes meet) plus two that collide. */
const KEYS = [...Array.from({ length: 40 }, (_, i) => `member-${i}`), COLLIDE_A, COLLIDE_B];

type Op =
  | { readonly op: 'set'; readonly key: string; readonly value: number }
  | {
      readonly op: 'delete';
      readonly key: string;
    };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    op: fc.constant('set' as const),
    key: fc.constantFrom(...KEYS),
    value: fc.integer({ min: 0, max: 3 }),
  }),
  fc.record({ op: fc.constant('delete' as const), key: fc.constantFrom(...KEYS) }),
);

/** Values are boxed so that "the same value" means the same object, as the map compares them. */
const boxes = [0, 1, 2, 3].map((n) => ({ n }));

function apply(
  map: PersistentMap<{ n: number }>,
  model: Map<string, { n: number }>,
  op: Op,
): PersistentMap<{ n: number }> {
  if (op.op === 'set') {
    model.set(op.key, boxes[op.value]!);
    return map.set(op.key, boxes[op.value]!);
  }
  model.delete(op.key);
  return map.delete(op.key);
}

function sortedEntries<V>(entries: Iterable<readonly [string, V]>): Array<[string, V]> {
  return [...entries].map(([k, v]): [string, V] => [k, v]).sort(([a], [b]) => (a < b ? -1 : 1));
}

describe('PersistentMap', () => {
  it('the brute-force search found two distinct keys of one hash', () => {
    expect(COLLIDE_A).not.toBe(COLLIDE_B);
    expect(fnv(COLLIDE_A)).toBe(fnv(COLLIDE_B));
  });

  it('holds what a Map holds after any sequence of sets and deletes', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 200 }), (ops) => {
        const model = new Map<string, { n: number }>();
        let map = PersistentMap.empty<{ n: number }>();
        for (const op of ops) {
          map = apply(map, model, op);
          expect(map.size).toBe(model.size);
        }
        for (const key of KEYS) {
          expect(map.has(key)).toBe(model.has(key));
          expect(map.get(key)).toBe(model.get(key));
        }
        expect(sortedEntries(map.entries())).toEqual(sortedEntries(model));
        expect(sortedEntries(Object.entries(map.toRecord()))).toEqual(sortedEntries(model));
        expect(map.keys().length).toBe(model.size);
        expect(map.values().length).toBe(model.size);
      }),
      { numRuns: 300 },
    );
  });

  it('reads what a Map holds at any point, whether it answers from the trie or from its index', () => {
    // Enough keys for the index (INDEXED_SIZE) and the two that collide; reads come in bursts
    // long enough to build it, between sets and deletes that derive new maps from indexed ones.
    const keys = [
      ...Array.from({ length: INDEXED_SIZE + 16 }, (_, i) => `member-${i}`),
      COLLIDE_A,
      COLLIDE_B,
    ];
    const step = fc.oneof(
      fc.record({
        op: fc.constant('set' as const),
        key: fc.constantFrom(...keys),
        value: fc.integer({ min: 0, max: 3 }),
      }),
      fc.record({ op: fc.constant('delete' as const), key: fc.constantFrom(...keys) }),
      fc.record({ op: fc.constant('read' as const), times: fc.integer({ min: 1, max: 3 }) }),
    );
    fc.assert(
      fc.property(fc.array(step, { maxLength: 120 }), (ops) => {
        const model = new Map<string, { n: number }>();
        keys.forEach((key, i) => model.set(key, boxes[i % 4]!));
        let map = PersistentMap.from(model);
        for (const op of ops) {
          if (op.op === 'read') {
            for (let round = 0; round < op.times; round++) {
              for (const key of keys) {
                expect(map.get(key)).toBe(model.get(key));
                expect(map.has(key)).toBe(model.has(key));
              }
            }
            // A map of INDEXED_SIZE or more, read in full, answers from its index from then on.
            if (map.size >= INDEXED_SIZE) expect(map.indexed).toBe(true);
          } else map = apply(map, model, op);
          expect(map.size).toBe(model.size);
        }
        for (const key of [...keys, 'missing']) {
          expect(map.get(key)).toBe(model.get(key));
          expect(map.has(key)).toBe(model.has(key));
        }
        expect(sortedEntries(map.entries())).toEqual(sortedEntries(model));
      }),
      { numRuns: 150 },
    );
  });

  it('never changes a map it was derived from', () => {
    fc.assert(
      fc.property(
        fc.array(opArb, { maxLength: 60 }),
        fc.array(opArb, { maxLength: 60 }),
        (a, b) => {
          const model = new Map<string, { n: number }>();
          let map = PersistentMap.empty<{ n: number }>();
          for (const op of a) map = apply(map, model, op);
          const frozen = sortedEntries(map.entries());
          let derived = map;
          for (const op of b) derived = apply(derived, new Map(), op);
          expect(sortedEntries(map.entries())).toEqual(frozen);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('has one shape per content: same iteration order and equal however it was built', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 200 }), (ops) => {
        const model = new Map<string, { n: number }>();
        let map = PersistentMap.empty<{ n: number }>();
        for (const op of ops) map = apply(map, model, op);
        const rebuilt = PersistentMap.from(sortedEntries(model).reverse());
        expect(rebuilt.keys()).toEqual(map.keys());
        expect(rebuilt).toEqual(map);
      }),
      { numRuns: 300 },
    );
  });

  it('diff reports exactly the keys whose values are not the same object', () => {
    fc.assert(
      fc.property(
        fc.array(opArb, { maxLength: 120 }),
        fc.array(opArb, { maxLength: 30 }),
        (a, b) => {
          const beforeModel = new Map<string, { n: number }>();
          let before = PersistentMap.empty<{ n: number }>();
          for (const op of a) before = apply(before, beforeModel, op);
          const afterModel = new Map(beforeModel);
          let after = before;
          for (const op of b) after = apply(after, afterModel, op);

          const expected: Array<[string, unknown, unknown]> = [];
          for (const key of new Set([...beforeModel.keys(), ...afterModel.keys()])) {
            if (beforeModel.get(key) !== afterModel.get(key))
              expected.push([key, beforeModel.get(key), afterModel.get(key)]);
          }
          const reported: Array<[string, unknown, unknown]> = [];
          PersistentMap.diff(before, after, (key, was, is) => reported.push([key, was, is]));
          const byKey = (x: [string, unknown, unknown], y: [string, unknown, unknown]) =>
            x[0] < y[0] ? -1 : 1;
          expect(reported.sort(byKey)).toEqual(expected.sort(byKey));
          // Between two unrelated maps of the same content, nothing either.
          const none: string[] = [];
          PersistentMap.diff(after, PersistentMap.from(afterModel), (key) => none.push(key));
          expect(none).toEqual([]);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('stays right at thousands of keys (deep branches), and diff finds the one change', () => {
    const model = new Map<string, number>();
    let map = PersistentMap.empty<number>();
    for (let i = 0; i < 6000; i++) {
      map = map.set(`joiner-${i}`, i);
      model.set(`joiner-${i}`, i);
    }
    for (let i = 0; i < 6000; i += 3) {
      map = map.delete(`joiner-${i}`);
      model.delete(`joiner-${i}`);
    }
    expect(map.size).toBe(model.size);
    for (let i = 0; i < 6000; i++) expect(map.get(`joiner-${i}`)).toBe(model.get(`joiner-${i}`));
    expect(PersistentMap.from(model)).toEqual(map);
    const changed: string[] = [];
    PersistentMap.diff(map, map.set('joiner-1', -1).delete('joiner-2').set('new', 0), (key) =>
      changed.push(key),
    );
    expect(changed.sort()).toEqual(['joiner-1', 'joiner-2', 'new']);
  });

  it('returns the very map for a set of the value it holds and a delete of a missing key', () => {
    const value = { n: 1 };
    const map = PersistentMap.from({ a: value, [COLLIDE_A]: value, [COLLIDE_B]: value });
    expect(map.set('a', value)).toBe(map);
    expect(map.set(COLLIDE_B, value)).toBe(map);
    expect(map.delete('missing')).toBe(map);
    expect(map.set('a', { n: 1 })).not.toBe(map);
    expect(map.delete(COLLIDE_A).delete(COLLIDE_B).delete('a')).toBe(PersistentMap.empty());
  });

  it('a map asked get as often as it has entries indexes them and answers the same from the index', () => {
    const model = new Map<string, number>();
    for (let i = 0; i < INDEXED_SIZE + 10; i++) model.set(`member-${i}`, i);
    model.set(COLLIDE_A, -1).set(COLLIDE_B, -2);
    const map = PersistentMap.from(model);
    const small = PersistentMap.from({ a: 1, b: 2 });
    const keys = [...model.keys()];
    // `has` alone never builds the index (the invariant checks ask it once per shard).
    for (let round = 0; round < 3; round++) for (const key of model.keys()) map.has(key);
    expect(map.indexed).toBe(false);
    const ask = (m: PersistentMap<number>, key: string) => [m.get(key), m.has(key)];
    // Before the index and after it, every key and a missing one read the same.
    for (let round = 0; round < 3; round++) {
      for (const key of keys) expect(ask(map, key)).toEqual([model.get(key), true]);
      expect(ask(map, 'missing')).toEqual([undefined, false]);
      expect(ask(small, 'a')).toEqual([1, true]);
    }
    expect(map.indexed).toBe(true);
    // Below the threshold, no index however often it is read.
    expect(small.indexed).toBe(false);
    // A map derived from an indexed one starts without one, and reads what it holds.
    const derived = map.set('member-0', 100).delete(COLLIDE_A).set('new', 7);
    expect(derived.indexed).toBe(false);
    expect([derived.get('member-0'), derived.get(COLLIDE_A), derived.get('new')]).toEqual([
      100,
      undefined,
      7,
    ]);
    expect(map.get('member-0')).toBe(0);
    expect(map.get('new')).toBeUndefined();
    expect(derived).not.toEqual(map);
    expect(PersistentMap.from(model)).toEqual(map);
  });

  it('serialises as a plain record', () => {
    const map = PersistentMap.from({ b: 2, a: 1 });
    expect(JSON.parse(JSON.stringify({ members: map }))).toEqual({ members: { a: 1, b: 2 } });
    expect(map).not.toEqual(PersistentMap.from({ a: 1 }));
    expect(map).not.toEqual(PersistentMap.from({ a: 1, b: 3 }));
  });
});
