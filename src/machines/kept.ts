/**
 * A value derived from an immutable object, kept on that object as a non-enumerable
 * symbol-keyed property: a spread does not copy it (a changed copy never inherits a stale
 * answer), and keys, JSON and equality do not see it. Where a WeakMap would cost a hash
 * lookup (a cache miss at 10,000 groups) on every read, and keep its table at its peak size:
 * V8 does not shrink a WeakMap's table when its keys are collected.
 */
export function kept<V>(object: object, key: symbol): V | undefined {
  return (object as Record<symbol, V | undefined>)[key];
}

/** Keeps `value` on `object` under `key` (not on a frozen object: then it is only returned). */
export function keep<V>(object: object, key: symbol, value: V): V {
  if (Object.isExtensible(object)) {
    Object.defineProperty(object, key, { value, writable: true, configurable: true });
  }
  return value;
}
