import type { Cluster, Redis } from 'ioredis';
import { compareStreamIds } from '../client/stream-seal.js';
import { CoordinatorError } from '../errors.js';
import { readLua } from '../store/lua-scripts.js';
import { isKeyError, keyErrorText } from './key-error.js';
import { causeOf } from './streams-reader.js';

/**
 * Moves a consumer group's position on its shard streams, back (a replay) or forward (a skip),
 * and plans such a move without writing (docs/operations.md#moving-a-groups-positions). The
 * position of a group on a shard is its Redis consumer group's last-delivered-id: the next
 * entry delivered is the first one after it.
 */

/** Where to move: the beginning, the end, a time, or an id per shard. */
export type ResetTo =
  | 'earliest'
  | 'latest'
  /** Epoch ms: the first entry at or after it is the next delivered. */
  | { readonly timestamp: number }
  /** Per shard number (as string key): the new last-delivered-id. */
  | { readonly ids: Readonly<Record<string, string>> };

export interface ShardPositionPlan {
  readonly shard: number;
  readonly stream: string;
  /** The group's last-delivered-id now; null when the stream or its consumer group does not exist. */
  readonly from: string | null;
  /** The new last-delivered-id (an exact stream id, never '$'): what XGROUP SETID will set. */
  readonly to: string;
  /** Entries that will be delivered again (to < from): entries with from >= id > to. */
  readonly redeliver: number;
  /**
   * Entries that will be skipped (to > from): entries with from < id <= to; they are never
   * delivered, and those of them pending are acknowledged. Without a consumer group (`from`
   * null), the entries with id <= to: the group is created past them.
   */
  readonly skip: number;
  /** False when a count stopped at the bound (then it is a lower bound). */
  readonly exact: boolean;
  /** Pending (delivered, unacknowledged) entries with id <= to, to be acknowledged by a skip. */
  readonly pendingSkipped: number;
}

export interface PlanPositionsInput {
  readonly streamPrefix: string;
  readonly consumerGroup: string;
  readonly shards: readonly number[];
  readonly to: ResetTo;
  /** Most entries counted one by one per count where Redis cannot say it. @default 100_000 */
  readonly countBound?: number;
}

export interface MoveShardPositionInput {
  readonly stream: string;
  readonly consumerGroup: string;
  /** The new last-delivered-id: an exact id ({@link isStreamId}). */
  readonly to: string;
  /** Acknowledge the group's pending entries with id <= `to` (a skip). */
  readonly acknowledgeUpTo: boolean;
  /**
   * Names the move (a reset's id and start), so that it is made once: a move of this name that
   * the group shows already changes nothing (`repeated`). An owner that lost the group while
   * its move was under way may send it after the new owner made it and granted the shard
   * again; without the name it would take back what members read since.
   */
  readonly moveId?: string;
}

export interface MoveShardPositionResult {
  /** Pending entries acknowledged by this call. */
  readonly acknowledged: number;
  /** The consumer group (and the stream, if missing) was created at `to` by this call. */
  readonly created: boolean;
  /** The move named `moveId` was made before: this call changed nothing. */
  readonly repeated: boolean;
}

/** The empty consumer that marks a shard as moved by `moveId` (moveShardPosition-1.lua). */
export function moveMarker(moveId: string): string {
  return `coord-move:${moveId}`;
}

const MAX_U64 = (1n << 64n) - 1n;
const EARLIEST_ID = '0-0';
/** Most entries one count script call reads (in 1,000-entry chunks inside it). */
const COUNT_PER_CALL = 10_000;
/** Most pending entries one move script call acknowledges. */
const ACK_PER_CALL = 1_000;
const DEFAULT_COUNT_BOUND = 100_000;

const SCRIPTS = {
  read: {
    name: 'coordReadShardPosition',
    lua: readLua(new URL('./lua/readShardPosition-1.lua', import.meta.url)),
  },
  count: {
    name: 'coordCountShardEntries',
    lua: readLua(new URL('./lua/countShardEntries-1.lua', import.meta.url)),
  },
  move: {
    name: 'coordMoveShardPosition',
    lua: readLua(new URL('./lua/moveShardPosition-1.lua', import.meta.url)),
  },
} as const;

type ScriptCall = (stream: string, ...args: Array<string | number>) => Promise<unknown[]>;

