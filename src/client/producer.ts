import { EventEmitter } from 'node:events';
import type { Redis } from 'ioredis';
import { shardForKey } from '../machines/routing.js';
import type { RoutingMetadata } from './coordinator-client.js';
import { CoordinatorApiError } from './errors.js';
import { resolveRedis, type RedisOption } from './redis-connection.js';
import { backoffDelay, delay, settledBy } from './retry.js';
import { appendUnlessSealed, sealVersionOf } from './stream-seal.js';

/**
 * What a {@link Producer} needs of the coordinator: routing metadata with long poll.
 * `CoordinatorClient` is the real one.
 */
export interface RoutingSource {
  routing(
    streamPrefix: string,
    consumerGroup: string,
    poll?: { afterVersion: number; waitMs: number },
    options?: {
      observedMetadataVersion?: number;
      /** The lifecycle `observedMetadataVersion` is of. */
      observedLifecycleId?: string;
      signal?: AbortSignal;
    },
  ): Promise<RoutingMetadata>;
}

/** How many lifecycles left behind a producer remembers (see `Producer.adopt`). */
const MAX_REPLACED_LIFECYCLES = 16;

/** The longest routing long poll the coordinator accepts (README, "API at a glance"), in milliseconds. */
const MAX_LONG_POLL_WAIT_MS = 60_000;

/** Options of {@link Producer}. */
export interface ProducerOptions {
  /** The coordinator, usually a `CoordinatorClient` whose token has the `PRODUCER` role. */
  readonly client: RoutingSource;
  /** Redis holding the shard streams: a URL (the producer owns the connection) or an ioredis instance. */
  readonly redis: RedisOption;
  /** The group's stream prefix: shard `i` is the stream `<streamPrefix>:<i>`. */
  readonly streamPrefix: string;
  /** The group whose routing metadata picks the shard. */
  readonly consumerGroup: string;
  /**
   * The entry field the key is written to (the consumer's `keyField`).
   * @default "key"
   */
  readonly keyField?: string;
  /**
   * How long one routing long poll waits for a new version, in milliseconds: above 0; more than
   * the coordinator's longest wait (60000) is cut to it.
   * @default 30000
   */
  readonly longPollWaitMs?: number;
  /**
   * Cap each stream at about this many entries (`XADD MAXLEN ~`). Trimming can drop entries no
   * consumer has read yet: size it well above any backlog.
   * @default unbounded
   */
  readonly maxLen?: number;
  /**
   * The longest {@link Producer.close} waits for the routing long poll to end (a
   * {@link RoutingSource} that ignores the abort is not waited for longer).
   * @default 5000
   */
  readonly closeTimeoutMs?: number;
}

/** Events of a {@link Producer}. */
export interface ProducerEvents {
  /**
   * Trouble with the streams Redis the producer connected itself (a URL given as `redis`), and
   * routing that cannot be read (the coordinator unreachable, the group deleted or failed
   * closed, a `CoordinatorApiError`): each once per episode, the first error after things worked,
   * not one per reconnect or retried long poll. Meanwhile sends go on with the last routing read.
   * Emitted only while listened to.
   */
  error: [error: unknown];
}

/** Options of one {@link Producer.send}. */
export interface SendOptions {
  /**
   * Gives the send up: once it aborts, the send rejects with the signal's reason. Aborted while
   * the send waits (for the first routing read, for producers to be resumed, for newer routing
   * after a seal refused it), nothing is appended; aborted while the append waits for the
   * streams Redis's answer (Redis down or silent), the append may still be made once Redis
   * answers: as after any timeout, whether it was is unknown (delivery is at least once).
   */
  readonly signal?: AbortSignal;
}

/** Where {@link Producer.send} wrote a message. */
export interface SendResult {
  readonly shard: number;
  /** The Redis stream entry id. */
  readonly id: string;
  /** The routing version the shard was chosen with. */
  readonly metadataVersion: number;
  /** The shard count of that version. */
  readonly shardCount: number;
}

/**
 * Writes keyed messages to a coordinated group's shards: the shard is the documented
 * partitioner (`fnv1a32-mod`, docs/partitioner.md) over routing metadata kept fresh by long
 * poll; sends wait while producers are paused, and every routing read reports the highest
 * version this producer has seen.
 */
