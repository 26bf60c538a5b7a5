import { EventEmitter } from 'node:events';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Redis } from 'ioredis';
import {
  tellsNothingNew,
  type HeartbeatReply,
  type HeartbeatRequest,
} from '../machines/protocol.js';
import type { HeartbeatHoldOptions } from './coordinator-client.js';
import type { SealVersion } from './stream-seal.js';
import {
  AuthenticationError,
  ConflictError,
  CoordinatorApiError,
  InvalidRequestError,
  NotFoundError,
  PermissionDeniedError,
  UnavailableError,
} from './errors.js';
import {
  heartbeatRequest,
  JOINING,
  planReply,
  versionsAfter,
  type MemberVersions,
  type ShardPhase,
} from './member-state.js';
import { blockingConnection, resolveRedis, type RedisOption } from './redis-connection.js';
import { backoffDelay } from './retry.js';
import { ShardReader, type MessageHandler } from './shard-reader.js';

/**
 * What a {@link Consumer} needs of the coordinator: the heartbeat. {@link CoordinatorClient}
 * is the real one; tests script their own.
 */
export interface HeartbeatTransport {
  heartbeat(
    streamPrefix: string,
    consumerGroup: string,
    request: HeartbeatRequest,
    timeoutMs?: number,
    /** Held open (docs/protocol.md "Held heartbeats"); a transport may ignore it. */
    hold?: HeartbeatHoldOptions,
  ): Promise<HeartbeatReply>;
}

/** Options of {@link Consumer}. */
export interface ConsumerOptions {
  /** The coordinator, usually a `CoordinatorClient` whose token has the `CONSUMER` role. */
  readonly client: HeartbeatTransport;
  /** Redis holding the shard streams: a URL (the consumer owns the connection) or an ioredis instance. */
  readonly redis: RedisOption;
  /** The group's stream prefix: shard `i` is the stream `<streamPrefix>:<i>`. */
  readonly streamPrefix: string;
  /** The group's name; also the name of the Redis consumer group on every shard. */
  readonly consumerGroup: string;
  /**
   * This member's id in the group (also its Redis consumer name): 1–128 printable ASCII
   * characters. Keep it stable across restarts to reclaim your own pending entries sooner.
   * @default `<hostname>-<pid>-<random>`
   */
  readonly memberId?: string;
  /** Called for each message; resolve when it is done (then it is acked), reject to leave it pending. */
  readonly handler: MessageHandler;
  /**
   * Entries read per XREADGROUP / XAUTOCLAIM call.
   * @default 10
   */
  readonly batchSize?: number;
  /**
   * How long one XREADGROUP blocks waiting for new entries, in milliseconds.
   * @default 500
   */
  readonly blockMs?: number;
  /**
   * Sent to the coordinator (which may clamp it): silent this long, the member expires. The
   * consumer itself drops all its shards once it has had no answer for 80% of it.
   * @default 45000
   */
  readonly sessionTimeoutMs?: number;
  /**
   * Sent to the coordinator: a member still revoking after this long is fenced.
   * @default 60000
   */
  readonly rebalanceTimeoutMs?: number;
  /**
   * How long a revoked shard's message in hand may take before it is abandoned (its signal
   * aborted, left pending for the next owner) and the shard reported DONE.
   * @default half of `rebalanceTimeoutMs`
   */
  readonly drainTimeoutMs?: number;
  /**
   * The entry field holding the message key (the producer's `keyField`).
   * @default "key"
   */
  readonly keyField?: string;
  /**
   * Sent to the coordinator as `clientId`, shown in monitoring.
   * @default none (not sent)
   */
  readonly clientId?: string;
  /**
   * Held heartbeats: while the member has nothing to report or act on, each heartbeat asks the
   * coordinator (`waitMs`, the advised interval) to hold its reply until something changes for
   * the member, and the next one goes out as soon as it is answered. A revoke, a grant or a
   * fence then arrives in one round trip instead of at the next heartbeat; the heartbeat rate
   * stays that of the advised interval. `false`: a heartbeat every advised interval, as a
   * coordinator without held heartbeats expects.
   * @default true
   */
  readonly holdHeartbeats?: boolean;
}

