/**
 * What the coordinator does with a group's dead letters (docs/protocol.md#dead-letters): reads
 * them, replays them to a shard stream and purges them, on the streams Redis or Redis Cluster.
 * Which dead letters and where each goes is decided by the caller.
 */
import { readFileSync } from 'node:fs';
import { Cluster, type Redis } from 'ioredis';
import { hashSlot } from '../store/hash-slot.js';
import { compareStreamIds } from '../client/stream-seal.js';
import {
  deadLetterStream,
  parseDeadLetter,
  REPLAY_FOR_FIELD,
  type DeadLetter,
} from './dead-letters.js';
import { keyErrorText } from './key-error.js';
import { READ_SLICE } from './streams-reader.js';

const REPLAY_SCRIPT = readFileSync(
  new URL('./lua/replayDeadLetter-1.lua', import.meta.url),
  'utf8',
);
const REPLAY_COMMAND = 'coordReplayDeadLetter';
const PURGE_SCRIPT = readFileSync(new URL('./lua/purgeDeadLetters-1.lua', import.meta.url), 'utf8');
const PURGE_COMMAND = 'coordPurgeDeadLetters';

type ReplayCall = (
  dead: string,
  target: string,
  id: string,
  group: string,
) => Promise<[number, string]>;
type PurgeCall = (dead: string) => Promise<number>;

/** The script's command on `client`, defined on first use. */
function replayCommand(client: Redis | Cluster): ReplayCall {
  const commands = client as unknown as Record<string, ReplayCall | undefined>;
  if (!commands[REPLAY_COMMAND]) {
    client.defineCommand(REPLAY_COMMAND, { lua: REPLAY_SCRIPT, numberOfKeys: 2 });
  }
  return commands[REPLAY_COMMAND]!.bind(client);
}

/** The purge script's command on `client`, defined on first use. */
function purgeCommand(client: Redis | Cluster): PurgeCall {
  const commands = client as unknown as Record<string, PurgeCall | undefined>;
  if (!commands[PURGE_COMMAND]) {
    client.defineCommand(PURGE_COMMAND, { lua: PURGE_SCRIPT, numberOfKeys: 1 });
  }
  return commands[PURGE_COMMAND]!.bind(client);
}

/** One dead-letter stream of a shard as read: its length, or Redis's error about its key. */
export interface DeadLetterStreamReading {
  readonly stream: string;
  /** Entries in the stream (0 when its key could not be read). */
  readonly count: number;
  /**
   * Redis's error about the stream's key (`<key>: WRONGTYPE …`: the name holds another type);
   * nothing was read from it then. Null when read.
   */
  readonly error: string | null;
}

/**
 * One shard's dead letters for one consumer group: those of the group's own dead-letter stream
 * `<streamPrefix>:<shard>:dead:<group>` and those of the shard's shared one
 * `<streamPrefix>:<shard>:dead` (an older SDK's, listed for every group on the prefix:
 * docs/protocol.md#dead-letters).
 */
export interface ShardDeadLetters {
  readonly shard: number;
  /** The group's own dead-letter stream. */
  readonly stream: string;
  /** Entries in both streams. */
  readonly count: number;
  /** Oldest first, both streams merged. */
  readonly letters: readonly DeadLetter[];
  /** With `ids`: those of them either stream holds as dead letters, listed or past the limit. */
  readonly found: readonly string[];
  /**
   * Redis's error about either stream's key (`<key>: WRONGTYPE …`), both joined by `; `; that
   * stream was not read. Null when both were read.
   */
  readonly error: string | null;
  /** The shard's shared dead-letter stream. */
  readonly shared: DeadLetterStreamReading;
}

interface StreamRead extends DeadLetterStreamReading {
  readonly letters: DeadLetter[];
  readonly found: string[];
}

/** One dead-letter stream's length, or Redis's error about its key (that key's trouble). */
async function countStream(
  client: Redis | Cluster,
  stream: string,
): Promise<DeadLetterStreamReading> {
  try {
    return { stream, count: await client.xlen(stream), error: null };
  } catch (error) {
    // That key's trouble (docs/operations.md#a-broken-shard-stream): the others are read.
    return { stream, count: 0, error: keyErrorText(stream, error) };
  }
}

