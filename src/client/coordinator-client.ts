import { randomUUID } from 'node:crypto';
import { CoordinatorApiError } from './errors.js';

export interface CoordinatorClientOptions {
  /** Base URL, e.g. `http://127.0.0.1:8080`. */
  readonly url: string;
  /** Bearer token; see {@link CoordinatorClient.login}. */
  readonly token?: string;
  /**
   * Per-request timeout in milliseconds.
   * @default 30000
   */
  readonly timeoutMs?: number;
}

export interface ChangeMeta {
  readonly requestedBy: string;
  readonly reason: string;
}

/** A small facade over the coordinator's HTTP API. */
export class CoordinatorClient {
  private token: string | undefined;
  private readonly timeoutMs: number;

  constructor(private readonly options: CoordinatorClientOptions) {
    this.token = options.token;
    this.timeoutMs = options.timeoutMs ?? 30_000;
  }

  /** Logs in and keeps the token for later calls. */
  async login(username: string, password: string): Promise<void> {
    const body = await this.request<{ accessToken: string }>('POST', '/coord/v1/auth/login', {
      username,
      password,
    });
    this.token = body.accessToken;
  }

  /** One JSON request; a non-2xx answer throws {@link CoordinatorApiError}. */
  async request<T>(
    method: string,
    path: string,
    body?: unknown,
    timeoutMs = this.timeoutMs,
  ): Promise<T> {
    const requestId = randomUUID();
    const res = await fetch(new URL(path, this.options.url), {
      method,
      headers: {
        'x-request-id': requestId,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    const parsed = parseJson(text);
    if (!res.ok)
      throw CoordinatorApiError.fromResponse(
        res.status,
        parsed,
        res.headers.get('x-request-id') ?? requestId,
      );
    return parsed as T;
  }

  groupPath(
    area: 'admin' | 'monitoring' | 'routing',
    streamPrefix: string,
    consumerGroup: string,
  ): string {
    return `/coord/v1/${area}/streams/${encodeURIComponent(streamPrefix)}/groups/${encodeURIComponent(consumerGroup)}`;
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

  /** Routing metadata; with `afterVersion` it waits up to `waitMs` for a newer version. */
  routing(
    sp: string,
    cg: string,
    poll?: { afterVersion: number; waitMs: number },
  ): Promise<{ shardCount: number; metadataVersion: number; producersPaused: boolean }> {
    const query = poll ? `?afterVersion=${poll.afterVersion}&waitMs=${poll.waitMs}` : '';
    return this.request(
      'GET',
      `${this.groupPath('routing', sp, cg)}${query}`,
      undefined,
      (poll?.waitMs ?? 0) + this.timeoutMs,
    );
  }
}

function parseJson(text: string): unknown {
  try {
    return text ? (JSON.parse(text) as unknown) : null;
  } catch {
    return null;
  }
}