/** Why a consumer dropped all its shards at once. */
export interface FencedEvent {
  /**
   * `FENCED_MEMBER_EPOCH` (the coordinator fenced it), `SESSION_LOST` (no answer for too long),
   * or the error code that took its membership away (`MEMBER_ID_IN_USE`, `GROUP_NOT_FOUND`, ...).
   */
  readonly reason: string;
  /** The shards it was reading. */
  readonly shards: readonly number[];
}

/** Events of a {@link Consumer}. */
export interface ConsumerEvents {
  /** Shards granted by the coordinator that the consumer started reading. */
  assigned: [shards: number[]];
  /** Shards the consumer stopped reading: drained and reported, retired, or taken away. */
  revoked: [shards: number[]];
  /** Every shard dropped at once; the consumer rejoins by itself. */
  fenced: [event: FencedEvent];
  /** Handler rejections, Redis errors and heartbeat failures; emitted only while listened to. */
  error: [error: unknown];
}

interface Slot {
  phase: ShardPhase;
  reader: ShardReader | null;
  /**
   * Granted back (`running`) or turned retiring (`retiring`) while still draining: read it
   * again, that way, once the drain finished.
   */
  restart: 'running' | 'retiring' | null;
}

/** Drop everything once this share of the session timeout passed without an answer. */
const SESSION_LOSS_FRACTION = 0.8;
/** Ceiling of the retry delay of failed heartbeats. */
const MAX_RETRY_DELAY_MS = 30_000;

/**
 * Consumes a coordinated group: heartbeats the coordinator, reads exactly the shards it is
 * granted (XREADGROUP, acking after the handler), drains revoked shards before reporting them
 * DONE, consumes retiring shards to their end, claims pending entries of shards it takes over,
 * and drops everything at once when fenced or cut off for its session timeout.
 */
export class Consumer extends EventEmitter<ConsumerEvents> {
  /** This member's id in the group. */
  readonly memberId: string;
  private readonly client: HeartbeatTransport;
  private readonly redis: Redis;
  private readonly ownsRedis: boolean;
  private readonly sessionTimeoutMs: number;
  private readonly rebalanceTimeoutMs: number;
  private readonly drainTimeoutMs: number;
  private versions: MemberVersions = JOINING;
  /** The routing of the last reply: a shard retired now is sealed with it. */
  private routing: SealVersion = { lifecycleId: '', metadataVersion: 0 };
  private readonly slots = new Map<number, Slot>();
  /** Bumped whenever everything is dropped: replies and drains of an older one are stale. */
  private generation = 0;
  private interval = 0;
  private closed = false;
  private loop: Promise<void> | null = null;
  private wake: (() => void) | null = null;
  private nudged = false;
  /** Cancels the heartbeat held open now (null when none is). */
  private held: AbortController | null = null;
  private watchdog: NodeJS.Timeout | undefined;