/**
 * Reads the entries of one counted dead-letter stream: its first `most`, or those of `ids`
 * (each looked up even past the limit: one not taken is not one not found).
 */
async function readStream(
  client: Redis | Cluster,
  counted: DeadLetterStreamReading,
  shard: number,
  shared: boolean,
  select: {
    readonly most: number;
    readonly ids: readonly string[] | null;
    readonly keyField: string;
  },
): Promise<StreamRead> {
  const { stream, count } = counted;
  let entries: [string, string[]][] = [];
  if (counted.error === null && count > 0 && (select.most > 0 || select.ids !== null)) {
    if (select.ids === null) {
      entries = await client.xrange(stream, '-', '+', 'COUNT', select.most);
    } else {
      const found = await Promise.all(select.ids.map((id) => client.xrange(stream, id, id)));
      entries = found.flat();
    }
  }
  const letters: DeadLetter[] = [];
  const found: string[] = [];
  for (const [id, flat] of entries) {
    const letter = parseDeadLetter(shard, id, flat, select.keyField, shared);
    if (letter === null) continue;
    found.push(id);
    letters.push(letter);
  }
  return { ...counted, letters, found };
}

/**
 * Runs `work` on each of `items`, {@link READ_SLICE} at a time (all of a slice in flight at
 * once, auto-pipelined on a single Redis), one slice after the other; the results in the order
 * of `items`. A group's 1,024 shards then cost 16 round trips to the streams Redis, not 1,024
 * (docs/operations.md#dead-letters), and no turn of the event loop sends more than a slice.
 */
export async function inSlices<T, R>(
  items: readonly T[],
  work: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results: R[] = [];
  for (let from = 0; from < items.length; from += READ_SLICE) {
    const slice = items.slice(from, from + READ_SLICE);
    results.push(...(await Promise.all(slice.map((item, i) => work(item, from + i)))));
  }
  return results;
}

/**
 * Reads the dead letters of consumer group `group` on `shards` (in that order): per shard those
 * of the group's own dead-letter stream and of the shard's shared one, merged oldest first, at
 * most `limit` in all; with `ids`, only the dead letters of those ids, and `found` says which
 * of them each shard holds, also those the limit left out. Entries that are not dead letters
 * are skipped. Every stream is counted first, a slice of shards at a time; then the entries
 * are read, a slice at a time, from the shards the limit still reaches, each for as many as
 * the limit leaves it, so the round trips do not grow with the shards one by one.
 */
export async function readDeadLetters(
  client: Redis | Cluster,
  streamPrefix: string,
  group: string,
  select: {
    readonly shards: readonly number[];
    readonly limit: number;
    readonly ids: readonly string[] | null;
    readonly keyField: string;
  },
): Promise<ShardDeadLetters[]> {
  const counted = await inSlices(select.shards, async (shard) => {
    const shardStream = `${streamPrefix}:${shard}`;
    const [own, shared] = await Promise.all([
      countStream(client, deadLetterStream(shardStream, group)),
      countStream(client, deadLetterStream(shardStream, null)),
    ]);
    return { shard, own, shared };
  });
  const result: ShardDeadLetters[] = [];
  let left = select.limit;
  for (let from = 0; from < counted.length; from += READ_SLICE) {
    const slice = counted.slice(from, from + READ_SLICE);
    // What the limit leaves each shard of the slice, were every entry a dead letter.
    let allotted = left;
    const reads = await Promise.all(
      slice.map(({ shard, own, shared }) => {
        const most = Math.min(own.count + shared.count, allotted);
        allotted -= most;
        const each = { most, ids: select.ids, keyField: select.keyField };
        return Promise.all([
          readStream(client, own, shard, false, each),
          readStream(client, shared, shard, true, each),
        ]);
      }),
    );
    for (const [i, [own, shared]] of reads.entries()) {
      const merged = [...own.letters, ...shared.letters].sort((a, b) =>
        compareStreamIds(a.id, b.id),
      );
      const letters = merged.slice(0, left);
      left -= letters.length;
      const errors = [own.error, shared.error].filter((e): e is string => e !== null);
      result.push({
        shard: slice[i]!.shard,
        stream: own.stream,
        count: own.count + shared.count,
        letters,
        found: select.ids === null ? [] : [...own.found, ...shared.found],
        error: errors.length === 0 ? null : errors.join('; '),
        shared: { stream: shared.stream, count: shared.count, error: shared.error },
      });
    }
  }
  return result;
}

