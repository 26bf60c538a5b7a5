import { randomUUID } from 'node:crypto';
import type { HeartbeatReply, HeartbeatRequest } from '../machines/protocol.js';
import type { LagView, ShardLagView } from '../streams/lag-view.js';
import {
  AuthenticationError,
  CoordinatorApiError,
  CoordinatorUnreachableError,
  UnavailableError,
} from './errors.js';
import { retryPolicy, withRetry, type RetryDecision, type RetryOptions } from './retry.js';
import { urlOn } from './url-on.js';

/** The longest delay a Node timer keeps (2³¹ − 1 ms, about 24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1;

interface CommonOptions {
  /**
   * Base URL of any coordinator replica, e.g. `http://127.0.0.1:8080`, or several: a request
   * that gets no answer moves the client on to the next one (any replica answers for any group).
   */
  readonly baseUrl?: string | readonly string[];
  /** @deprecated the former name of {@link CommonOptions.baseUrl}. */
  readonly url?: string;
  /**
   * Per-request timeout in milliseconds (a long poll adds its wait to it).
   * @default 30000
   */
  readonly timeoutMs?: number;
  /**
   * Retry of requests that are safe to repeat: reads on no answer or 502/503/504, writes only
   * on a 503 whose code says nothing was done (not a gateway's own 503 without a code, after
   * which the change may have been made), and any request whose login before it found no
   * replica (nothing of it was sent). Heartbeats are retried by the consumer itself.
   * @default { maxAttempts: 5, baseDelayMs: 100, maxDelayMs: 5000 }
   */
  readonly retry?: RetryOptions;
  /**
   * With several base URLs: how long one that gave no answer (a refused connection, or the
   * client's timeout: a shorter one a caller chose for one request, under 2.5 s, says nothing of
   * the replica), whose
   * gateway answered 502/504, or that answered 503 `OWNER_UNAVAILABLE` or `STORE_UNAVAILABLE`
   * is tried after the others, and not straight for its groups either. A paused replica accepts
   * connections and answers nothing, so without this every request would wait out its timeout
   * on it again (docs/operations.md#a-paused-owner). Those without an answer come last, and so
   * does the base URL of an owner that an `OWNER_UNAVAILABLE` answer names, or that a request
   * sent straight to it found silent or cut off from its store.
   * @default 15000
   */
  readonly demoteForMs?: number;
  /**
   * Where a group's requests go. `owner`: straight to the replica that owns the group, at the
   * URL its answers name (`X-Coord-Owner-Url`), falling back to the base URLs within the call
   * when it cannot be reached or answers 503 (a silent replica, or one cut off from its store,
   * is tried straight again only after `demoteForMs`); one HTTP hop instead of two. An owner
   * that is one of several base URLs is reached the same way (and comes after the other base
   * URLs when it fails); the only base URL is reached as a base URL.
   * `any`: always the base URLs (a load balancer), for deployments whose replicas' advertised
   * URLs clients cannot reach (docs/operations.md#owner-direct-clients).
   * @default 'owner'
   */
  readonly routing?: 'owner' | 'any';
}

/** A client holding a token minted elsewhere (a service token); it is never renewed. */
export interface TokenAuthOptions extends CommonOptions {
  /**
   * Bearer token (a JWT of the coordinator's secret); without one, call
   * {@link CoordinatorClient.login} first.
   * @default none
   */
  readonly token?: string;
  readonly username?: undefined;
  readonly password?: undefined;
}

/**
 * A client that logs in itself and logs in again before (or when) its token expires: at 80 % of
 * its lifetime the next request starts the renewal and goes on with the token it has, which is
 * still valid; only a request whose token has expired waits for the new one.
 */
export interface PasswordAuthOptions extends CommonOptions {
  readonly token?: undefined;
  /** The user to log in as (`POST /coord/v1/auth/login`). */
  readonly username: string;
  /** Its password; kept in memory only, for renewals, never logged. */
  readonly password: string;
}

/** Options of {@link CoordinatorClient}: a base URL and either a token or credentials. */
export type CoordinatorClientOptions = TokenAuthOptions | PasswordAuthOptions;

export interface ChangeMeta {
  readonly requestedBy: string;
  readonly reason: string;
}

