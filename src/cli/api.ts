import { setTimeout as sleep } from 'node:timers/promises';
import {
  CoordinatorApiError,
  CoordinatorUnreachableError,
  type ChangeMeta,
  type CoordinatorClient,
  type RequestOptions,
  type RoutingMetadata,
} from '../client/index.js';
import type { GroupName } from './options.js';
import { RequestError } from './request-error.js';

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

  /** One JSON request; a failure becomes a {@link RequestError}. */
  async call<T>(
    method: string,
    path: string,
    body?: unknown,
    /** A timeout in ms, or the SDK's per-request options (`retry: false` for one attempt). */
    options?: number | RequestOptions,
  ): Promise<T> {
    try {
      return await this.client.request<T>(method, path, body, options);
    } catch (error) {
      throw new RequestError(method, new URL(path, this.baseUrl).href, error);
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
   * POST could make the change twice.
   */
  async adminOnce<T>(
    group: GroupName,
    suffix: string,
    body: object,
    requestId: string,
    { attempts = 3, pauseMs = 500 }: { attempts?: number; pauseMs?: number } = {},
  ): Promise<T> {
    const path = this.groupPath('admin', group, suffix);
    const options = { headers: { 'x-request-id': requestId }, retry: false } as const;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.call<T>('POST', path, body, options);
      } catch (error) {
        const cause = (error as RequestError).cause;
        const again =
          cause instanceof CoordinatorUnreachableError ||
          (cause instanceof CoordinatorApiError && cause.status === 503);
        if (!again || attempt >= attempts) throw error;
        await sleep(pauseMs * attempt);
      }
    }
  }

  /** The SDK's admin calls, with their failures named as every CLI call's are. */
  pauseProducers(sp: string, cg: string, change: ChangeMeta): Promise<unknown> {
    const group = { streamPrefix: sp, consumerGroup: cg };
    return this.named('POST', this.groupPath('admin', group, '/producers/pause'), () =>
      this.client.pauseProducers(sp, cg, change),
    );
  }

  resumeProducers(sp: string, cg: string, change: ChangeMeta): Promise<unknown> {
    const group = { streamPrefix: sp, consumerGroup: cg };
    return this.named('POST', this.groupPath('admin', group, '/producers/resume'), () =>
      this.client.resumeProducers(sp, cg, change),
    );
  }

  scale(
    sp: string,
    cg: string,
    shardCount: number,
    change: ChangeMeta,
  ): Promise<{ migration: { migrationId: string } }> {
    const group = { streamPrefix: sp, consumerGroup: cg };
    return this.named('POST', this.groupPath('admin', group, '/scale'), () =>
      this.client.scale(sp, cg, shardCount, change),
    );
  }

  /** Routing metadata; with `poll` it waits up to `waitMs` for a version above `afterVersion`. */
  routing(
    sp: string,
    cg: string,
    poll?: { afterVersion: number; waitMs: number },
  ): Promise<RoutingMetadata> {
    const path = this.groupPath('routing', { streamPrefix: sp, consumerGroup: cg });
    return this.named('GET', path, () => this.client.routing(sp, cg, poll));
  }

  /** Runs an SDK call; a failure becomes a {@link RequestError} naming the method and URL. */
  private async named<T>(method: string, path: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      throw new RequestError(method, new URL(path, this.baseUrl).href, error);
    }
  }
}