/**
 * Appends `letter`'s message to shard `toShard` for consumer group `group` (its first field
 * {@link REPLAY_FOR_FIELD} names the group, so that only its consumers handle it) and deletes
 * the dead letter from the group's dead-letter stream, or from the shard's shared one for a
 * `shared` letter: in one script (`replayDeadLetter-1.lua`) when both streams are in one slot,
 * else one command after the other. Resolves to the message's new id, or null when the dead
 * letter was gone already.
 */
export async function replayDeadLetter(
  client: Redis | Cluster,
  streamPrefix: string,
  group: string,
  letter: Pick<DeadLetter, 'shard' | 'id' | 'shared'>,
  toShard: number,
): Promise<string | null> {
  const dead = deadLetterStream(`${streamPrefix}:${letter.shard}`, letter.shared ? null : group);
  const target = `${streamPrefix}:${toShard}`;
  if (!(client instanceof Cluster) || hashSlot(dead) === hashSlot(target)) {
    const [replayed, newId] = await replayCommand(client)(dead, target, letter.id, group);
    return replayed === 1 ? newId : null;
  }
  // Two slots: appended first, then deleted, by the one replay that claimed the dead letter
  // (SET NX of its claim key): another replay of it meanwhile (a retried request, two operators
  // at once, another group on the stream prefix replaying a shared one) finds it claimed and
  // counts it gone. Cut off between the append and the delete, the message was sent and its
  // dead letter stays: a replay after the claim expired would send it again.
  const claim = replayClaimKey(dead, letter.id);
  const claimed = await client.set(claim, '1', 'PX', REPLAY_CLAIM_MS, 'NX');
  if (claimed === null) return null;
  let entry: [string, string[]] | undefined;
  try {
    [entry] = (await client.xrange(dead, letter.id, letter.id)) as [string, string[]][];
  } catch (error) {
    await client.del(claim).catch(() => undefined);
    throw error;
  }
  const parsed = entry ? parseDeadLetter(letter.shard, entry[0], entry[1], '') : null;
  if (parsed === null || parsed.fields.length === 0) {
    await client.del(claim);
    return null;
  }
  // A failed append may have been made (an answer that never came): the claim stays then, so
  // nothing sends it again before it expires.
  const newId = await client.xadd(target, '*', REPLAY_FOR_FIELD, group, ...parsed.fields);
  await client.xdel(dead, letter.id);
  await client.del(claim);
  return newId;
}

/** How long a replay's claim of a dead letter lasts when the replay is cut off half-way. */
export const REPLAY_CLAIM_MS = 60_000;

/**
 * The key a replay sets (NX, expiring) to claim dead letter `id` of `dead` where the dead-letter
 * stream and the shard it goes to are in different Redis Cluster slots:
 * `<streamPrefix>:<shard>:dead:replaying:<id>`, beside the dead-letter stream under the stream
 * prefix (docs/protocol.md#dead-letters).
 */
export function replayClaimKey(dead: string, id: string): string {
  return `${dead}:replaying:${id}`;
}

/**
 * Deletes dead letters of `shard` from one of its dead-letter streams (`stream`: the group's
 * own or the shard's shared one): those of `ids`, or the whole stream. Resolves to how many
 * were deleted.
 */
export async function purgeDeadLetters(
  client: Redis | Cluster,
  stream: string,
  ids: readonly string[] | null,
): Promise<number> {
  if (ids !== null) return ids.length === 0 ? 0 : client.xdel(stream, ...ids);
  // One script: a key of that name that is not a stream is refused before anything is deleted
  // (in a MULTI, the DEL ran after the failed XLEN).
  return purgeCommand(client)(stream);
}
