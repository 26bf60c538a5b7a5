import { CoordinatorError } from '../errors.js';
import { groupId, type GroupRef } from '../machines/types.js';

/**
 * The shard layout of a stream prefix (docs/protocol.md#one-shard-layout-per-stream-prefix):
 * every consumer group on the prefix reads the same shards, so producers write with one shard
 * count whichever group's routing they read.
 */
export interface PrefixLayout {
  readonly streamPrefix: string;
  /** New when the prefix gets a layout afresh (its first group, or after its last was deleted). */
  readonly id: string;
  /** +1 on every change of the count. */
  readonly version: number;
  readonly shardCount: number;
  /** Consumer groups on the prefix, with the epoch ms at which each joined it. */
  readonly groups: Readonly<Record<string, number>>;
  readonly updatedAt: number;
}

/** How long a group that joined a layout counts as on the prefix before it is registered. */
export const LAYOUT_JOIN_GRACE_MS = 60_000;

/** What a group asks of its prefix's layout when it is created (or recreated, or adopts one). */
export interface LayoutRequest {
  /** The count the group asks for (used when the prefix has no layout yet). */
  readonly shardCount: number;
  /**
   * `adopt`: take the prefix's count. `exact` (a create with an explicit count): another count
   * on the prefix is refused, and a group alone on it sets the count unless it exists already.
   * `reset` (a recreate): like `exact`, also for a group that exists.
   */
  readonly mode: 'adopt' | 'exact' | 'reset';
  readonly now: number;
  /** Id of the layout if a new one is made. */
  readonly newId: string;
}

/** Decodes a layout as stored (JSON; the stream prefix is the hash field). */
export function decodeLayout(streamPrefix: string, json: string): PrefixLayout {
  const raw = JSON.parse(json) as Omit<PrefixLayout, 'streamPrefix'> & {
    groups: Record<string, number> | unknown[];
  };
  // Lua's cjson writes an empty table as `{}`, but an array-like one as a list: read both.
  const groups = Array.isArray(raw.groups) ? {} : raw.groups;
  return {
    streamPrefix,
    id: raw.id,
    version: raw.version,
    shardCount: raw.shardCount,
    groups,
    updatedAt: raw.updatedAt,
  };
}

/** Encodes a layout as stored. */
export function encodeLayout(layout: PrefixLayout): string {
  const { streamPrefix: _streamPrefix, ...stored } = layout;
  return JSON.stringify(stored);
}

/** The refusal of a group whose explicit shard count is not its prefix's. */
export function shardCountMismatch(
  ref: GroupRef,
  layout: PrefixLayout,
  asked: number,
): CoordinatorError {
  const others = Object.keys(layout.groups).filter((g) => g !== ref.consumerGroup);
  return new CoordinatorError(
    'SHARD_COUNT_MISMATCH',
    `stream prefix ${ref.streamPrefix} has ${layout.shardCount} shards (groups ${others.join(', ')}); ` +
      `group ${groupId(ref)} cannot have ${asked}: omit shardCount to adopt the prefix's, or scale the prefix`,
    {
      details: {
        streamPrefix: ref.streamPrefix,
        shardCount: layout.shardCount,
        requestedShardCount: asked,
        groups: others,
      },
    },
  );
}

/** A prefix with no layout (no group on it). */
export function layoutNotFound(streamPrefix: string): CoordinatorError {
  return new CoordinatorError(
    'GROUP_NOT_FOUND',
    `stream prefix ${streamPrefix} has no shard layout (no group on it)`,
    { details: { streamPrefix } },
  );
}

/**
 * The layout after `ref` joins it: what `adoptLayout-2.lua` does, for the MemoryStore (the two
 * are held to the same contract suite). `registered` says whether a group of the prefix is in
 * the registry. Returns the new layout, or the error to throw.
 */
export function adoptedLayout(
  ref: GroupRef,
  current: PrefixLayout | null,
  request: LayoutRequest,
  registered: (consumerGroup: string) => boolean,
): PrefixLayout | CoordinatorError {
  const exact = request.mode !== 'adopt';
  const { now } = request;
  if (current === null) {
    return {
      streamPrefix: ref.streamPrefix,
      id: request.newId,
      version: 1,
      shardCount: request.shardCount,
      groups: { [ref.consumerGroup]: now },
      updatedAt: now,
    };
  }
  const kept: Record<string, number> = {};
  for (const [name, joinedAt] of Object.entries(current.groups)) {
    if (name === ref.consumerGroup) continue;
    if (registered(name) || now - joinedAt < LAYOUT_JOIN_GRACE_MS) kept[name] = joinedAt;
  }
  const others = Object.keys(kept).length;
  const differs = exact && current.shardCount !== request.shardCount;
  if (differs && others > 0) return shardCountMismatch(ref, current, request.shardCount);
  // An existing group's create changes nothing (the store refuses it as GROUP_EXISTS next).
  if (differs && request.mode === 'exact' && registered(ref.consumerGroup)) return current;
  const groups = { ...kept, [ref.consumerGroup]: now };
  return differs
    ? {
        ...current,
        shardCount: request.shardCount,
        version: current.version + 1,
        updatedAt: now,
        groups,
      }
    : { ...current, groups };
}
