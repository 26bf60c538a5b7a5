import type { GroupFields } from '../store/codec.js';
import type { Store } from '../store/store.js';
import { groupId, type GroupRef } from '../machines/types.js';
import { assertImportable } from '../store/write-guards.js';
import { CliError } from './cli-error.js';

/** The backup file: every registered group's metadata hash, verbatim. */
export interface MetadataBackup {
  readonly format: 'stream-coordinator-metadata-backup';
  readonly version: 1;
  readonly keyPrefix: string;
  readonly createdAt: string;
  readonly groups: ReadonlyArray<GroupRef & { readonly fields: GroupFields }>;
}

export type Progress = (message: string) => void;

/** Dumps the metadata keys of every registered group (page by page, reporting progress). */
export async function backupMetadata(
  store: Store,
  keyPrefix: string,
  options: { groups?: readonly GroupRef[]; progress?: Progress; now?: Date } = {},
): Promise<MetadataBackup> {
  // Each group once, however often it is named: restore refuses a backup holding one twice.
  const refs: GroupRef[] = options.groups
    ? [...new Map(options.groups.map((g) => [groupId(g), g])).values()]
    : [];
  if (!options.groups) {
    let cursor: string | undefined;
    do {
      const page = await store.listGroups({ limit: 500, ...(cursor ? { cursor } : {}) });
      refs.push(...page.groups);
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
  }
  const groups: Array<GroupRef & { fields: GroupFields }> = [];
  const missing: GroupRef[] = [];
  for (const [i, ref] of refs.entries()) {
    const fields = await store.exportGroup(ref);
    if (fields) groups.push({ ...ref, fields });
    else if (options.groups) missing.push(ref);
    else
      options.progress?.(
        `skipped ${ref.streamPrefix}:${ref.consumerGroup}: registered but its metadata key is missing`,
      );
    if ((i + 1) % 100 === 0 || i + 1 === refs.length)
      options.progress?.(`backed up ${i + 1}/${refs.length} groups`);
  }
  // A group asked for by name and not backed up is a failed backup, not a smaller one.
  if (missing.length > 0) {
    throw new CliError(
      `no metadata under key prefix ${keyPrefix} for ${missing.map((g) => groupId(g)).join(', ')}: nothing written\n  what to do: check the names (coordctl groups) and --key-prefix; a group whose metadata is lost cannot be backed up`,
    );
  }
  return {
    format: 'stream-coordinator-metadata-backup',
    version: 1,
    keyPrefix,
    createdAt: (options.now ?? new Date()).toISOString(),
    groups,
  };
}

/** Checks that a parsed file is a backup this version understands. */
export function parseBackup(value: unknown): MetadataBackup {
  const backup = value as Partial<MetadataBackup> | null;
  if (
    backup?.format !== 'stream-coordinator-metadata-backup' ||
    backup.version !== 1 ||
    !Array.isArray(backup.groups)
  ) {
    throw new Error('not a stream-coordinator metadata backup (format/version mismatch)');
  }
  return backup as MetadataBackup;
}

/**
 * Writes groups of a backup back (disaster recovery: not fenced). A running coordinator notices
 * the older revision and fails the group closed until an operator RESUMEs or RECREATEs it. The
 * caller has checked them with {@link restoreProblem} first, before any is written.
 */
export async function restoreMetadata(
  store: Store,
  backup: MetadataBackup,
  options: { only?: (ref: GroupRef) => boolean; progress?: Progress } = {},
): Promise<number> {
  const chosen = backup.groups.filter((g) => options.only?.(g) ?? true);
  for (const [i, group] of chosen.entries()) {
    // Never the backup's fence: the group may have been claimed with higher ones since, and a
    // deposed owner still holding one must not match again. Without a fence, the next claim
    // starts one above every fence issued before (as RECREATE does).
    const { fence: _fence, ...fields } = group.fields;
    await store.importGroup(
      { streamPrefix: group.streamPrefix, consumerGroup: group.consumerGroup },
      fields,
    );
    if ((i + 1) % 100 === 0 || i + 1 === chosen.length)
      options.progress?.(`restored ${i + 1}/${chosen.length} groups`);
  }
  return chosen.length;
}

/**
 * Why these groups of a backup cannot be restored, or null: a group held twice (which copy is
 * right cannot be told) or one without a metadata hash the store would import (an edited or
 * damaged file).
 */
export function restoreProblem(groups: MetadataBackup['groups']): string | null {
  const seen = new Set<string>();
  const twice = new Set<string>();
  for (const group of groups) {
    const id = groupId(group);
    if (seen.has(id)) twice.add(id);
    seen.add(id);
  }
  if (twice.size > 0)
    return `${[...twice].join(', ')} ${twice.size === 1 ? 'is' : 'are'} in the backup twice`;
  const invalid = groups.filter((group) => !importable(group));
  if (invalid.length > 0)
    return `not a valid metadata hash in the backup: ${invalid.map((g) => groupId(g)).join(', ')}`;
  return null;
}

/** Whether a group of a backup holds a metadata hash the store would import. */
function importable(group: GroupRef & { readonly fields?: unknown }): boolean {
  const fields = group.fields;
  if (typeof fields !== 'object' || fields === null || Array.isArray(fields)) return false;
  if (!Object.values(fields).every((value) => typeof value === 'string')) return false;
  try {
    assertImportable(group, fields as GroupFields);
    return true;
  } catch {
    return false;
  }
}
