import type { Command } from 'commander';
import type { CliApi } from '../api.js';
import { connect, connectionOptions, type ConnectionFlags } from '../connection.js';
import {
  getGroup,
  getMigrations,
  listAllGroups,
  movedText,
  progressLine,
  type Migration,
  type Migrations,
  type PositionReset,
  type ResetTarget,
} from '../monitoring.js';
import { groupLabel, parseGroup, positiveInt, type GroupName } from '../options.js';
import { outputOption, print, renderFields, renderTable, type OutputFormat } from '../output.js';
import { getLag, lagTable } from '../lag.js';
import { replicasTable, readReplicas } from '../replicas.js';
import { RequestError } from '../request-error.js';
import { statechartTable, type Statechart } from '../statechart.js';

type ReadFlags = ConnectionFlags & { output: OutputFormat };

/** A read command: connection and output options, then `run` with a connected API. */
function readCommand(
  program: Command,
  name: string,
  description: string,
  configure: (command: Command) => Command,
  run: (api: CliApi, flags: ReadFlags, ...args: never[]) => Promise<void>,
): void {
  const command = configure(program.command(name).description(description));
  outputOption(connectionOptions(command)).action(async (...args: unknown[]) => {
    const flags = command.opts<ReadFlags>();
    const positional = args.slice(0, command.registeredArguments.length) as never[];
    await run(await connect(flags), flags, ...positional);
  });
}

const withGroup = (command: Command) =>
  command.argument('<group>', '<streamPrefix>:<consumerGroup>', parseGroup);

interface MemberView {
  memberId: string;
  state?: string;
  clientId: string | null;
  memberEpoch: number;
  lastHeartbeatAt: string | null;
  sessionExpiresAt: string | null;
  assignedShards: number[];
  revokeShards?: number[];
  retireShards?: number[];
  targetShards?: number[];
}

interface AuditRecord {
  timestamp: string;
  principal: string | null;
  operation: string;
  outcome: string;
  status: number;
  streamPrefix: string | null;
  consumerGroup: string | null;
  requestedBy: string | null;
  reason: string | null;
}

/** Where a reset moves a group, in words. */
function targetText(to: ResetTarget): string {
  if (typeof to === 'string') return to;
  if ('timestamp' in to) return new Date(to.timestamp).toISOString();
  return Object.entries(to.ids)
    .map(([shard, id]) => `${shard}=${id}`)
    .join(',');
}

/** A position reset on one line: id, target, stage and how many shards moved. */
function resetLine(
  reset: (PositionReset & { completedAt?: string; cancelled?: boolean }) | null,
): string {
  if (!reset) return 'none';
  const when = reset.completedAt ? `, ended ${reset.completedAt}` : '';
  const stage = reset.cancelled ? 'cancelled' : reset.stage;
  return `${reset.resetId} to ${targetText(reset.to)}: ${stage}, ${movedText(reset)} (by ${reset.requestedBy}: ${reset.reason}${when})`;
}

function migrationRows(migrations: readonly Migration[]) {
  return migrations.map((m) => [
    m.migrationId,
    m.kind,
    m.fromShardCount,
    m.toShardCount,
    m.state,
    m.rollbackAllowed ? `until ${m.rollbackAllowedUntil ?? 'converged'}` : 'no',
    m.startedAt,
    m.requestedBy,
    m.reason,
  ]);
}

function migrationsTable(body: Migrations): string {
  // the active migration first, then history (newest first)
  const table = renderTable(
    ['migration', 'kind', 'from', 'to', 'state', 'rollback', 'started', 'requested by', 'reason'],
    migrationRows([
      ...(body.active ? [body.active] : []),
      ...body.migrations.filter((m) => m.migrationId !== body.active?.migrationId),
    ]),
  );
  const active = body.active
    ? `\nactive: ${body.active.migrationId} ${body.active.state} ${body.active.fromShardCount} → ${body.active.toShardCount} shards; ${progressLine(body.active.progress)}\n`
    : '\nactive: none\n';
  return table + active;
}