/** Routing metadata of a group (docs/protocol.md). */
export interface RoutingMetadata {
  readonly streamPrefix: string;
  readonly consumerGroup: string;
  readonly lifecycleId: string;
  readonly shardCount: number;
  readonly metadataVersion: number;
  readonly streams: readonly string[];
  readonly partitioner: string;
  readonly producersPaused: boolean;
  /**
   * The stream prefix's shard layout the group follows (every group on a prefix shares it);
   * absent from older coordinators. Appends are checked against seals with it
   * (src/client/stream-seal.ts).
   */
  readonly layoutId?: string;
  readonly layoutVersion?: number;
}

/** One shard of {@link GroupLag}. */
export type ShardLag = ShardLagView;

/** A group's lag on its streams ({@link CoordinatorClient.lag}). */
export type GroupLag = LagView;

/** Options of one request made through {@link CoordinatorClient.request}. */
export interface RequestOptions {
  /** Overrides the client's timeout for this request. */
  readonly timeoutMs?: number;
  /** Extra headers. */
  readonly headers?: Readonly<Record<string, string>>;
  /**
   * Whether to retry (see {@link CommonOptions.retry}); `false` makes one attempt.
   * @default true
   */
  readonly retry?: boolean;
  /**
   * Cancels the request (a long poll, typically): an attempt in flight, and a retry's backoff
   * under way, which then ends at once with the last failure.
   */
  readonly signal?: AbortSignal;
  /**
   * How long the coordinator may hold the answer on purpose (a long poll's or a held
   * heartbeat's wait): a request sent straight to a group's owner gives up this plus
   * {@link DIRECT_ANSWER_MS} after it was sent, and goes to the base URLs (a heartbeat then
   * without its wait, answered at once).
   */
  readonly holdMs?: number;
}

/**
 * How long a request sent straight to a group's owner waits for its answer (beyond the wait it
 * asked for) before it goes to the base URLs: a replica forwarding it would answer 503 after
 * its own 2 s answer timeout, so an owner that does not answer costs no more than that.
 */
export const DIRECT_ANSWER_MS = 2_500;

export type { HeartbeatReply, HeartbeatRequest };

/** A heartbeat held open (`waitMs`, docs/protocol.md "Held heartbeats"). */
export interface HeartbeatHoldOptions {
  /**
   * How long the coordinator may hold the reply while it would tell nothing new (it answers at
   * once when the member must act); it clamps this to at most 60 s and half the session.
   */
  readonly waitMs: number;
  /** Cancels the held request (the consumer has something to report). */
  readonly signal?: AbortSignal;
}

/** What a group is addressed by. */
export interface GroupRef {
  readonly streamPrefix: string;
  readonly consumerGroup: string;
}

/** What a base URL that answered from more than one replica is behind: a load balancer. */
const SEVERAL = Symbol('several replicas');

/** Advertised URLs whose replica a client remembers (one per replica it heard of). */
const REMEMBERED_REPLICAS = 256;

/** Writes that the server answers 503 for after doing them: repeating those would repeat the write. */
const DONE_DESPITE_503 = new Set(['AUDIT_UNAVAILABLE']);

/**
 * A small facade over the coordinator's HTTP API: login and token renewal, typed errors
 * ({@link CoordinatorApiError} and its subclasses), retry with backoff and jitter, and the
 * owner hint (`X-Coord-Owner`) of every group it talked to.
 */
export class CoordinatorClient {
  private token: string | undefined;
  /** When the token should be renewed (ms since epoch); only with credentials. */
  private renewAt = Infinity;
  /** When the token expires (ms since epoch); only with credentials. */
  private expiresAt = Infinity;
  private loggingIn: Promise<void> | null = null;
  private readonly baseUrls: readonly string[];
  private current = 0;
  /**
   * Per base URL, until when (ms since epoch) it is tried after the others, and how badly it
   * failed: 1 it answered 503 `OWNER_UNAVAILABLE`, 2 it gave no answer.
   */
  private readonly demoted: Array<{ until: number; rank: 1 | 2 } | null>;
  private readonly demoteForMs: number;
  private readonly timeoutMs: number;
  private readonly owners = new Map<string, string>();
  /** Per group (`sp/cg`), the owner's advertised URL its last answer named. */
  private readonly ownerUrls = new Map<string, string>();
  /** Owner URLs that failed a direct request, until when (ms since epoch) they are not tried. */
  private readonly directBlocked = new Map<string, number>();
  /** Replica ids by advertised URL (`urlKey`), as answers named them (`X-Coord-Owner-Url`). */
  private readonly replicaAtUrl = new Map<string, string>();
  /**
   * Per base URL, the replica that answered there (`X-Coord-Replica`), or {@link SEVERAL} once
   * two have (a load balancer): a base URL spelled otherwise than its replica's advertised URL
   * is still known for that replica's.
   */
  private readonly replicaBehind: Array<string | typeof SEVERAL | undefined>;

