import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { hasJson, knownJson } from '../../src/http/same-json.js';

/*
 * The steady reply's JSON is reused while the reply reads the same (src/http/same-json.ts): a
 * "same" answer must always mean the same text; a "different" one only costs a serialisation.
 */

const primitive = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.string(),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
  fc.constant(-0),
);
const value = fc.oneof(
  primitive,
  fc.array(fc.oneof(primitive, fc.object({ maxDepth: 1 }))),
  fc.object({ maxDepth: 1 }),
);
const flat = fc.dictionary(fc.string(), value, { maxKeys: 6 });
const REPLY = {
  outcome: 'OK',
  memberId: 'member-1',
  memberEpoch: 3,
  assignmentEpoch: 2,
  metadataVersion: 1,
  lifecycleId: 'l-1',
  shardCount: 4,
  assignedShards: [0, 1],
  revokeShards: [],
  retireShards: [],
  pendingShards: [],
  heartbeatIntervalMs: 3000,
};

describe('hasJson: whether a value has the JSON text remembered', () => {
  it('a "same" answer always means the same text', () => {
    let same = 0;
    // b: another value, or a copy of a (its lists copied), perhaps with one key changed.
    const pair = fc.oneof(
      fc.tuple(flat, flat),
      fc.tuple(flat, fc.option(fc.tuple(fc.string(), value))).map(([a, change]) => {
        const b: Record<string, unknown> = {};
        for (const [key, v] of Object.entries(a)) b[key] = Array.isArray(v) ? [...v] : v;
        if (change) b[change[0]] = change[1];
        return [a, b] as const;
      }),
    );
    fc.assert(
      fc.property(pair, ([a, b]) => {
        const json = JSON.stringify(a);
        if (hasJson(knownJson(json), b)) {
          same++;
          expect(JSON.stringify(b)).toBe(json);
        }
      }),
      { numRuns: 1500 },
    );
    // Copies that read the same come up often enough for the property to mean something.
    expect(same).toBeGreaterThan(10);
  });

  it('a reply that reads the same is recognised; any change of a field, order or list is not', () => {
    const known = knownJson(JSON.stringify(REPLY));
    expect(hasJson(known, { ...REPLY, assignedShards: [0, 1] })).toBe(true);
    expect(hasJson(known, { ...REPLY, memberEpoch: 4 })).toBe(false);
    expect(hasJson(known, { ...REPLY, assignedShards: [0, 2] })).toBe(false);
    expect(hasJson(known, { ...REPLY, revokeShards: [1] })).toBe(false);
    expect(hasJson(known, { ...REPLY, extra: 1 })).toBe(false);
    const { outcome, ...rest } = REPLY;
    expect(hasJson(known, { ...rest, outcome })).toBe(false);
    expect(hasJson(known, rest)).toBe(false);
    class Reply {
      constructor(readonly outcome: string) {}
      toJSON() {
        return {};
      }
    }
    expect(hasJson(knownJson('{"outcome":"OK"}'), new Reply('OK'))).toBe(false);
  });

  it('an instance of a class without toJSON (the machine builds replies so) is recognised', () => {
    class Reply {
      constructor(
        readonly outcome: string,
        readonly memberId: string,
        readonly assignedShards: readonly number[],
      ) {}
      describe() {
        return this.outcome;
      }
    }
    const known = knownJson(JSON.stringify(new Reply('OK', 'm-1', [0, 1])));
    expect(hasJson(known, new Reply('OK', 'm-1', [0, 1]))).toBe(true);
    expect(hasJson(known, new Reply('OK', 'm-1', [0, 2]))).toBe(false);
    expect(hasJson(known, new Reply('REVOKE_PENDING', 'm-1', [0, 1]))).toBe(false);
    // An enumerable inherited key would not be serialised: not taken for the same.
    const withInherited = Object.assign(Object.create({ extra: 1 }) as object, {
      outcome: 'OK',
      memberId: 'm-1',
      assignedShards: [0, 1],
    });
    expect(JSON.stringify(withInherited)).toBe(known.json);
    expect(hasJson(known, withInherited)).toBe(false);
    expect(hasJson(knownJson('{}'), Object.create(null) as object)).toBe(true);
  });

  it('the remembered value is its own: changing the object it came from changes nothing', () => {
    const reply = { ...REPLY, assignedShards: [0, 1] };
    const known = knownJson(JSON.stringify(reply));
    reply.assignedShards.push(2);
    expect(hasJson(known, reply)).toBe(false);
    expect(hasJson(known, { ...REPLY, assignedShards: [0, 1] })).toBe(true);
  });
});
