/** A JSON text remembered with the value it reads back as, to tell whether another value has that text. */
export interface KnownJson {
  readonly json: string;
  /** `JSON.parse(json)`, kept to itself (nobody else holds it, so it cannot change). */
  readonly value: Readonly<Record<string, unknown>>;
  readonly keys: readonly string[];
}

/** Remembers the JSON text of a plain object. */
export function knownJson(json: string): KnownJson {
  const value = JSON.parse(json) as Record<string, unknown>;
  return { json, value, keys: Object.keys(value) };
}

/**
 * Whether `JSON.stringify(next)` would give `known.json`, decided without serialising: `next`
 * has the same own keys in the same order, each with the same primitive value, or an array of
 * the same primitives (`null`, strings, numbers, booleans). Anything else (a nested object, an
 * object inside an array, `NaN`, a key whose value is undefined) answers false, so a true answer
 * is always right and a false one only costs a `JSON.stringify`.
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
    } else if (typeof a === 'object' && a !== null) {
      return false;
    }
    i++;
  }
  return i === keys.length;
}
