/**
 * A map that keeps what was used recently, bounded: entries go into the current generation;
 * when it is full (entries, or characters of key), it becomes the previous one and the one
 * before is dropped. A hit in the previous generation moves the entry forward.
 *
 * With `rest`, a map that does not hold what is asked of it stops taking entries for a while:
 * when a generation fills with fewer than a quarter as many hits as entries (the first one after
 * it was made or rested excepted: first sightings fill it; more distinct keys cycle through
 * than it holds: 100,000 members' heartbeat bodies, docs/BENCHMARKS.md), the next
 * {@link REST_GENERATIONS} generations' worth of `set`s are skipped, then it tries again. Each
 * entry set and dropped before it is asked for again outlives a few young-generation GCs and
 * dies in the old generation, which a replica holding a large heap pays for in major GCs; an
 * entry not remembered costs only what remembering would have saved.
 */
export class RecentMap<V> {
  private current = new Map<string, V>();
  private previous = new Map<string, V>();
  private chars = 0;
  /** Hits since the current generation began. */
  private hits = 0;
  /** `set`s still to skip (resting after a generation that was mostly missed). */
  private resting = 0;
  /**
   * The generation filling now is the first since the map was made or rested: it was filled by
   * first sightings, not judged by its hits.
   */
  private first = true;

  constructor(
    private readonly maxEntries: number,
    private readonly maxChars: number,
    private readonly options: { readonly rest?: boolean } = {},
  ) {}

  get(key: string): V | undefined {
    const value = this.current.get(key);
    if (value !== undefined) {
      this.hits++;
      return value;
    }
    const old = this.previous.get(key);
    if (old !== undefined) {
      this.hits++;
      this.set(key, old);
    }
    return old;
  }

  set(key: string, value: V): void {
    if (this.resting > 0) {
      this.resting--;
      return;
    }
    if (this.current.size >= this.maxEntries || this.chars + key.length > this.maxChars) {
      const missed = !this.first && this.hits < this.current.size / 4;
      this.previous = this.current;
      this.current = new Map();
      this.chars = 0;
      this.hits = 0;
      this.first = false;
      if (missed && this.options.rest === true) {
        this.resting = REST_GENERATIONS * this.maxEntries;
        this.first = true;
        return;
      }
    }
    this.current.set(key, value);
    this.chars += key.length;
  }
}

/** How many generations' worth of `set`s a resting {@link RecentMap} skips. */
export const REST_GENERATIONS = 8;
