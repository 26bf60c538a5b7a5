import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { InvalidArgumentError, Option, type Command } from 'commander';
import type { CliApi } from '../api.js';
import { changeOf, changeOptions } from '../change.js';
import { CliError, EXIT } from '../cli-error.js';
import { connect, connectionOptions, type ConnectionFlags } from '../connection.js';
import {
  getGroup,
  movedText,
  type Consumption,
  type GroupDetail,
  type PositionReset,
  type ResetTarget,
} from '../monitoring.js';
import { durationOption, groupLabel, parseGroup, progress, type GroupName } from '../options.js';
import { cellText, renderTable } from '../output.js';
import { shardList } from './dead-letters.js';

/**
 * `coordctl pause`, `resume`, `reset-positions` and `cancel-reset`: consumption control of a group
 * (docs/operations.md#pausing-consumption, docs/operations.md#replay-or-skip), each waiting for
 * the group to get there with a progress line on stderr.
 */

interface WaitFlags {
  wait: boolean;
  timeout: number;
  interval: number;
  json?: boolean;
}
type PauseFlags = ConnectionFlags &
  WaitFlags & { requestedBy: string; reason: string; shards?: number[] };
type ResetFlags = ConnectionFlags &
  WaitFlags & {
    requestedBy: string;
    reason?: string;
    shards?: number[];
    toEarliest?: boolean;
    toLatest?: boolean;
    toDatetime?: number;
    toIds?: Record<string, string>;
    execute?: boolean;
    requestId?: string;
  };

/** One shard of a plan (`POST …/positions`). */
interface ShardPlan {
  shard: number;
  stream: string;
  from: string | null;
  to: string;
  redeliver: number;
  skip: number;
  exact: boolean;
  pendingSkipped: number;
}
interface PositionsReply {
  dryRun: boolean;
  plan: ShardPlan[];
  changes: number;
  reset: PositionReset | null;
}
interface Assignments {
  shards: { shard: number; state: string }[];
}

/** How long to wait and how often to look. */
interface Waiting {
  readonly deadline: number;
  readonly intervalMs: number;
  readonly timeoutMs: number;
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i);
const shardsText = (shards: readonly number[]) =>
  shards.length === 1 ? `shard ${shards[0]}` : `shards ${shards.join(',')}`;

/** `2026-11-27T06:00:00Z` → epoch ms; only ISO-8601 dates and times. */
export function isoDateTime(value: string): number {
  const iso =
    /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/i;
  const ms = iso.test(value.trim()) ? Date.parse(value.trim()) : NaN;
  if (!Number.isFinite(ms) || ms < 0)
    throw new InvalidArgumentError(
      'expected an ISO-8601 date-time, e.g. 2026-11-27T06:00:00Z (without a zone: local time)',
    );
  return ms;
}

/** `0=1700000000000-0,1=1700000000005-2` → `{"0": "1700000000000-0", "1": …}`. */
export function shardIds(value: string): Record<string, string> {
  const ids: Record<string, string> = {};
  for (const part of value.split(',').map((p) => p.trim())) {
    const match = /^(\d{1,7})=(\S+)$/.exec(part);
    if (!match?.[1] || !match[2])
      throw new InvalidArgumentError(
        'expected <shard>=<id> pairs separated by commas, e.g. 0=1700000000000-0,1=1700000000000-5',
      );
    ids[String(Number(match[1]))] = match[2];
  }
  return ids;
}

function waitOptions(command: Command, what: string): Command {
  return command
    .option('--no-wait', `return once the coordinator accepted it, without waiting ${what}`)
    .addOption(durationOption('--timeout <duration>', 'give up waiting after (exit code 3)', '5m'))
    .addOption(durationOption('--interval <duration>', 'time between reads while waiting', '500ms'))
    .option('--json', 'print the result as JSON');
}

function waiting(flags: WaitFlags): Waiting {
  return {
    deadline: Date.now() + flags.timeout,
    intervalMs: flags.interval,
    timeoutMs: flags.timeout,
  };
}

/** Prints `line` on stderr when it differs from the last one printed. */
function progressOnce(): (line: string) => void {
  let last = '';
  return (line) => {
    if (line !== last) progress(line);
    last = line;
  };
}

function getAssignments(api: CliApi, group: GroupName): Promise<Assignments> {
  return api.get<Assignments>(api.groupPath('monitoring', group, '/assignments'));
}

/** Those of `shards` no member holds any more (a shard without a record is released). */
function released(assignments: Assignments, shards: readonly number[]): number[] {
  return shards.filter(
    (shard) =>
      (assignments.shards.find((s) => s.shard === shard)?.state ?? 'released') === 'released',
  );
}

