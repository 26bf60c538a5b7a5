/**
 * Clients of a replica set for the end-to-end tests: an HTTP caller that goes round-robin over
 * the replicas and records every answer, and simulated members that record what each heartbeat
 * reply grants them, so a test can check from the members' side that no shard ever had two
 * owners at once.
 */
import type { Role } from '../../src/http/auth/roles.js';
import type { HeartbeatReply } from '../../src/machines/protocol.js';
import { SimulatedMember } from './members.js';
import { replicaToken } from './replica-processes.js';

const ROLES: Record<string, Role[]> = {
  admin: ['READ', 'WRITE', 'CONSUMER', 'PRODUCER'],
  writer: ['WRITE'],
  reader: ['READ'],
  consumer: ['CONSUMER'],
};

/** One HTTP answer a replica gave (connection failures are not answers and are counted apart). */
export interface Answer {
  readonly at: number;
  readonly url: string;
  readonly path: string;
  readonly status: number;
  /** `error.code` of an error body, if the answer had one. */
  readonly code: string | null;
  /** `X-Coord-Owner`, if set. */
  readonly owner: string | null;
  readonly retryAfter: string | null;
}

/** Options of {@link ReplicaCaller}. */
export interface ReplicaCallerOptions {
  /** The replica URLs to use now (called before every attempt: a test may take some away). */
  readonly targets: () => readonly string[];
  /** Retry a 503 or a connection failure until this long after the call began. @default 20000 */
  readonly retryForMs?: number;
  /** Wait between retries. @default 100 */
  readonly retryDelayMs?: number;
  /** One attempt's limit (a paused replica accepts connections but never answers). @default 3000 */
  readonly attemptTimeoutMs?: number;
}

/**
 * `call(method, path, …)` as {@link SimulatedMember} expects it, over a replica set: each
 * attempt goes to the next target; a 503 or a failed connection is retried on the next one
 * until `retryForMs`. Every answer is recorded in {@link ReplicaCaller.answers}.
 */
export class ReplicaCaller {
  readonly answers: Answer[] = [];
  connectionFailures = 0;
  /** When the attempt that produced the last returned response was sent. */
  lastSentAt = 0;
  private next = 0;

  constructor(private readonly options: ReplicaCallerOptions) {}

  async call(
    method: string,
    path: string,
    {
      user,
      body,
      headers,
    }: { user?: string; body?: unknown; headers?: Record<string, string> } = {},
  ): Promise<Response> {
    const deadline = Date.now() + (this.options.retryForMs ?? 20_000);
    for (;;) {
      const targets = this.options.targets();
      const url = targets[this.next++ % Math.max(1, targets.length)];
      if (url === undefined) throw new Error('no replica to call');
      const sentAt = Date.now();
      let res: Response | null = null;
      try {
        res = await fetch(`${url}${path}`, {
          method,
          headers: {
            ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
            ...(user ? { authorization: `Bearer ${replicaToken(user, ROLES[user] ?? [])}` } : {}),
            ...headers,
          },
          ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
          signal: AbortSignal.timeout(this.options.attemptTimeoutMs ?? 3_000),
        });
      } catch {
        this.connectionFailures++;
      }
      if (res) {
        const code = res.status >= 400 ? await errorCode(res.clone()) : null;
        this.answers.push({
          at: Date.now(),
          url,
          path,
          status: res.status,
          code,
          owner: res.headers.get('x-coord-owner'),
          retryAfter: res.headers.get('retry-after'),
        });
        if (res.status !== 503 || Date.now() >= deadline) {
          this.lastSentAt = sentAt;
          return res;
        }
        await res.body?.cancel();
      } else if (Date.now() >= deadline) {
        throw new Error(`no replica answered ${method} ${path}`);
      }
      await new Promise((done) => setTimeout(done, this.options.retryDelayMs ?? 100));
    }
  }
}

/** The `error.code` of an error body (the API's error shape), or null. */
async function errorCode(res: Response): Promise<string | null> {
  try {
    const body = (await res.json()) as { error?: { code?: unknown } };
    return typeof body.error?.code === 'string' ? body.error.code : null;
  } catch {
    return null;
  }
}