  constructor(private readonly options: ConsumerOptions) {
    super();
    this.client = options.client;
    this.memberId = options.memberId ?? `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
    const { redis, owned } = resolveRedis(options.redis);
    this.redis = redis;
    this.ownsRedis = owned;
    this.sessionTimeoutMs = options.sessionTimeoutMs ?? 45_000;
    this.rebalanceTimeoutMs = options.rebalanceTimeoutMs ?? 60_000;
    this.drainTimeoutMs = options.drainTimeoutMs ?? Math.floor(this.rebalanceTimeoutMs / 2);
  }

  /**
   * Joins the group and starts the heartbeat loop; resolves once the coordinator answered the
   * join. Rejects (and stops) when the join is refused for good: unknown group, no permission,
   * group full, invalid request.
   */
  async start(): Promise<void> {
    if (this.loop) throw new Error('consumer already started');
    let joined!: () => void;
    let refused!: (error: unknown) => void;
    const first = new Promise<void>((resolve, reject) => {
      joined = resolve;
      refused = reject;
    });
    this.loop = this.run(joined, refused);
    await first;
  }

  /** The shards being read now (running or retiring), ascending. */
  shards(): number[] {
    return [...this.slots]
      .filter(([, slot]) => slot.phase === 'running' || slot.phase === 'retiring')
      .map(([shard]) => shard)
      .sort((a, b) => a - b);
  }

  /** Stops reading, finishes in-flight messages (within the drain timeout), leaves the group. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.nudge();
    await this.loop?.catch(() => undefined);
    clearTimeout(this.watchdog);
    const generation = this.generation;
    await Promise.all(
      [...this.slots.values()].map((slot) =>
        slot.reader
          ? slot.reader.stop({ drain: true, drainTimeoutMs: this.drainTimeoutMs })
          : Promise.resolve(),
      ),
    );
    this.slots.clear();
    if (this.versions.memberEpoch > 0 && generation === this.generation) {
      await this.client
        .heartbeat(this.options.streamPrefix, this.options.consumerGroup, {
          ...this.request(),
          memberEpoch: -1,
          currentAssignments: [],
          revokeProgress: [],
        })
        .catch((error: unknown) => this.report(error));
    }
    this.versions = JOINING;
    if (this.ownsRedis) this.redis.disconnect();
  }

  private request(): HeartbeatRequest {
    const phases = new Map([...this.slots].map(([shard, slot]) => [shard, slot.phase]));
    return {
      ...heartbeatRequest(this.versions, phases, {
        clientId: this.options.clientId,
        sessionTimeoutMs: this.sessionTimeoutMs,
        rebalanceTimeoutMs: this.rebalanceTimeoutMs,
      }),
      memberId: this.memberId,
    };
  }

  private async run(joined: () => void, refused: (error: unknown) => void): Promise<void> {
    let failures = 0;
    let started = false;
    /** The wait the next heartbeat asks for: the advised interval, while nothing is going on. */
    let holdMs = 0;
    while (!this.closed) {
      const generation = this.generation;
      const sentAt = Date.now();
      const request = this.request();
      const held = holdMs > 0 && this.quiet() ? new AbortController() : null;
      this.held = held;
      let wait = 0;
      try {
        const reply = await this.client.heartbeat(
          this.options.streamPrefix,
          this.options.consumerGroup,
          request,
          Math.min(10_000, Math.max(1_000, this.sessionTimeoutMs / 4)),
          held ? { waitMs: holdMs, signal: held.signal } : undefined,
        );
        failures = 0;
        holdMs = 0;
        if (generation === this.generation && !this.closed) {
          this.answered(sentAt);
          wait = this.apply(reply);
          if (this.options.holdHeartbeats !== false && this.mayHold(reply)) {
            holdMs = reply.heartbeatIntervalMs;
            // The next heartbeat (held) goes out at once, unless this one asked to be held and
            // came back without news: then the coordinator could not hold it, and the next
            // waits for the advised interval.
            wait =
              held && tellsNothingNew(request, reply)
                ? Math.max(0, sentAt + reply.heartbeatIntervalMs - Date.now())
                : 0;
          }
        }
        if (!started) {
          started = true;
          joined();
        }
      } catch (error) {
        if (held?.signal.aborted) {
          // Cancelled here (something to report, or closing): not a failure; ask again now.
          wait = 0;
        } else {
          if (!started && isRefusal(error)) {
            this.closed = true;
            refused(error);
            return;
          }
          holdMs = 0;
          wait = this.failed(error, failures++, sentAt);
        }
      } finally {
        this.held = null;
      }
      if (!this.closed) await this.sleep(wait);
    }
  }

  /**
   * Whether the heartbeat after `reply` may be held: it asked for nothing to be revoked or
   * retired, and every local shard is running (nothing to report).
   */
  private mayHold(reply: HeartbeatReply): boolean {
    if (reply.outcome !== 'OK' && reply.outcome !== 'REVOKE_PENDING') return false;
    if (reply.revokeShards.length > 0 || reply.retireShards.length > 0) return false;
    return this.quiet();
  }

  /** Every local shard is running: there is nothing to report. */
  private quiet(): boolean {
    for (const slot of this.slots.values()) if (slot.phase !== 'running') return false;
    return true;
  }

  /** Acts on one reply; returns how long to wait before the next heartbeat. */
  private apply(reply: HeartbeatReply): number {
    this.interval = reply.heartbeatIntervalMs;
    if (reply.outcome === 'FENCED_MEMBER_EPOCH') {
      this.dropAll('FENCED_MEMBER_EPOCH');
      return 0;
    }
    this.versions = versionsAfter(reply);
    this.routing = { lifecycleId: reply.lifecycleId, metadataVersion: reply.metadataVersion };
    // SYNC_METADATA is retry-safe and changes nothing about the member but its versions.
    if (reply.outcome === 'SYNC_METADATA') return 0;
    const phases = new Map([...this.slots].map(([shard, slot]) => [shard, slot.phase]));
    const plan = planReply(phases, reply);
    const gone: number[] = [];
    for (const shard of plan.drop) {
      const slot = this.slots.get(shard)!;
      this.slots.delete(shard);
      if (slot.phase === 'running' || slot.phase === 'draining' || slot.phase === 'retiring') {
        void slot.reader?.stop({ drain: false });
        gone.push(shard);
      }
    }
    for (const shard of plan.drain) this.drain(shard);
    for (const shard of reply.revokeShards) {
      // Revoked again while draining: whatever was to follow the drain is off.
      const slot = this.slots.get(shard);
      if (slot?.phase === 'draining') slot.restart = null;
    }
    const started: number[] = [];
    for (const shard of plan.start) {
      const slot = this.slots.get(shard);
      if (slot?.phase === 'draining') slot.restart = 'running';
      else if (slot?.phase === 'retiring' && slot.reader) {
        // A scale-in rolled back: the shard stays ours; keep its reader, stop at no end.
        slot.phase = 'running';
        slot.reader.unretire();
      } else {
        this.open(shard, 'running');
        started.push(shard);
      }
    }
    for (const shard of plan.retire) {
      const slot = this.slots.get(shard);
      if (slot?.phase === 'draining') slot.restart = 'retiring';
      else if (slot?.phase === 'running' && slot.reader) {
        slot.phase = 'retiring';
        slot.reader.retire(this.routing);
      } else {
        this.open(shard, 'retiring');
        started.push(shard);
      }
    }
    if (gone.length > 0) this.emit('revoked', gone);
    if (started.length > 0) this.emit('assigned', started);
    return reply.heartbeatIntervalMs;
  }

  private open(shard: number, phase: 'running' | 'retiring'): void {
    const generation = this.generation;
    const reader = new ShardReader({
      shard,
      stream: `${this.options.streamPrefix}:${shard}`,
      group: this.options.consumerGroup,
      consumerName: this.memberId,
      redis: this.redis,
      reader: blockingConnection(this.redis, (error) => this.report(error)),
      handler: this.options.handler,
      keyField: this.options.keyField ?? 'key',
      batchSize: this.options.batchSize ?? 10,
      blockMs: this.options.blockMs ?? 500,
      onError: (error) => this.report(error),
      onRetired: (done) => {
        const slot = this.slots.get(done);
        if (generation !== this.generation || slot?.reader !== reader) return;
        slot.phase = 'retired';
        this.emit('revoked', [done]);
        this.nudge();
      },
    });
    if (phase === 'retiring') reader.retire(this.routing);
    // Never two readers of one shard: whatever an older slot still runs is abandoned.
    void this.slots.get(shard)?.reader?.stop({ drain: false });
    this.slots.set(shard, { phase, reader, restart: null });
  }

  /** Stops reading a revoked shard; once its work is finished (or abandoned) it reports DONE. */
  private drain(shard: number): void {
    const slot = this.slots.get(shard)!;
    const generation = this.generation;
    slot.phase = 'draining';
    const reader = slot.reader;
    void reader?.stop({ drain: true, drainTimeoutMs: this.drainTimeoutMs }).then(() => {
      if (generation !== this.generation || this.slots.get(shard) !== slot) return;
      if (slot.restart !== null) {
        this.open(shard, slot.restart);
        this.emit('assigned', [shard]);
      } else {
        slot.phase = 'drained';
        slot.reader = null;
        this.emit('revoked', [shard]);
      }
      this.nudge();
    });
  }

  /** Drops every shard at once, abandoning in-flight work, and rejoins as a new member epoch. */
  private dropAll(reason: string): void {
    this.generation++;
    clearTimeout(this.watchdog);
    const shards = this.shards();
    for (const slot of this.slots.values()) void slot.reader?.stop({ drain: false });
    this.slots.clear();
    this.versions = JOINING;
    this.emit('fenced', { reason, shards });
    this.nudge();
  }

  /** A heartbeat sent at `sentAt` was answered: the session holds until 80% of its timeout from then. */
  private answered(sentAt: number): void {
    clearTimeout(this.watchdog);
    const deadline = sentAt + this.sessionTimeoutMs * SESSION_LOSS_FRACTION;
    this.watchdog = setTimeout(
      () => {
        if (this.slots.size > 0 || this.versions.memberEpoch > 0) this.dropAll('SESSION_LOST');
      },
      Math.max(0, deadline - Date.now()),
    );
    this.watchdog.unref();
  }

  /** A failed heartbeat: what it means for the membership, and how long to wait. */
  private failed(error: unknown, attempt: number, sentAt: number): number {
    this.report(error);
    const retryAfterMs = error instanceof CoordinatorApiError ? error.retryAfterMs : null;
    const base = this.interval > 0 ? Math.min(this.interval, 1_000) : 100;
    const patient = { baseDelayMs: base, maxDelayMs: MAX_RETRY_DELAY_MS };
    if (error instanceof UnavailableError && error.code === 'GROUP_FAILED_CLOSED') {
      // The coordinator answered: nothing changes for anyone until recovery, so keep state,
      // asking again often enough that this answer keeps the session alive.
      this.answered(sentAt);
      const keepAlive = (this.sessionTimeoutMs * SESSION_LOSS_FRACTION) / 2;
      return Math.min(backoffDelay(attempt, patient, retryAfterMs), keepAlive);
    }
    if (isRefusal(error)) {
      // The membership is gone (group deleted, member id taken, group full): hold nothing.
      if (this.slots.size > 0 || this.versions.memberEpoch > 0) {
        this.dropAll((error as CoordinatorApiError).code);
      }
      return backoffDelay(attempt, patient, retryAfterMs);
    }
    // No answer, or the group is moving between replicas: keep state until the session is lost.
    const quick = { baseDelayMs: base, maxDelayMs: Math.max(base, this.interval || 1_000) };
    return backoffDelay(attempt, quick, retryAfterMs);
  }

  /**
   * Cuts the wait before the next heartbeat short (now, or as soon as it begins); a heartbeat
   * held open is cancelled, so the next one goes out at once.
   */
  private nudge(): void {
    this.held?.abort();
    if (this.wake) this.wake();
    else this.nudged = true;
  }

  private sleep(ms: number): Promise<void> {
    if (this.nudged) {
      this.nudged = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wake = null;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wake = done;
    });
  }

  private report(error: unknown): void {
    if (this.listenerCount('error') > 0) this.emit('error', error);
  }
}

/** Answers that say this member cannot be (or stay) a member, as opposed to "try again". */
function isRefusal(error: unknown): boolean {
  return (
    error instanceof InvalidRequestError ||
    error instanceof NotFoundError ||
    error instanceof ConflictError ||
    error instanceof PermissionDeniedError ||
    (error instanceof AuthenticationError && error.code !== 'TOKEN_EXPIRED')
  );
}
