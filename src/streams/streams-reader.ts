import { Cluster, Redis } from 'ioredis';
import { CoordinatorError } from '../errors.js';
import { deadLetterStream } from './dead-letters.js';
import { keyErrorText } from './key-error.js';
import { readLua } from '../store/lua-scripts.js';
import { redisTarget, seedCredentials } from '../store/redis-target.js';

/**
 * Reads the data streams themselves (not the coordinator's store): how far a consumer group is
 * behind on each shard (docs/operations.md#lag). One Lua call per shard stream, all sent at once
 * (auto-pipelined on a single Redis), so a group's reading costs one round trip per Redis node.
 */

/** What one shard stream says about one consumer group. */
export interface ShardStreamReading {
  readonly stream: string;
  /** The stream does not exist (never written, or deleted). */
  readonly missing: boolean;
  readonly length: number;
  /** Id of the newest entry; null when the stream is empty or missing. */
  readonly lastEntryId: string | null;
  /** The stream has no Redis consumer group of that name yet (no member read it). */
  readonly noConsumerGroup: boolean;
  readonly lastDeliveredId: string | null;
  /** Entries not delivered to the group yet (the whole length when it has no consumer group). */
  readonly lagEntries: number;
  /** False when Redis could not say the lag and the count stopped at its bound (a lower bound). */
  readonly lagExact: boolean;
  /** Delivered but not acknowledged. */
  readonly pending: number;
  /** Id of the oldest entry not delivered yet; null when caught up. */
  readonly oldestUndeliveredId: string | null;
  /** Idle time of the oldest pending entry in ms; null when nothing is pending. */
  readonly oldestPendingMs: number | null;
  /** The Redis server's clock when it was read (epoch ms). */
  readonly serverTimeMs: number;
  /**
   * The group's dead letters on the shard: entries of its own dead-letter stream
   * `<stream>:dead:<group>` and of the shard's shared one `<stream>:dead` (an older SDK's,
   * counted for every group on the prefix: docs/protocol.md#dead-letters).
   */
  readonly deadLetters: number;
  /**
   * Redis's error about this shard's stream or dead-letter key (`<key>: WRONGTYPE …`, see
   * {@link isKeyError}); the figures it kept from being read are zeros. Null when read.
   */
  readonly error: string | null;
}

/** Where the streams live: one Redis, or a Redis Cluster given by its seed nodes. */
export interface StreamsTarget {
  readonly url?: string | undefined;
  readonly clusterNodes?: readonly string[] | undefined;
}

export interface StreamsReaderOptions extends StreamsTarget {
  /**
   * How long one reading may take before it is answered STREAMS_UNAVAILABLE (see
   * {@link ReadBound}): below the forwarding answer timeout, so a forwarded lag request is
   * answered by the owner in time.
   * @default 1000
   */
  readonly timeoutMs?: number;
  /** Most entries counted one by one where Redis cannot say the lag. @default 10000 */
  readonly countBound?: number;
}

/**
 * Streams read at once: a group's shards are read this many at a time, one slice after the
 * other. A 1,024-shard group read at once sent 2,048 commands in one turn of the event loop and
 * took its replies in another, 25-40 ms each on a replica flooded with joins, where the other
 * groups' heartbeats waited (docs/architecture.md#fairness-between-groups); a slice costs one
 * round trip to Redis more.
 */
export const READ_SLICE = 64;

const SCRIPT = readLua(new URL('./lua/readShardLag-1.lua', import.meta.url));
const COMMAND = 'coordReadShardLag';
const SEAL_SCRIPT = readLua(new URL('./lua/sealRetired-1.lua', import.meta.url));
const SEAL_COMMAND = 'coordSealRetired';
/** First field of a seal entry (the SDK's `SEAL_FIELD`, docs/protocol.md). */
const SEAL_FIELD = '__coord_seal';

/**
 * What the timeout bounds: `reading`, the whole reading (a lag request, which must be answered
 * within the forwarding answer timeout); `slice`, each slice on its own (the metrics refresh,
 * which reads a large group at the pace Redis answers: 16 slices of a 1,024-shard group at
 * 100 ms a round trip never fit in one 1 s bound, and its lag series were never written).
 */
export type ReadBound = 'reading' | 'slice';

type ScriptCall = (
  stream: string,
  group: string,
  ...args: Array<string | number>
) => Promise<unknown[]>;

/** Reads shard streams on one Redis or Redis Cluster. */
export class StreamsReader {
  private readonly client: Redis | Cluster;
  private readonly target: string;
  private readonly timeoutMs: number;
  private readonly countBound: number;
  /** Why the connection last failed, until it works again (for the 503's message). */
  private failure: string | null = null;

