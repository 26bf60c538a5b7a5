import type { GroupRef, GroupState } from '../machines/types.js';
import { matchesAuditQuery } from './audit-query.js';
import { decodeGroup, encodeGroup } from './codec.js';
import type { FieldPatch, GroupFields } from './codec.js';
import { assertPageLimit, compareMembers, decodeCursor, encodeCursor } from './group-paging.js';
import { keyNames, parseRegistryMember, registryMember } from './keys.js';
import type { KeyNames } from './keys.js';
import { refusalError, ScriptStatus } from './script-status.js';
import { RevisionMismatchError } from '../errors.js';
import {
  adoptedLayout,
  layoutNotFound,
  type LayoutRequest,
  type PrefixLayout,
} from './prefix-layout.js';
import type {
  AuditQuery,
  AuditRecord,
  DeletedLifecycle,
  FailureRecord,
  GroupPage,
  GroupRevision,
  LoginAttempt,
  LoginFailures,
  ReplicaRecord,
  Store,
  StoredGroup,
  StoreHealth,
  StoreOutage,
} from './store.js';
import { fenceOf, toStoredGroup } from './stored-group.js';
import { assertImportable, assertPatchAllowed } from './write-guards.js';

/** Options of {@link MemoryStore}. */
export interface MemoryStoreOptions {
  /** Key prefix, so keys (and errors naming them) match what a RedisStore would use. */
  readonly keyPrefix: string;
  /** Exact cap of the audit log; the oldest records go first. */
  readonly auditMaxLen: number;
}

/**
 * The embedded-mode store (docs/architecture.md#runtime-modes). It keeps the same field maps as the Redis metadata
 * hashes and refuses writes with the same script status codes, so it passes the same contract
 * suite; everything handed out is a copy. Nothing survives the process.
 */
export class MemoryStore implements Store {
  readonly kind = 'memory' as const;
  private readonly keys: KeyNames;
  private readonly auditMaxLen: number;
  private readonly hashes = new Map<string, Map<string, string>>();
  /** Registry members in BYLEX order, as the Redis registry (all scores 0) lists them. */
  private readonly registry: string[] = [];
  /** Oldest first. */
  private audit: AuditRecord[] = [];
  private readonly failures = new Map<string, string>();
  /** Shard layouts by stream prefix (the Redis layouts hash). */
  private readonly layouts = new Map<string, PrefixLayout>();
  /** Highest fence this store has handed out: a created group starts above it (see createGroup). */
  private highestFence = 0;
  /** Live replicas by id, with the `performance.now()` at which each expires. */
  private readonly replicas = new Map<string, { record: ReplicaRecord; expiresAt: number }>();

  constructor(options: MemoryStoreOptions) {
    this.keys = keyNames(options.keyPrefix);
    this.auditMaxLen = options.auditMaxLen;
  }

  createGroup(state: GroupState): Promise<StoredGroup> {
    return settle(() => {
      const ref = { streamPrefix: state.streamPrefix, consumerGroup: state.consumerGroup };
      const key = this.keys.metadata(ref);
      if (this.hashes.has(key) || this.registryIndex(registryMember(ref)).found) {
        throw refusalError(ScriptStatus.GROUP_EXISTS, { ref, actualRevision: 0 });
      }
      const fields = encodeGroup(state);
      // Like the Lua fenceSeed: above every fence an earlier lifecycle of the group reached.
      const fence = this.issueFence(this.highestFence + 1);
      this.hashes.set(
        key,
        storedHash([...Object.entries(fields), ['fence', String(fence)], ['storeRevision', '1']]),
      );
      this.register(ref);
      return { state: decodeGroup(fields), revision: 1, fence };
    });
  }

  loadGroup(ref: GroupRef): Promise<StoredGroup | null> {
    return settle(() => {
      const fields = this.fieldsOf(ref);
      return fields === null ? null : toStoredGroup(fields);
    });
  }

  commitGroup(
    ref: GroupRef,
    fence: number,
    expectedRevision: number,
    patch: FieldPatch,
  ): Promise<number> {
    return settle(() => {
      assertPatchAllowed(patch);
      const hash = this.writableHash(ref, fence, expectedRevision);
      for (const [name, value] of Object.entries(patch.set)) hash.set(...storedField(name, value));
      for (const name of patch.del) hash.delete(name);
      return bumpRevision(hash);
    });
  }

  deleteGroup(ref: GroupRef, fence: number, expectedRevision: number): Promise<void> {
    return settle(() => {
      this.writableHash(ref, fence, expectedRevision);
      const { found, index } = this.registryIndex(registryMember(ref));
      if (found) this.registry.splice(index, 1);
      this.hashes.delete(this.keys.metadata(ref));
    });
  }

