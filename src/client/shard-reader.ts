/**
 * Reads one shard (one Redis stream) for a consumer: creates the Redis consumer group when
 * missing, first claims the entries previous owners left pending (XAUTOCLAIM), then reads new
 * ones (XREADGROUP), hands each to the handler and acks it once the handler resolved. It owns a
 * connection of its own for the blocking reads, so stopping it cuts a read short at once.
 */
import type { Redis } from 'ioredis';
import { appendSeal, compareStreamIds, isSeal, type SealVersion } from './stream-seal.js';

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
  readonly onError: (error: unknown, shard: number) => void;
  /** Called once a retiring shard has been read to its end (up to its seal). */
  readonly onRetired: (shard: number) => void;
}

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

  constructor(private readonly options: ShardReaderOptions) {
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
   * Stops reading at once. With `drain`, waits for the message in hand (at most
   * `drainTimeoutMs`, then aborts it and stops waiting); without, aborts it and returns.
   * Either way nothing more is acked after this resolves, so an abandoned message stays pending.
   */
  async stop(mode: { drain: boolean; drainTimeoutMs?: number }): Promise<void> {
    this.stopping = true;
    this.options.reader.disconnect();
    if (mode.drain && this.inFlight) {
      const timeout = mode.drainTimeoutMs ?? Infinity;
      let timer: NodeJS.Timeout | undefined;
      const expired = new Promise<void>((resolve) => {
        if (Number.isFinite(timeout)) timer = setTimeout(resolve, timeout);
      });
      await Promise.race([this.inFlight.catch(() => undefined), expired]);
      clearTimeout(timer);
    }
    this.abort.abort();
    if (mode.drain) await this.loop.catch(() => undefined);
  }

  private async run(): Promise<void> {
    const { redis, stream, group, shard } = this.options;
    try {
      await redis.xgroup('CREATE', stream, group, '0', 'MKSTREAM').catch((error: Error) => {
        if (!error.message.includes('BUSYGROUP')) throw error;
      });
      await this.claimPending();
      while (!this.stopping) {
        const entries = await this.readNew();
        if (this.stopping) break;
        if (entries.length > 0) await this.process(entries);
      }
    } catch (error) {
      if (!this.stopping) this.options.onError(error, shard);
    } finally {
      this.options.reader.disconnect();
    }
  }

  /** Appends the seal, retrying until it is written or the reader stops; resolves to its id. */
  private async appendSeal(version: SealVersion): Promise<string | null> {
    const { redis, stream, shard } = this.options;
    for (let attempt = 0; !this.stopping; attempt++) {
      try {
        return await appendSeal(redis, stream, version);
      } catch (error) {
        this.options.onError(error, shard);
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
      const reply = (await redis.xautoclaim(
        stream,
        group,
        consumerName,
        0,
        cursor,
        'COUNT',
        batchSize,
      )) as [string, StreamEntry[], string[]?];
      cursor = reply[0];
      // Entries deleted from the stream while pending come back as null fields: nothing to do.
      await this.process(reply[1].filter((entry) => Array.isArray(entry[1])));
    } while (cursor !== '0-0' && !this.stopping);
  }

  private async readNew(): Promise<StreamEntry[]> {
    const { reader, stream, group, consumerName, batchSize, blockMs } = this.options;
    try {
      const reply = (await reader.xreadgroup(
        'GROUP',
        group,
        consumerName,
        'COUNT',
        batchSize,
        'BLOCK',
        blockMs,
        'STREAMS',
        stream,
        '>',
      )) as [string, StreamEntry[]][] | null;
      return reply?.[0]?.[1] ?? [];
    } catch (error) {
      // A read cut short by stop() is how stopping looks from here.
      if (this.stopping) return [];
      throw error;
    }
  }

  /** Handles entries one by one (a shard keeps its order), acking each once its handler is done. */
  private async process(entries: readonly StreamEntry[]): Promise<void> {
    for (const [id, flat] of entries) {
      if (this.stopping) return;
      const work = this.handle(id, flat);
      this.inFlight = work;
      try {
        await work;
      } finally {
        this.inFlight = null;
      }
    }
  }

  private async handle(id: string, flat: readonly string[]): Promise<void> {
    const { shard, keyField, handler, redis, stream, group } = this.options;
    if (isSeal(flat)) {
      await redis.xack(stream, group, id);
      const seal = this.seal;
      const sealId = seal && (await seal);
      // Our own seal (or one after it) was read: everything before it was too.
      if (sealId !== null && this.seal === seal && compareStreamIds(id, sealId) >= 0) {
        this.stopping = true;
        this.options.reader.disconnect();
        this.options.onRetired(shard);
      }
      return;
    }
    const fields: Record<string, string> = {};
    let key: string | null = null;
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const name = flat[i]!;
      const value = flat[i + 1]!;
      if (name === keyField && key === null) key = value;
      else fields[name] = value;
    }
    try {
      await handler({ shard, id, key, fields, signal: this.abort.signal });
    } catch (error) {
      // Left pending: the application's own retry and dead-letter policy decides what next.
      this.options.onError(error, shard);
      return;
    }
    if (this.abort.signal.aborted) return;
    await redis.xack(stream, group, id);
  }
}