  constructor(options: StreamsReaderOptions) {
    this.timeoutMs = options.timeoutMs ?? 1_000;
    this.countBound = options.countBound ?? 10_000;
    const redisOptions = {
      connectTimeout: this.timeoutMs,
      commandTimeout: this.timeoutMs,
      maxRetriesPerRequest: 1,
    };
    this.target = redisTarget(options);
    if (options.clusterNodes && options.clusterNodes.length > 0) {
      // No auto-pipelining on a Cluster: ioredis batches the commands for one master, and
      // once a slot has moved to another master (a reshard) a batch that mixes commands for
      // that slot with others is not redirected: the moved ones fail with Redis's MOVED (or
      // ASK while the slot migrates), a 503 for the lag reading. Sent one by one, each is
      // redirected on its own; they are still all in flight at once, one round trip per
      // master (docs/operations.md#lag).
      this.client = new Cluster([...options.clusterNodes], {
        redisOptions: { ...redisOptions, ...seedCredentials(options.clusterNodes) },
        clusterRetryStrategy: (times) => Math.min(times * 200, 2_000),
      });
    } else {
      const url = options.url ?? 'redis://127.0.0.1:6379';
      this.client = new Redis(url, {
        ...redisOptions,
        enableAutoPipelining: true,
        retryStrategy: (times) => Math.min(times * 200, 2_000),
      });
    }
    this.client.defineCommand(COMMAND, { lua: SCRIPT, numberOfKeys: 1 });
    this.client.defineCommand(SEAL_COMMAND, { lua: SEAL_SCRIPT, numberOfKeys: 1 });
    // Listening keeps ioredis from printing every failed reconnect as unhandled.
    this.client.on('error', (error: unknown) => {
      this.failure = causeOf(error);
    });
    this.client.on('ready', () => {
      this.failure = null;
    });
  }

  /** `host:port` of the streams Redis (the cluster seeds joined by commas), never credentials. */
  describe(): string {
    return this.target;
  }

  /**
   * Reads each stream for `group`; `STREAMS_UNAVAILABLE` (with the host and cause) when the
   * streams Redis cannot be reached within the timeout, which bounds the whole reading or each
   * slice of it (`bound`, {@link ReadBound}).
   */
  async read(
    streams: readonly string[],
    group: string,
    { bound = 'reading' }: { readonly bound?: ReadBound } = {},
  ): Promise<ShardStreamReading[]> {
    const call = (this.client as unknown as Record<string, ScriptCall>)[COMMAND]!;
    // An error about one key is that shard's (docs/operations.md#a-broken-shard-stream): the
    // other shards are read on, and the reading names it.
    const readOne = async (stream: string) => {
      const own = deadLetterStream(stream, group);
      const shared = deadLetterStream(stream, null);
      const [reply, ownDead, sharedDead] = await Promise.all([
        call.call(this.client, stream, group, this.countBound).catch(aboutKey(stream)),
        this.client.xlen(own).catch(aboutKey(own)),
        this.client.xlen(shared).catch(aboutKey(shared)),
      ]);
      return toReading(stream, reply, sumOf(ownDead, sharedDead));
    };
    // Set when the reading is given up (timed out or failed): no further slice is sent.
    let abandoned = false;
    const reading = (async () => {
      const readings: ShardStreamReading[] = [];
      for (let from = 0; from < streams.length && !abandoned; from += READ_SLICE) {
        const slice = Promise.all(streams.slice(from, from + READ_SLICE).map(readOne));
        readings.push(...(await (bound === 'slice' ? this.within(slice) : slice)));
      }
      return readings;
    })();
    try {
      return await (bound === 'slice' ? reading : this.within(reading));
    } catch (error) {
      abandoned = true;
      throw this.unavailable(error);
    }
  }

  /** `work`, or `no answer` once the timeout has passed (what `work` does later is ignored). */
  private async within<T>(work: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('no answer')), this.timeoutMs);
    });
    try {
      return await Promise.race([work, timeout]);
    } catch (error) {
      work.catch(() => undefined);
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Seals a retiring shard no member reads, as a member would (`sealRetired-1.lua`), and says
   * whether the group left anything unread or unacknowledged before the seal. `startFromMs`:
   * where the group starts on a shard it never read (null: the beginning), as its members create
   * the shard's consumer group (docs/protocol.md#start-position); entries before it are not the
   * group's to read. `STREAMS_UNAVAILABLE` when the streams Redis cannot be reached.
   */
  async sealRetired(
    stream: string,
    group: string,
    seal: { readonly id: string; readonly version: number },
    startFromMs: number | null,
  ): Promise<{ drained: boolean; sealId: string }> {
    const call = (this.client as unknown as Record<string, ScriptCall>)[SEAL_COMMAND]!;
    try {
      const [drained, sealId] = (await call.call(
        this.client,
        stream,
        group,
        SEAL_FIELD,
        seal.id,
        String(seal.version),
        startFromMs === null ? '-' : `(${Math.max(0, Math.floor(startFromMs))}-0`,
      )) as [number, string];
      return { drained: drained === 1, sealId };
    } catch (error) {
      throw this.unavailable(error);
    }
  }

  /**
   * Runs `work` on the streams connection (each command bounded by the timeout);
   * `STREAMS_UNAVAILABLE` when the streams Redis cannot be reached or fails a command.
   */
  async use<T>(work: (client: Redis | Cluster) => Promise<T>): Promise<T> {
    try {
      return await work(this.client);
    } catch (error) {
      if (error instanceof CoordinatorError) throw error;
      throw this.unavailable(error);
    }
  }

  /** The streams Redis's clock (epoch ms): stream ids are made from it. */
  async time(): Promise<number> {
    try {
      const [seconds, micros] = await this.within(this.client.time());
      return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    } catch (error) {
      throw this.unavailable(error);
    }
  }

  async close(): Promise<void> {
    try {
      await this.client.quit();
    } catch {
      this.client.disconnect();
    }
  }

  private unavailable(error: unknown): CoordinatorError {
    const cause = this.failure ?? causeOf(error);
    return new CoordinatorError(
      'STREAMS_UNAVAILABLE',
      `the streams Redis at ${this.target} cannot be read (${cause})`,
      { details: { streams: this.target, cause } },
    );
  }
}