/** The monitoring reads: groups, describe, members, assignments, migrations, audit, replicas, statechart. */
export function registerReadCommands(program: Command): void {
  readCommand(
    program,
    'groups',
    'list groups (every page)',
    (c) => c,
    async (api, flags) => {
      const groups = await listAllGroups(api);
      print(flags.output, { groups }, () =>
        renderTable(
          ['group', 'shards', 'version', 'epoch', 'status', 'phase', 'members', 'owner'],
          groups.map((g) => [
            groupLabel(g),
            g.shardCount,
            g.metadataVersion,
            g.assignmentEpoch,
            g.status,
            g.phase,
            g.memberCount,
            g.owner,
          ]),
        ),
      );
    },
  );

  readCommand(
    program,
    'describe',
    'one group: status, versions, owner, rollback signals, active migration',
    withGroup,
    async (api, flags, group: GroupName) => {
      const [detail, migrations, lag] = await Promise.all([
        getGroup(api, group),
        getMigrations(api, group),
        // The lag table is part of the answer; a streams Redis that cannot be read is a line.
        getLag(api, group).catch((error: unknown) => {
          if (error instanceof RequestError) return { problem: error.message };
          throw error;
        }),
      ]);
      const active = migrations.active;
      const lagText = () => ('problem' in lag ? `lag: ${lag.problem}\n` : lagTable(lag));
      print(
        flags.output,
        { ...detail, activeMigration: active, lag },
        () =>
          renderFields([
            ['group', groupLabel(detail)],
            ['status', detail.status],
            ['failure reason', detail.failureReason],
            ['phase', detail.phase],
            ['shard count', detail.shardCount],
            ['metadata version', detail.metadataVersion],
            ['assignment epoch', detail.assignmentEpoch],
            ['lifecycle id', detail.lifecycleId],
            ['members', detail.memberCount],
            ['owner', detail.owner],
            ['producers paused', detail.producersPaused],
            ['consumption', detail.consumption.state],
            ['paused shards', detail.consumption.pausedShards],
            ['position reset', resetLine(detail.consumption.reset)],
            ['last reset', resetLine(detail.consumption.lastReset)],
            ['store revision', detail.storeRevision],
            ['highest version seen', detail.highestVersionSeen],
            [
              'rollback signals',
              detail.rollbackSignals
                ? `${detail.rollbackSignals.count} (highest ${detail.rollbackSignals.highestVersionSeen}, last ${detail.rollbackSignals.lastAt} from ${detail.rollbackSignals.lastSource})`
                : 'none',
            ],
            [
              'active migration',
              active
                ? `${active.migrationId} ${active.state} ${active.fromShardCount} → ${active.toShardCount}; ${progressLine(active.progress)}`
                : 'none',
            ],
            ['created', detail.createdAt],
            ['updated', detail.updatedAt],
          ]) +
          '\n' +
          lagText(),
      );
    },
  );

  readCommand(
    program,
    'members',
    'members of a group: state, epoch, shards, liveness',
    withGroup,
    async (api, flags, group: GroupName) => {
      const body = await api.get<{ members: MemberView[] }>(
        api.groupPath('monitoring', group, '/members'),
      );
      print(flags.output, body, () =>
        renderTable(
          [
            'member',
            'state',
            'client',
            'epoch',
            'assigned',
            'revoking',
            'retiring',
            'target',
            'last heartbeat',
            'session expires',
          ],
          body.members.map((m) => [
            m.memberId,
            m.state,
            m.clientId,
            m.memberEpoch,
            m.assignedShards,
            m.revokeShards,
            m.retireShards,
            m.targetShards,
            m.lastHeartbeatAt,
            m.sessionExpiresAt,
          ]),
        ),
      );
    },
  );

  readCommand(
    program,
    'assignments',
    'shards of a group: state, owner, target owner',
    withGroup,
    async (api, flags, group: GroupName) => {
      const body = await api.get<{
        shardCount: number;
        metadataVersion: number;
        assignmentEpoch: number;
        shards: Array<{
          shard: number;
          state: string;
          owner: string | null;
          target: string | null;
          ownerEpoch: number | null;
        }>;
      }>(api.groupPath('monitoring', group, '/assignments'));
      print(flags.output, body, () =>
        renderTable(
          ['shard', 'state', 'owner', 'target', 'owner epoch'],
          body.shards.map((s) => [s.shard, s.state, s.owner, s.target, s.ownerEpoch]),
        ),
      );
    },
  );

  readCommand(
    program,
    'migrations',
    'migrations of a group, newest first, and the active one with its progress',
    withGroup,
    async (api, flags, group: GroupName) => {
      const body = await getMigrations(api, group);
      print(flags.output, body, () => migrationsTable(body));
    },
  );

  readCommand(
    program,
    'audit',
    'audit records, newest first',
    (c) =>
      c
        .option('--group <sp:cg>', 'only this group', parseGroup)
        .option('--limit <n>', 'at most this many records (1..1000)', positiveInt, 50),
    async (api, flags) => {
      const { group, limit } = flags as ReadFlags & { group?: GroupName; limit: number };
      const query = new URLSearchParams({ limit: String(limit) });
      if (group) {
        query.set('streamPrefix', group.streamPrefix);
        query.set('consumerGroup', group.consumerGroup);
      }
      const body = await api.get<{ records: AuditRecord[] }>(
        `/coord/v1/monitoring/audit?${query.toString()}`,
      );
      print(flags.output, body, () =>
        renderTable(
          [
            'time',
            'principal',
            'operation',
            'outcome',
            'status',
            'group',
            'requested by',
            'reason',
          ],
          body.records.map((r) => [
            r.timestamp,
            r.principal,
            r.operation,
            r.outcome,
            r.status,
            r.streamPrefix && r.consumerGroup ? `${r.streamPrefix}:${r.consumerGroup}` : null,
            r.requestedBy,
            r.reason,
          ]),
        ),
      );
    },
  );

  readCommand(
    program,
    'replicas',
    'live coordinator replicas: URL, groups owned, lease ages',
    (c) => c,
    async (api, flags) => {
      const body = await readReplicas(api);
      print(flags.output, body, () => replicasTable(body));
    },
  );

  readCommand(
    program,
    'statechart',
    "a group's statechart: the current state of each region and member",
    (c) => withGroup(c).option('--mermaid', 'print the mermaid stateDiagram-v2 text instead'),
    async (api, flags, group: GroupName) => {
      const body = await api.get<Statechart>(api.groupPath('monitoring', group, '/statechart'));
      if ((flags as ReadFlags & { mermaid?: boolean }).mermaid) {
        process.stdout.write(`${body.mermaid.trimEnd()}\n`);
        return;
      }
      print(flags.output, body, () => statechartTable(body));
    },
  );
}
