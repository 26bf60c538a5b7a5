import { createInterface } from 'node:readline/promises';
import { InvalidArgumentError, Option, type Command } from 'commander';
import type { CliApi } from '../api.js';
import { changeOf, changeOptions } from '../change.js';
import { CliError } from '../cli-error.js';
import { connect, connectionOptions, type ConnectionFlags } from '../connection.js';
import { groupLabel, parseGroup, positiveInt, progress, type GroupName } from '../options.js';
import { outputOption, print, renderTable, type OutputFormat } from '../output.js';

/**
 * `coordctl dead-letters list|replay|purge`: a group's dead letters through the coordinator
 * (docs/operations.md#dead-letters), never straight from the streams Redis.
 */

type Flags = ConnectionFlags & {
  output: OutputFormat;
  json?: boolean;
  shards?: number[];
  limit?: number;
  ids?: string[];
  keyField?: string;
};
type ChangeFlags = Flags & { requestedBy: string; reason: string };

interface DeadLetter {
  shard: number;
  id: string;
  /** From the shard's shared dead-letter stream (absent from older coordinators). */
  shared?: boolean;
  originalId: string;
  deliveries: number;
  error: string;
  key: string | null;
  fields: Record<string, string>;
}
/** Redis's error about a shard's dead-letter key (absent from older coordinators). */
type KeyError = string | null | undefined;
/** The shard's shared dead-letter stream (absent from older coordinators). */
type Shared = { stream: string; count: number } | undefined;
interface Listing {
  shards: { shard: number; stream: string; count: number; error?: KeyError; shared?: Shared }[];
  deadLetters: DeadLetter[];
  more: boolean;
}
interface Replay {
  dryRun: boolean;
  shardCount: number;
  replayed: {
    shard: number;
    id: string;
    shared?: boolean;
    originalId: string;
    key: string | null;
    toShard: number;
    newId: string | null;
  }[];
  gone: { shard: number; id: string }[];
  notFound: string[];
  more: boolean;
  unreadable?: { shard: number; error: string }[];
  failed?: { shard: number; id: string; toShard: number; error: string }[];
}
interface Purge {
  shards: {
    shard: number;
    stream: string;
    purged: number;
    error?: KeyError;
    shared?: { stream: string; purged: number };
  }[];
  purged: number;
}

/** `0,2,3` → [0, 2, 3]. */
export function shardList(value: string): number[] {
  const parts = value.split(',').map((part) => part.trim());
  if (parts.some((part) => !/^\d{1,7}$/.test(part)))
    throw new InvalidArgumentError('expected shard numbers separated by commas, e.g. 0,2,3');
  return parts.map(Number);
}

/** `1700000000000-0,1700000000001-0` → the ids. */
export function idList(value: string): string[] {
  const ids = value.split(',').map((part) => part.trim());
  if (ids.some((id) => !/^\d{1,20}-\d{1,20}$/.test(id)))
    throw new InvalidArgumentError('expected dead-letter ids <ms>-<seq> separated by commas');
  return ids;
}

/**
 * The group of `<sp:cg>`, or of `<streamPrefix> <consumerGroup>` given as two arguments.
 */
export function groupOf(first: string, second: string | undefined): GroupName {
  if (second === undefined) return parseGroup(first);
  if (first === '' || second === '')
    throw new InvalidArgumentError('expected <streamPrefix> <consumerGroup>');
  return { streamPrefix: first, consumerGroup: second };
}

const format = (flags: Flags): OutputFormat => (flags.json ? 'json' : flags.output);

/** The selection options every subcommand shares, and the output options. */
function selection(command: Command, what: string): Command {
  return outputOption(
    connectionOptions(
      command
        .argument('<group>', '<streamPrefix>:<consumerGroup>, or <streamPrefix> <consumerGroup>')
        .argument('[consumerGroup]')
        .option(
          '--shards <list>',
          `the shards to ${what}, e.g. 0,2 (default: every shard)`,
          shardList,
        ),
    ),
  ).option('--json', 'print the API answer as JSON (same as -o json)');
}

