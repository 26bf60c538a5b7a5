import { CoordinatorError } from '../errors.js';
import { lifecycleRefusal } from '../machines/refusals.js';
import { allShards } from '../machines/group-state.js';
import {
  purgeDeadLetters,
  readDeadLetters,
  replayDeadLetter,
  type ShardDeadLetters,
} from '../streams/dead-letter-admin.js';
import { deadLetterStream, replayShard, type DeadLetter } from '../streams/dead-letters.js';
import { keyErrorText } from '../streams/key-error.js';
import type { StreamsReader } from '../streams/streams-reader.js';
import type { GroupSnapshot } from './types.js';

/**
 * A group's dead letters (docs/protocol.md#dead-letters, docs/operations.md#dead-letters):
 * listed, replayed through the group's routing and purged by its owner, so that nobody needs
 * to reach the streams Redis by hand.
 */

/**
 * One dead letter as the API shows it: as it is stored, its fields as an object (a name given
 * twice shows its last value).
 */
export type DeadLetterView = Omit<DeadLetter, 'fields'> & {
  readonly fields: Readonly<Record<string, string>>;
};

/** One shard's dead-letter stream. */
export interface DeadLetterShardView {
  readonly shard: number;
  readonly stream: string;
  readonly count: number;
  /**
   * Redis's error about the stream's key (`<key>: WRONGTYPE …`: its name holds another type),
   * which kept it from being read; null when read (docs/operations.md#a-broken-shard-stream).
   */
  readonly error: string | null;
}

/** `GET …/dead-letters`. */
export interface DeadLettersView {
  readonly streamPrefix: string;
  readonly consumerGroup: string;
  readonly shards: readonly DeadLetterShardView[];
  /** Oldest first per shard, shards ascending, at most `limit`. */
  readonly deadLetters: readonly DeadLetterView[];
  /** The chosen shards hold more than were listed. */
  readonly more: boolean;
}

/** One dead letter a replay sent (or, dry, would send) back. */
export interface ReplayedView {
  readonly shard: number;
  readonly id: string;
  readonly originalId: string;
  readonly key: string | null;
  /** The shard it goes to: where its key routes now (its own shard when it has no key). */
  readonly toShard: number;
  /** Its new id in `<streamPrefix>:<toShard>`; null in a dry run. */
  readonly newId: string | null;
}

/** `POST …/dead-letters/replay`. */
export interface ReplayView {
  readonly streamPrefix: string;
  readonly consumerGroup: string;
  readonly dryRun: boolean;
  /** The shard count routed with. */
  readonly shardCount: number;
  readonly replayed: readonly ReplayedView[];
  /** Chosen, but gone before it was replayed (replayed or purged by another request). */
  readonly gone: readonly { readonly shard: number; readonly id: string }[];
  /** `ids` no chosen shard holds. */
  readonly notFound: readonly string[];
  /** The chosen shards hold more dead letters than `limit` let this request take. */
  readonly more: boolean;
  /** Chosen shards whose dead-letter key Redis answered with an error: nothing read there. */
  readonly unreadable: readonly { readonly shard: number; readonly error: string }[];
  /**
   * Dead letters not sent because Redis answered their target shard's key with an error (its
   * name holds another type): each is still a dead letter, `error` says why.
   */
  readonly failed: readonly {
    readonly shard: number;
    readonly id: string;
    readonly toShard: number;
    readonly error: string;
  }[];
}

/** `POST …/dead-letters/purge`. */
export interface PurgeView {
  readonly streamPrefix: string;
  readonly consumerGroup: string;
  readonly shards: readonly {
    readonly shard: number;
    readonly stream: string;
    readonly purged: number;
    /** Redis's error about the key, which was then left as it was; null otherwise. */
    readonly error: string | null;
  }[];
  readonly purged: number;
}

/** Which dead letters a request is about. */
export interface DeadLetterSelection {
  /** Omitted: every shard of the group, retiring ones included. */
  readonly shards?: readonly number[] | undefined;
  readonly limit: number;
  /** Only these dead-letter ids. */
  readonly ids?: readonly string[] | undefined;
  /** The entry field holding the message key (the producer's `keyField`). */
  readonly keyField: string;
}

/**
 * The shards a request names, ascending, or all of `valid` when it names none; 400
 * `VALIDATION_FAILED` naming those that are not shards of the group.
 */
export function chosenShards(
  valid: readonly number[],
  requested: readonly number[] | undefined,
  field: string,
): number[] {
  if (requested === undefined) return [...valid].sort((a, b) => a - b);
  const known = new Set(valid);
  const bad = [...new Set(requested)].filter((shard) => !known.has(shard));
  if (bad.length > 0) {
    const range = valid.length === 0 ? 'none' : valid.join(', ');
    const message = `not a shard of the group: ${bad.join(', ')} (its shards: ${range})`;
    throw new CoordinatorError('VALIDATION_FAILED', message, {
      details: { issues: [{ field, message }] },
    });
  }
  return [...new Set(requested)].sort((a, b) => a - b);
}

function view(letter: DeadLetter): DeadLetterView {
  const fields: Record<string, string> = {};
  for (let i = 0; i + 1 < letter.fields.length; i += 2) {
    fields[letter.fields[i]!] = letter.fields[i + 1]!;
  }
  return {
    shard: letter.shard,
    id: letter.id,
    originalId: letter.originalId,
    deliveries: letter.deliveries,
    error: letter.error,
    key: letter.key,
    fields,
  };
}

/** The dead letters of the groups served here (see the module comment). */
export class GroupDeadLetters {
  constructor(private readonly reader: StreamsReader | null) {}