/** Throws the timeout error (exit 3) when the deadline has passed, else waits one interval. */
async function nextRead(w: Waiting, what: string, label: string, line: string): Promise<void> {
  if (Date.now() >= w.deadline)
    throw new CliError(
      `${what} of ${label} has not ended after ${w.timeoutMs} ms (${line})\n  what to do: see its members (\`coordctl members ${label}\`) and \`coordctl describe ${label}\`; a member that does not give a shard up is fenced at its rebalance timeout`,
      EXIT.TIMED_OUT,
    );
  await sleep(w.intervalMs);
}

/** Reads the group until each of `shards` is paused and held by no member. */
async function waitPaused(
  api: CliApi,
  group: GroupName,
  shards: readonly number[],
  w: Waiting,
): Promise<Consumption> {
  const label = groupLabel(group);
  const say = progressOnce();
  for (;;) {
    const [detail, assignments] = await Promise.all([
      getGroup(api, group),
      getAssignments(api, group),
    ]);
    const { consumption } = detail;
    const resumed = shards.filter((s) => !consumption.pausedShards.includes(s));
    if (resumed.length > 0)
      throw new CliError(
        `${shardsText(resumed)} of ${label} were resumed meanwhile (consumption ${consumption.state})\n  what to do: see the audit log (\`coordctl audit --group ${label}\`)`,
      );
    const line = `pausing: ${released(assignments, shards).length} of ${shards.length} shards released`;
    say(line);
    // The two reads run side by side: the view is read again, after the assignments said so.
    if (released(assignments, shards).length === shards.length)
      return (await getGroup(api, group)).consumption;
    await nextRead(w, 'the pause', label, line);
  }
}

/** Reads the group until none of `shards` is paused any more. */
async function waitResumed(
  api: CliApi,
  group: GroupName,
  shards: readonly number[],
  first: Consumption,
  w: Waiting,
): Promise<Consumption> {
  const label = groupLabel(group);
  const say = progressOnce();
  let consumption = first;
  for (;;) {
    const still = shards.filter((s) => consumption.pausedShards.includes(s));
    const line = `resuming: ${shards.length - still.length} of ${shards.length} shards resumed`;
    say(line);
    if (still.length === 0) return consumption;
    await nextRead(w, 'the resume', label, line);
    consumption = (await getGroup(api, group)).consumption;
  }
}

function consumptionLine(label: string, consumption: Consumption): string {
  return `${label}: consumption ${consumption.state}, paused shards ${cellText(consumption.pausedShards)}\n`;
}

function printConsumption(flags: WaitFlags, label: string, consumption: Consumption): void {
  process.stdout.write(
    flags.json ? `${JSON.stringify(consumption, null, 2)}\n` : consumptionLine(label, consumption),
  );
}

function pauseCommand(program: Command, action: 'PAUSE' | 'RESUME'): void {
  const name = action === 'PAUSE' ? 'pause' : 'resume';
  const command = waitOptions(
    changeOptions(
      connectionOptions(
        program
          .command(name)
          .description(
            action === 'PAUSE'
              ? 'stop a group reading some shards, or all: they are taken from their members and granted to nobody (WRITE, audited); waits until released'
              : 'let a group read paused shards again (WRITE, audited)',
          )
          .argument('<group>', '<streamPrefix>:<consumerGroup>', parseGroup),
      ),
    ).option(
      '--shards <list>',
      `the shards to ${name}, e.g. 1,2 (default: every shard)`,
      shardList,
    ),
    action === 'PAUSE' ? 'for members to release the shards' : 'for the shards to be resumed',
  );
  command.action(async (group: GroupName) => {
    const flags = command.opts<PauseFlags>();
    const api = await connect(flags);
    const label = groupLabel(group);
    const answer = await api.admin<GroupDetail>(group, '/consumption', changeOf(flags), {
      action,
      ...(flags.shards ? { shards: flags.shards } : {}),
    });
    const shards = flags.shards ?? range(answer.shardCount);
    progress(`${action === 'PAUSE' ? 'pausing' : 'resuming'} ${shardsText(shards)} of ${label}`);
    let consumption = answer.consumption;
    if (flags.wait) {
      const w = waiting(flags);
      consumption =
        action === 'PAUSE'
          ? await waitPaused(api, group, shards, w)
          : await waitResumed(api, group, shards, consumption, w);
    }
    printConsumption(flags, label, consumption);
  });
}