  constructor(private readonly options: CoordinatorClientOptions) {
    const given = options.baseUrl ?? options.url;
    const listed = typeof given === 'string' ? [given] : [...(given ?? [])];
    if (listed.length === 0) throw new TypeError('CoordinatorClient needs a baseUrl');
    for (const url of listed)
      if (!isHttpUrl(url))
        throw new TypeError(`CoordinatorClient: base URL ${url} is not an absolute http(s) URL`);
    // One replica listed twice (with and without a trailing slash, say) is one base URL: set
    // aside once, it is set aside (docs/operations.md#owner-direct-clients).
    this.baseUrls = listed.filter(
      (url, i) => listed.findIndex((other) => urlKey(other) === urlKey(url)) === i,
    );
    this.demoted = this.baseUrls.map(() => null);
    this.replicaBehind = this.baseUrls.map(() => undefined);
    this.demoteForMs = options.demoteForMs ?? 15_000;
    this.token = options.token;
    this.timeoutMs = options.timeoutMs ?? 30_000;
  }

  /** Logs in and keeps the token for later calls. */
  async login(username: string, password: string): Promise<void> {
    const sentAt = Date.now();
    const body = await this.send<{ accessToken: string; expiresIn?: number }>(
      'POST',
      '/coord/v1/auth/login',
      { username, password },
      { retry: false },
      false,
    );
    this.token = body.accessToken;
    // Renew at 80% of the lifetime so a long-running consumer never heartbeats with a dead token.
    if (typeof body.expiresIn === 'number') {
      this.renewAt = sentAt + body.expiresIn * 800;
      // A token's expiry is in whole seconds: it may end up to a second before its lifetime.
      this.expiresAt = sentAt + (body.expiresIn - 1) * 1000;
    }
  }

  /**
   * One JSON request; a non-2xx answer throws a {@link CoordinatorApiError} subclass, no answer
   * a {@link CoordinatorUnreachableError}. With credentials, a missing or expired token is
   * renewed first (or once, after a 401).
   */
  async request<T>(
    method: string,
    path: string,
    body?: unknown,
    options: RequestOptions | number = {},
  ): Promise<T> {
    const opts = typeof options === 'number' ? { timeoutMs: options } : options;
    return this.send<T>(method, path, body, opts, true);
  }

  private async send<T>(
    method: string,
    path: string,
    body: unknown,
    options: RequestOptions,
    authenticated: boolean,
  ): Promise<T> {
    /** Whether the last attempt failed in its login, before anything of it was sent. */
    let unsent = false;
    const once = async (): Promise<T> => {
      unsent = authenticated;
      if (authenticated) await this.ensureToken();
      unsent = false;
      return this.fetchJson<T>(method, path, body, options, authenticated);
    };
    if (options.retry === false) return once();
    const idempotent = isIdempotent(method);
    return withRetry(
      once,
      // A request its caller cancelled is not repeated; one whose login found no replica may be,
      // whatever it is: it was not sent.
      (error) =>
        options.signal?.aborted ? { retry: false } : retryDecision(error, idempotent || unsent),
      retryPolicy(this.options.retry),
      undefined,
      // Given up during a backoff (an aborted call, a closing Producer): it ends then.
      options.signal,
    );
  }

