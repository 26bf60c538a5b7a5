import { CoordinatorApiError } from '../client/index.js';
import type { CliApi } from './api.js';
import { CliError } from './cli-error.js';
import { renderTable } from './output.js';
import { RequestError } from './request-error.js';
import { urlOn } from '../client/url-on.js';

export const REPLICAS_PATH = '/coord/v1/monitoring/replicas';

/**
 * A live replica as `GET /coord/v1/monitoring/replicas` lists it: id, advertised URL, groups
 * owned and lease ages. The names of the fields are read leniently (`url` or `advertisedUrl`,
 * a count or a list of groups) so that the table does not depend on one spelling.
 */
export interface ReplicaView {
  readonly replicaId?: string;
  readonly id?: string;
  readonly url?: string;
  readonly advertisedUrl?: string;
  readonly groupsOwned?: number | readonly unknown[];
  readonly groups?: readonly unknown[];
  readonly leases?: ReadonlyArray<{ readonly ageMs?: number }>;
  readonly oldestLeaseAgeMs?: number;
  readonly lastHeartbeatAt?: string;
  readonly lastSeenAt?: string;
}

/** Reads the replica listing; a coordinator without it gets a message that says so. */
export async function readReplicas(api: CliApi): Promise<{ replicas: ReplicaView[] }> {
  try {
    return await api.get<{ replicas: ReplicaView[] }>(REPLICAS_PATH);
  } catch (error) {
    const cause = error instanceof RequestError ? error.cause : null;
    if (cause instanceof CoordinatorApiError && cause.status === 404) {
      throw new CliError(
        `GET ${urlOn(api.baseUrl, REPLICAS_PATH).href} answered 404: this coordinator has no replica listing (it is older than this coordctl)\n  what to do: upgrade the coordinator; meanwhile GET /coord/v1/monitoring/info names the replica that answers`,
      );
    }
    throw error;
  }
}

function groupsOwned(r: ReplicaView): number | null {
  if (typeof r.groupsOwned === 'number') return r.groupsOwned;
  if (Array.isArray(r.groupsOwned)) return r.groupsOwned.length;
  return (r.groups ?? r.leases)?.length ?? null;
}

function oldestLeaseAge(r: ReplicaView): string | null {
  const ages = r.leases?.map((l) => l.ageMs).filter((a): a is number => typeof a === 'number');
  const oldest = r.oldestLeaseAgeMs ?? (ages?.length ? Math.max(...ages) : undefined);
  return oldest === undefined ? null : `${Math.round(oldest / 1000)}s`;
}

/** The replicas as a table. */
export function replicasTable(body: { replicas: readonly ReplicaView[] }): string {
  return renderTable(
    ['replica', 'url', 'groups owned', 'oldest lease', 'last seen'],
    body.replicas.map((r) => [
      r.replicaId ?? r.id,
      r.advertisedUrl ?? r.url,
      groupsOwned(r),
      oldestLeaseAge(r),
      r.lastHeartbeatAt ?? r.lastSeenAt,
    ]),
  );
}