/**
 * The shard a key of an `ids` target names: a decimal shard number without leading zeros;
 * anything else is `VALIDATION_FAILED` naming the key.
 */
export function idsKeyShard(key: string): number {
  if (!/^(0|[1-9][0-9]*)$/.test(key))
    throw invalid(`"ids" has the key ${JSON.stringify(key)}, which is no shard number`);
  return Number(key);
}

/** An id `<ms>-<seq>`, both decimal integers of 0 to 2^64-1 without leading zeros. */
export function isStreamId(value: string): boolean {
  const match = /^(0|[1-9][0-9]{0,19})-(0|[1-9][0-9]{0,19})$/.exec(value);
  return match !== null && BigInt(match[1]!) <= MAX_U64 && BigInt(match[2]!) <= MAX_U64;
}

/** Orders two stream ids by number (the SDK's comparison, one for both sides). */
export { compareStreamIds };

/**
 * Checks where a move should go, without I/O, and returns it as a fresh value. `nowMs` is the
 * streams Redis's clock (`StreamsReader.time()`), which makes the ids: a time after it, or an
 * id whose time part is after it, would leave the group ahead of entries written later, so they
 * are refused. Throws `CoordinatorError` with `VALIDATION_FAILED` (a shape that is none of
 * {@link ResetTo}, a key that is no shard number), `TIMESTAMP_IN_FUTURE`, `INVALID_STREAM_ID`
 * (not an exact id, or in the future) or `SHARD_OUT_OF_RANGE` (a shard at or above
 * `shardCount`).
 */
export function validateResetTo(to: unknown, shardCount: number, nowMs: number): ResetTo {
  if (!Number.isSafeInteger(shardCount) || shardCount < 1) {
    throw new CoordinatorError('INTERNAL', `shard count ${String(shardCount)} is not positive`);
  }
  if (to === 'earliest' || to === 'latest') return to;
  if (typeof to !== 'object' || to === null || Array.isArray(to)) {
    throw invalid('the position is "earliest", "latest", {"timestamp": ms} or {"ids": {...}}');
  }
  const keys = Object.keys(to);
  if (keys.length !== 1 || (keys[0] !== 'timestamp' && keys[0] !== 'ids')) {
    throw invalid('the position object has exactly one field, "timestamp" or "ids"');
  }
  if (keys[0] === 'timestamp') {
    const timestamp = (to as { timestamp: unknown }).timestamp;
    if (typeof timestamp !== 'number' || !Number.isSafeInteger(timestamp) || timestamp < 0) {
      throw invalid('"timestamp" is a whole number of milliseconds since the epoch, at least 0');
    }
    if (timestamp > nowMs) {
      throw new CoordinatorError(
        'TIMESTAMP_IN_FUTURE',
        `the timestamp ${timestamp} is after the streams' clock (${nowMs})`,
        { details: { timestamp, nowMs } },
      );
    }
    return { timestamp };
  }
  const ids = (to as { ids: unknown }).ids;
  if (typeof ids !== 'object' || ids === null || Array.isArray(ids)) {
    throw invalid('"ids" maps shard numbers to stream ids');
  }
  const entries = Object.entries(ids as Record<string, unknown>);
  if (entries.length === 0) throw invalid('"ids" names no shard');
  const result: Record<string, string> = {};
  for (const [key, id] of entries) {
    const shard = idsKeyShard(key);
    if (shard >= shardCount) {
      throw new CoordinatorError(
        'SHARD_OUT_OF_RANGE',
        `shard ${key} is not one of the ${shardCount} shards (0 to ${shardCount - 1})`,
        { details: { shard: key, shardCount } },
      );
    }
    if (typeof id !== 'string' || !isStreamId(id)) {
      throw new CoordinatorError(
        'INVALID_STREAM_ID',
        `shard ${key}: ${JSON.stringify(id)} is not a stream id <ms>-<seq>`,
        { details: { shard: key } },
      );
    }
    if (BigInt(id.slice(0, id.indexOf('-'))) > BigInt(Math.max(0, Math.floor(nowMs)))) {
      throw new CoordinatorError(
        'INVALID_STREAM_ID',
        `shard ${key}: ${id} is after the streams' clock (${nowMs}); entries written later would never be delivered`,
        { details: { shard: key, id, nowMs } },
      );
    }
    result[key] = id;
  }
  return { ids: result };
}