  adoptLayout(ref: GroupRef, request: LayoutRequest): Promise<PrefixLayout> {
    return settle(() => {
      const registered = (consumerGroup: string) =>
        this.registryIndex(registryMember({ streamPrefix: ref.streamPrefix, consumerGroup })).found;
      const next = adoptedLayout(
        ref,
        this.layouts.get(ref.streamPrefix) ?? null,
        request,
        registered,
      );
      if (next instanceof Error) throw next;
      this.layouts.set(ref.streamPrefix, next);
      return next;
    });
  }

  changeLayout(
    streamPrefix: string,
    expectedVersion: number,
    shardCount: number,
    now: number,
  ): Promise<PrefixLayout> {
    return settle(() => {
      const layout = this.layouts.get(streamPrefix);
      if (!layout) throw layoutNotFound(streamPrefix);
      if (layout.version !== expectedVersion) {
        throw new RevisionMismatchError(expectedVersion, layout.version);
      }
      const next = { ...layout, version: layout.version + 1, shardCount, updatedAt: now };
      this.layouts.set(streamPrefix, next);
      return next;
    });
  }

  releaseLayout(ref: GroupRef): Promise<void> {
    return settle(() => {
      const layout = this.layouts.get(ref.streamPrefix);
      if (!layout) return;
      const { [ref.consumerGroup]: _left, ...groups } = layout.groups;
      if (Object.keys(groups).length === 0) this.layouts.delete(ref.streamPrefix);
      else this.layouts.set(ref.streamPrefix, { ...layout, groups });
    });
  }

  readLayouts(streamPrefixes: readonly string[]): Promise<Array<PrefixLayout | null>> {
    return settle(() => streamPrefixes.map((sp) => this.layouts.get(sp) ?? null));
  }

  /** Embedded mode has one replica and no leases (docs/architecture.md#replicas-leases-and-fences): `lease` is not checked. */
  claimGroup(ref: GroupRef, _lease: string | null): Promise<StoredGroup> {
    return settle(() => {
      const hash = this.hashes.get(this.keys.metadata(ref));
      if (hash === undefined) {
        throw refusalError(ScriptStatus.GROUP_NOT_FOUND, { ref, actualRevision: 0 });
      }
      const current = fenceOf(hash.get('fence'));
      hash.set(
        'fence',
        String(this.issueFence(current === 0 ? this.highestFence + 1 : current + 1)),
      );
      bumpRevision(hash);
      return toStoredGroup(Object.fromEntries(hash));
    });
  }

  registerReplica(replica: ReplicaRecord, ttlMs: number): Promise<void> {
    return settle(() => {
      this.replicas.set(replica.id, {
        record: { ...replica },
        expiresAt: performance.now() + ttlMs,
      });
    });
  }

  listReplicas(): Promise<ReplicaRecord[]> {
    return settle(() => {
      const now = performance.now();
      for (const [id, { expiresAt }] of this.replicas) {
        if (expiresAt <= now) this.replicas.delete(id);
      }
      return [...this.replicas.values()]
        .map(({ record }) => ({ ...record }))
        .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    });
  }

  deregisterReplica(id: string): Promise<void> {
    return settle(() => {
      this.replicas.delete(id);
    });
  }

  recordFailure(ref: GroupRef, record: FailureRecord): Promise<void> {
    return settle(() => {
      this.failures.set(this.keys.failure(ref), JSON.stringify(record));
    });
  }

  readFailure(ref: GroupRef): Promise<FailureRecord | null> {
    return settle(() => {
      const value = this.failures.get(this.keys.failure(ref));
      return value === undefined ? null : (JSON.parse(value) as FailureRecord);
    });
  }

  clearFailure(ref: GroupRef): Promise<void> {
    return settle(() => {
      this.failures.delete(this.keys.failure(ref));
    });
  }

  isRegistered(ref: GroupRef): Promise<boolean> {
    return settle(() => this.registryIndex(registryMember(ref)).found);
  }

  listGroups(options: { cursor?: string | undefined; limit: number }): Promise<GroupPage> {
    return settle(() => {
      assertPageLimit(options.limit);
      let start = 0;
      if (options.cursor !== undefined) {
        const { found, index } = this.registryIndex(decodeCursor(options.cursor));
        start = found ? index + 1 : index;
      }
      const page = this.registry.slice(start, start + options.limit);
      const last = page[page.length - 1];
      const more = start + options.limit < this.registry.length;
      return {
        groups: page.map(parseRegistryMember),
        nextCursor: more && last !== undefined ? encodeCursor(last) : null,
      };
    });
  }

