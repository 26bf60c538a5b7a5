/**
 * Reads one shard (one Redis stream) for a consumer: creates the Redis consumer group when
 * missing, first claims the entries previous owners left pending (XAUTOCLAIM), then reads new
 * ones (XREADGROUP), hands each to the handler and acks it once the handler resolved. It owns a
 * connection of its own for the blocking reads, so stopping it cuts a read short at once. With
 * a retry policy, an entry the handler rejected is claimed and handled again after the backoff,
 * and one delivered `maxDeliveries` times is moved to the group's dead-letter stream of the
 * shard instead; a dead letter replayed for another group is acknowledged, not handed over
 * (docs/protocol.md#dead-letters).
 *
 * A Redis command that fails is retried with backoff (the group is created again, should it
 * have gone); one that hangs (ioredis queues commands while it reconnects) is waited for. Either
 * way the reader says since when it has been unable to read ({@link ShardReader.stalledSince}),
 * and the consumer decides when that is too long.
 */
import type { Redis } from 'ioredis';
import { errorText, moveToDeadLetters, replayTarget } from '../streams/dead-letters.js';
import { isKeyError } from '../streams/key-error.js';
import type { GroupStart } from './member-state.js';
import { settledBy } from './retry.js';
import { appendSeal, compareStreamIds, isSeal, type SealVersion } from './stream-seal.js';

/**
 * The retries of a consumer without a retry policy, for the entries before a retiring shard's
 * seal that its handler rejected: after 1 s, until acknowledged (docs/protocol.md#dead-letters).
 */
const SEAL_RETRY: RetryPolicy = { backoffMs: 1_000, maxDeliveries: null };
/** One message handed to a consumer's handler. */
export interface ConsumerMessage {
  /** The shard (stream `<streamPrefix>:<shard>`) it was read from. */
  readonly shard: number;
  /** The Redis stream entry id. */
  readonly id: string;
  /** The producer's key (see the producer's `keyField`); `null` for entries without one. */
  readonly key: string | null;
  /** The entry's other fields. */
  readonly fields: Readonly<Record<string, string>>;
  /**
   * Aborted when the consumer gives the shard up without waiting (fenced, session lost, or a
   * revoke's drain timeout): a handler that can stop early should, its message stays pending
   * and the next owner gets it again.
   */
  readonly signal: AbortSignal;
}

export { isKeyError };

/** The handler of a consumer: resolves when the message is done; a rejection leaves it pending. */
export type MessageHandler = (message: ConsumerMessage) => Promise<void> | void;

export interface ShardReaderOptions {
  readonly shard: number;
  readonly stream: string;
  readonly group: string;
  readonly consumerName: string;
  /** Connection for group creation, claims and acks (shared). */
  readonly redis: Redis;
  /** Connection of its own for blocking reads; closed by the reader. */
  readonly reader: Redis;
  readonly handler: MessageHandler;
  readonly keyField: string;
  readonly batchSize: number;
  readonly blockMs: number;
  /** Where the Redis consumer group starts if this reader has to create it. */
  readonly createAt: GroupStart;
  /** A handler rejected: the message is left pending. */
  readonly onError: (error: unknown, shard: number) => void;
  /** A Redis command failed; it is retried. */
  readonly onRedisError: (error: unknown, shard: number) => void;
  /** A Redis command succeeded after one of this reader's failed. */
  readonly onRedisRecovered?: (shard: number) => void;
  /** Called once a retiring shard has been read to its end (up to its seal). */
  readonly onRetired: (shard: number) => void;
  /** A message was handled: acknowledged (`acked`), or left pending (the handler rejected). */
  readonly onHandled?: (shard: number, id: string, acked: boolean) => void;
  /**
   * Retries of entries the handler rejected (docs/protocol.md#dead-letters); null: none, a
   * rejected entry stays pending for the shard's next owner.
   */
  readonly retry?: RetryPolicy | null;
  /** An entry was moved to the group's dead-letter stream of the shard. */
  readonly onDeadLettered?: (letter: DeadLetteredEvent) => void;
  /** A dead letter replayed for another consumer group was acknowledged, not handled. */
  readonly onSkipped?: (skipped: ReplaySkippedEvent) => void;
}

/**
 * An entry of the shard that a replay appended for another consumer group on the stream prefix
 * (docs/protocol.md#dead-letters): acknowledged for this group without reaching its handler.
 */
