import { PersistentMap } from '../collections/persistent-map.js';
import type {
  CompletedReset,
  FailureReason,
  GroupState,
  GroupStatus,
  MemberRecord,
  MigrationRecord,
  PositionReset,
  ShardRecord,
} from '../machines/types.js';

/**
 * The metadata hash of a group as field → string (docs/architecture.md#the-metadata-hash). Both
 * stores keep exactly these fields, so MemoryStore and RedisStore behave alike and a backup is a
 * plain field map.
 */
export type GroupFields = Readonly<Record<string, string>>;

/** Only the changed fields of one write. */
export interface FieldPatch {
  readonly set: Readonly<Record<string, string>>;
  readonly del: readonly string[];
}

/** A patch just made: its caller may add fields to it before writing it. */
export interface OwnedPatch extends FieldPatch {
  readonly set: Record<string, string>;
}

/** Fields the store itself owns: never part of a GroupState encoding or a patch. */
export const STORE_FIELDS = ['storeRevision', 'fence'] as const;

const SHARD = 'shard:';
const MEMBER = 'member:';

/** Encodes the persisted part of a group. */
export function encodeGroup(state: GroupState): Record<string, string> {
  const fields = encodeHeader(state);
  for (const shard of Object.values(state.shards))
    fields[`${SHARD}${shard.shard}`] = encodeShard(shard);
  state.members.forEach((member) => {
    fields[`${MEMBER}${member.memberId}`] = encodeMember(member);
  });
  return fields;
}

/** The fields of a group other than its shard and member records. */
function encodeHeader(state: GroupState): Record<string, string> {
  const fields: Record<string, string> = {
    streamPrefix: state.streamPrefix,
    consumerGroup: state.consumerGroup,
    lifecycleId: state.lifecycleId,
    shardCount: String(state.shardCount),
    metadataVersion: String(state.metadataVersion),
    assignmentEpoch: String(state.assignmentEpoch),
    memberEpochSeq: String(state.memberEpochSeq),
    status: state.status,
    producersPaused: state.producersPaused ? 'true' : 'false',
    createdAt: String(state.createdAt),
    updatedAt: String(state.updatedAt),
    migrations: JSON.stringify(state.migrations),
    layoutId: state.layout.id,
    layoutVersion: String(state.layout.version),
    startAt: state.startAt,
    initialShardCount: String(state.initialShardCount),
    startFrom: String(state.startFrom),
  };
  if (state.failureReason) fields.failureReason = state.failureReason;
  if (state.activeMigration) fields['migration:active'] = JSON.stringify(state.activeMigration);
  // Consumption control (docs/operations.md#pausing-consumption): present only while in use.
  if (state.pausedShards && state.pausedShards.length > 0)
    fields.pausedShards = JSON.stringify(state.pausedShards);
  if (state.positionReset) fields.positionReset = JSON.stringify(state.positionReset);
  if (state.lastPositionReset) fields.lastPositionReset = JSON.stringify(state.lastPositionReset);
  return fields;
}

function encodeShard(record: ShardRecord): string {
  const { shard: _shard, ...rest } = record;
  return JSON.stringify(rest);
}

function encodeMember(record: MemberRecord): string {
  const { memberId: _memberId, ...rest } = record;
  return JSON.stringify(rest);
}

/**
 * The patch from the encoding of `before` to that of `after`, equal to
 * `diffFields(encodeGroup(before), encodeGroup(after))` but encoding only the shard and member
 * records whose object changed: groups are immutable values that keep every unchanged record,
 * so a join, leave or expiry costs identity checks over the records plus the encoding of what
 * it changed, not the encoding of the whole group.
 */
export function diffGroups(before: GroupState, after: GroupState): OwnedPatch {
  const patch = diffFields(encodeHeader(before), encodeHeader(after));
  const set = patch.set as Record<string, string>;
  const del = [...patch.del];
  diffRecords(before.shards, after.shards, SHARD, encodeShard, set, del);
  // Members are a persistent map: only the records a change touched are visited.
  PersistentMap.diff(before.members, after.members, (memberId, was, is) => {
    if (is === undefined) del.push(`${MEMBER}${memberId}`);
    else if (changedRecord(was, is, encodeMember)) set[`${MEMBER}${memberId}`] = encodeMember(is);
  });
  return { set, del };
}

/**
 * Whether a record that is another object encodes otherwise: a record of plain values (shards,
 * and members but for their lists) is compared field by field, which is what the encodings'
 * comparison would say at a fraction of its cost (a recompute rewrites every shard's record);
 * one with an object-valued field that differs is compared by its encoding.
 */