  readRevisions(refs: readonly GroupRef[]): Promise<Array<GroupRevision | null>> {
    return settle(() =>
      refs.map((ref) => {
        const hash = this.hashes.get(this.keys.metadata(ref));
        return hash === undefined
          ? null
          : { revision: revisionOf(hash), lifecycleId: hash.get('lifecycleId') ?? '' };
      }),
    );
  }

  exportGroup(ref: GroupRef): Promise<GroupFields | null> {
    return settle(() => this.fieldsOf(ref));
  }

  importGroup(ref: GroupRef, fields: GroupFields): Promise<void> {
    return settle(() => {
      assertImportable(ref, fields);
      this.issueFence(fenceOf(fields.fence));
      this.hashes.set(this.keys.metadata(ref), storedHash(Object.entries(fields)));
      this.register(ref);
    });
  }

  appendAudit(record: AuditRecord): Promise<void> {
    return settle(() => {
      this.audit.push(structuredClone(record));
      if (this.audit.length > this.auditMaxLen) {
        this.audit = this.audit.slice(this.audit.length - this.auditMaxLen);
      }
    });
  }

  queryAudit(query: AuditQuery): Promise<AuditRecord[]> {
    return settle(() => {
      const matched: AuditRecord[] = [];
      for (let i = this.audit.length - 1; i >= 0 && matched.length < query.limit; i--) {
        const record = this.audit[i];
        if (record && matchesAuditQuery(record, query)) matched.push(structuredClone(record));
      }
      return matched;
    });
  }

  ping(): Promise<void> {
    return Promise.resolve();
  }

  /** Embedded mode has no store connection to be up or down (docs/architecture.md#runtime-modes). */
  health(): StoreHealth {
    return 'NOT_CONFIGURED';
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  /* Lost metadata (docs/operations.md#lost-metadata); the same rules as recordLostGroup-2.lua. */

  /** Deleted lifecycles by `kp:G:deleted` key: lifecycleId -> epoch ms. */
  private readonly deletions = new Map<string, Map<string, number>>();

  recordLostGroup(ref: GroupRef, record: FailureRecord): Promise<'recorded' | 'exists'> {
    return settle(() => {
      if (this.hashes.has(this.keys.metadata(ref))) return 'exists' as const;
      const earlier = this.failures.get(this.keys.failure(ref));
      const merged =
        earlier === undefined ? record : mergeLost(JSON.parse(earlier) as FailureRecord, record);
      this.failures.set(this.keys.failure(ref), JSON.stringify(merged));
      this.register(ref);
      return 'recorded' as const;
    });
  }

  recordDeletion(ref: GroupRef, lifecycleId: string, at: number): Promise<void> {
    return settle(() => {
      const key = this.keys.deleted(ref);
      const known = this.deletions.get(key) ?? new Map<string, number>();
      known.set(lifecycleId, at);
      this.deletions.set(key, known);
    });
  }

  readDeletions(ref: GroupRef): Promise<DeletedLifecycle[]> {
    return settle(() =>
      [...(this.deletions.get(this.keys.deleted(ref)) ?? new Map<string, number>())]
        .map(([lifecycleId, at]) => ({ lifecycleId, at }))
        .sort((a, b) => a.at - b.at),
    );
  }

  /*
   * Outages and failed logins (docs/operations.md#login-throttling): an embedded store is never
   * down; the counters follow the rules of reserveLoginAttempt-1.lua and readLoginFailures-1.lua.
   */

  /**
   * Failed logins by id, with the time at which their window closes ({@link loginClock}).
   */
  private readonly loginWindows = new Map<string, { failures: number; closesAt: number }>();

  outage(): StoreOutage | null {
    return null;
  }

  reserveLoginAttempt(id: string, maxAttempts: number, windowMs: number): Promise<LoginAttempt> {
    return settle(() => {
      const now = loginClock();
      const open = this.openLoginWindow(id, now);
      const window = open ?? { failures: 0, closesAt: now + windowMs };
      const allowed = window.failures < maxAttempts;
      if (allowed) window.failures += 1;
      this.loginWindows.set(id, window);
      return {
        allowed,
        failures: window.failures,
        remainingMs: Math.ceil(window.closesAt - now),
      };
    });
  }

  readLoginFailures(id: string): Promise<LoginFailures> {
    return settle(() => {
      const now = loginClock();
      const open = this.openLoginWindow(id, now);
      return open
        ? { failures: open.failures, remainingMs: Math.ceil(open.closesAt - now) }
        : { failures: 0, remainingMs: 0 };
    });
  }

  clearLoginFailures(id: string): Promise<void> {
    return settle(() => {
      this.loginWindows.delete(id);
    });
  }

  /** The window of `id` if it is still open (a closed one is forgotten, as a key's TTL would). */
  private openLoginWindow(id: string, now: number) {
    const window = this.loginWindows.get(id);
    if (window !== undefined && window.closesAt <= now) {
      this.loginWindows.delete(id);
      return undefined;
    }
    return window;
  }

  /** Records `fence` as handed out (or imported) and returns it. */
  private issueFence(fence: number): number {
    this.highestFence = Math.max(this.highestFence, fence);
    return fence;
  }

  private fieldsOf(ref: GroupRef): Record<string, string> | null {
    const hash = this.hashes.get(this.keys.metadata(ref));
    return hash === undefined ? null : Object.fromEntries(hash);
  }

  /** The hash a fenced write may change, refused exactly as the Lua `checkWriter` refuses. */
  private writableHash(
    ref: GroupRef,
    fence: number,
    expectedRevision: number,
  ): Map<string, string> {
    const hash = this.hashes.get(this.keys.metadata(ref));
    const refuse = (status: ScriptStatus, actualRevision: number) =>
      refusalError(status, { ref, expectedRevision, actualRevision });
    if (hash === undefined) throw refuse(ScriptStatus.GROUP_NOT_FOUND, 0);
    const revision = revisionOf(hash);
    if (hash.get('fence') !== String(fence)) throw refuse(ScriptStatus.FENCE_MISMATCH, revision);
    if (revision !== expectedRevision) throw refuse(ScriptStatus.REVISION_MISMATCH, revision);
    return hash;
  }

  private register(ref: GroupRef): void {
    const member = registryMember(ref);
    const { found, index } = this.registryIndex(member);
    if (!found) this.registry.splice(index, 0, member);
  }

  /** Binary search: where `member` is, or where it would be inserted. */
  private registryIndex(member: string): { found: boolean; index: number } {
    let low = 0;
    let high = this.registry.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      const order = compareMembers(this.registry[mid] as string, member);
      if (order === 0) return { found: true, index: mid };
      if (order < 0) low = mid + 1;
      else high = mid;
    }
    return { found: false, index: low };
  }
}

