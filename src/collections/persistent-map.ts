/**
 * An immutable map from string keys to values with structural sharing (a hash array mapped trie):
 * `set` and `delete` return a new map that shares every untouched node with the old one, in
 * O(log₃₂ n), where a copy of a plain record costs O(n). A group's members live in one
 * (`GroupState.members`), so that a join, leave or expiry costs no copy of every member and the
 * host's write patch comes from {@link PersistentMap.diff}, which skips shared subtrees
 * (docs/architecture.md#performance-rules).
 *
 * The trie's shape is a function of its keys alone (a leaf sits at the shallowest level where its
 * hash is unique; entries of one full hash share a collision node, sorted by key; a branch holding
 * a single leaf collapses into it), so two maps with the same entries iterate in the same order
 * however they were built, and compare equal. That order is the hash order, not the key order:
 * callers that need sorted keys sort them (`memberIds`).
 */

const LEAF = 0;
const COLLISION = 1;
const BRANCH = 2;

/** A leaf: one entry and its key's hash. */
class Leaf<V> {
  readonly kind = LEAF;
  constructor(
    readonly hash: number,
    readonly key: string,
    readonly value: V,
  ) {}
}

/** Two or more entries whose keys have the same full hash, sorted by key. */
class Collision<V> {
  readonly kind = COLLISION;
  constructor(
    readonly hash: number,
    readonly leaves: readonly Leaf<V>[],
  ) {}
}

/** Children by the 5 hash bits of this level, present ones flagged in `bitmap`, in bit order. */
class Branch<V> {
  readonly kind = BRANCH;
  constructor(
    readonly bitmap: number,
    readonly children: readonly TrieNode<V>[],
  ) {}
}

type TrieNode<V> = Leaf<V> | Collision<V> | Branch<V>;

const BITS = 5;
const MASK = 31;

/**
 * The fewest entries for which a map builds a native index of them (see `PersistentMap.get`):
 * below it the trie is one or two levels deep, and an index would cost memory (10,000 groups of
 * 10 members on a replica) for little.
 */
export const INDEXED_SIZE = 64;