/** A key's trouble, as the reading shows it. */
interface KeyTrouble {
  readonly error: string;
}

/** Turns Redis's error about `key` into its {@link KeyTrouble}; any other failure is rethrown. */
function aboutKey(key: string): (error: unknown) => KeyTrouble {
  return (error) => ({ error: keyErrorText(key, error) });
}

function isTrouble(value: unknown): value is KeyTrouble {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && 'error' in value;
}

/** Dead-letter counts added, a key in trouble counting 0; the troubles joined (null: none). */
function sumOf(...counts: (number | KeyTrouble)[]): { count: number; error: string | null } {
  const errors = counts.filter(isTrouble).map((t) => t.error);
  const count = counts.reduce<number>((sum, c) => sum + (isTrouble(c) ? 0 : c), 0);
  return { count, error: errors.length === 0 ? null : errors.join('; ') };
}

function toReading(
  stream: string,
  reply: unknown[] | KeyTrouble,
  dead: { readonly count: number; readonly error: string | null },
): ShardStreamReading {
  const deadLetters = dead.count;
  if (isTrouble(reply)) {
    return {
      stream,
      missing: false,
      length: 0,
      lastEntryId: null,
      noConsumerGroup: false,
      lastDeliveredId: null,
      lagEntries: 0,
      lagExact: false,
      pending: 0,
      oldestUndeliveredId: null,
      oldestPendingMs: null,
      serverTimeMs: 0,
      deadLetters,
      error: reply.error,
    };
  }
  const [exists, length, lastId, hasGroup, delivered, lag, exact, pending, after, idle, now] =
    reply as [
      number,
      number,
      string,
      number,
      string,
      number,
      number,
      number,
      string,
      number,
      number,
    ];
  return {
    stream,
    missing: exists === 0,
    length,
    lastEntryId: lastId === '' ? null : lastId,
    noConsumerGroup: exists === 1 && hasGroup === 0,
    lastDeliveredId: delivered === '' ? null : delivered,
    lagEntries: lag,
    lagExact: exact === 1,
    pending,
    oldestUndeliveredId: after === '' ? null : after,
    oldestPendingMs: idle < 0 ? null : idle,
    serverTimeMs: now,
    deadLetters,
    error: dead.error,
  };
}

/** ECONNREFUSED and the like, or the error's message. */
export function causeOf(error: unknown): string {
  const e = error as { code?: unknown; message?: unknown } | null;
  if (typeof e?.code === 'string' && /^E[A-Z]+$/.test(e.code)) return e.code;
  const message = typeof e?.message === 'string' ? e.message : String(error);
  if (/maxRetriesPerRequest|Stream isn't writeable|enableOfflineQueue/.test(message)) {
    return 'no connection';
  }
  return message;
}

/** The age of an entry id's time part against `nowMs`, in seconds (0 for none). */
export function entryAgeSeconds(id: string | null, nowMs: number): number {
  if (id === null) return 0;
  const ms = Number(id.split('-')[0]);
  return Number.isFinite(ms) ? Math.max(0, (nowMs - ms) / 1000) : 0;
}

/**
 * Where the streams are: `coordinator.streams.url` (a Redis Cluster's seeds with
 * `coordinator.streams.cluster`), else the store's Redis in redis modes; null in embedded mode
 * without it (lag is then unavailable, with that reason).
 */
export function streamsTargetOf(settings: {
  readonly streams: { readonly url?: string | undefined; readonly cluster: boolean };
  readonly store: {
    readonly type: 'memory' | 'redis' | 'redis-cluster';
    readonly url: string;
    readonly 'cluster-nodes'?: readonly string[] | undefined;
  };
}): StreamsTarget | null {
  const { streams, store } = settings;
  if (streams.url) {
    const seeds = streams.url
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
    return streams.cluster ? { clusterNodes: seeds } : { url: seeds[0] };
  }
  if (store.type === 'redis') return { url: store.url };
  if (store.type === 'redis-cluster') return { clusterNodes: store['cluster-nodes'] ?? [] };
  return null;
}