/** Where to, from the one `--to-…` option given. */
function targetOf(flags: ResetFlags): ResetTarget {
  const given: ResetTarget[] = [];
  if (flags.toEarliest) given.push('earliest');
  if (flags.toLatest) given.push('latest');
  if (flags.toDatetime !== undefined) given.push({ timestamp: flags.toDatetime });
  if (flags.toIds !== undefined) given.push({ ids: flags.toIds });
  if (given.length !== 1 || !given[0])
    throw new CliError(
      'reset-positions needs exactly one of --to-earliest, --to-latest, --to-datetime <ISO-8601>, --to-ids <shard>=<id>,…',
    );
  return given[0];
}

/** The count, with `+` when counting stopped at its bound. */
const counted = (n: number, exact: boolean) => `${n}${exact ? '' : '+'}`;

function planTable(reply: PositionsReply): string {
  const table = renderTable(
    ['shard', 'stream', 'from', 'to', 'redeliver', 'skip', 'pending-skipped'],
    reply.plan.map((p) => [
      p.shard,
      p.stream,
      p.from ?? '(no consumer group)',
      p.to,
      counted(p.redeliver, p.exact),
      counted(p.skip, p.exact),
      p.pendingSkipped,
    ]),
  );
  const changing = reply.plan.filter((p) => p.from !== p.to);
  const redeliver = changing.reduce((n, p) => n + p.redeliver, 0);
  const skip = changing.reduce((n, p) => n + p.skip, 0);
  return reply.changes === 0
    ? `${table}nothing to change: every shard is at that position\n`
    : `${table}${reply.changes} of ${reply.plan.length} shard(s) change: ${redeliver} entries delivered again, ${skip} skipped\n`;
}

function movesTable(reset: PositionReset): string {
  return renderTable(
    ['shard', 'from', 'to', 'redeliver', 'skip', 'moved'],
    reset.moves.map((m) => [
      m.shard,
      m.from ?? '(no consumer group)',
      m.to,
      counted(m.redeliver, m.exact),
      counted(m.skip, m.exact),
      m.moved ? 'yes' : 'no',
    ]),
  );
}

/** A reset that ended (the group's `lastReset`): done, or cancelled where it got to. */
type EndedReset = NonNullable<Consumption['lastReset']>;

/**
 * Reads the group until the reset `resetId` has ended (it is the group's `lastReset`), printing
 * its stage and progress whenever they change.
 */
async function waitReset(
  api: CliApi,
  group: GroupName,
  resetId: string,
  w: Waiting,
): Promise<EndedReset> {
  const label = groupLabel(group);
  const say = progressOnce();
  for (;;) {
    const { consumption } = await getGroup(api, group);
    const ended = consumption.lastReset;
    if (ended?.resetId === resetId) {
      say(`${ended.cancelled ? 'cancelled' : 'done'}: ${movedText(ended)}`);
      return ended;
    }
    const reset = consumption.reset;
    if (reset?.resetId !== resetId)
      throw new CliError(
        `the reset ${resetId} of ${label} is neither under way nor the last one\n  what to do: see \`coordctl describe ${label}\` and the audit log (\`coordctl audit --group ${label}\`)`,
      );
    const shards = reset.moves.map((m) => m.shard);
    const line =
      reset.stage === 'pausing'
        ? `pausing: ${released(await getAssignments(api, group), shards).length} of ${shards.length} shards released`
        : `moving: ${reset.moves.filter((m) => m.moved).length} of ${shards.length} shards moved`;
    say(line);
    await nextRead(w, `the reset ${resetId}`, label, line);
  }
}