/**
 * Whose a dead letter is, for the GROUP column: the group's own, or `(shared)`, one of the
 * shard's shared dead-letter stream that an older SDK wrote for every group on the prefix
 * (docs/cli.md#dead-letters). No group name has parentheses.
 */
const owner = (group: GroupName, shared: boolean | undefined): string =>
  shared ? SHARED_MARK : group.consumerGroup;
const SHARED_MARK = '(shared)';

function listTable(group: GroupName, listing: Listing): string {
  const rows = listing.deadLetters.map((d) => [
    d.shard,
    d.id,
    owner(group, d.shared),
    d.originalId,
    d.deliveries,
    d.key,
    d.error,
  ]);
  const table = renderTable(
    ['shard', 'id', 'group', 'original-id', 'deliveries', 'key', 'error'],
    rows,
  );
  const total = listing.shards.reduce((n, s) => n + s.count, 0);
  const shared = listing.shards.reduce((n, s) => n + (s.shared?.count ?? 0), 0);
  const perShard = listing.shards.map((s) => `${s.shard}:${s.count}`).join(' ');
  const sharedNote =
    shared > 0 ? `, ${shared} of them ${SHARED_MARK}: not attributed to a group` : '';
  const more = listing.more
    ? ` (${listing.deadLetters.length} listed; raise --limit for more)`
    : '';
  return `${table}${unreadableLines(listing.shards)}total: ${total} dead letter(s) [per shard ${perShard}]${sharedNote}${more}\n`;
}

/** One line per shard whose dead-letter key Redis answered with an error (too long for a cell). */
function unreadableLines(shards: readonly { shard: number; error?: KeyError }[]): string {
  return shards
    .filter((s) => s.error)
    .map((s) => `shard ${s.shard} unreadable: ${s.error}\n`)
    .join('');
}

/** Asks "y/N" on the terminal; false on anything but y/yes. */
async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr, terminal: true });
  try {
    const answer = await rl.question(`${question} [y/N] `);
    return /^y(es)?$/i.test(answer.trim());
  } finally {
    rl.close();
  }
}

function list(api: CliApi, group: GroupName, flags: Flags, limit?: number): Promise<Listing> {
  const query = new URLSearchParams();
  if (flags.shards) query.set('shards', flags.shards.join(','));
  if (limit !== undefined) query.set('limit', String(limit));
  if (flags.keyField) query.set('keyField', flags.keyField);
  const suffix = `/dead-letters${query.size > 0 ? `?${query.toString()}` : ''}`;
  return api.get<Listing>(api.groupPath('monitoring', group, suffix));
}

