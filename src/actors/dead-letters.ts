import { CoordinatorError } from '../errors.js';
import { lifecycleRefusal } from '../machines/refusals.js';
import { allShards } from '../machines/group-state.js';
import {
  inSlices,
  purgeDeadLetters,
  readDeadLetters,
  replayDeadLetter,
  type ShardDeadLetters,
} from '../streams/dead-letter-admin.js';
import { deadLetterStream, replayShard, type DeadLetter } from '../streams/dead-letters.js';
import { keyErrorText } from '../streams/key-error.js';
import { READ_SLICE, type StreamsReader } from '../streams/streams-reader.js';
import type { GroupSnapshot } from './types.js';

/**
 * A group's dead letters (docs/protocol.md#dead-letters, docs/operations.md#dead-letters):
 * listed, replayed through the group's routing and purged by its owner, so that nobody needs
 * to reach the streams Redis by hand. A group's dead letters are those of its own dead-letter
 * streams `<streamPrefix>:<shard>:dead:<group>`, never another group's on the same prefix, and
 * the shards' shared `<streamPrefix>:<shard>:dead` (an older SDK's, not attributed to a group,
 * shown with `shared: true`); a replay is for this group alone.
 */

/**
 * One dead letter as the API shows it: as it is stored, its fields as an object (a name given
 * twice shows its last value).
 */
export type DeadLetterView = Omit<DeadLetter, 'fields'> & {
  readonly fields: Readonly<Record<string, string>>;
};

/**
 * One shard's dead letters for the group: its own dead-letter stream `stream` and the shard's
 * shared one (`shared`, an older SDK's, listed for every group on the prefix).
 */
export interface DeadLetterShardView {
  readonly shard: number;
  /** The group's own dead-letter stream `<streamPrefix>:<shard>:dead:<group>`. */
  readonly stream: string;
  /** Dead letters of the group on the shard: its own and the shared ones. */
  readonly count: number;
  /**
   * Redis's error about either key (`<key>: WRONGTYPE …`: its name holds another type), which
   * kept it from being read; null when both were read
   * (docs/operations.md#a-broken-shard-stream).
   */
  readonly error: string | null;
  /** The shard's shared dead-letter stream `<streamPrefix>:<shard>:dead`: how many it holds. */
  readonly shared: { readonly stream: string; readonly count: number };
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
  /** It was one of the shard's shared dead letters. */
  readonly shared: boolean;
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
  readonly gone: readonly {
    readonly shard: number;
    readonly id: string;
    readonly shared: boolean;
  }[];
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
    /** The group's own dead-letter stream. */
    readonly stream: string;
    /** Deleted from both streams of the shard. */
    readonly purged: number;
    /** Redis's error about either key, which was then left as it was; null otherwise. */
    readonly error: string | null;
    /** The shard's shared dead-letter stream, and how many were deleted from it. */
    readonly shared: { readonly stream: string; readonly purged: number };
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
    shared: letter.shared,
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
      shards: shards.map(({ shard, stream, count, error, shared }) => ({
        shard,
        stream,
        count,
        error,
        shared: { stream: shared.stream, count: shared.count },
      })),
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
    const { streamPrefix, consumerGroup } = snapshot.context.group;
    const replayed: ReplayedView[] = [];
    const gone: { shard: number; id: string; shared: boolean }[] = [];
    const failed: { shard: number; id: string; toShard: number; error: string }[] = [];
    // For this group only, a shared dead letter too (docs/protocol.md#dead-letters). A target
    // whose key holds another type is that shard's trouble, not the streams'
    // (docs/operations.md#a-broken-shard-stream): the letter stays, the others go on.
    const send = (letter: DeadLetter, toShard: number) =>
      reader.use(async (client) => {
        try {
          const newId = await replayDeadLetter(
            client,
            streamPrefix,
            consumerGroup,
            letter,
            toShard,
          );
          return { newId, error: null };
        } catch (error) {
          return { newId: null, error: keyErrorText(`${streamPrefix}:${toShard}`, error) };
        }
      });
    // A slice of letters at a time, those going to one shard one after the other in the order
    // listed, so that they arrive there in that order; different shards' at once.
    const targets = letters.map((letter) => replayShard(letter, shardCount));
    const sent: ({ newId: string | null; error: string | null } | null)[] = [];
    for (let from = 0; from < letters.length; from += READ_SLICE) {
      const chains = new Map<number, Promise<unknown>>();
      const slice = letters.slice(from, from + READ_SLICE).map((letter, i) => {
        const toShard = targets[from + i]!;
        if (select.dryRun) return Promise.resolve(null);
        const answer = (chains.get(toShard) ?? Promise.resolve()).then(() => send(letter, toShard));
        chains.set(toShard, answer);
        return answer;
      });
      sent.push(...(await Promise.all(slice)));
    }
    for (const [i, letter] of letters.entries()) {
      const toShard = targets[i]!;
      const answer = sent[i] ?? null;
      if (answer !== null && answer.error !== null) {
        failed.push({ shard: letter.shard, id: letter.id, toShard, error: answer.error });
        continue;
      }
      const newId = answer?.newId ?? null;
      if (!select.dryRun && newId === null) {
        gone.push({ shard: letter.shard, id: letter.id, shared: letter.shared });
        continue;
      }
      const { shard, id, shared, originalId, key } = letter;
      replayed.push({ shard, id, shared, originalId, key, toShard, newId });
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
   * Deletes the dead letters of `ids`, or every dead letter, of the chosen shards: the group's
   * own and the shards' shared ones, never another group's; 409 when the group is frozen or
   * failed closed.
   */
  async purge(
    snapshot: GroupSnapshot,
    select: { readonly shards?: readonly number[] | undefined; readonly ids?: readonly string[] },
  ): Promise<PurgeView> {
    this.assertChangeable(snapshot);
    const { streamPrefix, consumerGroup } = snapshot.context.group;
    const shards = chosenShards(this.shardsOf(snapshot), select.shards, 'body.shards');
    const reader = this.streams();
    // A key of that name that holds another type is left alone and named; the other keys are
    // purged (docs/operations.md#a-broken-shard-stream).
    const purgeOne = (stream: string) =>
      reader.use(async (client) => {
        try {
          const purged = await purgeDeadLetters(client, stream, select.ids ?? null);
          return { purged, error: null };
        } catch (error) {
          return { purged: 0, error: keyErrorText(stream, error) };
        }
      });
    // A slice of shards at a time, both streams of each at once (docs/operations.md#dead-letters).
    const result = await inSlices(shards, async (shard) => {
      const stream = deadLetterStream(`${streamPrefix}:${shard}`, consumerGroup);
      const sharedStream = deadLetterStream(`${streamPrefix}:${shard}`, null);
      const [own, shared] = await Promise.all([purgeOne(stream), purgeOne(sharedStream)]);
      const errors = [own.error, shared.error].filter((e): e is string => e !== null);
      return {
        shard,
        stream,
        purged: own.purged + shared.purged,
        error: errors.length === 0 ? null : errors.join('; '),
        shared: { stream: sharedStream, purged: shared.purged },
      };
    });
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
      readDeadLetters(
        client,
        snapshot.context.group.streamPrefix,
        snapshot.context.group.consumerGroup,
        {
          shards,
          limit: select.limit,
          ids: select.ids ? [...new Set(select.ids)] : null,
          keyField: select.keyField,
        },
      ),
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