export class Producer extends EventEmitter<ProducerEvents> {
  private readonly redis: Redis;
  private readonly ownsRedis: boolean;
  private readonly keyField: string;
  private current: RoutingMetadata | null = null;
  private highest = 0;
  /** Routing reads sent so far: each answer is adopted with the number of its read. */
  private reads = 0;
  /**
   * Lifecycles this producer followed and left for a newer one, each with the number of the
   * read that brought the newer one: an answer of such a lifecycle to a read sent before that
   * was late (see {@link adopt}). The last few only.
   */
  private readonly replaced = new Map<string, number>();
  private changed: { promise: Promise<void>; resolve: () => void } = signal();
  private readonly stop = new AbortController();
  private loop: Promise<void> | null = null;
  private first: Promise<void> | null = null;
  /** An error of the streams Redis was reported, and the connection has not been ready since. */
  private troubled = false;

  private readonly longPollWaitMs: number;

  constructor(private readonly options: ProducerOptions) {
    super();
    const waitMs = options.longPollWaitMs ?? 30_000;
    // A wait of 0 is answered at once, and the loop would poll again straight away.
    if (!(waitMs > 0)) throw new RangeError('longPollWaitMs must be > 0');
    // The coordinator refuses a longer wait (400): every poll would fail and routing go stale.
    this.longPollWaitMs = Math.min(MAX_LONG_POLL_WAIT_MS, Math.ceil(waitMs));
    const { redis, owned } = resolveRedis(options.redis, (error) => {
      if (this.troubled || this.stop.signal.aborted) return;
      this.troubled = true;
      if (this.listenerCount('error') > 0) this.emit('error', error);
    });
    if (owned) redis.on('ready', () => (this.troubled = false));
    this.redis = redis;
    this.ownsRedis = owned;
    this.keyField = options.keyField ?? 'key';
  }

  /**
   * Reads routing and starts following it; `send` does this by itself when needed. Rejects once
   * the producer is closed.
   */
  start(): Promise<void> {
    // Closed, it follows routing no more: a send would ignore pauses and scales it cannot see.
    if (this.stop.signal.aborted) return Promise.reject(new Error('producer closed'));
    this.first ??= (async () => {
      await this.readAndAdopt();
      this.loop = this.follow();
    })().catch((error: unknown) => {
      this.first = null; // the next send asks again
      throw error;
    });
    return this.first;
  }

  /** The routing metadata in use, if read yet. */
  routing(): RoutingMetadata | null {
    return this.current;
  }

  /**
   * Appends `fields` with `key` to the key's shard and resolves to where it went. Waits while
   * producers are paused. A shard that a scale-in removed is sealed by its consumer once it
   * starts reading it to its end (src/client/stream-seal.ts): an append chosen with routing older
   * than the seal is refused by Redis, the producer reads routing again and sends the message
   * where the new routing puts it, so a message is never written after the end of a shard.
   * `options.signal` bounds the waiting: once it aborts, the send rejects with its reason.
   */
  async send(
    key: string,
    fields: Readonly<Record<string, string>> = {},
    options: SendOptions = {},
  ): Promise<SendResult> {
    if (Object.hasOwn(fields, this.keyField)) {
      throw new TypeError(`field "${this.keyField}" is reserved for the key`);
    }
    const { signal } = options;
    signal?.throwIfAborted();
    if (this.stop.signal.aborted) throw new Error('producer closed');
    await untilAborted(this.start(), signal);
    const flat = [this.keyField, key, ...Object.entries(fields).flat()];
    for (let refused = 0; ; refused++) {
      const routing = await this.writable(signal);
      const shard = shardForKey(key, routing.shardCount);
      const stream = `${this.options.streamPrefix}:${shard}`;
      // Redis commands wait for a connection as long as it takes (`maxRetriesPerRequest: null`):
      // the signal is the caller's only bound on a streams Redis that does not answer.
      const result = await untilAborted(
        appendUnlessSealed(this.redis, stream, sealVersionOf(routing), this.options.maxLen, flat),
        signal,
      );
      if ('id' in result) {
        return {
          shard,
          id: result.id,
          metadataVersion: routing.metadataVersion,
          shardCount: routing.shardCount,
        };
      }
      await this.catchUp(result.sealedAt, refused, signal);
    }
  }

  /** Reads routing until it is at least `version` (a seal of that version refused an append). */
  private async catchUp(version: number, attempt: number, signal?: AbortSignal): Promise<void> {
    if (attempt > 0) {
      const wait = backoffDelay(attempt - 1, { baseDelayMs: 20, maxDelayMs: 1_000 }, null);
      await delay(wait, signal ? AbortSignal.any([this.stop.signal, signal]) : this.stop.signal);
    }
    signal?.throwIfAborted();
    if (this.stop.signal.aborted) throw new Error('producer closed');
    if (sealVersionOf(this.current!).metadataVersion >= version) return;
    await untilAborted(this.readAndAdopt(), signal);
  }

