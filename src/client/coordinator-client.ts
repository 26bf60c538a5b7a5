import { randomUUID } from 'node:crypto';
import type { HeartbeatReply, HeartbeatRequest } from '../machines/protocol.js';
import {
  AuthenticationError,
  CoordinatorApiError,
  CoordinatorUnreachableError,
  UnavailableError,
} from './errors.js';
import { retryPolicy, withRetry, type RetryDecision, type RetryOptions } from './retry.js';

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
   * on a 503 that says nothing was done. Heartbeats are retried by the consumer itself.
   * @default { maxAttempts: 5, baseDelayMs: 100, maxDelayMs: 5000 }
   */
  readonly retry?: RetryOptions;
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

/** A client that logs in itself and logs in again before (or when) its token expires. */
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

/** Routing metadata of a group (DESIGN.md §9). */
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
  /** Cancels the request (a long poll, typically). */
  readonly signal?: AbortSignal;
}

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
  private loggingIn: Promise<void> | null = null;
  private readonly baseUrls: readonly string[];
  private current = 0;
  private readonly timeoutMs: number;
  private readonly owners = new Map<string, string>();

  constructor(private readonly options: CoordinatorClientOptions) {
    const given = options.baseUrl ?? options.url;
    this.baseUrls = typeof given === 'string' ? [given] : [...(given ?? [])];
    if (this.baseUrls.length === 0) throw new TypeError('CoordinatorClient needs a baseUrl');
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
    if (typeof body.expiresIn === 'number') this.renewAt = sentAt + body.expiresIn * 800;
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
    const once = async (): Promise<T> => {
      if (authenticated) await this.ensureToken();
      try {
        return await this.fetchJson<T>(method, path, body, options);
      } catch (error) {
        if (authenticated && error instanceof AuthenticationError && this.hasCredentials()) {
          await this.renewToken();
          return this.fetchJson<T>(method, path, body, options);
        }
        throw error;
      }
    };
    if (options.retry === false) return once();
    const idempotent = method === 'GET' || method === 'HEAD' || method === 'PUT';
    return withRetry(
      once,
      // A request its caller cancelled is not repeated.
      (error) => (options.signal?.aborted ? { retry: false } : retryDecision(error, idempotent)),
      retryPolicy(this.options.retry),
    );
  }

  private async fetchJson<T>(
    method: string,
    path: string,
    body: unknown,
    options: RequestOptions,
  ): Promise<T> {
    const requestId = randomUUID();
    let res: Response;
    let text: string;
    const at = this.current;
    try {
      res = await fetch(new URL(path, this.baseUrls[at]), {
        method,
        headers: {
          'x-request-id': requestId,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
          ...options.headers,
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: options.signal
          ? AbortSignal.any([
              options.signal,
              AbortSignal.timeout(options.timeoutMs ?? this.timeoutMs),
            ])
          : AbortSignal.timeout(options.timeoutMs ?? this.timeoutMs),
      });
      text = await res.text();
    } catch (error) {
      // No answer: the next request tries the next replica (not when the caller cancelled).
      if (this.current === at && !options.signal?.aborted) {
        this.current = (at + 1) % this.baseUrls.length;
      }
      const url = new URL(path, this.baseUrls[at]);
      throw CoordinatorUnreachableError.fromFetchError(
        `${url.origin}${url.pathname}`,
        error,
        options.timeoutMs ?? this.timeoutMs,
      );
    }
    const owner = res.headers.get('x-coord-owner');
    const group = /\/streams\/([^/]+)\/groups\/([^/?]+)/.exec(path);
    if (owner && group) this.owners.set(`${group[1]}/${group[2]}`, owner);
    const parsed = parseJson(text);
    if (!res.ok)
      throw CoordinatorApiError.fromResponse(
        res.status,
        parsed,
        res.headers.get('x-request-id') ?? requestId,
        res.headers.get('retry-after'),
      );
    return parsed as T;
  }

  private hasCredentials(): boolean {
    return this.options.username !== undefined && this.options.password !== undefined;
  }

  private async ensureToken(): Promise<void> {
    if (!this.hasCredentials()) return;
    if (this.token !== undefined && Date.now() < this.renewAt) return;
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
   * One consumer heartbeat (DESIGN.md §5), tried once: the {@link Consumer} owns the retry,
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
   * Routing metadata; with `poll` it waits up to `waitMs` for a version above `afterVersion`.
   * `observedMetadataVersion` reports the highest version this caller has seen, so the
   * coordinator notices a rollback of its metadata.
   */
  routing(
    sp: string,
    cg: string,
    poll?: { afterVersion: number; waitMs: number },
    options: { observedMetadataVersion?: number; signal?: AbortSignal } = {},
  ): Promise<RoutingMetadata> {
    const query = poll ? `?afterVersion=${poll.afterVersion}&waitMs=${poll.waitMs}` : '';
    const observed = options.observedMetadataVersion;
    return this.request('GET', `${this.groupPath('routing', sp, cg)}${query}`, undefined, {
      timeoutMs: (poll?.waitMs ?? 0) + this.timeoutMs,
      ...(options.signal ? { signal: options.signal } : {}),
      ...(observed === undefined
        ? {}
        : { headers: { 'x-observed-metadata-version': String(observed) } }),
    });
  }
}

/** Which failures a request may be repeated after (see {@link CommonOptions.retry}). */
function retryDecision(error: unknown, idempotent: boolean): RetryDecision {
  if (error instanceof CoordinatorUnreachableError) return { retry: idempotent };
  if (error instanceof UnavailableError) {
    if (error.code === 'GROUP_FAILED_CLOSED') return { retry: false };
    if (!idempotent && (error.status !== 503 || DONE_DESPITE_503.has(error.code)))
      return { retry: false };
    return { retry: true, retryAfterMs: error.retryAfterMs };
  }
  return { retry: false };
}

function parseJson(text: string): unknown {
  try {
    return text ? (JSON.parse(text) as unknown) : null;
  } catch {
    return null;
  }
}
