import { setTimeout as sleep } from 'node:timers/promises';
import {
  CoordinatorApiError,
  CoordinatorUnreachableError,
  type ChangeMeta,
  type CoordinatorClient,
  type RequestOptions,
} from '../client/index.js';
import type { GroupName } from './options.js';
import { RequestError } from './request-error.js';
import { urlOn } from '../client/url-on.js';

type Sdk = CoordinatorClient;

/** How long one call of coordctl waits for an answer, retries included (the SDK's timeout). */
export const CALL_TIMEOUT_MS = 30_000;

/**
 * The CLI's one road to the coordinator: every call goes through {@link CliApi.call}, so every
 * failure names the method and URL (see explain-error.ts for what the operator is told).
 */
export class CliApi {
  constructor(
    private readonly client: CoordinatorClient,
    /** The coordinator's base URL. */
    readonly baseUrl: string,
  ) {}

  /**
   * One JSON request; a failure becomes a {@link RequestError}. Its timeout (default
   * {@link CALL_TIMEOUT_MS}) bounds the whole call, the SDK's retries included: a replica that
   * takes the connection and never answers is waited for once, not once per attempt, and the
   * `no answer within …` the operator reads is how long coordctl waited.
   */
  async call<T>(
    method: string,
    path: string,
    body?: unknown,
    /** A timeout in ms, or the SDK's per-request options (`retry: false` for one attempt). */
    options?: number | RequestOptions,
  ): Promise<T> {
    const given: RequestOptions =
      typeof options === 'number' ? { timeoutMs: options } : (options ?? {});
    const timeoutMs = given.timeoutMs ?? CALL_TIMEOUT_MS;
    const deadline = new AbortController();
    const timer = setTimeout(
      () => deadline.abort(new DOMException(`no answer within ${timeoutMs} ms`, 'TimeoutError')),
      timeoutMs,
    );
    const signal = given.signal
      ? AbortSignal.any([given.signal, deadline.signal])
      : deadline.signal;
    try {
      return await this.client.request<T>(method, path, body, { ...given, timeoutMs, signal });
    } catch (error) {
      throw new RequestError(method, urlOn(this.baseUrl, path).href, error);
    } finally {
      clearTimeout(timer);
    }
  }

  get<T>(path: string): Promise<T> {
    return this.call<T>('GET', path);
  }

  /** `/coord/v1/<area>/streams/<sp>/groups/<cg><suffix>`, names percent-encoded. */
  groupPath(area: 'admin' | 'monitoring' | 'routing', group: GroupName, suffix = ''): string {
    return `${this.client.groupPath(area, group.streamPrefix, group.consumerGroup)}${suffix}`;
  }

  /** A group mutation under `/admin/`, with `requestedBy` and `reason`. */
  admin<T>(group: GroupName, suffix: string, change: ChangeMeta, extra: object = {}): Promise<T> {
    return this.call<T>('POST', this.groupPath('admin', group, suffix), { ...extra, ...change });
  }

  /**
   * A group mutation under `/admin/` sent with `X-Request-Id: requestId`, which the coordinator
   * answers the same way however often it comes: so it is sent again (up to `attempts` times in
   * all) when no answer came or the coordinator could not serve it then (503), which for another
   * POST could make the change twice. The attempts share one {@link CALL_TIMEOUT_MS}, as a
   * {@link call}'s retries do: a replica that never answers is waited for once.
   */
  async adminOnce<T>(
    group: GroupName,
    suffix: string,
    body: object,
    requestId: string,
    { attempts = 3, pauseMs = 500 }: { attempts?: number; pauseMs?: number } = {},
  ): Promise<T> {
    const path = this.groupPath('admin', group, suffix);
    const until = Date.now() + CALL_TIMEOUT_MS;
    for (let attempt = 1; ; attempt++) {
      const timeoutMs = Math.max(1, until - Date.now());
      const options = { headers: { 'x-request-id': requestId }, retry: false, timeoutMs } as const;
      try {
        return await this.call<T>('POST', path, body, options);
      } catch (error) {
        const cause = (error as RequestError).cause;
        const again =
          cause instanceof CoordinatorUnreachableError ||
          (cause instanceof CoordinatorApiError && cause.status === 503);
        if (!again || attempt >= attempts || Date.now() + pauseMs * attempt >= until) throw error;
        await sleep(pauseMs * attempt);
      }
    }
  }

  /** The SDK's admin calls, with their failures named as every CLI call's are. */
  pauseProducers(...args: Parameters<Sdk['pauseProducers']>): ReturnType<Sdk['pauseProducers']> {
    return this.namedAdmin(args, '/producers/pause', () => this.client.pauseProducers(...args));
  }

  resumeProducers(...args: Parameters<Sdk['resumeProducers']>): ReturnType<Sdk['resumeProducers']> {
    return this.namedAdmin(args, '/producers/resume', () => this.client.resumeProducers(...args));
  }

  scale(...args: Parameters<Sdk['scale']>): ReturnType<Sdk['scale']> {
    return this.namedAdmin(args, '/scale', () => this.client.scale(...args));
  }

  /** Routing metadata; with `poll` it waits up to `waitMs` for a version above `afterVersion`. */
  routing(...args: Parameters<Sdk['routing']>): ReturnType<Sdk['routing']> {
    const [streamPrefix, consumerGroup] = args;
    const path = this.groupPath('routing', { streamPrefix, consumerGroup });
    return this.named('GET', path, () => this.client.routing(...args));
  }

  /** An SDK admin call on the group its first two arguments name (see {@link named}). */
  private namedAdmin<T>(
    [streamPrefix, consumerGroup]: readonly [string, string, ...unknown[]],
    suffix: string,
    call: () => Promise<T>,
  ): Promise<T> {
    const path = this.groupPath('admin', { streamPrefix, consumerGroup }, suffix);
    return this.named('POST', path, call);
  }

  /** Runs an SDK call; a failure becomes a {@link RequestError} naming the method and URL. */
  private async named<T>(method: string, path: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      throw new RequestError(method, urlOn(this.baseUrl, path).href, error);
    }
  }
}