/**
 * The field as kept for the life of the group, in as little memory as the same text can take:
 * names other than member records (the header's and `shard:<n>`, the same in every group) are
 * one shared string each, and values are flat strings (JSON.stringify builds its result out of
 * parts, V8 cons strings, that take about twice the memory).
 */
function storedField(name: string, value: string): [string, string] {
  return [name.startsWith('member:') ? name : interned(name), flat(value)];
}

function storedHash(fields: ReadonlyArray<readonly [string, string]>): Map<string, string> {
  return new Map(fields.map(([name, value]) => storedField(name, value)));
}

const names = new Map<string, string>();

function interned(name: string): string {
  let kept = names.get(name);
  if (kept === undefined) {
    kept = name;
    names.set(name, name);
  }
  return kept;
}

function flat(value: string): string {
  if (value.length < 16) return value;
  const copy = Buffer.from(value, 'utf8').toString('utf8');
  return copy === value ? copy : value;
}

function revisionOf(hash: Map<string, string>): number {
  return Number(hash.get('storeRevision') ?? 0);
}

function bumpRevision(hash: Map<string, string>): number {
  const revision = revisionOf(hash) + 1;
  hash.set('storeRevision', String(revision));
  return revision;
}

/** Runs synchronously but answers like a store: results and refusals both arrive as promises. */
function settle<T>(run: () => T): Promise<T> {
  // The executor runs synchronously, and a throw inside it becomes the rejection.
  return new Promise<T>((resolve) => resolve(run()));
}

/** An earlier failure record merged with a lost-metadata one, as recordLostGroup-2.lua does. */
function mergeLost(earlier: FailureRecord, record: FailureRecord): FailureRecord {
  const max = (a: number | undefined, b: number | undefined) => Math.max(a ?? 0, b ?? 0);
  const knownLifecycle = earlier.lifecycleId !== 'unknown' && earlier.lifecycleId !== undefined;
  return {
    ...earlier,
    lifecycleId: knownLifecycle ? earlier.lifecycleId : record.lifecycleId,
    knownRevision: max(earlier.knownRevision, record.knownRevision),
    metadataVersion: max(earlier.metadataVersion, record.metadataVersion),
    highestVersionSeen: max(earlier.highestVersionSeen, record.highestVersionSeen),
    assignmentEpoch: max(earlier.assignmentEpoch, record.assignmentEpoch),
    memberEpochSeq: max(earlier.memberEpochSeq, record.memberEpochSeq),
  };
}

/**
 * The clock of the failed-login windows, in whole milliseconds (as Redis's PTTL counts them): a
 * window's remaining time is then exact, where `Math.ceil((now + 1000) - now)` on fractional
 * milliseconds read 1,001 for some `now`.
 */
function loginClock(): number {
  return Math.floor(performance.now());
}