export interface ReplaySkippedEvent {
  readonly shard: number;
  /** The entry's id in the shard stream. */
  readonly id: string;
  /** The consumer group it was replayed for. */
  readonly for: string;
}

/** How a reader retries entries the handler rejected. */
export interface RetryPolicy {
  /** How long a rejected entry stays pending before it is delivered again. */
  readonly backoffMs: number;
  /**
   * An entry delivered this many times and still pending is not delivered again but moved to
   * the dead-letter stream; null: delivered again without end.
   */
  readonly maxDeliveries: number | null;
}

/** An entry moved to its shard's dead-letter stream. */
export interface DeadLetteredEvent {
  readonly shard: number;
  /** The entry's id in the shard stream. */
  readonly id: string;
  /** Its id in the group's dead-letter stream `<streamPrefix>:<shard>:dead:<consumerGroup>`. */
  readonly deadLetterId: string;
  /** How many times it was delivered. */
  readonly deliveries: number;
  /** The handler's last error ('' when this consumer did not see it fail). */
  readonly error: string;
}

/** `XPENDING` extended form: id, consumer, idle ms, delivery count. */
type PendingRow = [id: string, consumer: string, idleMs: number, deliveries: number];

/** Last errors kept per reader for the dead letters (the oldest are forgotten beyond it). */
const MAX_KEPT_ERRORS = 10_000;

type StreamEntry = [id: string, fields: string[]];

/** The reader of one shard; see the module comment. */
export class ShardReader {
  private stopping = false;
  /**
   * While retiring: the id of the seal this reader appended (src/client/stream-seal.ts). The
   * shard is read to its end once an entry at or after it was read.
   */
  private seal: Promise<string | null> | null = null;
  private readonly abort = new AbortController();
  private inFlight: Promise<void> | null = null;
  private readonly loop: Promise<void>;
  /** The pending entries of earlier owners were claimed: a retry after an error reads on. */
  private claimed = false;
  /**
   * The highest id handed to {@link ShardReader.process}: entries of this consumer pending
   * above it were delivered by a read whose reply never arrived.
   */
  private lastSeenId = '0-0';
  /**
   * A read may have been delivered without its reply arriving (the reading connection closed,
   * or a command failed): this consumer's pending entries above {@link lastSeenId} are read
   * back (XREADGROUP with an id) before anything new.
   */
  private unseen = false;
  /** Redis commands under way, each with the time from which its wait counts as a stall. */
  private readonly waiting = new Map<symbol, number>();
  /**
   * When the current run of failed Redis commands began (null: the last one succeeded, or
   * Redis answered with an error about this shard's key, {@link isKeyError}).
   */
  private failingSince: number | null = null;
  /** The last Redis command failed (for {@link ShardReaderOptions.onRedisRecovered}). */
  private failed = false;
  /** Ends the backoff after a failure early (stop). */
  private wakeUp: (() => void) | null = null;
  /** When the next retry of rejected entries is due (ms since epoch); null: none is. */
  private retryDueAt: number | null = null;
  /** A retiring shard's seal was reached: its rejected entries are being retried. */
  private finishingSeal = false;
  /** The handler's last error per entry still pending, for its dead letter. */
  private readonly lastErrors = new Map<string, string>();

  constructor(private readonly options: ShardReaderOptions) {
    // ioredis sends a read again on the new connection: what Redis delivered to the one it
    // lost stays pending for this consumer, and a read of new entries ('>') never returns it.
    options.reader.on('close', () => (this.unseen = true));
    this.loop = this.run();
  }

  /**
   * From now on, consume the shard to its end and then report it retired: seals the stream
   * with the routing version that removed it, so producers that still route to it are refused
   * from here on, and reads up to that seal.
   */
  retire(version: SealVersion): void {
    this.seal = this.appendSeal(version);
  }

  /** A retiring shard came back (a scale-in rolled back): read on with no end. */
  unretire(): void {
    this.seal = null;
  }

  /**
   * Since when this reader has been unable to make progress on Redis (ms since epoch), or null
   * when it is not: the start of a run of failed commands, or of a command still waiting for
   * its reply (a blocking read counts only once its block time is over). Time spent in the
   * handler never counts.
   */
  stalledSince(): number | null {
    let since = this.failingSince;
    for (const at of this.waiting.values()) if (since === null || at < since) since = at;
    return since;
  }