/**
 * Reads (never writes) what moving `shards` to `to` would do, one shard stream at a time per
 * call (Cluster routes each by its key). `to` per shard: earliest `0-0`; latest the stream's
 * last-generated-id (`0-0` for a missing stream); a timestamp the id of the last entry before
 * it (`0-0` when none), so the first entry at or after it is the next delivered; ids as given.
 * Counts come from Redis's `lag` where it is exact, else are counted up to `countBound`.
 * `STREAMS_UNAVAILABLE` when the streams Redis cannot be read.
 */
export async function planPositions(
  client: Redis | Cluster,
  input: PlanPositionsInput,
): Promise<ShardPositionPlan[]> {
  const bound = input.countBound ?? DEFAULT_COUNT_BOUND;
  if (!Number.isSafeInteger(bound) || bound < 1) {
    throw invalid(`the count bound ${String(bound)} is not a positive whole number`);
  }
  const seen = new Set<number>();
  for (const shard of input.shards) {
    if (!Number.isSafeInteger(shard) || shard < 0 || seen.has(shard)) {
      throw invalid(`shard ${String(shard)} is not a shard number, or is named twice`);
    }
    seen.add(shard);
    if (typeof input.to === 'object' && 'ids' in input.to) {
      const id = input.to.ids[String(shard)];
      if (id === undefined) throw invalid(`"ids" gives no id for shard ${shard}`);
      if (!isStreamId(id)) throw badId(id);
    }
  }
  const scripts = scriptsOf(client);
  return Promise.all(
    input.shards.map((shard) =>
      planShard(scripts, `${input.streamPrefix}:${shard}`, shard, input, bound),
    ),
  );
}

/**
 * Moves one shard's consumer group to `to` (XGROUP SETID, or XGROUP CREATE … MKSTREAM when the
 * stream or group is missing) and, with `acknowledgeUpTo`, acknowledges its pending entries
 * with id <= `to`, 1,000 per script call until none is left. The move is one script call, so
 * each shard moves atomically; running it again ends in the same state. `INVALID_STREAM_ID`
 * for a `to` that is no exact id, `STREAMS_UNAVAILABLE` when the streams Redis cannot be
 * written.
 */
export async function moveShardPosition(
  client: Redis | Cluster,
  input: MoveShardPositionInput,
): Promise<MoveShardPositionResult> {
  if (!isStreamId(input.to)) throw badId(input.to);
  const move = scriptsOf(client).move;
  const most = input.acknowledgeUpTo ? ACK_PER_CALL : 0;
  const marker = input.moveId === undefined ? '' : moveMarker(input.moveId);
  const [created, firstAcknowledged, firstMore, repeated] = (await streams(() =>
    move(input.stream, input.consumerGroup, input.to, '1', most, marker),
  )) as [number, number, number, number];
  let acknowledged = firstAcknowledged;
  let more = firstMore;
  // Later calls only acknowledge: setting the id again would take back what members read since.
  while (more === 1) {
    const [, acked, again] = (await streams(() =>
      move(input.stream, input.consumerGroup, input.to, '0', most, marker),
    )) as [number, number, number, number];
    acknowledged += acked;
    more = acked > 0 ? again : 0;
  }
  return { acknowledged, created: created === 1, repeated: repeated === 1 };
}

interface Scripts {
  readonly read: ScriptCall;
  readonly count: ScriptCall;
  readonly move: ScriptCall;
}

/** Clients the scripts are defined on (defineCommand loads each script once per client). */
const defined = new WeakSet<Redis | Cluster>();

function scriptsOf(client: Redis | Cluster): Scripts {
  if (!defined.has(client)) {
    for (const script of Object.values(SCRIPTS)) {
      client.defineCommand(script.name, { lua: script.lua, numberOfKeys: 1 });
    }
    defined.add(client);
  }
  const commands = client as unknown as Record<string, ScriptCall>;
  const bind = (name: string): ScriptCall => commands[name]!.bind(client);
  return {
    read: bind(SCRIPTS.read.name),
    count: bind(SCRIPTS.count.name),
    move: bind(SCRIPTS.move.name),
  };
}

