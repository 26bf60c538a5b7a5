/**
 * What the coordinator does with a group's dead letters (docs/protocol.md#dead-letters): reads
 * them, replays them to a shard stream and purges them, on the streams Redis or Redis Cluster.
 * Which dead letters and where each goes is decided by the caller.
 */
import { readFileSync } from 'node:fs';
import { Cluster, type Redis } from 'ioredis';
import { hashSlot } from '../store/hash-slot.js';
import { deadLetterStream, parseDeadLetter, type DeadLetter } from './dead-letters.js';
import { keyErrorText } from './key-error.js';

const REPLAY_SCRIPT = readFileSync(
  new URL('./lua/replayDeadLetter-1.lua', import.meta.url),
  'utf8',
);
const REPLAY_COMMAND = 'coordReplayDeadLetter';
const PURGE_SCRIPT = readFileSync(new URL('./lua/purgeDeadLetters-1.lua', import.meta.url), 'utf8');
const PURGE_COMMAND = 'coordPurgeDeadLetters';

type ReplayCall = (dead: string, target: string, id: string) => Promise<[number, string]>;
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

/** One shard's dead-letter stream: its length and the dead letters read from it. */
export interface ShardDeadLetters {
  readonly shard: number;
  readonly stream: string;
  /** Entries in the stream. */
  readonly count: number;
  /** Oldest first. */
  readonly letters: readonly DeadLetter[];
  /** With `ids`: those of them this stream holds as dead letters, listed or past the limit. */
  readonly found: readonly string[];
  /**
   * Redis's error about the stream's key (`<key>: WRONGTYPE …`: the name holds another type);
   * nothing was read from it then. Null when read.
   */
  readonly error: string | null;
}

/**
 * Reads the dead letters of `shards` (in that order), oldest first, at most `limit` in all; with
 * `ids`, only the dead letters of those ids, and `found` says which of them each stream holds,
 * also those the limit left out. Entries that are not dead letters are skipped.
 */
export async function readDeadLetters(
  client: Redis | Cluster,
  streamPrefix: string,
  select: {
    readonly shards: readonly number[];
    readonly limit: number;
    readonly ids: readonly string[] | null;
    readonly keyField: string;
  },
): Promise<ShardDeadLetters[]> {
  const result: ShardDeadLetters[] = [];
  let left = select.limit;
  for (const shard of select.shards) {
    const stream = deadLetterStream(`${streamPrefix}:${shard}`);
    let count: number;
    try {
      count = await client.xlen(stream);
    } catch (error) {
      // That shard's trouble (docs/operations.md#a-broken-shard-stream): the others are read.
      const text = keyErrorText(stream, error);
      result.push({ shard, stream, count: 0, letters: [], found: [], error: text });
      continue;
    }
    let entries: [string, string[]][] = [];
    // With ids, each is looked up even past the limit: one not taken is not one not found.
    if (count > 0 && (left > 0 || select.ids !== null)) {
      if (select.ids === null) {
        entries = await client.xrange(stream, '-', '+', 'COUNT', left);
      } else {
        const found = await Promise.all(select.ids.map((id) => client.xrange(stream, id, id)));
        entries = found.flat();
      }
    }
    const letters: DeadLetter[] = [];
    const found: string[] = [];
    for (const [id, flat] of entries) {
      if (left === 0 && select.ids === null) break;
      const letter = parseDeadLetter(shard, id, flat, select.keyField);
      if (letter === null) continue;
      found.push(id);
      if (left === 0) continue;
      letters.push(letter);
      left--;
    }
    result.push({
      shard,
      stream,
      count,
      letters,
      found: select.ids === null ? [] : found,
      error: null,
    });
  }
  return result;
}

/**
 * Appends `letter`'s message to shard `toShard` and deletes the dead letter: in one script
 * (`replayDeadLetter-1.lua`) when both streams are in one slot, else one command after the
 * other. Resolves to the message's new id, or null when the dead letter was gone already.
 */
export async function replayDeadLetter(
  client: Redis | Cluster,
  streamPrefix: string,
  letter: Pick<DeadLetter, 'shard' | 'id'>,
  toShard: number,
): Promise<string | null> {
  const dead = deadLetterStream(`${streamPrefix}:${letter.shard}`);
  const target = `${streamPrefix}:${toShard}`;
  if (!(client instanceof Cluster) || hashSlot(dead) === hashSlot(target)) {
    const [replayed, newId] = await replayCommand(client)(dead, target, letter.id);
    return replayed === 1 ? newId : null;
  }
  // Two slots: appended first, then deleted, by the one replay that claimed the dead letter
  // (SET NX of its claim key): another replay of it meanwhile (a retried request, two operators
  // at once, another group on the stream prefix) finds it claimed and counts it gone. Cut off
  // between the append and the delete, the message was sent and its dead letter stays: a replay
  // after the claim expired would send it again.
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
  const newId = await client.xadd(target, '*', ...parsed.fields);
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
 * Deletes dead letters of `shard`: those of `ids`, or the whole dead-letter stream. Resolves
 * to how many were deleted.
 */
export async function purgeDeadLetters(
  client: Redis | Cluster,
  streamPrefix: string,
  shard: number,
  ids: readonly string[] | null,
): Promise<number> {
  const stream = deadLetterStream(`${streamPrefix}:${shard}`);
  if (ids !== null) return ids.length === 0 ? 0 : client.xdel(stream, ...ids);
  // One script: a key of that name that is not a stream is refused before anything is deleted
  // (in a MULTI, the DEL ran after the failed XLEN).
  return purgeCommand(client)(stream);
}