/** `coordctl dead-letters list|replay|purge`. */
export function registerDeadLetterCommands(program: Command): void {
  const deadLetters = program
    .command('dead-letters')
    .description(
      "a group's dead letters: messages its consumers gave up on after maxDeliveries (docs/operations.md#dead-letters)",
    );

  const listCommand = selection(
    deadLetters
      .command('list')
      .description('per shard the count, and the oldest dead letters (READ)'),
    'list',
  )
    .option(
      '--limit <n>',
      'at most this many dead letters in all (1-1000, default 100)',
      positiveInt,
    )
    .option('--key-field <field>', "the entry field holding the message key (default 'key')");
  listCommand.action(async (first: string, second: string | undefined) => {
    const flags = listCommand.opts<Flags>();
    const group = groupOf(first, second);
    const listing = await list(await connect(flags), group, flags, flags.limit);
    print(format(flags), listing, () => listTable(group, listing));
  });

  const replayCommand = changeOptions(
    selection(
      deadLetters
        .command('replay')
        .description(
          'send dead letters back through routing, to the shard their key routes to now (WRITE, audited)',
        ),
      'replay from',
    ),
  )
    .option('--limit <n>', 'at most this many (1-1000, default 100), oldest first', positiveInt)
    .option(
      '--ids <list>',
      'only these dead-letter ids (as `list` shows them), comma-separated',
      idList,
    )
    .option('--key-field <field>', "the entry field holding the message key (default 'key')")
    .option('--dry-run', 'say which would be replayed and where; send nothing');
  replayCommand.action(async (first: string, second: string | undefined) => {
    const flags = replayCommand.opts<ChangeFlags & { dryRun?: boolean }>();
    const group = groupOf(first, second);
    const api = await connect(flags);
    const label = groupLabel(group);
    progress(`${flags.dryRun ? 'dry run: ' : ''}replaying dead letters of ${label}…`);
    const body = {
      ...(flags.shards ? { shards: flags.shards } : {}),
      ...(flags.limit !== undefined ? { limit: flags.limit } : {}),
      ...(flags.ids ? { ids: flags.ids } : {}),
      ...(flags.keyField ? { keyField: flags.keyField } : {}),
      dryRun: flags.dryRun === true,
    };
    const result = await api.admin<Replay>(group, '/dead-letters/replay', changeOf(flags), body);
    const verb = result.dryRun ? 'would replay' : 'replayed';
    progress(
      `${verb} ${result.replayed.length} dead letter(s) of ${label}` +
        (result.gone.length > 0 ? `; ${result.gone.length} gone meanwhile` : '') +
        (result.notFound.length > 0 ? `; not found: ${result.notFound.join(', ')}` : '') +
        (result.more ? '; more remain (raise --limit or run again)' : ''),
    );
    for (const { shard, error } of result.unreadable ?? [])
      progress(`shard ${shard} unreadable, nothing replayed from it: ${error}`);
    for (const { shard, id, toShard, error } of result.failed ?? [])
      progress(`dead letter ${id} of shard ${shard} not replayed to shard ${toShard}: ${error}`);
    print(format(flags), result, () =>
      renderTable(
        ['shard', 'id', 'group', 'original-id', 'key', 'to-shard', 'new-id'],
        result.replayed.map((r) => [
          r.shard,
          r.id,
          owner(group, r.shared),
          r.originalId,
          r.key,
          r.toShard,
          r.newId,
        ]),
      ),
    );
  });

  const purgeCommand = changeOptions(
    selection(
      deadLetters
        .command('purge')
        .description('delete dead letters for good (WRITE, audited); asks first unless --yes'),
      'purge',
    ),
  )
    .option('--ids <list>', 'only these dead-letter ids, comma-separated (default: all)', idList)
    .addOption(new Option('--yes', 'do not ask for confirmation'));
  purgeCommand.action(async (first: string, second: string | undefined) => {
    const flags = purgeCommand.opts<ChangeFlags & { yes?: boolean }>();
    const group = groupOf(first, second);
    const api = await connect(flags);
    const label = groupLabel(group);
    const shards = flags.shards ? `shard(s) ${flags.shards.join(',')}` : 'every shard';
    const what = flags.ids
      ? `${flags.ids.length} dead letter(s) by id on ${shards}`
      : `every dead letter on ${shards}`;
    if (!flags.yes) {
      if (!process.stdin.isTTY) {
        throw new CliError(
          `purge deletes ${what} of ${label} for good: pass --yes to confirm (stdin is not a terminal, so coordctl cannot ask)`,
        );
      }
      const listing = await list(api, group, flags, 1);
      const total = listing.shards.reduce((n, s) => n + s.count, 0);
      const question = flags.ids
        ? `delete ${what} of ${label}?`
        : `delete ${total} dead letter(s) on ${shards} of ${label}?`;
      if (!(await confirm(question))) throw new CliError('purge cancelled: nothing was deleted');
    }
    progress(`purging ${what} of ${label}…`);
    const result = await api.admin<Purge>(group, '/dead-letters/purge', changeOf(flags), {
      ...(flags.shards ? { shards: flags.shards } : {}),
      ...(flags.ids ? { ids: flags.ids } : {}),
    });
    progress(`purged ${result.purged} dead letter(s) of ${label}`);
    for (const { shard, error } of result.shards)
      if (error) progress(`shard ${shard} left as it is: ${error}`);
    print(format(flags), result, () =>
      renderTable(
        ['shard', 'stream', 'purged', 'shared-purged'],
        result.shards.map((s) => [s.shard, s.stream, s.purged, s.shared?.purged ?? 0]),
      ),
    );
  });
}