  /**
   * Stops reading at once. With `drain`, waits for the message in hand (at most
   * `drainTimeoutMs`, then aborts it and stops waiting) and for the reader to wind down (within
   * the same time: a Redis command that hangs is not waited for longer); without, aborts it and
   * returns. Either way nothing more is acked after the handler's message was abandoned, so it
   * stays pending.
   */
  async stop(mode: { drain: boolean; drainTimeoutMs?: number }): Promise<void> {
    this.stopping = true;
    this.wakeUp?.();
    this.options.reader.disconnect();
    const timeout = mode.drainTimeoutMs ?? Infinity;
    const deadline = Date.now() + timeout;
    if (mode.drain && this.inFlight) await settledBy(this.inFlight, deadline);
    this.abort.abort();
    if (mode.drain) await settledBy(this.loop, deadline);
  }

  private async run(): Promise<void> {
    const { shard } = this.options;
    try {
      for (let attempt = 0; !this.stopping; attempt++) {
        try {
          await this.readUntilStopped(() => (attempt = 0));
        } catch (error) {
          if (this.stopping) break;
          this.unseen = true;
          this.options.onRedisError(error, shard);
          await this.pause(Math.min(2_000, 50 * 2 ** Math.min(attempt, 10)));
        }
      }
    } finally {
      this.options.reader.disconnect();
    }
  }

  /** Creates the group if missing, claims what earlier owners left pending, reads on. */
  private async readUntilStopped(onRead: () => void): Promise<void> {
    const { redis, stream, group } = this.options;
    const createAt = await this.startId();
    const created = await this.command(() =>
      redis.xgroup('CREATE', stream, group, createAt, 'MKSTREAM').then(
        () => true,
        (error: Error) => {
          if (!error.message.includes('BUSYGROUP')) throw error;
          return false;
        },
      ),
    );
    // A group created again (it had gone) may hand out ids below those seen before.
    if (created) this.lastSeenId = '0-0';
    if (!this.claimed) {
      if (this.options.retry) await this.sweepPending(0, null);
      else await this.claimPending();
      this.claimed = true;
    }
    while (!this.stopping) {
      if (this.retryDueAt !== null && Date.now() >= this.retryDueAt) {
        await this.retryRejected('+');
        if (this.stopping) break;
      }
      const history = this.unseen;
      const entries = history ? await this.readUnseen() : await this.readNew();
      onRead();
      if (this.stopping) break;
      // Closed during the read: what it returned is read back, in order, with the rest.
      if (!history && this.unseen) continue;
      if (entries.length > 0) await this.process(entries);
    }
  }

  /**
   * Retries the entries of this consumer up to `end` that the handler rejected and whose
   * backoff is over. A sweep that fails stays due: nothing else would look at the entries it
   * did not get to.
   */
  private async retryRejected(end: string): Promise<void> {
    const due = this.retryDueAt!;
    this.retryDueAt = null;
    try {
      await this.sweepPending(this.retryPolicy()!.backoffMs, this.options.consumerName, end);
    } catch (error) {
      this.retryAt(due);
      throw error;
    }
  }

  /**
   * A retiring shard read to its seal (`sealId`): the entries before it that the handler
   * rejected are retried, after their backoff, until acknowledged or dead-lettered, before the
   * end is reported. Once the shard is retired nobody reads it again
   * (docs/protocol.md#dead-letters). A failed sweep is retried here: the seal is acked, and a
   * reader starting over would read past it. An error about the shard's key ends the retries:
   * the entries' pending state went with the key or the group.
   */
  private async finishRetries(sealId: string): Promise<void> {
    for (let attempt = 0; !this.stopping && this.retryDueAt !== null;) {
      const wait = this.retryDueAt - Date.now();
      if (wait > 0) {
        await this.pause(wait);
        continue;
      }
      try {
        await this.retryRejected(`(${sealId}`);
        attempt = 0;
      } catch (error) {
        if (this.stopping || isKeyError(error)) return;
        this.options.onRedisError(error, this.options.shard);
        await this.pause(Math.min(2_000, 50 * 2 ** Math.min(attempt++, 10)));
      }
    }
  }