  private async fetchJson<T>(
    method: string,
    path: string,
    body: unknown,
    options: RequestOptions,
    authenticated: boolean,
  ): Promise<T> {
    // A 401 (the token expired meanwhile) was refused before anything was done: with
    // credentials, the same exchange goes again once with a new token, as it was sent (a held
    // heartbeat's fallback without its wait stays so).
    const exchange = async (base: string, at: number, b: unknown, o: RequestOptions) => {
      try {
        return await this.exchange<T>(base, at, method, path, b, o);
      } catch (error) {
        if (!(authenticated && error instanceof AuthenticationError && this.hasCredentials()))
          throw error;
        await this.renewToken();
        return this.exchange<T>(base, at, method, path, b, o);
      }
    };
    const direct = this.directUrlFor(path);
    /** A base URL this call does not go back to: the owner it just tried. */
    let tried = -1;
    let sent = { body, options };
    // A change the owner may have made before it stopped answering is never sent again: a
    // bound would only turn a slow success into an unknown outcome, so it gets the whole time.
    const heartbeat = isHeartbeat(method, path);
    const repeatable = isIdempotent(method) || heartbeat;
    const directBound = (given: RequestOptions) =>
      Math.min(given.timeoutMs ?? this.timeoutMs, (given.holdMs ?? 0) + DIRECT_ANSWER_MS);
    if (direct !== null) {
      const bounded = repeatable ? directBound(options) : (options.timeoutMs ?? this.timeoutMs);
      try {
        return await exchange(direct, -1, body, { ...options, timeoutMs: bounded });
      } catch (error) {
        if (options.signal?.aborted || !fallsBack(error)) throw error;
        // Not the owner now, or not reachable from here: this call goes to the base URLs.
        this.forgetOwnerUrl(path);
        // The owner may be one of the base URLs (a client that lists every replica); whether it
        // is set aside for its other groups too, `exchange` decided from its answer.
        tried = this.baseOf(direct);
        if (!retryDecision(error, repeatable).retry) throw error;
        // A held heartbeat is answered at once where it falls back: held twice, it could outlast
        // the member's session (docs/operations.md#a-paused-owner).
        if (options.holdMs && heartbeat) {
          const { holdMs, ...rest } = options;
          const total = options.timeoutMs ?? this.timeoutMs;
          sent = {
            body: withoutWait(body),
            options: { ...rest, timeoutMs: total > holdMs ? total - holdMs : total },
          };
        }
      }
    }
    const at = this.pick(tried);
    this.current = at;
    // Falling back to a base URL that gave no answer a moment ago (every other one did too): it
    // gets the direct bound, not the whole timeout again.
    const mark = this.demoted[at];
    if (direct !== null && repeatable && mark && mark.rank === 2 && mark.until > Date.now())
      sent = { ...sent, options: { ...sent.options, timeoutMs: directBound(sent.options) } };
    return exchange(this.baseUrls[at]!, at, sent.body, sent.options);
  }

  /** The owner URL to send a group's request to first (`routing: 'owner'`), or null. */
  private directUrlFor(path: string): string | null {
    if (this.options.routing === 'any') return null;
    const key = groupKeyOf(path);
    const url = key === null ? undefined : this.ownerUrls.get(key);
    if (url === undefined) return null;
    const blocked = this.directBlocked.get(urlKey(url));
    if (blocked !== undefined && blocked > Date.now()) return null;
    // The only base URL is no other way to the owner: it decides, with the whole timeout, and a
    // request it leaves unanswered is not sent to it a second time.
    return this.baseUrls.length === 1 && this.baseOf(url) === 0 ? null : url;
  }

  private forgetOwnerUrl(path: string): void {
    const key = groupKeyOf(path);
    if (key !== null) this.ownerUrls.delete(key);
  }