function resetCommand(program: Command): void {
  const to = (flags: string, description: string) => new Option(flags, description);
  const command = waitOptions(
    connectionOptions(
      program
        .command('reset-positions')
        .description(
          'replay or skip: plan moving the group on its streams (exit 0: nothing to change, 2: changes planned), or with --execute move it (WRITE, audited)',
        )
        .argument('<group>', '<streamPrefix>:<consumerGroup>', parseGroup),
    )
      .addOption(to('--to-earliest', 'to the start of each stream: every entry again'))
      .addOption(to('--to-latest', 'to the end of each stream: skip every entry there now'))
      .addOption(
        to(
          '--to-datetime <ISO-8601>',
          'to the first entry at or after this time, e.g. 2026-11-27T06:00:00Z',
        ).argParser(isoDateTime),
      )
      .addOption(
        to(
          '--to-ids <list>',
          'an exact id per shard: <shard>=<ms>-<seq>,… (its shards, unless --shards)',
        ).argParser(shardIds),
      )
      .option('--shards <list>', 'only these shards, e.g. 1,2 (default: every shard)', shardList)
      .option('--execute', 'start the reset and wait for it to end (default: only the plan)')
      .addOption(
        new Option('--requested-by <who>', 'recorded in the audit log')
          .env('COORDCTL_REQUESTED_BY')
          .makeOptionMandatory(),
      )
      .option('--reason <why>', 'recorded in the audit log (required with --execute)')
      .option(
        '--request-id <id>',
        'the X-Request-Id of the reset: running again with the same id answers the same reset (default: a new one)',
      ),
    'for the reset to end',
  );
  command.action(async (group: GroupName) => {
    const flags = command.opts<ResetFlags>();
    const target = targetOf(flags);
    if (flags.execute && !flags.reason)
      throw new CliError(
        'reset-positions --execute needs --reason <why> (recorded in the audit log)',
      );
    const shards =
      flags.shards ??
      (typeof target === 'object' && 'ids' in target
        ? Object.keys(target.ids).map(Number)
        : undefined);
    const api = await connect(flags);
    const label = groupLabel(group);
    const requestId = flags.requestId ?? randomUUID();
    const body = {
      to: target,
      ...(shards ? { shards } : {}),
      dryRun: !flags.execute,
      requestedBy: flags.requestedBy,
      reason: flags.reason ?? 'plan a position reset',
    };
    const reply = await api.adminOnce<PositionsReply>(group, '/positions', body, requestId);
    if (!flags.execute || reply.reset === null) {
      if (flags.json) process.stdout.write(`${JSON.stringify(reply, null, 2)}\n`);
      else process.stdout.write(planTable(reply));
      if (reply.changes > 0 && reply.dryRun) throw new CliError('', EXIT.CHANGES_PLANNED);
      return;
    }
    const reset = reply.reset;
    progress(
      `reset ${reset.resetId} of ${label} started: ${shardsText(reset.moves.map((m) => m.shard))} to move`,
    );
    const final: PositionReset | EndedReset =
      flags.wait && reset.stage !== 'done'
        ? await waitReset(api, group, reset.resetId, waiting(flags))
        : reset;
    const cancelled = 'cancelled' in final && final.cancelled;
    const outcome = cancelled
      ? `cancelled, ${movedText(final)}`
      : final.stage === 'done'
        ? 'done'
        : `under way (${final.stage})`;
    if (flags.json)
      process.stdout.write(`${JSON.stringify({ ...reply, reset: final }, null, 2)}\n`);
    else
      process.stdout.write(`${movesTable(final)}reset ${final.resetId} of ${label}: ${outcome}\n`);
    // Cancelled by someone else while this one waited: it did not do what was asked.
    if (cancelled)
      throw new CliError(
        `the reset ${final.resetId} of ${label} was cancelled before it ended (${movedText(final)})\n  what to do: see who cancelled it and why in the audit log (\`coordctl audit --group ${label}\`)`,
      );
  });
}

/**
 * `cancel-reset`: ends the reset under way where it got to (docs/operations.md#replay-or-skip);
 * the shards moved so far stay moved, the others keep their positions, all are granted again.
 */
function cancelResetCommand(program: Command): void {
  const command = changeOptions(
    connectionOptions(
      program
        .command('cancel-reset')
        .description(
          'end the position reset under way where it got to: shards moved so far stay moved, the others keep their positions, all are read again (WRITE, audited)',
        )
        .argument('<group>', '<streamPrefix>:<consumerGroup>', parseGroup),
    ),
  ).option('--json', "print the group's consumption as JSON");
  command.action(async (group: GroupName) => {
    const flags = command.opts<
      ConnectionFlags & { requestedBy: string; reason: string; json?: boolean }
    >();
    const api = await connect(flags);
    const label = groupLabel(group);
    const answer = await api.admin<GroupDetail>(group, '/consumption', changeOf(flags), {
      action: 'CANCEL_RESET',
    });
    const { consumption } = answer;
    if (flags.json) {
      process.stdout.write(`${JSON.stringify(consumption, null, 2)}\n`);
      return;
    }
    const ended = consumption.lastReset;
    process.stdout.write(
      `${ended ? `${movesTable(ended)}reset ${ended.resetId} of ${label} cancelled: ${movedText(ended)}\n` : ''}${consumptionLine(label, consumption)}`,
    );
  });
}

/** `pause`, `resume`, `reset-positions`, `cancel-reset`. */
export function registerConsumptionCommands(program: Command): void {
  pauseCommand(program, 'PAUSE');
  pauseCommand(program, 'RESUME');
  resetCommand(program);
  cancelResetCommand(program);
}
