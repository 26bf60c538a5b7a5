/**
 * Dead letters (docs/protocol.md#dead-letters): an entry a consumer failed to handle
 * `maxDeliveries` times is moved, with one script, from its shard `<streamPrefix>:<shard>` to
 * its consumer group's dead-letter stream of the shard, `<streamPrefix>:<shard>:dead:<group>`,
 * and acknowledged there. The layout of a dead letter, the field that marks a replay for one
 * group and the choice of where a replay sends it are here, pure, for the SDK that writes and
 * reads them and the coordinator that lists, replays and purges them.
 */
import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import { shardForKey } from '../machines/routing.js';

/**
 * The dead-letter stream of consumer group `group` on a shard stream:
 * `<streamPrefix>:<shard>:dead:<group>`; without a group, the shard's shared one
 * `<streamPrefix>:<shard>:dead`, where SDKs before per-group dead letters wrote them for every
 * group on the prefix (docs/protocol.md#dead-letters).
 */
export function deadLetterStream(shardStream: string, group: string | null): string {
  return group === null ? `${shardStream}:dead` : `${shardStream}:dead:${group}`;
}

/**
 * First field of a replayed message: its value names the consumer group the replay is for.
 * Consumers of every other group on the stream prefix acknowledge the entry without handing it
 * to their handler; that group's consumers hand it over without this field
 * (docs/protocol.md#dead-letters). Reserved like the seal's `__coord_seal`.
 */
export const REPLAY_FOR_FIELD = '__coord_replay_for';

/**
 * What a consumer of `group` does with a shard entry's fields: `skip` a replay meant for another
 * group; else `handle` the fields it hands over (a replay for `group` without its marker).
 */
export function replayTarget(
  flat: readonly string[],
  group: string,
):
  | { readonly skip: true; readonly for: string }
  | { readonly skip: false; readonly fields: readonly string[] } {
  if (flat[0] !== REPLAY_FOR_FIELD) return { skip: false, fields: flat };
  const target = flat[1] ?? '';
  if (target !== group) return { skip: true, for: target };
  return { skip: false, fields: flat.slice(2) };
}

/** The fields a dead letter starts with, in this order, before the entry's own. */
export const DEAD_LETTER_FIELDS = ['originalId', 'deliveries', 'error'] as const;

/** Longest `error` kept in a dead letter, in characters. */
export const MAX_ERROR_CHARS = 1_024;

/** One dead letter as read back from a dead-letter stream. */
export interface DeadLetter {
  /** The shard whose dead-letter stream holds it. */
  readonly shard: number;
  /**
   * Read from the shard's shared dead-letter stream `<streamPrefix>:<shard>:dead` (written by an
   * older SDK, not attributed to a consumer group) rather than the group's own.
   */
  readonly shared: boolean;
  /** Its id in the dead-letter stream. */
  readonly id: string;
  /** The entry's id in the shard stream it came from. */
  readonly originalId: string;
  /** Its delivery count when it was moved. */
  readonly deliveries: number;
  /** The handler's last error ('' when the consumer that moved it did not see it fail). */
  readonly error: string;
  /** The value of the key field (the producer's `keyField`); null when the entry has none. */
  readonly key: string | null;
  /** The entry's own fields, key included, as field/value pairs in their order. */
  readonly fields: readonly string[];
}

/**
 * Reads a dead letter's flat field list; null when it is not one (it does not start with the
 * three fields of {@link DEAD_LETTER_FIELDS}).
 */
export function parseDeadLetter(
  shard: number,
  id: string,
  flat: readonly string[],
  keyField: string,
  shared = false,
): DeadLetter | null {
  if (flat.length < 6 || flat.length % 2 !== 0) return null;
  for (let i = 0; i < DEAD_LETTER_FIELDS.length; i++) {
    if (flat[i * 2] !== DEAD_LETTER_FIELDS[i]) return null;
  }
  const deliveries = Number(flat[3]);
  if (!Number.isSafeInteger(deliveries) || deliveries < 0) return null;
  // A replayed message dead-lettered again: its replay marker is not one of its own fields.
  const fields = flat[6] === REPLAY_FOR_FIELD ? flat.slice(8) : flat.slice(6);
  let key: string | null = null;
  for (let i = 0; i + 1 < fields.length; i += 2) {
    if (fields[i] === keyField) {
      key = fields[i + 1]!;
      break;
    }
  }
  return { shard, shared, id, originalId: flat[1]!, deliveries, error: flat[5]!, key, fields };
}

/**
 * Where a replay sends a dead letter: the shard its key routes to under the current shard
 * count (the producer's partitioner, docs/partitioner.md); an entry without a key goes back to
 * its own shard, or, when a scale-in removed that shard, to `shard mod shardCount` (a removed
 * shard is read only up to its end).
 */
export function replayShard(letter: Pick<DeadLetter, 'shard' | 'key'>, shardCount: number): number {
  if (letter.key !== null) return shardForKey(letter.key, shardCount);
  return letter.shard < shardCount ? letter.shard : letter.shard % shardCount;
}

/** The error a dead letter keeps: the first line of its message, clipped. */
export function errorText(error: unknown): string {
  const text = error instanceof Error ? error.message || error.name : String(error);
  const line = text.split('\n')[0]!.trim();
  return line.length > MAX_ERROR_CHARS ? `${line.slice(0, MAX_ERROR_CHARS - 1)}…` : line;
}

const MOVE_SCRIPT = readFileSync(new URL('./lua/deadLetter-1.lua', import.meta.url), 'utf8');
let moveSha: string | null = null;

/** What {@link moveToDeadLetters} did (see `deadLetter-1.lua`). */
export type MoveOutcome =
  | { readonly outcome: 'moved'; readonly deliveries: number; readonly deadId: string }
  | { readonly outcome: 'not-pending' | 'below' | 'gone'; readonly deliveries: number };

/**
 * Moves entry `id` of `stream` to the dead-letter stream of consumer group `group`
 * (`<stream>:dead:<group>`) and acknowledges it there, atomically
 * (`deadLetter-1.lua`), if it is still pending for `consumer` ('' for any) with at least
 * `minDeliveries` deliveries.
 */
export async function moveToDeadLetters(
  redis: Redis,
  move: {
    readonly stream: string;
    readonly group: string;
    readonly id: string;
    readonly consumer: string;
    readonly minDeliveries: number;
    readonly error: string;
  },
): Promise<MoveOutcome> {
  const keys = [move.stream, deadLetterStream(move.stream, move.group)];
  const args = [move.group, move.id, move.consumer, String(move.minDeliveries), move.error];
  let reply: [string, number, string];
  try {
    moveSha ??= (await redis.script('LOAD', MOVE_SCRIPT)) as string;
    reply = (await redis.evalsha(moveSha, 2, ...keys, ...args)) as [string, number, string];
  } catch (error) {
    // The server lost its script cache (restart, SCRIPT FLUSH): send it whole.
    if (!(error instanceof Error) || !error.message.includes('NOSCRIPT')) throw error;
    reply = (await redis.eval(MOVE_SCRIPT, 2, ...keys, ...args)) as [string, number, string];
  }
  const [outcome, deliveries, deadId] = reply;
  if (outcome === 'moved') return { outcome, deliveries, deadId };
  return { outcome: outcome as 'not-pending' | 'below' | 'gone', deliveries };
}