  /**
   * One request to `base` (base URL number `at`, or -1 for an owner's URL that is none): the answer,
   * the owner hints it carries, and the one decision of what a failure says of a replica: no
   * answer, a gateway's 502/504 or its own `STORE_UNAVAILABLE` sets it aside (not tried straight,
   * and as a base URL after the others); a 503 about one group, or relayed from another owner,
   * does not.
   */
  private async exchange<T>(
    base: string,
    at: number,
    method: string,
    path: string,
    body: unknown,
    options: RequestOptions,
  ): Promise<T> {
    const requestId = randomUUID();
    // Serialised first: a body that cannot be is the caller's mistake, not a replica's silence.
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    // The timeout is a timer held here, not AbortSignal.timeout(): joined to the caller's signal
    // by AbortSignal.any(), such a signal is held only weakly and the collector may take it
    // (timer and all) before it fires, and the request would then wait for ever.
    const abort = new AbortController();
    const timer = setTimeout(
      () => abort.abort(new DOMException(`no answer within ${timeoutMs} ms`, 'TimeoutError')),
      // setTimeout runs a longer delay after 1 ms.
      Math.min(timeoutMs, MAX_TIMER_MS),
    );
    // As AbortSignal.timeout()'s: it does not keep the process alive by itself.
    timer.unref();
    const cancel = () => abort.abort(options.signal?.reason);
    if (options.signal?.aborted) cancel();
    else options.signal?.addEventListener('abort', cancel, { once: true });
    let res: Response;
    let text: string;
    try {
      res = await fetch(urlOn(base, path), {
        method,
        headers: {
          'x-request-id': requestId,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
          ...options.headers,
        },
        ...(payload === undefined ? {} : { body: payload }),
        signal: abort.signal,
      });
      text = await res.text();
    } catch (error) {
      // No answer: the next requests try the other replicas first, and not straight either. Not
      // when the caller cancelled, nor when it gave this request less time than the client's own
      // timeout and than any replica may need.
      const shortTimeout =
        abort.signal.reason instanceof DOMException &&
        abort.signal.reason.name === 'TimeoutError' &&
        timeoutMs < Math.min(this.timeoutMs, (options.holdMs ?? 0) + DIRECT_ANSWER_MS);
      if (!options.signal?.aborted && !shortTimeout) this.setAside(base, 2);
      const url = urlOn(base, path);
      throw CoordinatorUnreachableError.fromFetchError(
        `${url.origin}${url.pathname}`,
        error,
        timeoutMs,
      );
    } finally {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', cancel);
    }
    const owner = res.headers.get('x-coord-owner');
    const group = groupKeyOf(path);
    if (owner && group) this.owners.set(group, owner);
    // An owner URL that is no absolute http(s) URL (a proxy's own spelling, say) is not one to
    // send to: the group is reached through the base URLs.
    const named = res.headers.get('x-coord-owner-url');
    const ownerUrl = named !== null && isHttpUrl(named) ? named : null;
    if (owner && ownerUrl) this.noteReplicaAt(ownerUrl, owner);
    if (group && res.ok) {
      if (owner && ownerUrl) this.ownerUrls.set(group, ownerUrl);
      else this.ownerUrls.delete(group);
    }
    const answeredBy = res.headers.get('x-coord-replica');
    if (at >= 0 && answeredBy) this.noteReplicaBehind(at, answeredBy);
    const parsed = parseJson(text);
    if (res.status === 503 && errorCodeOf(parsed) === 'OWNER_UNAVAILABLE') {
      const unavailable = ownerUrlOf(parsed);
      if (unavailable) this.blockDirect(unavailable);
      if (at >= 0) this.demote(at, 1);
      // The owner that does not answer, if it is one of ours: no better than a silent one.
      const silent = this.baseOf(unavailable);
      if (silent !== -1 && silent !== at) this.demote(silent, 2);
    } else if (res.status === 503 && errorCodeOf(parsed) === 'STORE_UNAVAILABLE') {
      // A replica cut off from its store serves no group: the others first, for a while. A
      // replica relaying its owner's answer names that owner, whose store it is.
      const relayed =
        answeredBy && owner
          ? answeredBy !== owner
          : ownerUrl !== null && urlKey(ownerUrl) !== urlKey(base);
      if (!relayed) this.setAside(base, 1);
      else if (ownerUrl) this.setAside(ownerUrl, 1);
    } else if (GATEWAY_STATUSES.has(res.status)) {
      // A gateway in front of the replica (or a load balancer) could not reach it.
      this.setAside(base, 1);
    } else if (at >= 0) this.demoted[at] = null;
    if (!res.ok) {
      const url = urlOn(base, path);
      throw CoordinatorApiError.fromResponse(
        res.status,
        parsed,
        res.headers.get('x-request-id') ?? requestId,
        res.headers.get('retry-after'),
        { url: `${url.origin}${url.pathname}`, text },
      );
    }
    return parsed as T;
  }

  /**
   * The base URL to send to: the current one, or the first after it that is not demoted; when
   * all are, the least badly failed, the one whose demotion ends first among equals. Never
   * `avoid` (the owner a call just tried) when there is another.
   */
  private pick(avoid = -1): number {
    const count = this.baseUrls.length;
    if (count === 1) return 0;
    const now = Date.now();
    let best = this.current;
    let bestRank = Infinity;
    let bestUntil = Infinity;
    for (let k = 0; k < count; k++) {
      const i = (this.current + k) % count;
      if (i === avoid) continue;
      const mark = this.demoted[i];
      if (!mark || mark.until <= now) return i;
      if (mark.rank < bestRank || (mark.rank === bestRank && mark.until < bestUntil)) {
        best = i;
        bestRank = mark.rank;
        bestUntil = mark.until;
      }
    }
    return best;
  }

