/**
 * Periodic work over every group (the deadline sweep, the verify loop) in slices: between two
 * slices the event loop turns, so requests are answered in between and no turn of the loop
 * works through more than one slice, however many groups this replica holds
 * (docs/architecture.md#performance-rules).
 */

/** Calls `fn` on each item, `size` items per turn of the event loop. */
export async function forEachSlice<T>(
  items: readonly T[],
  size: number,
  fn: (item: T) => void,
): Promise<void> {
  for (let start = 0; start < items.length; start += size) {
    if (start > 0) await nextTurn();
    const end = Math.min(items.length, start + size);
    for (let i = start; i < end; i++) fn(items[i] as T);
  }
}

/** Resolves in the next turn of the event loop, after the I/O waiting now has been served. */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
