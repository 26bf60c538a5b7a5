/**
 * The deterministic sticky-uniform assignor of DESIGN.md §5: every member ends within ±1 shard
 * of the mean, a member keeps every shard it can keep under that bound, and no more shards move
 * than the bound needs. Pure and deterministic: same input, same output, on every replica.
 */

/** Input of {@link assignTargets}. */
export interface AssignInput {
  readonly shardCount: number;
  /** Live members; order and duplicates do not matter. */
  readonly members: readonly string[];
  /**
   * Sticky preference per shard: its current owner if assigned/revoking, else its current
   * target. Shards outside `0..shardCount-1` and preferences naming no member are ignored.
   */
  readonly current: ReadonlyMap<number, string | null>;
}

/** Code-unit order, so the result never depends on the process locale. */
export function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The ids without duplicates, in {@link compareIds} order (as given when they already are). */
function sortedUnique(ids: readonly string[]): readonly string[] {
  for (let i = 1; i < ids.length; i++) {
    if (!(ids[i - 1]! < ids[i]!)) return [...new Set(ids)].sort(compareIds);
  }
  return ids;
}

/**
 * Target owner of every shard `0..shardCount-1`; an empty map when there are no members.
 *
 * Quotas are ⌊n/m⌋ or ⌈n/m⌉. The members that get the larger quota are those that already hold
 * the most shards (ties by member id), which is what maximises the shards that stay put: a
 * member keeps min(held, quota) of its shards (its lowest-numbered ones), and only the surplus
 * and the unowned shards are handed out, lowest shard first, to members in id order.
 */
export function assignTargets(input: AssignInput): Map<number, string> {
  const members = sortedUnique(input.members);
  const result = new Map<number, string>();
  const shardCount = Math.max(0, Math.floor(input.shardCount));
  if (members.length === 0 || shardCount === 0) return result;

  const held = new Map<string, number[]>(members.map((id) => [id, []]));
  const free: number[] = [];
  for (let shard = 0; shard < shardCount; shard++) {
    const preferred = input.current.get(shard);
    const list = preferred == null ? undefined : held.get(preferred);
    if (list) list.push(shard);
    else free.push(shard);
  }

  const base = Math.floor(shardCount / members.length);
  const extra = shardCount % members.length;
  const byHoldings = [...members].sort(
    (a, b) => heldCount(held, b) - heldCount(held, a) || compareIds(a, b),
  );
  const quota = new Map(byHoldings.map((id, rank) => [id, base + (rank < extra ? 1 : 0)]));

  const deficits: Array<[string, number]> = [];
  for (const id of members) {
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

function heldCount(held: ReadonlyMap<string, readonly number[]>, id: string): number {
  return held.get(id)?.length ?? 0;
}