  /**
   * The index of the base URL that is `url` (same origin and path), or -1. A single base URL
   * too: the owner's URL that is the only base URL is no separate way to the owner, and taking
   * it for one would cut its requests at the direct bound and, when the owner stalls, send a
   * heartbeat to it twice (docs/operations.md#owner-direct-clients).
   */
  private indexOfUrl(url: string | null): number {
    if (url === null) return -1;
    const wanted = urlKey(url);
    return this.baseUrls.findIndex((base) => urlKey(base) === wanted);
  }

  /**
   * The base URL that reaches the replica at `url` (an advertised URL or a base URL), or -1:
   * the one spelled the same, else the one where that replica answered (and only it).
   */
  private baseOf(url: string | null): number {
    if (url === null) return -1;
    const at = this.indexOfUrl(url);
    if (at !== -1) return at;
    const replica = this.replicaAtUrl.get(urlKey(url));
    return replica === undefined ? -1 : this.replicaBehind.indexOf(replica);
  }

  private noteReplicaAt(url: string, replica: string): void {
    const key = urlKey(url);
    if (this.replicaAtUrl.get(key) === replica) return;
    // Replicas come and go (a restarted one has a new id, a pod a new address): the oldest go.
    if (this.replicaAtUrl.size >= REMEMBERED_REPLICAS) {
      const oldest = this.replicaAtUrl.keys().next().value;
      if (oldest !== undefined) this.replicaAtUrl.delete(oldest);
    }
    this.replicaAtUrl.delete(key);
    this.replicaAtUrl.set(key, replica);
  }

  private noteReplicaBehind(at: number, replica: string): void {
    const known = this.replicaBehind[at];
    if (known === undefined) this.replicaBehind[at] = replica;
    else if (known !== replica) this.replicaBehind[at] = SEVERAL;
  }

  /** `url` (an owner's, or a base URL) is not tried straight for `demoteForMs`. */
  private blockDirect(url: string): void {
    this.directBlocked.set(urlKey(url), Date.now() + this.demoteForMs);
  }

  /** The replica at `url` serves nothing now: not straight, and as a base URL after the others. */
  private setAside(url: string, rank: 1 | 2): void {
    this.blockDirect(url);
    const at = this.baseOf(url);
    if (at !== -1) this.demote(at, rank);
  }

  /** Tries base URL `at` after the others for a while; the next request goes to another one. */
  private demote(at: number, rank: 1 | 2): void {
    if (this.baseUrls.length === 1) return;
    const known = this.demoted[at];
    this.demoted[at] = {
      until: Date.now() + this.demoteForMs,
      rank: known && known.until > Date.now() && known.rank > rank ? known.rank : rank,
    };
    if (this.current === at) this.current = (at + 1) % this.baseUrls.length;
  }

  private hasCredentials(): boolean {
    return this.options.username !== undefined && this.options.password !== undefined;
  }

  private async ensureToken(): Promise<void> {
    if (!this.hasCredentials()) return;
    if (this.token !== undefined && Date.now() < this.renewAt) return;
    // Due for renewal and still valid: the request goes with it while the renewal runs beside
    // it, so a slow or silent replica answering the login holds no heartbeat up; a renewal
    // that fails is tried again by the next request.
    if (this.token !== undefined && Date.now() < this.expiresAt) {
      this.renewToken().catch(() => undefined);
      return;
    }
    await this.renewToken();
  }

  /** One login at a time, however many requests found the token stale together. */
  private async renewToken(): Promise<void> {
    this.loggingIn ??= this.login(this.options.username!, this.options.password!).finally(() => {
      this.loggingIn = null;
    });
    await this.loggingIn;
  }

  /** The replica that last answered for a group (`X-Coord-Owner`), if any did. */
  ownerHint(streamPrefix: string, consumerGroup: string): string | undefined {
    return this.owners.get(
      `${encodeURIComponent(streamPrefix)}/${encodeURIComponent(consumerGroup)}`,
    );
  }

  groupPath(
    area: 'admin' | 'monitoring' | 'routing' | 'consumer',
    streamPrefix: string,
    consumerGroup: string,
  ): string {
    return `/coord/v1/${area}/streams/${encodeURIComponent(streamPrefix)}/groups/${encodeURIComponent(consumerGroup)}`;
  }