/** One heartbeat as the member saw it: when it went out, when the reply came, what it held after. */
export interface BeatRecord {
  readonly memberId: string;
  readonly sentAt: number;
  readonly repliedAt: number;
  readonly outcome: HeartbeatReply['outcome'];
  readonly memberEpoch: number;
  /** Shards the member holds after the reply (assigned, revoking, retiring). */
  readonly owned: readonly number[];
  /** `X-Coord-Owner` of the reply. */
  readonly owner: string | null;
}

/** A simulated member heartbeating in a loop through its own {@link ReplicaCaller}. */
export class LoopingMember {
  readonly caller: ReplicaCaller;
  readonly member: SimulatedMember;
  readonly beats: BeatRecord[] = [];
  private running: Promise<void> | null = null;
  private stopped = false;
  /** An error that ended the loop (a heartbeat no replica answered with 200). */
  failure: unknown = null;

  constructor(
    memberId: string,
    streamPrefix: string,
    consumerGroup: string,
    options: ReplicaCallerOptions,
    private readonly intervalMs = 250,
  ) {
    this.caller = new ReplicaCaller(options);
    this.member = new SimulatedMember(this.caller, memberId, streamPrefix, consumerGroup);
  }

  /** One heartbeat, recorded. */
  async beat(): Promise<HeartbeatReply> {
    const reply = await this.member.beat();
    this.beats.push({
      memberId: this.member.memberId,
      sentAt: this.caller.lastSentAt,
      repliedAt: Date.now(),
      outcome: reply.outcome,
      memberEpoch: reply.memberEpoch,
      owned: [...this.member.owned],
      owner: this.caller.answers.at(-1)?.owner ?? null,
    });
    return reply;
  }

  /** Beats until the member holds its final assignment (outcome OK with nothing pending). */
  async settle(): Promise<void> {
    for (let i = 0; i < 200; i++) {
      const reply = await this.beat();
      if (
        reply.outcome === 'OK' &&
        reply.pendingShards.length === 0 &&
        reply.revokeShards.length === 0
      )
        return;
      await new Promise((done) => setTimeout(done, 50));
    }
    throw new Error(`${this.member.memberId} did not settle`);
  }

  /** Starts beating every `intervalMs` until {@link LoopingMember.stop}. */
  start(): void {
    this.stopped = false;
    this.running = (async () => {
      while (!this.stopped) {
        try {
          await this.beat();
        } catch (error) {
          this.failure = error;
          return;
        }
        await new Promise((done) => setTimeout(done, this.intervalMs));
      }
    })();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
  }
}

/** A member holding a shard from one instant to another (`end` Infinity: still holds it). */
export interface Hold {
  readonly memberId: string;
  readonly shard: number;
  readonly start: number;
  readonly end: number;
}

/**
 * The members' own view of who held which shard when: a shard is held from the reply that
 * grants it until the heartbeat that gives it up is sent (the coordinator can grant it to
 * another member only after receiving that heartbeat).
 */
export function holds(beats: readonly BeatRecord[]): Hold[] {
  const result: Hold[] = [];
  const open = new Map<string, { memberId: string; shard: number; start: number }>();
  const byMember = new Map<string, BeatRecord[]>();
  for (const beat of beats)
    byMember.set(beat.memberId, [...(byMember.get(beat.memberId) ?? []), beat]);
  for (const list of byMember.values()) {
    list.sort((a, b) => a.sentAt - b.sentAt);
    for (const beat of list) {
      for (const [key, hold] of open) {
        if (hold.memberId === beat.memberId && !beat.owned.includes(hold.shard)) {
          result.push({ ...hold, end: beat.sentAt });
          open.delete(key);
        }
      }
      for (const shard of beat.owned) {
        const key = `${beat.memberId}/${shard}`;
        if (!open.has(key))
          open.set(key, { memberId: beat.memberId, shard, start: beat.repliedAt });
      }
    }
  }
  for (const hold of open.values()) result.push({ ...hold, end: Infinity });
  return result;
}

/** Pairs of holds of one shard by two members that intersect in time. */
export function holdOverlaps(all: readonly Hold[]): [Hold, Hold][] {
  const found: [Hold, Hold][] = [];
  for (const a of all) {
    for (const b of all) {
      if (a.shard === b.shard && a.memberId < b.memberId && a.start < b.end && b.start < a.end) {
        found.push([a, b]);
      }
    }
  }
  return found;
}