  /**
   * Stops following routing and closes the connection it owns (a `send` still waiting for it
   * then rejects, and so does every later `send`); resolves within `closeTimeoutMs`.
   */
  async close(): Promise<void> {
    const deadline = Date.now() + (this.options.closeTimeoutMs ?? 5_000);
    this.stop.abort();
    this.changed.resolve();
    await settledBy(this.loop ?? Promise.resolve(), deadline);
    if (this.ownsRedis) this.redis.disconnect();
  }

  /** The current routing once producers are not paused. */
  private async writable(signal?: AbortSignal): Promise<RoutingMetadata> {
    for (;;) {
      const routing = this.current!;
      if (!routing.producersPaused) return routing;
      if (this.stop.signal.aborted) throw new Error('producer closed');
      await untilAborted(this.changed.promise, signal);
    }
  }

  /** Reads routing and adopts the answer, if it is newer than what is held. */
  private async readAndAdopt(poll?: { afterVersion: number; waitMs: number }): Promise<void> {
    const read = ++this.reads;
    this.adopt(await this.read(poll), read);
  }

  private read(poll?: { afterVersion: number; waitMs: number }): Promise<RoutingMetadata> {
    return this.options.client.routing(
      this.options.streamPrefix,
      this.options.consumerGroup,
      poll,
      {
        // The highest version seen, and the lifecycle it is of: after the group was deleted and
        // created again, the coordinator does not compare it with the new lifecycle's versions.
        ...(this.highest > 0 && this.current !== null
          ? {
              observedMetadataVersion: this.highest,
              observedLifecycleId: this.current.lifecycleId,
            }
          : {}),
        signal: this.stop.signal,
      },
    );
  }

  /**
   * Takes `next`, the answer to read number `read`, when it is newer than the routing held: a
   * higher version of the same lifecycle, or another lifecycle (the group deleted and created
   * again, or recreated), unless it is one this producer already left for a newer one and the
   * read was sent before that: two reads answered out of order around a recreate (a long poll
   * answered by the old lifecycle, held up on its way, after a plain read of the new one) must
   * not switch it back. Read again after that, the old lifecycle is the group's again (restored
   * and resumed), and is followed.
   */
  private adopt(next: RoutingMetadata, read: number): void {
    const current = this.current;
    if (current !== null && next.lifecycleId === current.lifecycleId) {
      if (next.metadataVersion <= current.metadataVersion) return;
    } else if (current !== null) {
      const leftAt = this.replaced.get(next.lifecycleId);
      if (leftAt !== undefined && read < leftAt) return;
      this.replaced.delete(next.lifecycleId);
      this.replaced.set(current.lifecycleId, read);
      if (this.replaced.size > MAX_REPLACED_LIFECYCLES) {
        this.replaced.delete(this.replaced.keys().next().value!);
      }
      this.highest = 0;
    }
    this.current = next;
    this.highest = Math.max(this.highest, next.metadataVersion);
    const { resolve } = this.changed;
    this.changed = signal();
    resolve();
  }

  /**
   * The long-poll loop; failures keep the last routing and retry with backoff, and the first of
   * each episode is an `error` event.
   */
  private async follow(): Promise<void> {
    const waitMs = this.longPollWaitMs;
    let failures = 0;
    while (!this.stop.signal.aborted) {
      try {
        // After a failure the group may be another one (deleted and created again, its versions
        // starting over below ours): a long poll above our version would wait out `waitMs` on
        // it, so the first read of the way back is a plain one.
        const poll =
          failures === 0 ? { afterVersion: this.current!.metadataVersion, waitMs } : undefined;
        await this.readAndAdopt(poll);
        failures = 0;
      } catch (error) {
        if (this.stop.signal.aborted) return;
        // The first failure after a read that worked; the retries of this episode are quiet.
        if (failures === 0 && this.listenerCount('error') > 0) this.emit('error', error);
        const retryAfterMs = error instanceof CoordinatorApiError ? error.retryAfterMs : null;
        await delay(
          backoffDelay(failures++, { baseDelayMs: 100, maxDelayMs: 5_000 }, retryAfterMs),
          this.stop.signal,
        );
      }
    }
  }
}

/** `work`, or a rejection with `signal`'s reason as soon as it aborts (`work` goes on). */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return work;
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  let onAbort!: () => void;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
  });
  return Promise.race([work, aborted]).finally(() => signal.removeEventListener('abort', onAbort));
}

function signal(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}