function changedRecord<R extends object>(
  was: R | undefined,
  is: R,
  encode: (record: R) => string,
): boolean {
  if (was === undefined) return true;
  const byEncoding = () => encode(was) !== encode(is);
  const before = was as Record<string, unknown>;
  const after = is as Record<string, unknown>;
  const keys = Object.keys(after);
  if (Object.keys(before).length !== keys.length) return byEncoding();
  let objectDiffers = false;
  for (const key of keys) {
    if (!Object.hasOwn(before, key)) return byEncoding();
    const a = before[key];
    const b = after[key];
    if (a === b) continue;
    if ((typeof a !== 'object' || a === null) && (typeof b !== 'object' || b === null)) return true;
    objectDiffers = true;
  }
  return objectDiffers && byEncoding();
}

function diffRecords<R extends object>(
  before: Readonly<Record<string, R>>,
  after: Readonly<Record<string, R>>,
  prefix: string,
  encode: (record: R) => string,
  set: Record<string, string>,
  del: string[],
): void {
  if (before === after) return;
  for (const key of Object.keys(after)) {
    const is = after[key]!;
    const was = Object.hasOwn(before, key) ? before[key] : undefined;
    if (was !== is && changedRecord(was, is, encode)) set[`${prefix}${key}`] = encode(is);
  }
  for (const key of Object.keys(before)) {
    if (!Object.hasOwn(after, key)) del.push(`${prefix}${key}`);
  }
}

function num(fields: GroupFields, name: string): number {
  const value = Number(fields[name]);
  if (!Number.isFinite(value)) throw new Error(`metadata field ${name} is missing or not a number`);
  return value;
}

/** Decodes a metadata hash; throws on a hash that is not a group's metadata. */
export function decodeGroup(fields: GroupFields): GroupState {
  const shards: Record<number, ShardRecord> = {};
  let members = PersistentMap.empty<MemberRecord>();
  for (const [name, value] of Object.entries(fields)) {
    if (name.startsWith(SHARD)) {
      const shard = Number(name.slice(SHARD.length));
      shards[shard] = { shard, ...(JSON.parse(value) as Omit<ShardRecord, 'shard'>) };
    } else if (name.startsWith(MEMBER)) {
      const memberId = name.slice(MEMBER.length);
      // Records written before members were bound to a principal carry none.
      const record = JSON.parse(value) as Omit<MemberRecord, 'memberId' | 'principal'> &
        Partial<Pick<MemberRecord, 'principal'>>;
      members = members.set(memberId, { memberId, ...record, principal: record.principal ?? null });
    }
  }
  const active = fields['migration:active'];
  return {
    streamPrefix: fields.streamPrefix ?? '',
    consumerGroup: fields.consumerGroup ?? '',
    lifecycleId: fields.lifecycleId ?? '',
    shardCount: num(fields, 'shardCount'),
    metadataVersion: num(fields, 'metadataVersion'),
    assignmentEpoch: num(fields, 'assignmentEpoch'),
    memberEpochSeq: fields.memberEpochSeq === undefined ? 0 : num(fields, 'memberEpochSeq'),
    status: (fields.status ?? 'ACTIVE') as GroupStatus,
    failureReason: (fields.failureReason ?? null) as FailureReason | null,
    producersPaused: fields.producersPaused === 'true',
    createdAt: num(fields, 'createdAt'),
    updatedAt: num(fields, 'updatedAt'),
    shards,
    members,
    activeMigration: active ? (JSON.parse(active) as MigrationRecord) : null,
    migrations: fields.migrations ? (JSON.parse(fields.migrations) as MigrationRecord[]) : [],
    // Groups written before layouts and start positions: no layout yet, and every shard read
    // from its beginning (what members did then).
    layout: {
      id: fields.layoutId ?? '',
      version: fields.layoutVersion === undefined ? 0 : num(fields, 'layoutVersion'),
    },
    startAt: fields.startAt === 'latest' ? 'latest' : 'earliest',
    initialShardCount:
      fields.initialShardCount === undefined
        ? num(fields, 'shardCount')
        : num(fields, 'initialShardCount'),
    startFrom: fields.startFrom === undefined ? num(fields, 'createdAt') : num(fields, 'startFrom'),
    ...(fields.pausedShards ? { pausedShards: JSON.parse(fields.pausedShards) as number[] } : {}),
    ...(fields.positionReset
      ? { positionReset: JSON.parse(fields.positionReset) as PositionReset }
      : {}),
    ...(fields.lastPositionReset
      ? { lastPositionReset: JSON.parse(fields.lastPositionReset) as CompletedReset }
      : {}),
  };
}

/** The fields that differ between two encodings: what one fenced write must send. */
export function diffFields(before: GroupFields, after: GroupFields): FieldPatch {
  const set: Record<string, string> = {};
  const del: string[] = [];
  for (const [name, value] of Object.entries(after)) {
    if (before[name] !== value) set[name] = value;
  }
  for (const name of Object.keys(before)) {
    if (!(name in after)) del.push(name);
  }
  return { set, del };
}

export function isEmptyPatch(patch: FieldPatch): boolean {
  return patch.del.length === 0 && Object.keys(patch.set).length === 0;
}