  /**
   * Goes through the pending entries idle for at least `minIdleMs` (of `consumer`, or of every
   * consumer when null: a shard taken over) in id order: one delivered `maxDeliveries` times
   * already is moved to the dead-letter stream, any other is claimed (XCLAIM, which counts a
   * delivery) and handled again. One still too recently delivered sets when to look again.
   * `end`: the last id looked at (`+`: every one).
   */
  private async sweepPending(minIdleMs: number, consumer: string | null, end = '+'): Promise<void> {
    const { redis, stream, group, consumerName, batchSize } = this.options;
    const { maxDeliveries } = this.retryPolicy()!;
    let start = '-';
    while (!this.stopping) {
      const rows = (await this.command(() =>
        consumer === null
          ? redis.call('XPENDING', stream, group, start, end, batchSize)
          : redis.call('XPENDING', stream, group, start, end, batchSize, consumer),
      )) as PendingRow[];
      for (const [id, , idleMs, deliveries] of rows) {
        if (this.stopping) return;
        if (idleMs < minIdleMs) {
          this.retryAt(Date.now() + (minIdleMs - idleMs));
        } else if (maxDeliveries !== null && deliveries >= maxDeliveries) {
          await this.deadLetter(id, consumer ?? '', maxDeliveries);
        } else {
          const claimed = (await this.command(() =>
            redis.xclaim(stream, group, consumerName, minIdleMs, id),
          )) as StreamEntry[];
          // An entry deleted from the stream while pending is dropped by XCLAIM: nothing to do.
          // Nothing comes back too when this XCLAIM is one ioredis sent again after a reply lost
          // to a closed connection: the first one claimed the entry, so its idle time is back
          // to 0. An entry still in the stream is looked at again after the backoff.
          const live = claimed.filter((entry) => Array.isArray(entry?.[1]));
          if (live.length === 0) {
            const [entry] = await this.command(() => redis.xrange(stream, id, id));
            if (entry) this.retryAt(Date.now() + minIdleMs);
            else this.lastErrors.delete(id);
          }
          await this.process(live);
        }
      }
      if (rows.length < batchSize) break;
      start = `(${rows.at(-1)![0]}`;
    }
  }

  /** Moves `id` to the dead-letter stream (if still pending as expected) and says so. */
  private async deadLetter(id: string, consumer: string, maxDeliveries: number): Promise<void> {
    const { redis, stream, group, shard } = this.options;
    const error = this.lastErrors.get(id) ?? '';
    const result = await this.command(() =>
      moveToDeadLetters(redis, {
        stream,
        group,
        id,
        consumer,
        minDeliveries: maxDeliveries,
        error,
      }),
    );
    if (result.outcome !== 'below') this.lastErrors.delete(id);
    if (result.outcome === 'moved') {
      this.options.onDeadLettered?.({
        shard,
        id,
        deadLetterId: result.deadId,
        deliveries: result.deliveries,
        error,
      });
    }
  }

  /**
   * How rejected entries are retried: the consumer's policy; while a retiring shard's seal is
   * being finished, {@link SEAL_RETRY} for a consumer without one; else null (not retried).
   */
  private retryPolicy(): RetryPolicy | null {
    return this.options.retry ?? (this.finishingSeal ? SEAL_RETRY : null);
  }

  /** The next retry is due at `at` at the latest. */
  private retryAt(at: number): void {
    if (this.retryDueAt === null || at < this.retryDueAt) this.retryDueAt = at;
  }

  /**
   * The ID the Redis consumer group is created at, should it be missing (an existing group
   * keeps its position). `since`: the older of the stream's last entry and that time, so that
   * what was written after it is read and what came before is not.
   */
  private async startId(): Promise<string> {
    const start = this.options.createAt;
    if (start.at === 'beginning') return '0';
    if (start.at === 'end') return '$';
    const { redis, stream } = this.options;
    const [last] = await this.command(() => redis.xrevrange(stream, '+', '-', 'COUNT', 1));
    // Empty (or missing): nothing to skip, and whatever lands before the group is created was
    // written after the group existed, so it is read too.
    if (!last) return '0';
    const since = `${Math.max(0, Math.floor(start.ms))}-0`;
    return compareStreamIds(last[0], since) < 0 ? last[0] : since;
  }

