/**
 * The monitoring reads of the CLI (`GET /coord/v1/monitoring/…`), typed as far as the CLI
 * reads them. Fields the CLI does not print are passed through untouched by `-o json`.
 */
import type { z } from 'zod';
import type { consumptionSchema } from '../http/schemas.js';
import type { CliApi } from './api.js';
import type { GroupName } from './options.js';

export interface GroupSummary extends GroupName {
  readonly shardCount: number;
  readonly metadataVersion: number;
  readonly assignmentEpoch: number;
  readonly lifecycleId: string;
  readonly status: string;
  readonly phase: string;
  readonly memberCount: number;
  readonly owner: string | null;
}

/** Consumption control of a group, as the API answers it (docs/operations.md#pausing-consumption). */
export type Consumption = z.infer<typeof consumptionSchema>;

/** A position reset (docs/operations.md#replay-or-skip). */
export type PositionReset = NonNullable<Consumption['reset']>;

/** One shard of a position reset: where from, where to, what is delivered again or skipped. */
export type ShardMove = PositionReset['moves'][number];

/** `1 of 2 shards moved`, from the moves' own flags (a cancelled reset moved only some). */
export function movedText(reset: PositionReset): string {
  return `${reset.moves.filter((m) => m.moved).length} of ${reset.moves.length} shards moved`;
}

/** Where a position reset moves a group: `earliest`, `latest`, a time or an id per shard. */
export type ResetTarget = PositionReset['to'];

export interface GroupDetail extends GroupSummary {
  readonly failureReason: string | null;
  readonly producersPaused: boolean;
  readonly storeRevision: number;
  readonly highestVersionSeen: number;
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly state: unknown;
  readonly consumption: Consumption;
  readonly rollbackSignals: {
    readonly count: number;
    readonly lastAt: string;
    readonly highestVersionSeen: number;
    readonly lastSource: string;
  } | null;
}

export interface MigrationProgress {
  readonly shardsConverged: number;
  readonly shardsTotal: number;
  readonly removedShardsRemaining: readonly number[];
  readonly removedShardsReported: readonly number[];
  readonly membersReporting: number;
  readonly membersTotal: number;
}

export interface Migration {
  readonly migrationId: string;
  readonly kind: string;
  readonly fromShardCount: number;
  readonly toShardCount: number;
  readonly state: 'IN_PROGRESS' | 'CONVERGED' | 'COMPLETED' | 'ROLLED_BACK';
  readonly rollbackAllowed: boolean;
  readonly rollbackAllowedUntil: string | null;
  readonly startedAt: string;
  readonly requestedBy: string;
  readonly reason: string;
  readonly progress: MigrationProgress | null;
}

export interface Migrations {
  readonly active: Migration | null;
  readonly migrations: readonly Migration[];
}

/** Every group the token may see, following the cursor page by page. */
export async function listAllGroups(api: CliApi): Promise<GroupSummary[]> {
  const groups: GroupSummary[] = [];
  let cursor: string | null | undefined;
  do {
    const query = `limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const page = await api.get<{ groups: GroupSummary[]; nextCursor?: string | null }>(
      `/coord/v1/monitoring/groups?${query}`,
    );
    groups.push(...page.groups);
    cursor = page.nextCursor;
  } while (cursor);
  return groups;
}

export function getGroup(api: CliApi, group: GroupName): Promise<GroupDetail> {
  return api.get(api.groupPath('monitoring', group));
}

export function getMigrations(api: CliApi, group: GroupName): Promise<Migrations> {
  return api.get(api.groupPath('monitoring', group, '/migrations'));
}

/** One line on how far a migration is, e.g. `shards 3/4 converged, members 1/2 reporting`. */
export function progressLine(progress: MigrationProgress | null): string {
  if (!progress) return '';
  const parts = [
    `shards ${progress.shardsConverged}/${progress.shardsTotal} converged`,
    `members ${progress.membersReporting}/${progress.membersTotal} reporting`,
  ];
  if (progress.removedShardsRemaining.length)
    parts.push(`removed shards still retiring: ${progress.removedShardsRemaining.join(',')}`);
  return parts.join(', ');
}
