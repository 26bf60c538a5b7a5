/**
 * What consumers report about their own work, and the checks the SDK tests run on it: every
 * sent key processed, duplicates counted, and no shard processed by two consumers at once.
 */
import { readFileSync } from 'node:fs';

/**
 * The JSON lines of a log a child process appends to (none when the file is not there yet); a
 * line cut short by a kill is left out.
 */
export function jsonLines<T>(file: string): T[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  return text.split('\n').flatMap((line) => {
    try {
      return line.length > 0 ? [JSON.parse(line) as T] : [];
    } catch {
      return [];
    }
  });
}

/** What a consumer child process (test/e2e/consumer-process.ts) notes in its events log. */
export interface ConsumerEvent {
  readonly at: number;
  readonly event: 'started' | 'assigned' | 'revoked' | 'fenced' | 'error';
  readonly shards?: number[];
  readonly reason?: string;
}

/** The shards a consumer holds, from its events. */
export function heldShards(events: readonly ConsumerEvent[]): Set<number> {
  const held = new Set<number>();
  for (const e of events) {
    if (e.event === 'assigned') for (const s of e.shards ?? []) held.add(s);
    if (e.event === 'revoked') for (const s of e.shards ?? []) held.delete(s);
    if (e.event === 'fenced') held.clear();
  }
  return held;
}

/** One message as one consumer processed it (handler start and end, ms since epoch). */
export interface Processed {
  readonly consumer: string;
  readonly shard: number;
  readonly key: string;
  readonly start: number;
  readonly end: number;
}

/** Two consumers working on one shard at the same time. */
export interface Overlap {
  readonly shard: number;
  readonly first: Processed;
  readonly second: Processed;
}

/** Keys sent but never processed (the lost messages), in `sent` order. */
export function lostKeys(sent: Iterable<string>, processed: readonly Processed[]): string[] {
  const seen = new Set(processed.map((p) => p.key));
  return [...sent].filter((key) => !seen.has(key));
}

/** How many processings beyond the first each key had, summed. */
export function duplicateCount(processed: readonly Processed[]): number {
  return processed.length - new Set(processed.map((p) => p.key)).size;
}

/**
 * Pairs of handler runs on one shard by different consumers whose intervals intersect. The
 * protocol drains a revoked shard before the next owner is granted it, so with handlers that
 * are never abandoned there must be none.
 */
export function overlaps(processed: readonly Processed[]): Overlap[] {
  const byShard = new Map<number, Processed[]>();
  for (const p of processed) {
    const list = byShard.get(p.shard) ?? [];
    list.push(p);
    byShard.set(p.shard, list);
  }
  const found: Overlap[] = [];
  for (const [shard, list] of byShard) {
    list.sort((a, b) => a.start - b.start);
    // Sweep: the run that ends last so far, per consumer, is the one a newcomer can collide with.
    let latest: Processed | null = null;
    for (const p of list) {
      if (latest && latest.consumer !== p.consumer && p.start < latest.end) {
        found.push({ shard, first: latest, second: p });
      }
      if (!latest || p.end > latest.end) latest = p;
    }
  }
  return found;
}

/**
 * A consumer handler that records each message it is given in `log` as `consumer` processed
 * it, yielding once in between so that a handler run has a start and an end.
 */
export function recordingHandler(
  log: Processed[],
  consumer: string,
): (message: { readonly shard: number; readonly key?: string | null }) => Promise<void> {
  return async (message) => {
    const start = Date.now();
    await new Promise((resolve) => setImmediate(resolve));
    log.push({ consumer, shard: message.shard, key: message.key!, start, end: Date.now() });
  };
}