/** FNV-1a over the UTF-16 code units: cheap, and spreads ids like `member-0001` well enough. */
function hashOf(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

function popcount(x: number): number {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  x = (x + (x >>> 4)) & 0x0f0f0f0f;
  return Math.imul(x, 0x01010101) >>> 24;
}

function slot(hash: number, shift: number): number {
  return 1 << ((hash >>> shift) & MASK);
}

const EMPTY_ROOT = new Branch<never>(0, []);

/** Set by `insert` and `remove`: whether the last change added or removed an entry. */
let sizeChange = 0;

function insert<V>(
  node: TrieNode<V>,
  shift: number,
  hash: number,
  key: string,
  value: V,
): TrieNode<V> {
  if (node.kind === BRANCH) {
    const bit = slot(hash, shift);
    const index = popcount(node.bitmap & (bit - 1));
    if ((node.bitmap & bit) === 0) {
      sizeChange = 1;
      const children = node.children.slice();
      children.splice(index, 0, new Leaf(hash, key, value));
      return new Branch(node.bitmap | bit, children);
    }
    const child = node.children[index]!;
    const updated = insert(child, shift + BITS, hash, key, value);
    if (updated === child) return node;
    const children = node.children.slice();
    children[index] = updated;
    return new Branch(node.bitmap, children);
  }
  if (node.kind === LEAF) {
    if (node.key === key) return node.value === value ? node : new Leaf(hash, key, value);
    sizeChange = 1;
    const leaf = new Leaf(hash, key, value);
    if (node.hash === hash) {
      return new Collision(hash, node.key < key ? [node, leaf] : [leaf, node]);
    }
    return split(node, leaf, shift);
  }
  if (node.hash !== hash) {
    sizeChange = 1;
    return split(node, new Leaf(hash, key, value), shift);
  }
  const at = node.leaves.findIndex((leaf) => leaf.key >= key);
  const leaves = node.leaves.slice();
  if (at >= 0 && leaves[at]!.key === key) {
    if (leaves[at]!.value === value) return node;
    leaves[at] = new Leaf(hash, key, value);
  } else {
    sizeChange = 1;
    leaves.splice(at < 0 ? leaves.length : at, 0, new Leaf(hash, key, value));
  }
  return new Collision(hash, leaves);
}

/** The branch holding two single-hash nodes of different hashes, at the level of `shift`. */
function split<V>(a: Leaf<V> | Collision<V>, b: Leaf<V>, shift: number): Branch<V> {
  const bitA = slot(a.hash, shift);
  const bitB = slot(b.hash, shift);
  if (bitA === bitB) return new Branch(bitA, [split(a, b, shift + BITS)]);
  // Unsigned: the bit of index 31 is negative as an int32.
  return new Branch(bitA | bitB, bitA >>> 0 < bitB >>> 0 ? [a, b] : [b, a]);
}

/** The node without `key`; null when nothing is left of it. */
function remove<V>(
  node: TrieNode<V>,
  shift: number,
  hash: number,
  key: string,
): TrieNode<V> | null {
  if (node.kind === LEAF) {
    if (node.key !== key) return node;
    sizeChange = -1;
    return null;
  }
  if (node.kind === COLLISION) {
    if (node.hash !== hash) return node;
    const at = node.leaves.findIndex((leaf) => leaf.key === key);
    if (at < 0) return node;
    sizeChange = -1;
    const leaves = node.leaves.filter((_, i) => i !== at);
    return leaves.length === 1 ? leaves[0]! : new Collision(hash, leaves);
  }
  const bit = slot(hash, shift);
  if ((node.bitmap & bit) === 0) return node;
  const index = popcount(node.bitmap & (bit - 1));
  const child = node.children[index]!;
  const updated = remove(child, shift + BITS, hash, key);
  if (updated === child) return node;
  if (updated === null) {
    if (node.children.length === 1) return null;
    const children = node.children.filter((_, i) => i !== index);
    // A branch left with one leaf (or collision) collapses into it: the shape stays canonical.
    if (shift > 0 && children.length === 1 && children[0]!.kind !== BRANCH) {
      return children[0]!;
    }
    return new Branch(node.bitmap & ~bit, children);
  }
  if (shift > 0 && node.children.length === 1 && updated.kind !== BRANCH) return updated;
  const children = node.children.slice();
  children[index] = updated;
  return new Branch(node.bitmap, children);
}

/** The leaf of `key` under `under`, a node at the level of `shift` (0: the root). */
function lookup<V>(under: TrieNode<V>, hash: number, key: string, shift = 0): Leaf<V> | undefined {
  let node: TrieNode<V> = under;
  while (node.kind === BRANCH) {
    const bitmap: number = node.bitmap;
    const bit = slot(hash, shift);
    if ((bitmap & bit) === 0) return undefined;
    node = node.children[popcount(bitmap & (bit - 1))]!;
    shift += BITS;
  }
  if (node.kind === LEAF) return node.key === key ? node : undefined;
  return node.hash === hash ? node.leaves.find((leaf) => leaf.key === key) : undefined;
}

function each<V>(node: TrieNode<V>, visit: (leaf: Leaf<V>) => void): void {
  if (node.kind === LEAF) visit(node);
  else if (node.kind === COLLISION) for (const leaf of node.leaves) visit(leaf);
  else for (const child of node.children) each(child, visit);
}

/** Every leaf under `node`, in trie order, appended to `out`. */
function collect<V>(node: TrieNode<V>, out: Leaf<V>[]): Leaf<V>[] {
  if (node.kind === LEAF) out.push(node);
  else if (node.kind === COLLISION) out.push(...node.leaves);
  else for (const child of node.children) collect(child, out);
  return out;
}

const ADDED = true;
const REMOVED = false;

/**
 * Visits every entry under `node` as added (`before` undefined) or removed (`after`
 * undefined), in trie order, but the one of key `skip`.
 */
function visitAll<V>(
  node: TrieNode<V>,
  visit: DiffVisitor<V>,
  added: boolean,
  skip?: string,
): void {
  if (node.kind === LEAF) {
    if (node.key === skip) return;
    if (added) visit(node.key, undefined, node.value);
    else visit(node.key, node.value, undefined);
  } else {
    const children: readonly TrieNode<V>[] = node.kind === COLLISION ? node.leaves : node.children;
    for (const child of children) visitAll(child, visit, added, skip);
  }
}

/**
 * The diff of the single entry `before` against every entry under `after`, in trie order: each
 * of `after` is added, or changed when it has `before`'s key and another value. True when
 * `before`'s key was among them (else the caller reports it removed).
 */
function leafAgainst<V>(before: Leaf<V>, after: TrieNode<V>, visit: DiffVisitor<V>): boolean {
  if (after.kind === LEAF) {
    if (after.key !== before.key) {
      visit(after.key, undefined, after.value);
      return false;
    }
    if (after.value !== before.value) visit(after.key, before.value, after.value);
    return true;
  }
  const children: readonly TrieNode<V>[] = after.kind === COLLISION ? after.leaves : after.children;
  let found = false;
  for (const child of children) if (leafAgainst(before, child, visit)) found = true;
  return found;
}

/** What {@link PersistentMap.diff} reports: a key whose value is not the same object. */
export type DiffVisitor<V> = (key: string, before: V | undefined, after: V | undefined) => void;

function diffNodes<V>(
  a: TrieNode<V> | undefined,
  b: TrieNode<V> | undefined,
  shift: number,
  visit: DiffVisitor<V>,
): void {
  if (a === b) return;
  if (a === undefined) return visitAll(b!, visit, ADDED);
  if (b === undefined) return visitAll(a, visit, REMOVED);
  if (a.kind === BRANCH && b.kind === BRANCH) {
    let bits = a.bitmap | b.bitmap;
    while (bits !== 0) {
      const bit = bits & -bits;
      bits ^= bit;
      const childA = a.bitmap & bit ? a.children[popcount(a.bitmap & (bit - 1))] : undefined;
      const childB = b.bitmap & bit ? b.children[popcount(b.bitmap & (bit - 1))] : undefined;
      diffNodes(childA, childB, shift + BITS, visit);
    }
    return;
  }
  if (a.kind === LEAF && b.kind === LEAF) {
    // The common case (one record replaced), without the allocations of the general one below;
    // the same visits in the same order.
    if (a.key === b.key) {
      if (a.value !== b.value) visit(b.key, a.value, b.value);
    } else {
      visit(b.key, undefined, b.value);
      visit(a.key, a.value, undefined);
    }
    return;
  }
  // A leaf where the other side has a branch or collision (a key added beside it, or the rest
  // of its branch removed): the same visits in the same order as the general case below, without
  // its allocations; a join splits a leaf so.
  if (a.kind === LEAF) {
    if (!leafAgainst(a, b, visit)) visit(a.key, a.value, undefined);
    return;
  }
  if (b.kind === LEAF) {
    const was = lookup(a, b.hash, b.key, shift);
    if (was === undefined) visit(b.key, undefined, b.value);
    else if (was.value !== b.value) visit(b.key, was.value, b.value);
    visitAll(a, visit, REMOVED, b.key);
    return;
  }
  // Shapes differ otherwise (a collision against a branch): few entries, compared by key.
  const before = new Map<string, V>();
  each(a, (leaf) => before.set(leaf.key, leaf.value));
  each(b, (leaf) => {
    const was = before.get(leaf.key);
    const had = before.has(leaf.key);
    before.delete(leaf.key);
    if (!had || was !== leaf.value) visit(leaf.key, had ? was : undefined, leaf.value);
  });
  for (const [key, was] of before) visit(key, was, undefined);
}

/** An immutable string-keyed map with structural sharing; see the module comment. */
export class PersistentMap<V> implements Iterable<[string, V]> {
  readonly #root: Branch<V>;
  readonly #size: number;
  /** `get`s answered from the trie so far (see {@link get}). */
  #lookups = 0;
  /** Every entry in a native Map, built once `get` was asked `size` times; null before. */
  #index: Map<string, V> | null = null;

  private constructor(root: Branch<V>, size: number) {
    this.#root = root;
    this.#size = size;
  }

  static readonly #EMPTY = new PersistentMap<never>(EMPTY_ROOT, 0);

  /** The empty map (one shared instance). */
  static empty<V>(): PersistentMap<V> {
    return PersistentMap.#EMPTY;
  }

  /** A map of `entries` (a record's own entries, or key/value pairs; later keys win). */
  static from<V>(
    entries: Readonly<Record<string, V>> | Iterable<readonly [string, V]>,
  ): PersistentMap<V> {
    const pairs =
      Symbol.iterator in entries ? entries : Object.entries(entries as Record<string, V>);
    let map = PersistentMap.empty<V>();
    for (const [key, value] of pairs) map = map.set(key, value);
    return map;
  }

  get size(): number {
    return this.#size;
  }

  /**
   * O(log₃₂ n) from the trie, or O(1) from the index: a map of {@link INDEXED_SIZE} entries or
   * more that has been asked `get` as many times as it has entries indexes them in a native Map
   * (O(n) once, so O(1) amortised over those reads) and answers from it after. A group's members
   * map read by every steady heartbeat gets there in one pass of its members; one replaced at
   * every join of a burst never does.
   */
  get(key: string): V | undefined {
    const index = this.#index ?? (this.#size < INDEXED_SIZE ? null : this.#indexed());
    return index !== null ? index.get(key) : lookup(this.#root, hashOf(key), key)?.value;
  }

  /**
   * Answered from the index when there is one, but never counted towards building it: the
   * invariant checks ask it once per shard of a map that the next leave or expiry replaces.
   */
  has(key: string): boolean {
    const index = this.#index;
    return index !== null ? index.has(key) : lookup(this.#root, hashOf(key), key) !== undefined;
  }

  /** Whether reads are answered from the native index (see {@link get}). */
  get indexed(): boolean {
    return this.#index !== null;
  }

  /** The index once this read makes it due (see {@link get}), else null; the map is large enough. */
  #indexed(): Map<string, V> | null {
    if (++this.#lookups < this.#size) return null;
    const index = new Map<string, V>();
    each(this.#root, (leaf) => index.set(leaf.key, leaf.value));
    this.#index = index;
    return index;
  }

  /** The map with `key` set to `value`; this very map when it already holds that value. */
  set(key: string, value: V): PersistentMap<V> {
    sizeChange = 0;
    const root = insert(this.#root, 0, hashOf(key), key, value) as Branch<V>;
    return root === this.#root ? this : new PersistentMap(root, this.#size + sizeChange);
  }

  /** The map without `key`; this very map when it has no such key. */
  delete(key: string): PersistentMap<V> {
    sizeChange = 0;
    const root = remove(this.#root, 0, hashOf(key), key);
    if (root === this.#root) return this;
    return root === null
      ? PersistentMap.empty()
      : new PersistentMap(root as Branch<V>, this.#size + sizeChange);
  }

  /** Visits every entry in trie order, walking the trie: no list of thousands of entries for it. */
  forEach(visit: (value: V, key: string) => void): void {
    each(this.#root, (leaf) => visit(leaf.value, leaf.key));
  }

  keys(): string[] {
    return collect(this.#root, []).map((leaf) => leaf.key);
  }

  values(): V[] {
    return collect(this.#root, []).map((leaf) => leaf.value);
  }

  entries(): Array<[string, V]> {
    return collect(this.#root, []).map((leaf): [string, V] => [leaf.key, leaf.value]);
  }

  [Symbol.iterator](): Iterator<[string, V]> {
    return this.entries()[Symbol.iterator]();
  }

  /** The entries as a plain record (views, tests, JSON). */
  toRecord(): Record<string, V> {
    const record: Record<string, V> = {};
    each(this.#root, (leaf) => {
      record[leaf.key] = leaf.value;
    });
    return record;
  }

  toJSON(): Record<string, V> {
    return this.toRecord();
  }

  /**
   * Calls `visit` for every key whose value differs (is not the same object) between `before`
   * and `after`, with `undefined` on the side that lacks the key. Subtrees the two maps share
   * are skipped, so a map derived from another by k changes costs O(k log n), not O(n).
   */
  static diff<V>(before: PersistentMap<V>, after: PersistentMap<V>, visit: DiffVisitor<V>): void {
    diffNodes(before.#root, after.#root, 0, visit);
  }
}
