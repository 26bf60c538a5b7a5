/**
 * The deterministic sticky-uniform assignor (docs/protocol.md#assignment): every member ends within
 * ±1 shard of the mean, a member keeps every shard it can keep under that bound, and no more shards
 * move than the bound needs. Pure and deterministic: same input, same output, on every replica.
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
  /**
   * Second preference per shard: a move already decided (its target, where that is not the
   * member in `current`). A shard that must be handed out goes there first while that member
   * is short of its quota, so a recompute while moves are under way (a burst of joins, members
   * not yet done revoking) re-aims only what the new quotas need, not every pending move.
   */
  readonly decided?: ReadonlyMap<number, string | null>;
  /**
   * Shards no member may have (paused, docs/operations.md#pausing-consumption): they get no
   * target, and quotas are counted over the other shards.
   */
  readonly excluded?: ReadonlySet<number>;
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
 * and the unowned shards are handed out: first each to the member a decided move names, while
 * it is short of its quota, then the rest lowest shard first to members in id order.
 *
 * O(shards + members) but for sorting the members that hold shards (at most one per shard) and
 * the shards handed out: a burst of joins into a large group recomputes in a few milliseconds.
 */
export function assignTargets(input: AssignInput): Map<number, string> {
  const members = sortedUnique(input.members);
  const result = new Map<number, string>();
  const shardCount = Math.max(0, Math.floor(input.shardCount));
  if (members.length === 0 || shardCount === 0) return result;

  // The shards each member prefers to keep, lowest first, by its position in id order (found
  // once per preferred id, not per member: a large group has far more members than holders).
  const wanted = new Map<string, number[]>();
  const free: number[] = [];
  const excluded = input.excluded;
  let assignable = shardCount;
  for (let shard = 0; shard < shardCount; shard++) {
    if (excluded?.has(shard)) {
      assignable--;
      continue;
    }
    const preferred = input.current.get(shard);
    if (preferred == null) {
      free.push(shard);
      continue;
    }
    const list = wanted.get(preferred);
    if (list === undefined) wanted.set(preferred, [shard]);
    else list.push(shard);
  }
  const held: Array<number[] | undefined> = new Array<number[] | undefined>(members.length);
  const holders: number[] = [];
  for (const [id, shards] of wanted) {
    const i = positionOf(members, id);
    if (i < 0) {
      free.push(...shards);
    } else {
      held[i] = shards;
      holders.push(i);
    }
  }

  // The larger quota goes to the `extra` members first in (most held, then id) order: those
  // that hold shards, by holdings, then those that hold none, in id order.
  const base = Math.floor(assignable / members.length);
  const extra = assignable % members.length;
  const larger = new Uint8Array(members.length);
  holders.sort((a, b) => held[b]!.length - held[a]!.length || a - b);
  let given = 0;
  for (let k = 0; k < holders.length && given < extra; k++, given++) larger[holders[k]!] = 1;
  for (let i = 0; i < members.length && given < extra; i++) {
    if (held[i] === undefined) {
      larger[i] = 1;
      given++;
    }
  }

  const deficits: Array<[string, number]> = [];
  for (let i = 0; i < members.length; i++) {
    const id = members[i]!;
    const mine = held[i];
    const q = base + larger[i]!;
    const kept = mine === undefined ? 0 : Math.min(mine.length, q);
    for (let k = 0; k < kept; k++) result.set(mine![k]!, id);
    if (mine !== undefined) for (let k = kept; k < mine.length; k++) free.push(mine[k]!);
    if (kept < q) deficits.push([id, q - kept]);
  }

  free.sort((a, b) => a - b);
  const left = input.decided ? handOutDecided(free, input.decided, deficits, result) : free;
  let next = 0;
  for (const [id, deficit] of deficits) {
    for (let i = 0; i < deficit; i++) {
      const shard = left[next++];
      if (shard !== undefined) result.set(shard, id);
    }
  }
  return result;
}

/**
 * Gives each free shard to the member its decided move names while that member is short of
 * its quota (lowering its deficit in `deficits`); returns the free shards left, in order.
 */
function handOutDecided(
  free: readonly number[],
  decided: ReadonlyMap<number, string | null>,
  deficits: Array<[string, number]>,
  result: Map<number, string>,
): number[] {
  const short = new Map<string, [string, number]>(deficits.map((entry) => [entry[0], entry]));
  const left: number[] = [];
  for (const shard of free) {
    const id = decided.get(shard);
    const entry = id == null ? undefined : short.get(id);
    if (entry === undefined || entry[1] === 0) {
      left.push(shard);
      continue;
    }
    result.set(shard, entry[0]);
    entry[1]--;
  }
  return left;
}

/** The position of `id` in `sorted` (code-unit order), or -1. */
function positionOf(sorted: readonly string[], id: string): number {
  let low = 0;
  let high = sorted.length - 1;
  while (low <= high) {
    const mid = (low + high) >>> 1;
    const at = sorted[mid]!;
    if (at === id) return mid;
    if (at < id) low = mid + 1;
    else high = mid - 1;
  }
  return -1;
}