  /**
   * One consumer heartbeat (docs/protocol.md), tried once: the {@link Consumer} owns the retry,
   * because how long it may keep its shards depends on when it last got an answer.
   */
  heartbeat(
    streamPrefix: string,
    consumerGroup: string,
    request: HeartbeatRequest,
    timeoutMs?: number,
    hold?: HeartbeatHoldOptions,
  ): Promise<HeartbeatReply> {
    const path = `${this.groupPath('consumer', streamPrefix, consumerGroup)}/heartbeat`;
    if (!hold || hold.waitMs <= 0) {
      return this.request('POST', path, request, {
        retry: false,
        ...(timeoutMs === undefined ? {} : { timeoutMs }),
      });
    }
    // Held: the reply may come up to `waitMs` later, so the timeout runs from then.
    return this.request(
      'POST',
      path,
      { ...request, waitMs: hold.waitMs },
      {
        retry: false,
        timeoutMs: (timeoutMs ?? this.timeoutMs) + hold.waitMs,
        holdMs: hold.waitMs,
        ...(hold.signal ? { signal: hold.signal } : {}),
      },
    );
  }

  pauseProducers(sp: string, cg: string, change: ChangeMeta): Promise<unknown> {
    return this.request('POST', `${this.groupPath('admin', sp, cg)}/producers/pause`, change);
  }

  resumeProducers(sp: string, cg: string, change: ChangeMeta): Promise<unknown> {
    return this.request('POST', `${this.groupPath('admin', sp, cg)}/producers/resume`, change);
  }

  scale(
    sp: string,
    cg: string,
    shardCount: number,
    change: ChangeMeta,
  ): Promise<{ migration: { migrationId: string } }> {
    return this.request('POST', `${this.groupPath('admin', sp, cg)}/scale`, {
      shardCount,
      ...change,
    });
  }

  /** Rolls back a migration (`current` names the active one). */
  rollback(
    sp: string,
    cg: string,
    migrationId: string,
    change: ChangeMeta,
  ): Promise<{ migration: { migrationId: string } }> {
    return this.request(
      'POST',
      `${this.groupPath('admin', sp, cg)}/migrations/${encodeURIComponent(migrationId)}/rollback`,
      change,
    );
  }

  /**
   * Creates a group. `shardCount` `undefined` adopts the stream prefix's count (a second group
   * on a prefix, docs/protocol.md#one-shard-layout-per-stream-prefix); `options.startAt` says
   * where its shards start being read (docs/protocol.md#start-position).
   */
  createGroup(
    sp: string,
    cg: string,
    shardCount: number | undefined,
    change: ChangeMeta,
    options: { readonly startAt?: 'earliest' | 'latest' } = {},
  ): Promise<Record<string, unknown>> {
    return this.request('POST', '/coord/v1/admin/groups', {
      streamPrefix: sp,
      consumerGroup: cg,
      ...(shardCount === undefined ? {} : { shardCount }),
      ...(options.startAt ? { startAt: options.startAt } : {}),
      ...change,
    });
  }

  /**
   * How far the group is behind on its streams, per shard, as the coordinator reads it
   * (docs/operations.md#lag): needs READ; `available: false` with a `reason` when the
   * coordinator does not know where the streams are; 503 `STREAMS_UNAVAILABLE` when it cannot
   * read them.
   */
  lag(sp: string, cg: string): Promise<GroupLag> {
    return this.request('GET', `${this.groupPath('monitoring', sp, cg)}/lag`);
  }

