import type { ChangeMeta, CoordinatorClient, RoutingMetadata } from '../client/index.js';
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
  async call<T>(method: string, path: string, body?: unknown, timeoutMs?: number): Promise<T> {
    try {
      return await this.client.request<T>(method, path, body, timeoutMs);
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

  pauseProducers(sp: string, cg: string, change: ChangeMeta): Promise<unknown> {
    return this.admin({ streamPrefix: sp, consumerGroup: cg }, '/producers/pause', change);
  }

  resumeProducers(sp: string, cg: string, change: ChangeMeta): Promise<unknown> {
    return this.admin({ streamPrefix: sp, consumerGroup: cg }, '/producers/resume', change);
  }

  scale(
    sp: string,
    cg: string,
    shardCount: number,
    change: ChangeMeta,
  ): Promise<{ migration: { migrationId: string } }> {
    return this.admin({ streamPrefix: sp, consumerGroup: cg }, '/scale', change, { shardCount });
  }

  /** Routing metadata; with `poll` it waits up to `waitMs` for a version above `afterVersion`. */
  async routing(
    sp: string,
    cg: string,
    poll?: { afterVersion: number; waitMs: number },
  ): Promise<RoutingMetadata> {
    try {
      return await this.client.routing(sp, cg, poll);
    } catch (error) {
      const path = this.groupPath('routing', { streamPrefix: sp, consumerGroup: cg });
      throw new RequestError('GET', new URL(path, this.baseUrl).href, error);
    }
  }
}
