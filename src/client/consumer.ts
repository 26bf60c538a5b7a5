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
import { sealVersionOf, type SealVersion } from './stream-seal.js';
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
  groupStart,
  heartbeatRequest,
  JOINING,
  planReply,
  versionsAfter,
  type MemberVersions,
  type ShardPhase,
} from './member-state.js';
import { blockingConnection, resolveRedis, type RedisOption } from './redis-connection.js';
import { backoffDelay, settledBy } from './retry.js';
import {
  isKeyError,
  ShardReader,
  type DeadLetteredEvent,
  type ReplaySkippedEvent,
  type MessageHandler,
  type RetryPolicy,
} from './shard-reader.js';

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
   * Dead letters (docs/protocol.md#dead-letters): an entry delivered this many times without
   * its handler resolving is not delivered again but moved, atomically, to its group's
   * dead-letter stream of the shard `<streamPrefix>:<shard>:dead:<consumerGroup>` (with its id,
   * fields, delivery count and the handler's last error) and acknowledged on the shard;
   * `deadLettered` is emitted. Setting it makes the consumer retry rejected entries after
   * `retryBackoffMs`.
   * @default off: a rejected entry stays pending for the shard's next owner
   */
  readonly maxDeliveries?: number;
  /**
   * How long an entry the handler rejected stays pending before it is delivered again
   * (claimed with XCLAIM, which counts a delivery). Setting it alone retries without end.
   * @default 1000 with `maxDeliveries`, else no retries
   */
  readonly retryBackoffMs?: number;
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
  /**
   * How long the consumer may be unable to read its shards' streams (the streams Redis down or
   * unreachable, its commands failing or left without a reply) before it gives all its shards
   * back: it stops reading, leaves the group (`memberEpoch: -1`) so that other members take the
   * shards, and emits `streamsUnreachable`. It then sends PING to the streams Redis with
   * backoff; once it answers, the consumer emits `streamsReachable` and joins again
   * (`memberEpoch: 0`). Keep it well under the session timeout: until it passes, the shards
   * wait. A blocking read counts only once its `blockMs` is over, and time spent in the handler
   * never counts. `Infinity` turns this off.
   * @default 10000
   */
  readonly streamsUnreachableMs?: number;
  /**
   * The longest {@link Consumer.close} takes. The drain of the messages in hand and the leave
   * heartbeat are given up when it is over (a message abandoned stays pending for the next
   * owner; without the leave, the coordinator releases the shards when the session expires),
   * the connections the consumer owns are disconnected, and `close()` resolves.
   * @default 5000
   */
  readonly closeTimeoutMs?: number;
}

/** One shard as {@link Consumer.stats} reports it. */
export interface ShardStats {
  readonly shard: number;
  /** `running`, `draining`, `retiring`, … or `gone` when the shard is not this member's now. */
  readonly phase: string;
  readonly handled: number;
  readonly acked: number;
  /** Handled, but the handler rejected: left pending. */
  readonly failed: number;
  /** Moved to the shard's dead-letter stream by this consumer. */
  readonly deadLettered: number;
  /**
   * Dead letters replayed for another consumer group on the stream prefix: acknowledged, never
   * handed to the handler (docs/protocol.md#dead-letters).
   */
  readonly skipped: number;
  /** 1 while a message of the shard is in the handler. */
  readonly inFlight: number;
  readonly lastAckedId: string | null;
}

/** What {@link Consumer.stats} returns. */
export interface ConsumerStats {
  readonly memberId: string;
  readonly shards: readonly ShardStats[];
  readonly totals: {
    readonly handled: number;
    readonly acked: number;
    readonly failed: number;
    readonly deadLettered: number;
    readonly skipped: number;
    readonly inFlight: number;
  };
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

/** Why a consumer gave all its shards back: it could not read their streams. */
export interface StreamsUnreachableEvent {
  /** The shards it was reading and gave back, ascending. */
  readonly shards: readonly number[];
  /** What went wrong, in one line (`connect ECONNREFUSED 127.0.0.1:6379`, ...). */
  readonly cause: string;
}

/** The paused shards of the group, after a change (see {@link ConsumerEvents.pausedShards}). */
export interface PausedShardsEvent {
  /** Every paused shard of the group now, ascending. */
  readonly paused: readonly number[];
  /** Shards paused before and not any more. */
  readonly resumed: readonly number[];
}

const NO_SHARDS: readonly number[] = Object.freeze([]);

/** Events of a {@link Consumer}. */
export interface ConsumerEvents {
  /**
   * Shards granted by the coordinator that the consumer started reading (`shards`), and every
   * shard it reads now, those included (`current`, ascending, as {@link Consumer.shards}). A
   * listener that takes only `shards` gets what it always got.
   */
  assigned: [shards: number[], current: number[]];
  /** Shards the consumer stopped reading: drained and reported, retired, or taken away. */
  revoked: [shards: number[]];
  /** Every shard dropped at once; the consumer rejoins by itself. */
  fenced: [event: FencedEvent];
  /**
   * The streams could not be read for `streamsUnreachableMs`: every shard was given back and
   * the consumer left the group. It joins again by itself once Redis answers PING.
   */
  streamsUnreachable: [event: StreamsUnreachableEvent];
  /** The streams Redis answers again after `streamsUnreachable`: the consumer joins again. */
  streamsReachable: [];
  /**
   * An entry delivered `maxDeliveries` times was moved to its shard's dead-letter stream and
   * acknowledged on the shard (docs/protocol.md#dead-letters).
   */
  deadLettered: [event: DeadLetteredEvent];
  /**
   * A dead letter replayed for another consumer group on the stream prefix was read: it was
   * acknowledged for this group and not handed to the handler (docs/protocol.md#dead-letters).
   */
  replaySkipped: [event: ReplaySkippedEvent];
  /**
   * The group's paused shards changed (docs/operations.md#pausing-consumption): an operator
   * paused or resumed consumption, or a position reset holds some shards. The coordinator
   * revokes paused shards (the consumer finishes what it has in hand, as for any revoke) and
   * grants them to nobody until resumed; `paused` lists them all now, `resumed` those let go.
   */
  pausedShards: [event: PausedShardsEvent];
  /**
   * Emitted only while listened to: a handler's rejection (each one); trouble with the streams
   * Redis or the coordinator (once per episode: the first failure after things worked, not each
   * retry). A routine move of the group between coordinator replicas (503 `GROUP_MOVED`,
   * `OWNER_MOVING`, `OWNER_UNAVAILABLE`) is retried without one.
   */
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
/** How long a PING probing the streams Redis may take. */
const PROBE_TIMEOUT_MS = 2_000;
/** 503 answers of a group moving between coordinator replicas: retried, never news. */
const ROUTINE_MOVES = new Set(['GROUP_MOVED', 'OWNER_MOVING', 'OWNER_UNAVAILABLE']);

/** What is going wrong: each kind is reported once per episode. */
type Trouble = 'coordinator' | 'streams';

/** The consumer gave its shards back because it cannot read their streams. */
interface Unreachable {
  /** The leave heartbeat is still to be answered. */
  leave: boolean;
  /** PING probes so far (their backoff). */
  attempt: number;
}

/**
 * Consumes a coordinated group: heartbeats the coordinator, reads exactly the shards it is
 * granted (XREADGROUP, acking after the handler), drains revoked shards before reporting them
 * DONE, consumes retiring shards to their end, claims pending entries of shards it takes over,
 * and drops everything at once when fenced or cut off for its session timeout. When it cannot
 * read the streams for `streamsUnreachableMs`, it leaves the group so that others take its
 * shards, and joins again once the streams Redis answers.
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
  private readonly streamsUnreachableMs: number;
  private readonly closeTimeoutMs: number;
  /** Retries of rejected entries; null: none. */
  private readonly retry: RetryPolicy | null;
  private versions: MemberVersions = JOINING;
  /** Where a shard's Redis consumer group starts if it has to be created (the last reply's). */
  private startPositions: Pick<HeartbeatReply, 'startAt' | 'createdAt' | 'startFromMs'> = {};
  /** The group's paused shards, as the last reply listed them. */
  private paused: readonly number[] = NO_SHARDS;
  /** The routing of the last reply: a shard retired now is sealed with it. */
  private routing: SealVersion = { lifecycleId: '', metadataVersion: 0 };
  private readonly slots = new Map<number, Slot>();
  /** Per-shard counts for {@link stats}, kept across readers of the same shard. */
  private readonly counters = new Map<
    number,
    {
      handled: number;
      acked: number;
      failed: number;
      deadLettered: number;
      skipped: number;
      lastAckedId: string | null;
    }
  >();
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
  private closing: Promise<void> | null = null;
  /** Set while the shards are given back because their streams cannot be read. */
  private unreachable: Unreachable | null = null;
  private streamsCheck: NodeJS.Timeout | undefined;
  /** Trouble reported already and not over yet. */
  private readonly troubles = new Set<Trouble>();
  /** Shards whose key trouble was reported ({@link Consumer.shardTrouble}). */
  private readonly shardTroubles = new Set<number>();
  /** The latest error of the streams Redis in this episode: the cause given with the shards. */
  private lastStreamsError: unknown = null;

  constructor(private readonly options: ConsumerOptions) {
    super();
    this.client = options.client;
    this.memberId = options.memberId ?? `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
    const { redis, owned } = resolveRedis(options.redis, (error) => this.streamsTrouble(error));
    this.redis = redis;
    this.ownsRedis = owned;
    this.sessionTimeoutMs = options.sessionTimeoutMs ?? 45_000;
    this.rebalanceTimeoutMs = options.rebalanceTimeoutMs ?? 60_000;
    this.drainTimeoutMs = options.drainTimeoutMs ?? Math.floor(this.rebalanceTimeoutMs / 2);
    this.streamsUnreachableMs = options.streamsUnreachableMs ?? 10_000;
    this.closeTimeoutMs = options.closeTimeoutMs ?? 5_000;
    if (!(this.streamsUnreachableMs > 0)) throw new RangeError('streamsUnreachableMs must be > 0');
    if (!(this.closeTimeoutMs >= 0)) throw new RangeError('closeTimeoutMs must be >= 0');
    this.retry = retryPolicy(options.maxDeliveries, options.retryBackoffMs);
  }

  /**
   * Joins the group and starts the heartbeat loop; resolves once the coordinator answered the
   * join. Rejects (and stops, as {@link Consumer.close} does) when the join is refused for good:
   * unknown group, no permission, group full, invalid request; rejects too when `close()` is
   * called before the join was answered.
   */
  async start(): Promise<void> {
    if (this.loop) throw new Error('consumer already started');
    if (this.closing) throw new Error('consumer closed');
    const every = Number.isFinite(this.streamsUnreachableMs)
      ? Math.min(1_000, Math.max(20, this.streamsUnreachableMs / 4))
      : 1_000;
    this.streamsCheck = setInterval(() => this.checkStreams(), every);
    this.streamsCheck.unref();
    let joined!: () => void;
    let refused!: (error: unknown) => void;
    const first = new Promise<void>((resolve, reject) => {
      joined = resolve;
      refused = reject;
    });
    this.loop = this.run(joined, refused);
    await first;
  }

  /**
   * What this process did per shard since it started: messages handled, acknowledged, left
   * pending (the handler rejected), in the handler now, and the last acknowledged id. Only the
   * consumer knows these; how far the group is behind on its streams is the coordinator's
   * reading (`CoordinatorClient.lag`, docs/operations.md#lag).
   */
  stats(): ConsumerStats {
    const shards = [...this.counters]
      .map(([shard, c]): ShardStats => {
        const slot = this.slots.get(shard);
        return {
          shard,
          phase: slot?.phase ?? 'gone',
          handled: c.handled,
          acked: c.acked,
          failed: c.failed,
          deadLettered: c.deadLettered,
          skipped: c.skipped,
          inFlight: slot?.reader?.busy() ? 1 : 0,
          lastAckedId: c.lastAckedId,
        };
      })
      .sort((a, b) => a.shard - b.shard);
    const sum = (pick: (s: ShardStats) => number) => shards.reduce((n, s) => n + pick(s), 0);
    return {
      memberId: this.memberId,
      shards,
      totals: {
        handled: sum((s) => s.handled),
        acked: sum((s) => s.acked),
        failed: sum((s) => s.failed),
        deadLettered: sum((s) => s.deadLettered),
        skipped: sum((s) => s.skipped),
        inFlight: sum((s) => s.inFlight),
      },
    };
  }

  private counter(shard: number) {
    let c = this.counters.get(shard);
    if (!c) {
      c = { handled: 0, acked: 0, failed: 0, deadLettered: 0, skipped: 0, lastAckedId: null };
      this.counters.set(shard, c);
    }
    return c;
  }

  private count(shard: number, id: string, acked: boolean): void {
    const c = this.counter(shard);
    c.handled++;
    if (acked) {
      c.acked++;
      c.lastAckedId = id;
    } else c.failed++;
  }

  /** The shards being read now (running or retiring), ascending. */
  shards(): number[] {
    return [...this.slots]
      .filter(([, slot]) => slot.phase === 'running' || slot.phase === 'retiring')
      .map(([shard]) => shard)
      .sort((a, b) => a - b);
  }

  /**
   * Stops reading, finishes the messages in hand (within the drain timeout), leaves the group
   * and disconnects the connections it owns, all within `closeTimeoutMs`: what is not done by
   * then (a drain, the leave heartbeat to a coordinator that does not answer, a Redis command
   * that hangs) is given up, and the promise resolves anyway. Calling it again returns the same
   * promise.
   */
  close(): Promise<void> {
    this.closing ??= this.shutDown();
    return this.closing;
  }

  private async shutDown(): Promise<void> {
    const deadline = Date.now() + this.closeTimeoutMs;
    this.closed = true;
    this.nudge();
    clearInterval(this.streamsCheck);
    clearTimeout(this.watchdog);
    await settledBy(this.leave(deadline), deadline);
    // Whatever did not finish in time is abandoned: its message stays pending for the next owner.
    for (const slot of this.slots.values()) void slot.reader?.stop({ drain: false });
    this.slots.clear();
    this.versions = JOINING;
    if (this.ownsRedis) this.redis.disconnect();
  }

  /** The orderly part of close(): drains, then the leave heartbeat, all by `deadline`. */
  private async leave(deadline: number): Promise<void> {
    // Kept for the leave heartbeat, however long the drains take.
    const reserve = Math.min(1_000, this.closeTimeoutMs / 4);
    await settledBy(this.loop ?? Promise.resolve(), deadline - reserve);
    const generation = this.generation;
    const drainTimeoutMs = Math.min(
      this.drainTimeoutMs,
      Math.max(0, deadline - reserve - Date.now()),
    );
    await Promise.all(
      [...this.slots.values()].map((slot) =>
        slot.reader ? slot.reader.stop({ drain: true, drainTimeoutMs }) : Promise.resolve(),
      ),
    );
    if (this.versions.memberEpoch > 0 && generation === this.generation) {
      // A group moving between replicas is answered again shortly: the leave is retried
      // (quietly) until the close bound, so the shards are not left waiting for the session.
      for (let attempt = 0; ; attempt++) {
        try {
          await this.client.heartbeat(
            this.options.streamPrefix,
            this.options.consumerGroup,
            this.leaveRequest(),
            Math.max(1, deadline - Date.now()),
          );
          return;
        } catch (error) {
          const wait = Math.min(250 * 2 ** attempt, 1_000);
          if (!isRoutineMove(error) || Date.now() + wait >= deadline) {
            if (!isRoutineMove(error)) this.report(error);
            return;
          }
          await new Promise((resolve) => setTimeout(resolve, wait));
        }
      }
    }
  }

  private leaveRequest(): HeartbeatRequest {
    return { ...this.request(), memberEpoch: -1, currentAssignments: [], revokeProgress: [] };
  }

  /**
   * How long one heartbeat (not held) may take: at least 2.5 s, above a coordinator's
   * forwarding answer timeout (2 s by default), so that a replica forwarding to an owner that
   * does not answer says so (503 `OWNER_UNAVAILABLE`) before the consumer gives up on that
   * replica (docs/operations.md#a-paused-owner).
   */
  private heartbeatTimeoutMs(): number {
    return Math.min(10_000, Math.max(2_500, this.sessionTimeoutMs / 4));
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
      if (this.unreachable) {
        // No member any more (or leaving): nothing is held, and the rejoin starts afresh.
        holdMs = 0;
        failures = 0;
        const wait = await this.whileUnreachable(this.unreachable);
        if (!this.closed) await this.sleep(wait);
        continue;
      }
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
          this.heartbeatTimeoutMs(),
          held ? { waitMs: holdMs, signal: held.signal } : undefined,
        );
        failures = 0;
        this.troubles.delete('coordinator');
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
        } else if (
          this.closed &&
          generation === this.generation &&
          reply.outcome !== 'FENCED_MEMBER_EPOCH'
        ) {
          // Answered after close() began (a join, say): nothing is read any more, but the member
          // is in the group now, and its versions let close() send the leave, so the shards are
          // not held until the session expires.
          this.versions = versionsAfter(reply);
        }
        if (!started) {
          started = true;
          // start() promised a consumer that reads; a closed one does not.
          if (this.closed) refused(new Error('consumer closed before it joined'));
          else joined();
        }
      } catch (error) {
        if (held?.signal.aborted) {
          // Cancelled here (something to report, or closing): not a failure; ask again now.
          wait = 0;
        } else {
          if (!started && isRefusal(error)) {
            this.closed = true;
            refused(error);
            void this.close();
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
    if (!started) refused(new Error('consumer closed before it joined'));
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
    this.routing = sealVersionOf(reply);
    this.startPositions = {
      startAt: reply.startAt,
      createdAt: reply.createdAt,
      startFromMs: reply.startFromMs,
    };
    this.notePaused(reply.pausedShards ?? NO_SHARDS);
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
    if (gone.length > 0) this.announce('revoked', gone);
    if (started.length > 0) this.announce('assigned', started, this.shards());
    return reply.heartbeatIntervalMs;
  }

  /** Tells listeners when the group's paused shards changed. */
  private notePaused(paused: readonly number[]): void {
    const before = this.paused;
    if (before.length === paused.length && before.every((shard, i) => shard === paused[i])) return;
    this.paused = [...paused];
    const resumed = before.filter((shard) => !paused.includes(shard));
    this.announce('pausedShards', { paused: this.paused, resumed });
  }

  /** The group's paused shards as the coordinator last said (docs/operations.md#pausing-consumption). */
  pausedShards(): readonly number[] {
    return this.paused;
  }

  private open(shard: number, phase: 'running' | 'retiring'): void {
    const generation = this.generation;
    // A new reader starts without trouble: a key broken again later is news again.
    this.shardTroubles.delete(shard);
    const reader = new ShardReader({
      shard,
      stream: `${this.options.streamPrefix}:${shard}`,
      group: this.options.consumerGroup,
      consumerName: this.memberId,
      redis: this.redis,
      reader: blockingConnection(this.redis, (error) => this.streamsTrouble(error)),
      handler: this.options.handler,
      keyField: this.options.keyField ?? 'key',
      batchSize: this.options.batchSize ?? 10,
      blockMs: this.options.blockMs ?? 500,
      createAt: groupStart(shard, this.startPositions),
      onError: (error) => this.report(error),
      onRedisError: (error, failed) =>
        isKeyError(error) ? this.shardTrouble(failed, error) : this.streamsTrouble(error),
      onRedisRecovered: (recovered) => this.shardTroubles.delete(recovered),
      onHandled: (handled, id, acked) => this.count(handled, id, acked),
      retry: this.retry,
      onDeadLettered: (letter) => {
        this.counter(letter.shard).deadLettered++;
        this.announce('deadLettered', letter);
      },
      onSkipped: (skipped) => {
        this.counter(skipped.shard).skipped++;
        this.announce('replaySkipped', skipped);
      },
      onRetired: (done) => {
        const slot = this.slots.get(done);
        if (generation !== this.generation || slot?.reader !== reader) return;
        slot.phase = 'retired';
        this.announce('revoked', [done]);
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
        this.announce('assigned', [shard], this.shards());
      } else {
        slot.phase = 'drained';
        slot.reader = null;
        this.announce('revoked', [shard]);
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
    this.announce('fenced', { reason, shards });
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

  /**
   * Runs every quarter of `streamsUnreachableMs` (at most every second): gives every shard back
   * once a reader has been unable to read for that long, and ends an episode of streams trouble
   * once every reader reads again.
   */
  private checkStreams(): void {
    if (this.closed || this.unreachable) return;
    const now = Date.now();
    let stalledSince: number | null = null;
    for (const slot of this.slots.values()) {
      const since = slot.reader?.stalledSince() ?? null;
      if (since !== null && since <= now && (stalledSince === null || since < stalledSince)) {
        stalledSince = since;
      }
    }
    if (stalledSince === null) {
      if (this.redis.status === 'ready') this.streamsFine();
      return;
    }
    if (now - stalledSince >= this.streamsUnreachableMs) this.giveBack(now - stalledSince);
  }

  /**
   * The streams cannot be read: stops every reader at once (their work cannot be acked
   * anyway), tells the loop to leave the group and wait for Redis, and says so.
   */
  private giveBack(stalledMs: number): void {
    this.generation++;
    clearTimeout(this.watchdog);
    const shards = this.request().currentAssignments;
    for (const slot of this.slots.values()) void slot.reader?.stop({ drain: false });
    this.slots.clear();
    this.unreachable = { leave: this.versions.memberEpoch > 0, attempt: 0 };
    const cause =
      this.lastStreamsError === null
        ? `no reply from the streams Redis for ${stalledMs} ms`
        : oneLine(this.lastStreamsError);
    this.announce('streamsUnreachable', { shards: [...shards], cause });
    this.nudge();
  }

  /**
   * One turn of the loop while the shards are given back: back to a join once the streams
   * Redis answers PING; until then the leave heartbeat (until answered). Returns the wait.
   */
  private async whileUnreachable(state: Unreachable): Promise<number> {
    if (await this.streamsAnswer()) {
      this.unreachable = null;
      this.versions = JOINING;
      this.streamsFine();
      this.announce('streamsReachable');
      return 0;
    }
    if (state.leave && !this.closed) {
      try {
        await this.client.heartbeat(
          this.options.streamPrefix,
          this.options.consumerGroup,
          this.leaveRequest(),
          this.heartbeatTimeoutMs(),
        );
        this.troubles.delete('coordinator');
        state.leave = false;
        this.versions = JOINING;
      } catch (error) {
        if (!isRoutineMove(error)) this.trouble('coordinator', error);
        if (isRefusal(error)) {
          // Not a member any more anyway.
          state.leave = false;
          this.versions = JOINING;
        }
      }
    }
    const base = Math.min(500, Math.max(20, this.streamsUnreachableMs / 10));
    const ceiling = Math.max(base, Math.min(5_000, this.streamsUnreachableMs));
    return Math.max(10, backoffDelay(state.attempt++, { baseDelayMs: base, maxDelayMs: ceiling }));
  }

  /** Whether the streams Redis answers PING now. */
  private async streamsAnswer(): Promise<boolean> {
    // A connection still (re)connecting would only queue the PING.
    if (this.redis.status !== 'ready' && this.redis.status !== 'wait') return false;
    let answered = false;
    await settledBy(
      this.redis.ping().then((reply) => {
        answered = reply === 'PONG';
      }),
      Date.now() + PROBE_TIMEOUT_MS,
    );
    return answered;
  }

  /** An error of the streams Redis (a connection's, or a command's). */
  private streamsTrouble(error: unknown): void {
    if (this.closed) return;
    this.lastStreamsError = error;
    this.trouble('streams', error);
  }

  /**
   * Redis answered a shard's command with an error about its key (a stream key of another
   * type, a consumer group gone): reported once until that shard's commands succeed again. The
   * shard is kept and retried with backoff; the others read on
   * (docs/operations.md#a-broken-shard-stream).
   */
  private shardTrouble(shard: number, error: unknown): void {
    if (this.closed || this.shardTroubles.has(shard)) return;
    this.shardTroubles.add(shard);
    this.report(error);
  }

  /** The streams Redis works again: the next trouble is news. */
  private streamsFine(): void {
    this.troubles.delete('streams');
    this.lastStreamsError = null;
  }

  /** Reports `error` unless trouble of its kind was reported already and is not over yet. */
  private trouble(kind: Trouble, error: unknown): void {
    if (this.troubles.has(kind)) return;
    this.troubles.add(kind);
    this.report(error);
  }

  /** A failed heartbeat: what it means for the membership, and how long to wait. */
  private failed(error: unknown, attempt: number, sentAt: number): number {
    if (!isRoutineMove(error)) this.trouble('coordinator', error);
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
    if (isRefusal(error) && !isForeign(error)) {
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

  /**
   * Emits one of the consumer's events. A listener that throws is the application's error, not
   * the consumer's: it is reported on `error` (or, with no `error` listener, thrown on its own,
   * as an uncaught exception), and what the consumer was doing goes on.
   */
  private announce<K extends Exclude<keyof ConsumerEvents, 'error'>>(
    event: K,
    ...args: ConsumerEvents[K]
  ): void {
    try {
      (this.emit as (event: K, ...args: ConsumerEvents[K]) => boolean)(event, ...args);
    } catch (error) {
      if (this.listenerCount('error') > 0) this.emit('error', error);
      else
        process.nextTick(() => {
          throw error;
        });
    }
  }

  private report(error: unknown): void {
    if (this.listenerCount('error') > 0) this.emit('error', error);
  }
}

/**
 * The retry policy of the options (docs/protocol.md#dead-letters): none unless `maxDeliveries`
 * or `retryBackoffMs` is set; the backoff defaults to 1 s.
 */
export function retryPolicy(
  maxDeliveries: number | undefined,
  retryBackoffMs: number | undefined,
): RetryPolicy | null {
  if (maxDeliveries !== undefined && !(Number.isSafeInteger(maxDeliveries) && maxDeliveries >= 1))
    throw new RangeError('maxDeliveries must be an integer >= 1');
  if (retryBackoffMs !== undefined && !(Number.isFinite(retryBackoffMs) && retryBackoffMs >= 0))
    throw new RangeError('retryBackoffMs must be >= 0');
  if (maxDeliveries === undefined && retryBackoffMs === undefined) return null;
  return { backoffMs: retryBackoffMs ?? 1_000, maxDeliveries: maxDeliveries ?? null };
}

/** A 503 of a group moving between coordinator replicas: retry, nothing to report. */
function isRoutineMove(error: unknown): boolean {
  return error instanceof UnavailableError && ROUTINE_MOVES.has(error.code);
}

/** The first line of an error's message. */
function oneLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.split('\n')[0]!.trim() || (error instanceof Error ? error.name : 'unknown error');
}

/** Answers that say this member cannot be (or stay) a member, as opposed to "try again". */
/**
 * An error answer without the coordinator's error body (a proxy's own page, `HTTP_<status>`):
 * it says nothing of the membership, so after the join it counts as no answer.
 */
function isForeign(error: unknown): boolean {
  return error instanceof CoordinatorApiError && error.code.startsWith('HTTP_');
}

function isRefusal(error: unknown): boolean {
  return (
    error instanceof InvalidRequestError ||
    error instanceof NotFoundError ||
    error instanceof ConflictError ||
    error instanceof PermissionDeniedError ||
    (error instanceof AuthenticationError && error.code !== 'TOKEN_EXPIRED')
  );
}