  /**
   * Runs one Redis command, keeping track of how long it waits and whether it failed (see
   * {@link ShardReader.stalledSince}). `graceMs`: how long the command may take by design.
   */
  private async command<T>(send: () => Promise<T>, graceMs = 0): Promise<T> {
    const token = Symbol();
    this.waiting.set(token, Date.now() + graceMs);
    try {
      const result = await send();
      if (this.failed) {
        this.failed = false;
        this.options.onRedisRecovered?.(this.options.shard);
      }
      this.failingSince = null;
      return result;
    } catch (error) {
      this.failed = true;
      // Redis answered: it can be reached, whatever is wrong with this shard's key.
      if (isKeyError(error)) this.failingSince = null;
      else if (!this.stopping) this.failingSince ??= Date.now();
      throw error;
    } finally {
      this.waiting.delete(token);
    }
  }

  /** Waits `ms` after a failure, or until stop(). */
  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakeUp = null;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wakeUp = done;
    });
  }

  /** Appends the seal, retrying until it is written or the reader stops; resolves to its id. */
  private async appendSeal(version: SealVersion): Promise<string | null> {
    const { redis, stream, shard } = this.options;
    for (let attempt = 0; !this.stopping; attempt++) {
      try {
        return await this.command(() => appendSeal(redis, stream, version));
      } catch (error) {
        if (this.stopping) break;
        this.options.onRedisError(error, shard);
        await new Promise((resolve) => setTimeout(resolve, Math.min(1_000, 50 * 2 ** attempt)));
      }
    }
    return null;
  }

  /** XAUTOCLAIM everything pending in the shard: it is ours now, whoever read it before. */
  private async claimPending(): Promise<void> {
    const { redis, stream, group, consumerName, batchSize } = this.options;
    let cursor = '0-0';
    do {
      const reply = (await this.command(() =>
        redis.xautoclaim(stream, group, consumerName, 0, cursor, 'COUNT', batchSize),
      )) as [string, StreamEntry[], string[]?];
      cursor = reply[0];
      // Entries deleted from the stream while pending come back as null fields: nothing to do.
      await this.process(reply[1].filter((entry) => Array.isArray(entry[1])));
    } while (cursor !== '0-0' && !this.stopping);
  }

  /**
   * This consumer's pending entries above {@link lastSeenId}, up to one batch (without
   * blocking); another batch is read next when this one is full.
   */
  private async readUnseen(): Promise<StreamEntry[]> {
    this.unseen = false;
    const entries = await this.readGroup(this.lastSeenId);
    if (entries.length >= this.options.batchSize) this.unseen = true;
    // Entries deleted from the stream while pending come back without fields: nothing to do
    // (a batch of nothing else is passed over; the handled entries move the start on).
    const live = entries.filter((entry) => Array.isArray(entry[1]));
    if (live.length === 0 && entries.length > 0) this.seen(entries.at(-1)![0]);
    return live;
  }

  /** An entry at `id` was handed over (or skipped): later reads of unseen entries start after it. */
  private seen(id: string): void {
    if (compareStreamIds(id, this.lastSeenId) > 0) this.lastSeenId = id;
  }

  private async readNew(): Promise<StreamEntry[]> {
    // A retry falls due during the read: the read ends by then (BLOCK 0 would wait forever).
    const blockMs =
      this.retryDueAt === null
        ? this.options.blockMs
        : Math.max(1, Math.min(this.options.blockMs, this.retryDueAt - Date.now()));
    try {
      return await this.readGroup('>', blockMs);
    } catch (error) {
      // A read cut short by stop() is how stopping looks from here.
      if (this.stopping) return [];
      throw error;
    }
  }

  /**
   * One XREADGROUP of this consumer on the shard, a batch at most: `'>'` for entries nobody
   * was given yet (blocking up to `blockMs`), an id for its own pending entries after it.
   */
  private async readGroup(from: string, blockMs?: number): Promise<StreamEntry[]> {
    const { reader, stream, group, consumerName, batchSize } = this.options;
    const block = blockMs === undefined ? [] : ['BLOCK', blockMs];
    // One signature for both forms (ioredis types each as its own overload).
    const xreadgroup = reader.xreadgroup.bind(reader) as (
      ...args: Array<string | number>
    ) => Promise<unknown>;
    const reply = (await this.command(
      () =>
        xreadgroup(
          'GROUP',
          group,
          consumerName,
          'COUNT',
          batchSize,
          ...block,
          'STREAMS',
          stream,
          from,
        ),
      blockMs,
    )) as [string, StreamEntry[]][] | null;
    return reply?.[0]?.[1] ?? [];
  }

  /** Handles entries one by one (a shard keeps its order), acking each once its handler is done. */
  private async process(entries: readonly StreamEntry[]): Promise<void> {
    // A retiring shard's seal retries rejected entries inside its own handling.
    const outer = this.inFlight;
    for (const [id, flat] of entries) {
      if (this.stopping) return;
      this.seen(id);
      const work = this.handle(id, flat);
      this.inFlight = work;
      try {
        await work;
      } finally {
        this.inFlight = outer;
      }
    }
  }

  private async handle(id: string, flat: readonly string[]): Promise<void> {
    const { shard, keyField, handler, redis, stream, group } = this.options;
    if (isSeal(flat)) {
      const acked = await this.command(() => redis.xack(stream, group, id)).then(
        () => true,
        () => false,
      );
      const seal = this.seal;
      const sealId = seal && (await seal);
      // Our own seal (or one after it) was read: everything before it was too. The end is
      // reached even if its ack failed: a retry would read past it and never see it again.
      if (sealId !== null && this.seal === seal && compareStreamIds(id, sealId) >= 0) {
        // Entries before the seal that the handler rejected are retried first, also by a
        // consumer without a retry policy: a retired shard has no next owner to claim them.
        if (!this.options.retry) {
          this.finishingSeal = true;
          this.retryAt(Date.now());
        }
        await this.finishRetries(id);
        this.finishingSeal = false;
        // Stopped, or the shard came back (a scale-in rolled back) meanwhile: no end.
        if (this.stopping || this.seal !== seal) return;
        this.stopping = true;
        this.options.reader.disconnect();
        this.options.onRetired(shard);
        return;
      }
      if (!acked) await this.acknowledge(id);
      return;
    }
    // A dead letter replayed for another consumer group on the stream prefix is that group's
    // alone: acknowledged here, never handed over (docs/protocol.md#dead-letters).
    const target = replayTarget(flat, group);
    if (target.skip) {
      if (!(await this.acknowledge(id))) return;
      this.options.onSkipped?.({ shard, id, for: target.for });
      return;
    }
    const own = target.fields;
    const fields: Record<string, string> = {};
    let key: string | null = null;
    for (let i = 0; i + 1 < own.length; i += 2) {
      const name = own[i]!;
      const value = own[i + 1]!;
      if (name === keyField && key === null) key = value;
      else fields[name] = value;
    }
    try {
      await handler({ shard, id, key, fields, signal: this.abort.signal });
    } catch (error) {
      // Left pending: retried after the backoff (and dead-lettered after maxDeliveries) when
      // the consumer retries (or finishes a retiring shard), else the shard's next owner gets
      // it again.
      const retry = this.retryPolicy();
      if (retry) {
        this.lastErrors.delete(id);
        this.lastErrors.set(id, errorText(error));
        if (this.lastErrors.size > MAX_KEPT_ERRORS) {
          this.lastErrors.delete(this.lastErrors.keys().next().value!);
        }
        this.retryAt(Date.now() + retry.backoffMs);
      }
      this.options.onHandled?.(shard, id, false);
      this.options.onError(error, shard);
      return;
    }
    if (this.abort.signal.aborted) return;
    if (!(await this.acknowledge(id))) return;
    this.lastErrors.delete(id);
    this.options.onHandled?.(shard, id, true);
  }

  /**
   * Acks an entry that is done. A failed XACK is retried with backoff, the rest of the batch
   * waiting in order behind it: given up, the entry would stay pending for this consumer, and
   * the entries read with it would never be handled while the shard stays here. It is retried
   * until it succeeds or the message is abandoned (the reader stopped without waiting, or a
   * drain ran out of time; it then stays pending for the next owner): false. An error about
   * the shard's key is thrown: the reader creates the group again.
   */
  private async acknowledge(id: string): Promise<boolean> {
    const { redis, stream, group, shard } = this.options;
    for (let attempt = 0; ; attempt++) {
      try {
        await this.command(() => redis.xack(stream, group, id));
        return true;
      } catch (error) {
        if (isKeyError(error)) throw error;
        if (this.abort.signal.aborted) return false;
        this.options.onRedisError(error, shard);
        await this.pause(Math.min(2_000, 50 * 2 ** Math.min(attempt, 10)));
        if (this.abort.signal.aborted) return false;
      }
    }
  }

  /** Whether a message of this shard is in the handler now. */
  busy(): boolean {
    return this.inFlight !== null;
  }
}