  async list(snapshot: GroupSnapshot, select: DeadLetterSelection): Promise<DeadLettersView> {
    const { shards, letters, more } = await this.read(snapshot, select, 'query.shards');
    return {
      ...this.names(snapshot),
      shards: shards.map(({ shard, stream, count, error }) => ({ shard, stream, count, error })),
      deadLetters: letters.map(view),
      more,
    };
  }

  /**
   * Sends the chosen dead letters back through the group's routing (unless `dryRun`), each
   * appended and deleted in one step; 409 when the group is frozen or failed closed.
   */
  async replay(
    snapshot: GroupSnapshot,
    select: DeadLetterSelection & { readonly dryRun: boolean },
  ): Promise<ReplayView> {
    this.assertChangeable(snapshot);
    const { shardCount } = snapshot.context.group;
    const { shards, letters, more } = await this.read(snapshot, select, 'body.shards');
    const reader = this.streams();
    const { streamPrefix } = snapshot.context.group;
    const replayed: ReplayedView[] = [];
    const gone: { shard: number; id: string }[] = [];
    const failed: { shard: number; id: string; toShard: number; error: string }[] = [];
    for (const letter of letters) {
      const toShard = replayShard(letter, shardCount);
      // A target whose key holds another type is that shard's trouble, not the streams'
      // (docs/operations.md#a-broken-shard-stream): the letter stays, the others go on.
      const sent = select.dryRun
        ? null
        : await reader.use(async (client) => {
            try {
              const newId = await replayDeadLetter(client, streamPrefix, letter, toShard);
              return { newId, error: null };
            } catch (error) {
              return { newId: null, error: keyErrorText(`${streamPrefix}:${toShard}`, error) };
            }
          });
      if (sent !== null && sent.error !== null) {
        failed.push({ shard: letter.shard, id: letter.id, toShard, error: sent.error });
        continue;
      }
      const newId = sent?.newId ?? null;
      if (!select.dryRun && newId === null) {
        gone.push({ shard: letter.shard, id: letter.id });
        continue;
      }
      const { shard, id, originalId, key } = letter;
      replayed.push({ shard, id, originalId, key, toShard, newId });
    }
    const found = new Set(shards.flatMap((s) => s.found));
    return {
      ...this.names(snapshot),
      dryRun: select.dryRun,
      shardCount,
      replayed,
      gone,
      notFound: select.ids ? [...new Set(select.ids)].filter((id) => !found.has(id)) : [],
      more,
      unreadable: shards.flatMap(({ shard, error }) => (error === null ? [] : [{ shard, error }])),
      failed,
    };
  }

  /**
   * Deletes the dead letters of `ids`, or every dead letter, of the chosen shards; 409 when the
   * group is frozen or failed closed.
   */
  async purge(
    snapshot: GroupSnapshot,
    select: { readonly shards?: readonly number[] | undefined; readonly ids?: readonly string[] },
  ): Promise<PurgeView> {
    this.assertChangeable(snapshot);
    const { streamPrefix } = snapshot.context.group;
    const shards = chosenShards(this.shardsOf(snapshot), select.shards, 'body.shards');
    const reader = this.streams();
    const result = [];
    for (const shard of shards) {
      const stream = deadLetterStream(`${streamPrefix}:${shard}`);
      // A key of that name that holds another type is left alone and named; the other shards
      // are purged (docs/operations.md#a-broken-shard-stream).
      const outcome = await reader.use(async (client) => {
        try {
          const purged = await purgeDeadLetters(client, streamPrefix, shard, select.ids ?? null);
          return { purged, error: null };
        } catch (error) {
          return { purged: 0, error: keyErrorText(stream, error) };
        }
      });
      result.push({ shard, stream, ...outcome });
    }
    return {
      ...this.names(snapshot),
      shards: result,
      purged: result.reduce((sum, s) => sum + s.purged, 0),
    };
  }

  private async read(
    snapshot: GroupSnapshot,
    select: DeadLetterSelection,
    field: string,
  ): Promise<{ shards: ShardDeadLetters[]; letters: DeadLetter[]; more: boolean }> {
    const shards = chosenShards(this.shardsOf(snapshot), select.shards, field);
    const reader = this.streams();
    const read = await reader.use((client) =>
      readDeadLetters(client, snapshot.context.group.streamPrefix, {
        shards,
        limit: select.limit,
        ids: select.ids ? [...new Set(select.ids)] : null,
        keyField: select.keyField,
      }),
    );
    const letters = read.flatMap((s) => s.letters);
    // With ids, what the chosen shards hold of them; else every dead letter they hold.
    const total = select.ids
      ? read.reduce((sum, s) => sum + s.found.length, 0)
      : read.reduce((sum, s) => sum + s.count, 0);
    return { shards: read, letters, more: total > letters.length };
  }

  private shardsOf(snapshot: GroupSnapshot): number[] {
    return allShards(snapshot.context.group).map((record) => record.shard);
  }

  private names(snapshot: GroupSnapshot) {
    const { streamPrefix, consumerGroup } = snapshot.context.group;
    return { streamPrefix, consumerGroup };
  }

  private assertChangeable(snapshot: GroupSnapshot): void {
    const refusal = lifecycleRefusal(snapshot.context.group);
    if (refusal) throw new CoordinatorError(refusal.code, refusal.message);
  }

  private streams(): StreamsReader {
    if (this.reader === null) {
      throw new CoordinatorError(
        'STREAMS_UNAVAILABLE',
        'the coordinator does not know where the streams are: set coordinator.streams.url (COORDINATOR_STREAMS_URL)',
      );
    }
    return this.reader;
  }
}