  /**
   * Routing metadata; with `poll` it waits up to `waitMs` for a version above `afterVersion`.
   * `observedMetadataVersion` reports the highest version this caller has seen, so the
   * coordinator notices a rollback of its metadata; `observedLifecycleId` the lifecycle that
   * version is of, so a group deleted and created again in between (its versions starting over)
   * is not taken for a rollback (docs/operations.md#what-the-coordinator-notices).
   */
  routing(
    sp: string,
    cg: string,
    poll?: { afterVersion: number; waitMs: number },
    options: {
      observedMetadataVersion?: number;
      observedLifecycleId?: string;
      signal?: AbortSignal;
    } = {},
  ): Promise<RoutingMetadata> {
    const query = poll ? `?afterVersion=${poll.afterVersion}&waitMs=${poll.waitMs}` : '';
    const observed = options.observedMetadataVersion;
    const lifecycle = options.observedLifecycleId;
    return this.request('GET', `${this.groupPath('routing', sp, cg)}${query}`, undefined, {
      timeoutMs: (poll?.waitMs ?? 0) + this.timeoutMs,
      ...(poll ? { holdMs: poll.waitMs } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
      ...(observed === undefined
        ? {}
        : {
            headers: {
              'x-observed-metadata-version': String(observed),
              ...(lifecycle ? { 'x-observed-lifecycle-id': lifecycle } : {}),
            },
          }),
    });
  }
}

/** Which failures a request may be repeated after (see {@link CommonOptions.retry}). */
function retryDecision(error: unknown, idempotent: boolean): RetryDecision {
  if (error instanceof CoordinatorUnreachableError) return { retry: idempotent };
  if (error instanceof UnavailableError) {
    if (error.code === 'GROUP_FAILED_CLOSED') return { retry: false };
    // A 503 without a coordinator's code (a gateway's own) says nothing of what was done.
    if (
      !idempotent &&
      (error.status !== 503 || DONE_DESPITE_503.has(error.code) || error.code.startsWith('HTTP_'))
    )
      return { retry: false };
    // Sent to the owner, which did not answer in time: it may have done it.
    if (!idempotent && error.code === 'OWNER_UNAVAILABLE' && error.details?.reason === 'no-answer')
      return { retry: false };
    return { retry: true, retryAfterMs: error.retryAfterMs };
  }
  return { retry: false };
}

/** `error.code` of an error body, if it has one. */
function errorCodeOf(body: unknown): unknown {
  return (body as { error?: { code?: unknown } } | null)?.error?.code;
}

/** `sp/cg` of a path under `/streams/{sp}/groups/{cg}`, or null. */
function groupKeyOf(path: string): string | null {
  const group = /\/streams\/([^/]+)\/groups\/([^/?]+)/.exec(path);
  return group ? `${group[1]}/${group[2]}` : null;
}

/** A 502 or 504 comes from a gateway in front of a replica that could not reach it. */
const GATEWAY_STATUSES = new Set([502, 504]);

/**
 * Whether a request sent straight to a group's owner goes to the base URLs instead: no answer,
 * any 503 (moving, paused, failed over) or a gateway's 502/504; other answers are the group's
 * own.
 */
function fallsBack(error: unknown): boolean {
  if (error instanceof CoordinatorUnreachableError) return true;
  return (
    error instanceof CoordinatorApiError &&
    (error.status === 503 || GATEWAY_STATUSES.has(error.status))
  );
}

/** A URL as compared with another: origin and path, without a trailing slash. */
function urlKey(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.origin}${parsed.pathname.replace(/\/+$/, '')}`;
  } catch {
    return url;
  }
}

/** Whether a request may be repeated without being applied twice: a read, or a `PUT`. */
function isIdempotent(method: string): boolean {
  return method === 'GET' || method === 'HEAD' || method === 'PUT';
}

/** Whether a request is a member's heartbeat (POST to a group's heartbeat route). */
function isHeartbeat(method: string, path: string): boolean {
  return method === 'POST' && HEARTBEAT_PATH.test(path);
}

const HEARTBEAT_PATH = /^\/coord\/v1\/consumer\/streams\/[^/?]+\/groups\/[^/?]+\/heartbeat(\?|$)/;

/** An absolute http: or https: URL. */
function isHttpUrl(text: string): boolean {
  try {
    const { protocol } = new URL(text);
    return protocol === 'http:' || protocol === 'https:';
  } catch {
    return false;
  }
}

/** A held heartbeat's body without its wait: sent again elsewhere, it is answered at once. */
function withoutWait(body: unknown): unknown {
  if (typeof body !== 'object' || body === null || !('waitMs' in body)) return body;
  const { waitMs: _waitMs, ...rest } = body as Record<string, unknown>;
  return rest;
}

/** `error.details.ownerUrl` of an `OWNER_UNAVAILABLE` body: the owner that does not answer. */
function ownerUrlOf(body: unknown): string | null {
  const url = (body as { error?: { details?: { ownerUrl?: unknown } } } | null)?.error?.details
    ?.ownerUrl;
  return typeof url === 'string' ? url : null;
}

function parseJson(text: string): unknown {
  try {
    return text ? (JSON.parse(text) as unknown) : null;
  } catch {
    return null;
  }
}