async function planShard(
  scripts: Scripts,
  stream: string,
  shard: number,
  input: PlanPositionsInput,
  bound: number,
): Promise<ShardPositionPlan> {
  const target = input.to;
  const at = typeof target === 'object' && 'timestamp' in target ? String(target.timestamp) : '';
  const [, lastGenerated, length, hasGroup, delivered, redisLag, pending, before] = (await streams(
    () => scripts.read(stream, input.consumerGroup, at),
    { shard, stream },
  )) as [number, string, number, number, string, number, number, string];
  const to =
    target === 'earliest'
      ? EARLIEST_ID
      : target === 'latest'
        ? lastGenerated
        : 'timestamp' in target
          ? before
          : target.ids[String(shard)]!;
  const from = hasGroup === 1 ? delivered : null;
  // Redis's lag is the entries after `from`; it cannot exceed the length where it is right.
  const lag = redisLag >= 0 && redisLag <= length ? redisLag : null;
  const count = (mode: 'entries' | 'pending', after: string, upTo: string) =>
    countBetween(scripts.count, stream, mode, input.consumerGroup, after, upTo, bound);

  let redeliver = 0;
  let skip = 0;
  let exact = true;
  if (from === null) {
    if (to === lastGenerated) skip = length;
    else ({ count: skip, exact } = await count('entries', EARLIEST_ID, to));
  } else if (compareStreamIds(to, from) < 0) {
    if (to === EARLIEST_ID && lag !== null) redeliver = length - lag;
    else ({ count: redeliver, exact } = await count('entries', to, from));
  } else if (compareStreamIds(to, from) > 0) {
    if (to === lastGenerated && lag !== null) skip = lag;
    else ({ count: skip, exact } = await count('entries', from, to));
  }
  let pendingSkipped = 0;
  // Pending entries are entries of the stream, so none lies after its last-generated-id.
  if (pending > 0 && compareStreamIds(to, lastGenerated) >= 0) pendingSkipped = pending;
  else if (pending > 0) {
    const counted = await count('pending', EARLIEST_ID, to);
    pendingSkipped = counted.count;
    exact &&= counted.exact;
  }
  return { shard, stream, from, to, redeliver, skip, exact, pendingSkipped };
}

/**
 * Counts entries (or pending entries) with ids in (after, upTo], one bounded script call per
 * 10,000; stops past `bound` and then says `bound`, not exact.
 */
async function countBetween(
  call: ScriptCall,
  stream: string,
  mode: 'entries' | 'pending',
  group: string,
  after: string,
  upTo: string,
  bound: number,
): Promise<{ count: number; exact: boolean }> {
  if (compareStreamIds(after, upTo) >= 0) return { count: 0, exact: true };
  const wanted = bound + 1;
  let total = 0;
  let cursor = after;
  while (total < wanted) {
    const most = Math.min(COUNT_PER_CALL, wanted - total);
    const [counted, last] = (await streams(() =>
      call(stream, mode, group, cursor, upTo, most),
    )) as [number, string];
    total += counted;
    if (counted < most || last === upTo) break;
    cursor = last;
  }
  return total > bound ? { count: bound, exact: false } : { count: total, exact: true };
}

/**
 * Runs a streams Redis call; anything it throws becomes `STREAMS_UNAVAILABLE` with its cause,
 * but Redis's error about the key of `about` (WRONGTYPE: it holds another type), which is that
 * shard's: 409 `SHARD_STREAM_BROKEN` naming it (docs/operations.md#a-broken-shard-stream).
 */
async function streams<T>(
  call: () => Promise<T>,
  about?: { readonly shard: number; readonly stream: string },
): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof CoordinatorError) throw error;
    if (about && isKeyError(error)) {
      throw new CoordinatorError('SHARD_STREAM_BROKEN', keyErrorText(about.stream, error), {
        cause: error,
        details: about,
      });
    }
    const cause = causeOf(error);
    throw new CoordinatorError(
      'STREAMS_UNAVAILABLE',
      `the streams Redis cannot be read or written (${cause})`,
      { cause: error, details: { cause } },
    );
  }
}

function invalid(message: string): CoordinatorError {
  return new CoordinatorError('VALIDATION_FAILED', message);
}

function badId(id: string): CoordinatorError {
  return new CoordinatorError(
    'INVALID_STREAM_ID',
    `${JSON.stringify(id)} is not a stream id <ms>-<seq>`,
    { details: { id } },
  );
}
