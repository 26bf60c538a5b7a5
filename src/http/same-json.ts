/** A JSON text remembered with the value it reads back as, to tell whether another value has that text. */
export interface KnownJson {
  readonly json: string;
  /**
   * What `json` reads back as, kept to itself: `JSON.parse(json)`, or a copy of the value it was
   * made from (its frozen lists shared: they cannot change either).
   */
  readonly value: Readonly<Record<string, unknown>>;
  readonly keys: readonly string[];
  /**
   * Per key (as `keys`): whether its value is a frozen list of primitives, shared with the value
   * it was made from; such a list found again by identity reads the same without being read.
   */
  readonly shared?: readonly boolean[];
}

/**
 * Remembers the JSON text of a plain object: `json` is `JSON.stringify(source)` when `source` is
 * given. Then the value kept is a copy of `source`'s own fields, its lists kept as they are when
 * frozen (else copied), instead of `JSON.parse(json)`: a steady reply is built from the same
 * frozen shard lists heartbeat after heartbeat (kept per group, `machines/group-state.ts`), so
 * {@link hasJson} finds them identical without reading them, and nothing is parsed.
 */
export function knownJson(json: string, source?: object): KnownJson {
  if (source === undefined || 'toJSON' in source) {
    const value = JSON.parse(json) as Record<string, unknown>;
    return { json, value, keys: Object.keys(value) };
  }
  // No prototype: a key named `__proto__` is then a field like any other.
  const value = Object.create(null) as Record<string, unknown>;
  const keys = Object.keys(source);
  const shared = keys.map((key) => {
    const field = (source as Record<string, unknown>)[key];
    if (!Array.isArray(field)) {
      value[key] = field;
      return false;
    }
    const list = field as readonly unknown[];
    const frozen = Object.isFrozen(list);
    value[key] = frozen ? list : list.slice();
    return frozen && list.every((item) => typeof item !== 'object' || item === null);
  });
  return { json, value, keys, shared };
}

/**
 * Whether `JSON.stringify(next)` would give `known.json`, decided without serialising: `next`
 * has the same own keys in the same order, each with the same primitive value, or an array of
 * the same primitives (`null`, strings, numbers, booleans), or the very frozen list of primitives
 * it was remembered with. Anything else (a nested object, an object inside an array, `NaN`)
 * answers false, so a true answer is always right and a false one only costs a
 * `JSON.stringify`.
 */
export function hasJson(known: KnownJson, next: object): boolean {
  // An object with a toJSON (its own or inherited) serialises otherwise. A class instance
  // without one (the machine's replies) serialises as its own enumerable fields, as a plain
  // object does; an enumerable inherited key fails the `hasOwn` test below.
  if ('toJSON' in next) return false;
  const { value, keys } = known;
  let i = 0;
  for (const key in next) {
    if (!Object.hasOwn(next, key) || key !== keys[i]) return false;
    const a = value[key];
    const b = (next as Record<string, unknown>)[key];
    if (a !== b) {
      if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
      for (let j = 0; j < a.length; j++) {
        const x: unknown = a[j];
        if (x !== b[j] || (typeof x === 'object' && x !== null)) return false;
      }
    } else if (typeof a === 'object' && a !== null && known.shared?.[i] !== true) {
      return false;
    }
    i++;
  }
  return i === keys.length;
}
