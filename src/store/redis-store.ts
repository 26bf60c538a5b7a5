import { readFileSync } from 'node:fs';
import { Cluster, Redis } from 'ioredis';
import type { RedisOptions } from 'ioredis';
import { CoordinatorError, RevisionMismatchError, StoreUnavailableError } from '../errors.js';
import type { GroupRef, GroupState } from '../machines/types.js';
import { matchesAuditQuery } from './audit-query.js';
import { decodeGroup, encodeGroup } from './codec.js';
import type { FieldPatch, GroupFields } from './codec.js';
import { assertPageLimit, decodeCursor, encodeCursor } from './group-paging.js';
import { keyNames, parseRegistryMember, registryMember } from './keys.js';
import type { KeyNames } from './keys.js';
import { loadLuaScripts, luaScript } from './lua-scripts.js';
import {
  decodeLayout,
  LAYOUT_JOIN_GRACE_MS,
  layoutNotFound,
  shardCountMismatch,
  type LayoutRequest,
  type PrefixLayout,
} from './prefix-layout.js';
import { redisTarget, seedCredentials } from './redis-target.js';
import { refusalError, ScriptStatus } from './script-status.js';
import { writeRefusalOf } from './refused-writes.js';
import type {
  AuditQuery,
  AuditRecord,
  DeletedLifecycle,
  FailureRecord,
  GroupPage,
  GroupRevision,
  LoginAttempt,
  LoginFailures,
  ReplicaLease,
  ReplicaRecord,
  Store,
  StoredGroup,
  StoreHealth,
  StoreOutage,
} from './store.js';
import { fenceOf, toStoredGroup } from './stored-group.js';
import { assertImportable, assertPatchAllowed } from './write-guards.js';

/*
 * Layout decisions (docs/architecture.md#store-layout) that readers of the data must know:
 * - Registry `kp:groups`: every member has score 0 so ZRANGE BYLEX gives a stable order for
 *   cursor paging (see group-paging.ts); `createdAt` lives in the metadata hash only.
 * - Registry and metadata key live in different Cluster slots, so no script touches both.
 *   create/import: metadata script first, then ZADD; delete: fence check, ZREM, fenced DEL
 *   script (ZADD back if it refuses). A crash in between leaves an unregistered metadata key
 *   (create answers GROUP_EXISTS, a delete retry finishes), never a registered group without
 *   metadata, which would read as lost metadata (docs/operations.md#lost-metadata).
 * - Audit `kp:audit`: one stream entry per record with a single field `json` (the record as
 *   JSON, lossless for nulls and arrays), trimmed with `MAXLEN ~ auditMaxLen`: Redis keeps at
 *   least auditMaxLen entries and at most about one stream node (100 entries) more.
 */

/** Options of {@link RedisStore}. */
export interface RedisStoreOptions {
  /** Standalone Redis URL. @default 'redis://127.0.0.1:6379' */
  readonly url?: string;
  /** Redis Cluster startup nodes (`host:port` or `redis://host:port`); selects cluster mode. */
  readonly clusterNodes?: readonly string[];
  /** `coordinator.store.key-prefix`: every key starts with it. */
  readonly keyPrefix: string;
  /** `coordinator.audit.max-len`: approximate cap of the audit stream. */
  readonly auditMaxLen: number;
  /** Time to establish a connection. @default 2000 */
  readonly connectTimeoutMs?: number;
  /** A command without a reply by then fails with `StoreUnavailableError`. @default 2000 */
  readonly commandTimeoutMs?: number;
}

type Client = Redis | Cluster;
type ScriptCommand = (...args: Array<string | number>) => Promise<unknown>;

interface ScriptReply {
  readonly status: number;
  readonly revision: number;
  /** Flat `[field, value, ...]` list, from claimGroup (whole hash) and createGroup (fence). */
  readonly fields: readonly string[];
}

/** Upper bound of audit entries one query reads, so a rare filter cannot scan forever. */
const AUDIT_SCAN_LIMIT = 10_000;
const AUDIT_SCAN_BATCH = 500;
/** Reconnect backoff cap: after a Redis restart the store is back within about a second. */
const MAX_RECONNECT_DELAY_MS = 1_000;

const PACKAGE_VERSION = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version: string;
  }
).version;

/**
 * Script command names carry the package version, so replicas of two versions sharing one
 * Redis during a rolling upgrade never run each other's scripts.
 */
const COMMAND_PREFIX = `coord_${PACKAGE_VERSION.replace(/[^A-Za-z0-9]/g, '_')}_`;

/** Metadata keys read by one `readRevisions-n.lua` call. */
export const READ_REVISIONS_BATCH = 500;
/** The verify loop's batched read (`src/store/lua/readRevisions-n.lua`). */
export const READ_REVISIONS_SCRIPT = luaScript('readRevisions').lua;
const READ_REVISIONS_COMMAND = `${COMMAND_PREFIX}readRevisions`;
type ReadRevisionsBatch = (count: number, ...keys: string[]) => Promise<Array<string | null>>;

const reconnectDelay = (times: number): number => Math.min(times * 100, MAX_RECONNECT_DELAY_MS);

/**
 * The store on Redis (standalone or Cluster) through ioredis. Every group write is one Lua
 * script of `src/store/lua/`; commands fail fast with `StoreUnavailableError` while Redis is
 * down (one retry, a command timeout) instead of queueing until it returns.
 */
export class RedisStore implements Store {
  readonly kind: 'redis' | 'redis-cluster';
  private readonly client: Client;
  private readonly keys: KeyNames;
  private readonly auditMaxLen: number;
  private lastHealth: StoreHealth = 'DOWN';
  /** Whether the client ever connected: before that, calls wait for the first connection. */
  private wasReady = false;
  /** `host:port` (or the cluster seeds) of the store, without credentials: for messages. */
  private readonly target: string;
  /** Why the last connection attempt failed (`ECONNREFUSED`, ...), until one succeeds. */
  private connectionFailure: string | null = null;
  /**
   * The first word of the error with which Redis last refused a write (`READONLY`, `OOM`, ...),
   * until a write succeeds: the store is DOWN meanwhile, whatever reads answer.
   */
  private refusedWrites: string | null = null;

  constructor(options: RedisStoreOptions) {
    this.keys = keyNames(options.keyPrefix);
    this.auditMaxLen = options.auditMaxLen;
    const redisOptions: RedisOptions = {
      connectTimeout: options.connectTimeoutMs ?? 2_000,
      commandTimeout: options.commandTimeoutMs ?? 2_000,
      maxRetriesPerRequest: 1,
    };
    this.target = redisTarget(options);
    if (options.clusterNodes && options.clusterNodes.length > 0) {
      this.kind = 'redis-cluster';
      this.client = new Cluster([...options.clusterNodes], {
        redisOptions: { ...redisOptions, ...seedCredentials(options.clusterNodes) },
        clusterRetryStrategy: reconnectDelay,
        enableOfflineQueue: true,
      });
    } else {
      this.kind = 'redis';
      this.client = new Redis(options.url ?? 'redis://127.0.0.1:6379', {
        ...redisOptions,
        enableOfflineQueue: true,
        retryStrategy: reconnectDelay,
      });
    }
    for (const script of loadLuaScripts()) {
      this.client.defineCommand(COMMAND_PREFIX + script.name, {
        lua: script.lua,
        numberOfKeys: script.numberOfKeys,
      });
    }
    this.client.on('ready', () => {
      this.wasReady = true;
      this.connectionFailure = null;
      if (this.refusedWrites === null) this.lastHealth = 'UP';
    });
    this.client.on('error', (error: unknown) => {
      if (this.client.status !== 'ready') this.connectionFailure = causeOf(error);
    });
    // The listener also keeps ioredis from reporting every reconnect failure as unhandled.
    for (const event of ['error', 'close', 'end']) {
      this.client.on(event, () => {
        this.lastHealth = 'DOWN';
      });
    }
  }

  async createGroup(state: GroupState): Promise<StoredGroup> {
    const ref = refOf(state);
    const member = registryMember(ref);
    const registered = await this.command(
      'createGroup',
      () => this.client.zscore(this.keys.groups(), member),
      'read',
    );
    if (registered !== null) {
      throw refusalError(ScriptStatus.GROUP_EXISTS, { ref, actualRevision: 0 });
    }
    const fields = encodeGroup(state);
    const reply = await this.runScript('createGroup', ref, [JSON.stringify(fields)]);
    await this.command('createGroup', () => this.client.zadd(this.keys.groups(), 0, member));
    const fence = fenceOf(pairsToFields(reply.fields).fence);
    return { state: decodeGroup(fields), revision: reply.revision, fence };
  }

  async loadGroup(ref: GroupRef): Promise<StoredGroup | null> {
    const fields = await this.exportGroup(ref);
    return fields === null ? null : toStoredGroup(fields);
  }

  async commitGroup(
    ref: GroupRef,
    fence: number,
    expectedRevision: number,
    patch: FieldPatch,
  ): Promise<number> {
    assertPatchAllowed(patch);
    const { revision } = await this.runScript(
      'commitGroup',
      ref,
      [fence, expectedRevision, JSON.stringify({ set: patch.set, del: patch.del })],
      expectedRevision,
    );
    return revision;
  }

  async deleteGroup(ref: GroupRef, fence: number, expectedRevision: number): Promise<void> {
    const member = registryMember(ref);
    await this.runScript('checkWriter', ref, [fence, expectedRevision], expectedRevision);
    await this.command('deleteGroup', () => this.client.zrem(this.keys.groups(), member));
    try {
      await this.runScript('deleteGroup', ref, [fence, expectedRevision], expectedRevision);
    } catch (error) {
      // Refused: the owner changed since the check, so the group lives on and stays registered.
      // Unavailable: the DEL may have happened; a retry of the delete finishes the job.
      if (!(error instanceof StoreUnavailableError)) {
        await this.command('deleteGroup', () => this.client.zadd(this.keys.groups(), 0, member));
      }
      throw error;
    }
  }

  async adoptLayout(ref: GroupRef, request: LayoutRequest): Promise<PrefixLayout> {
    const [status, json] = await this.runLayoutScript(
      'adoptLayout',
      [this.keys.layouts(), this.keys.groups()],
      [
        ref.streamPrefix,
        ref.consumerGroup,
        request.shardCount,
        request.mode,
        request.now,
        request.newId,
        LAYOUT_JOIN_GRACE_MS,
      ],
    );
    const layout = decodeLayout(ref.streamPrefix, json);
    if (status === ScriptStatus.SHARD_COUNT_MISMATCH) {
      throw shardCountMismatch(ref, layout, request.shardCount);
    }
    return layout;
  }

  async changeLayout(
    streamPrefix: string,
    expectedVersion: number,
    shardCount: number,
    now: number,
  ): Promise<PrefixLayout> {
    const [status, json] = await this.runLayoutScript(
      'changeLayout',
      [this.keys.layouts()],
      [streamPrefix, expectedVersion, shardCount, now],
    );
    if (status === ScriptStatus.GROUP_NOT_FOUND) throw layoutNotFound(streamPrefix);
    const layout = decodeLayout(streamPrefix, json);
    if (status === ScriptStatus.REVISION_MISMATCH) {
      throw new RevisionMismatchError(expectedVersion, layout.version);
    }
    return layout;
  }

  async releaseLayout(ref: GroupRef): Promise<void> {
    await this.runLayoutScript(
      'releaseLayout',
      [this.keys.layouts()],
      [ref.streamPrefix, ref.consumerGroup],
    );
  }

  async readLayouts(streamPrefixes: readonly string[]): Promise<Array<PrefixLayout | null>> {
    if (streamPrefixes.length === 0) return [];
    const values = await this.command('readLayouts', () =>
      this.client.hmget(this.keys.layouts(), ...streamPrefixes),
    );
    return values.map((json, i) => (json ? decodeLayout(streamPrefixes[i]!, json) : null));
  }

  /** A layout script (`src/store/lua/*Layout-*.lua`): its status and the layout JSON it returns. */
  private async runLayoutScript(
    name: string,
    keys: readonly string[],
    args: Array<string | number>,
  ): Promise<[ScriptStatus, string]> {
    const run = (this.client as unknown as Record<string, ScriptCommand | undefined>)[
      COMMAND_PREFIX + name
    ];
    if (run === undefined) {
      throw new CoordinatorError('INTERNAL', `store script ${name} is not loaded`);
    }
    const reply = await this.command(name, () => run.call(this.client, ...keys, ...args));
    if (!Array.isArray(reply) || typeof reply[0] !== 'number') {
      throw new CoordinatorError('INTERNAL', `store script ${name} returned an unexpected reply`);
    }
    return [reply[0], String(reply[1] ?? '')];
  }

  async claimGroup(ref: GroupRef, lease: string | null): Promise<StoredGroup> {
    const { fields } = await this.runScript('claimGroup', ref, [lease ?? ''], undefined, [
      this.keys.lease(ref),
    ]);
    return toStoredGroup(pairsToFields(fields));
  }

  async registerReplica(replica: ReplicaRecord, ttlMs: number): Promise<void> {
    const key = this.keys.replica(replica.id);
    // The hash's own TTL (kept by the Redis server) decides liveness; the sorted set is the
    // index to find the hashes (its score, the expiry by this replica's clock, is informative).
    // Two commands: in Cluster mode the two keys live in different slots.
    await this.command('registerReplica', async () => {
      // One transaction: a crash between HSET and PEXPIRE would leave a replica live forever.
      const results = await this.client
        .multi()
        .hset(key, replicaFields(replica))
        .pexpire(key, ttlMs)
        .exec();
      const failed = results?.find(([error]) => error !== null)?.[0];
      if (results === null || failed) throw failed ?? new Error('replica registration aborted');
      await this.client.zadd(this.keys.replicas(), Date.now() + ttlMs, replica.id);
    });
  }

  async listReplicas(): Promise<ReplicaRecord[]> {
    const ids = await this.command('listReplicas', () =>
      this.client.zrange(this.keys.replicas(), '0', '-1'),
    );
    const hashes = await this.command('listReplicas', () =>
      Promise.all(ids.map((id) => this.client.hgetall(this.keys.replica(id)))),
    );
    const live: ReplicaRecord[] = [];
    const expired: string[] = [];
    ids.forEach((id, i) => {
      const hash = hashes[i];
      if (hash?.url === undefined) expired.push(id);
      else live.push(replicaOfFields(id, hash));
    });
    if (expired.length > 0) {
      // A refresh racing this prune re-adds its id on its next beat (about a second later).
      await this.command('listReplicas', () => this.client.zrem(this.keys.replicas(), ...expired));
    }
    return live.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  async deregisterReplica(id: string): Promise<void> {
    await this.command('deregisterReplica', async () => {
      await this.client.zrem(this.keys.replicas(), id);
      await this.client.del(this.keys.replica(id));
    });
  }

  async recordFailure(ref: GroupRef, record: FailureRecord): Promise<void> {
    await this.command('recordFailure', () =>
      this.client.set(this.keys.failure(ref), JSON.stringify(record)),
    );
  }

  async readFailure(ref: GroupRef): Promise<FailureRecord | null> {
    const value = await this.command('readFailure', () => this.client.get(this.keys.failure(ref)));
    return value === null ? null : (JSON.parse(value) as FailureRecord);
  }

  async clearFailure(ref: GroupRef): Promise<void> {
    await this.command('clearFailure', () => this.client.del(this.keys.failure(ref)));
  }

  async isRegistered(ref: GroupRef): Promise<boolean> {
    const score = await this.command('isRegistered', () =>
      this.client.zscore(this.keys.groups(), registryMember(ref)),
    );
    return score !== null;
  }

  async listGroups(options: { cursor?: string | undefined; limit: number }): Promise<GroupPage> {
    assertPageLimit(options.limit);
    const start = options.cursor === undefined ? '-' : `(${decodeCursor(options.cursor)}`;
    // One extra member tells whether another page follows without a second round trip.
    const members = await this.command('listGroups', () =>
      this.client.zrange(this.keys.groups(), start, '+', 'BYLEX', 'LIMIT', 0, options.limit + 1),
    );
    const page = members.slice(0, options.limit);
    const last = page[page.length - 1];
    return {
      groups: page.map(parseRegistryMember),
      nextCursor: members.length > options.limit && last !== undefined ? encodeCursor(last) : null,
    };
  }

  async readRevisions(refs: readonly GroupRef[]): Promise<Array<GroupRevision | null>> {
    if (refs.length === 0) return [];
    const keys = refs.map((ref) => this.keys.metadata(ref));
    const replies = await this.command('readRevisions', async () => {
      if (this.client instanceof Cluster) {
        // A Cluster pipeline must stay within one slot; parallel commands still share round trips.
        return Promise.all(
          keys.map((key) => this.client.hmget(key, 'storeRevision', 'lifecycleId')),
        );
      }
      const readBatch = (this.client as unknown as Record<string, ReadRevisionsBatch>)[
        READ_REVISIONS_COMMAND
      ] as ReadRevisionsBatch;
      const batches: Array<Promise<Array<string | null>>> = [];
      for (let i = 0; i < keys.length; i += READ_REVISIONS_BATCH) {
        const batch = keys.slice(i, i + READ_REVISIONS_BATCH);
        batches.push(readBatch.call(this.client, batch.length, ...batch));
      }
      const flat = (await Promise.all(batches)).flat();
      return keys.map((_key, i) => [flat[2 * i] ?? null, flat[2 * i + 1] ?? null]);
    });
    return replies.map(([revision, lifecycleId]) =>
      revision === null || revision === undefined
        ? null
        : { revision: Number(revision), lifecycleId: lifecycleId ?? '' },
    );
  }

  async exportGroup(ref: GroupRef): Promise<GroupFields | null> {
    const fields = await this.command('loadGroup', () =>
      this.client.hgetall(this.keys.metadata(ref)),
    );
    return Object.keys(fields).length === 0 ? null : { ...fields };
  }

  async importGroup(ref: GroupRef, fields: GroupFields): Promise<void> {
    assertImportable(ref, fields);
    await this.runScript('importGroup', ref, [JSON.stringify(fields)]);
    await this.command('importGroup', () =>
      this.client.zadd(this.keys.groups(), 0, registryMember(ref)),
    );
  }

  async appendAudit(record: AuditRecord): Promise<void> {
    await this.command('appendAudit', () =>
      this.client.xadd(
        this.keys.audit(),
        'MAXLEN',
        '~',
        this.auditMaxLen,
        '*',
        'json',
        JSON.stringify(record),
      ),
    );
  }

  async queryAudit(query: AuditQuery): Promise<AuditRecord[]> {
    const matched: AuditRecord[] = [];
    let end = '+';
    let scanned = 0;
    while (matched.length < query.limit && scanned < AUDIT_SCAN_LIMIT) {
      const count = Math.min(AUDIT_SCAN_BATCH, AUDIT_SCAN_LIMIT - scanned);
      const upTo = end;
      const entries = await this.command('queryAudit', () =>
        this.client.xrevrange(this.keys.audit(), upTo, '-', 'COUNT', count),
      );
      for (const [, entryFields] of entries) {
        const record = parseAuditEntry(entryFields);
        if (record && matchesAuditQuery(record, query)) matched.push(record);
        if (matched.length >= query.limit) break;
      }
      scanned += entries.length;
      const last = entries[entries.length - 1];
      if (entries.length < count || last === undefined) break;
      end = `(${last[0]}`;
    }
    return matched;
  }

  /**
   * A round trip; rejects as well while Redis refuses writes (until a write succeeds again, such
   * as the next refresh of this replica's registry entry), so a store that answers but cannot
   * take a lease or a change is not reported reachable.
   */
  async ping(): Promise<void> {
    await this.command('ping', () => this.client.ping());
    if (this.refusedWrites !== null) {
      throw this.unavailable('ping', `writes refused (${this.refusedWrites})`);
    }
  }

  health(): StoreHealth {
    return this.lastHealth;
  }

  async close(): Promise<void> {
    try {
      await this.client.quit();
    } catch {
      // Already disconnected: nothing left to flush.
      this.client.disconnect();
    }
    this.lastHealth = 'DOWN';
  }

  /**
   * Every script call goes through here: runs it on the group's metadata key (then
   * `extraKeys`, all in the group's slot) and turns a negative status into the typed error of
   * `refusalError`.
   */
  private async runScript(
    name: string,
    ref: GroupRef,
    args: Array<string | number>,
    expectedRevision?: number,
    extraKeys: readonly string[] = [],
  ): Promise<ScriptReply> {
    const commandName = COMMAND_PREFIX + name;
    const run = (this.client as unknown as Record<string, ScriptCommand | undefined>)[commandName];
    if (run === undefined) {
      throw new CoordinatorError('INTERNAL', `store script ${name} is not loaded`);
    }
    const reply = parseScriptReply(
      await this.command(
        name,
        () => run.call(this.client, this.keys.metadata(ref), ...extraKeys, ...args),
        READ_SCRIPTS.has(name) ? 'read' : 'write',
      ),
    );
    if (reply.status < 0) {
      throw refusalError(reply.status, {
        ref,
        actualRevision: reply.revision,
        ...(expectedRevision === undefined ? {} : { expectedRevision }),
      });
    }
    return reply;
  }

  /**
   * Runs one round trip, tracking health; any failure becomes `StoreUnavailableError`. A write
   * Redis refuses (`READONLY`, `OOM`, ...) leaves the store DOWN until a write succeeds: reads
   * answering meanwhile do not make it UP (docs/operations.md#when-the-store-is-down).
   */
  private async command<T>(
    operation: string,
    run: () => Promise<T>,
    access: 'read' | 'write' = READ_OPERATIONS.has(operation) ? 'read' : 'write',
  ): Promise<T> {
    // Once connected, a lost connection fails calls at once instead of queueing them for the
    // command timeout: callers (503s, health) learn of an outage without waiting for it.
    if (this.wasReady && LOST.has(this.client.status)) {
      this.lastHealth = 'DOWN';
      throw this.unavailable(
        operation,
        this.connectionFailure ?? `connection ${this.client.status}`,
      );
    }
    try {
      const result = await run();
      if (access === 'write') this.refusedWrites = null;
      this.lastHealth = this.refusedWrites === null ? 'UP' : 'DOWN';
      return result;
    } catch (error) {
      this.lastHealth = 'DOWN';
      const refusal = writeRefusalOf(error);
      if (refusal !== null) {
        this.refusedWrites = refusal;
        throw this.unavailable(operation, `writes refused (${refusal})`, error);
      }
      // Not connected: the cause is the connection's (ECONNREFUSED, ...), not the retry limit
      // ioredis reports for the queued command.
      const cause =
        this.client.status === 'ready'
          ? causeOf(error)
          : (this.connectionFailure ?? causeOf(error));
      throw this.unavailable(operation, cause, error);
    }
  }

  /** `store <operation> failed: Redis at host:port unreachable (ECONNREFUSED)`, with details. */
  private unavailable(operation: string, cause: string, error?: unknown): StoreUnavailableError {
    const reached = this.client.status === 'ready';
    const message = reached
      ? `store ${operation} failed at ${this.target}: ${cause}`
      : `store ${operation} failed: Redis at ${this.target} unreachable (${cause})`;
    return new StoreUnavailableError(message, {
      ...(error === undefined ? {} : { cause: error }),
      details: { store: this.target, cause },
    });
  }

  /** `host:port` of the store (the cluster seeds joined by commas), for logs and messages. */
  describe(): string {
    return this.target;
  }

  /* Lost metadata (docs/operations.md#lost-metadata); see the Store interface. */

  async recordLostGroup(ref: GroupRef, record: FailureRecord): Promise<'recorded' | 'exists'> {
    const { status } = await this.runScript(
      'recordLostGroup',
      ref,
      [JSON.stringify(record)],
      undefined,
      [this.keys.failure(ref)],
    );
    if (status === LOST_GROUP_EXISTS) return 'exists';
    // Registry after the failure record (another slot in Cluster), as create and import do.
    await this.command('recordLostGroup', () =>
      this.client.zadd(this.keys.groups(), 0, registryMember(ref)),
    );
    return 'recorded';
  }

  async recordDeletion(ref: GroupRef, lifecycleId: string, at: number): Promise<void> {
    await this.command('recordDeletion', () =>
      this.client.hset(this.keys.deleted(ref), lifecycleId, String(at)),
    );
  }

  async readDeletions(ref: GroupRef): Promise<DeletedLifecycle[]> {
    const hash = await this.command('readDeletions', () =>
      this.client.hgetall(this.keys.deleted(ref)),
    );
    return deletionsOf(hash);
  }

  /*
   * Outages and failed logins (docs/operations.md#when-the-store-is-down,
   * docs/operations.md#login-throttling); see the Store interface.
   */

  outage(): StoreOutage | null {
    if (this.lastHealth !== 'DOWN') return null;
    const status = this.client.status;
    return {
      store: this.target,
      cause:
        this.connectionFailure ??
        (status !== 'ready'
          ? `connection ${status}`
          : this.refusedWrites !== null
            ? `writes refused (${this.refusedWrites})`
            : 'no answer'),
    };
  }

  async reserveLoginAttempt(
    id: string,
    maxAttempts: number,
    windowMs: number,
  ): Promise<LoginAttempt> {
    const reply = await this.runKeyScript(
      'reserveLoginAttempt',
      [this.keys.loginFailures(id)],
      [maxAttempts, windowMs],
    );
    if (!Array.isArray(reply)) {
      throw new CoordinatorError('INTERNAL', 'store script returned an unexpected reply');
    }
    return { allowed: Number(reply[0]) === 1, ...loginFailuresOf(reply.slice(1)) };
  }

  async readLoginFailures(id: string): Promise<LoginFailures> {
    return loginFailuresOf(
      await this.runKeyScript('readLoginFailures', [this.keys.loginFailures(id)], []),
    );
  }

  async clearLoginFailures(id: string): Promise<void> {
    await this.command('clearLoginFailures', () => this.client.del(this.keys.loginFailures(id)));
  }

  /** A script of `src/store/lua/` that is about no group: its keys as given, its raw reply. */
  private runKeyScript(
    name: string,
    keys: readonly string[],
    args: Array<string | number>,
  ): Promise<unknown> {
    const run = (this.client as unknown as Record<string, ScriptCommand | undefined>)[
      COMMAND_PREFIX + name
    ];
    if (run === undefined) {
      throw new CoordinatorError('INTERNAL', `store script ${name} is not loaded`);
    }
    return this.command(name, () => run.call(this.client, ...keys, ...args));
  }
}

/** `{failures, remainingMs}` of the login-failure scripts' replies. */
function loginFailuresOf(reply: unknown): LoginFailures {
  if (!Array.isArray(reply)) {
    throw new CoordinatorError('INTERNAL', 'store script returned an unexpected reply');
  }
  return { failures: Number(reply[0]) || 0, remainingMs: Math.max(0, Number(reply[1]) || 0) };
}

/** Status of `recordLostGroup-2.lua` when the metadata key exists (nothing written). */
const LOST_GROUP_EXISTS = 1;

/** The deleted lifecycles of a `kp:G:deleted` hash, oldest first. */
export function deletionsOf(hash: Readonly<Record<string, string>>): DeletedLifecycle[] {
  return Object.entries(hash)
    .map(([lifecycleId, at]) => ({ lifecycleId, at: Number(at) || 0 }))
    .sort((a, b) => a.at - b.at);
}

/*
 * Other Redis clients of the coordinator (the lease client): their failures described as the
 * store's are (docs/operations.md#when-the-store-is-down).
 */

/**
 * Makes the failures of `client`'s commands name the store and the cause as the store's do
 * (`<what> failed: Redis at host:port unreachable (ECONNREFUSED)`), instead of ioredis'
 * bookkeeping (`Reached the max retries per request limit`, `Command timed out`), since they
 * reach log lines: a lease lost while Redis is down says why. Errors Redis itself answered
 * (`ReplyError`: `NOSCRIPT`, `NOPERM`, ...) pass unchanged, so ioredis and redlock still act on
 * them. Returns `client`.
 */
export function describeFailures<C extends Redis | Cluster>(
  client: C,
  what: string,
  addresses: { readonly url?: string; readonly clusterNodes?: readonly string[] },
): C {
  const target = redisTarget(addresses);
  let connectionFailure: string | null = null;
  client.on('error', (error: unknown) => {
    if (client.status !== 'ready') connectionFailure = causeOf(error);
  });
  client.on('ready', () => {
    connectionFailure = null;
  });
  const send = client.sendCommand.bind(client) as (command: object, ...rest: unknown[]) => unknown;
  // ioredis sends a queued command again itself after a reconnect and ignores what that call
  // returns: the command keeps the one described promise its caller holds, never a second one
  // that nobody handles.
  const describedOf = new WeakMap<object, Promise<unknown>>();
  const described = (command: object, ...rest: unknown[]): unknown => {
    const sent = send(command, ...rest);
    if (!(sent instanceof Promise)) return sent;
    const known = describedOf.get(command);
    if (known !== undefined) return known;
    const promise = sent.catch((error: unknown) => {
      if ((error as { name?: unknown } | null)?.name === 'ReplyError') throw error;
      const cause =
        client.status === 'ready' ? causeOf(error) : (connectionFailure ?? causeOf(error));
      throw new StoreUnavailableError(`${what} failed: Redis at ${target} unreachable (${cause})`, {
        cause: error,
        details: { store: target, cause },
      });
    });
    describedOf.set(command, promise);
    return promise;
  };
  (client as unknown as { sendCommand: typeof described }).sendCommand = described;
  return client;
}

/**
 * A short cause for an operator: the system error code of a connection failure
 * (`ECONNREFUSED`, `ENOTFOUND`, `ETIMEDOUT`), else the error's message. ioredis' own retry
 * bookkeeping (`maxRetriesPerRequest`) is never the cause.
 */
function causeOf(error: unknown): string {
  const e = error as { code?: unknown; message?: unknown; lastNodeError?: unknown } | null;
  if (typeof e?.code === 'string' && /^E[A-Z]+$/.test(e.code)) return e.code;
  if (e?.lastNodeError) return causeOf(e.lastNodeError);
  const message = typeof e?.message === 'string' ? e.message : String(error);
  if (/maxRetriesPerRequest/.test(message)) return 'no connection';
  if (/^Command timed out/.test(message)) return 'no answer in time';
  if (/^Connection is closed/.test(message)) return 'connection closed';
  return message;
}

/**
 * Operations of {@link RedisStore} that only read: their success says nothing about whether
 * Redis takes writes again.
 */
const READ_OPERATIONS = new Set([
  'readLayouts',
  'listReplicas',
  'readFailure',
  'isRegistered',
  'listGroups',
  'readRevisions',
  'loadGroup',
  'queryAudit',
  'ping',
  'readDeletions',
  'readLoginFailures',
]);

/** Group scripts that write nothing (`checkWriter-1.lua`). */
const READ_SCRIPTS = new Set(['checkWriter']);

/** Client states in which a command would only wait in the offline queue. */
const LOST = new Set(['reconnecting', 'close', 'end']);

function refOf(state: GroupState): GroupRef {
  return { streamPrefix: state.streamPrefix, consumerGroup: state.consumerGroup };
}

function parseScriptReply(reply: unknown): ScriptReply {
  if (!Array.isArray(reply) || typeof reply[0] !== 'number' || typeof reply[1] !== 'number') {
    throw new CoordinatorError('INTERNAL', 'store script returned an unexpected reply');
  }
  const fields: unknown = reply[2];
  return {
    status: reply[0],
    revision: reply[1],
    fields: Array.isArray(fields) ? fields.map(String) : [],
  };
}

function pairsToFields(pairs: readonly string[]): Record<string, string> {
  const fields: Record<string, string> = {};
  for (let i = 0; i + 1 < pairs.length; i += 2) {
    fields[pairs[i] as string] = pairs[i + 1] as string;
  }
  return fields;
}

/** An entry written by appendAudit; null for anything else found in the stream. */
function parseAuditEntry(entryFields: readonly string[]): AuditRecord | null {
  const index = entryFields.indexOf('json');
  const json = index >= 0 && index % 2 === 0 ? entryFields[index + 1] : undefined;
  if (json === undefined) return null;
  try {
    return JSON.parse(json) as AuditRecord;
  } catch {
    return null;
  }
}

/** The fields of a replica's registry hash. */
function replicaFields(replica: ReplicaRecord): Record<string, string> {
  const fields: Record<string, string> = { url: replica.url };
  if (replica.groupsOwned !== undefined) fields.groupsOwned = String(replica.groupsOwned);
  if (replica.heartbeatAt !== undefined) fields.heartbeatAt = replica.heartbeatAt;
  if (replica.leases !== undefined) fields.leases = JSON.stringify(replica.leases);
  return fields;
}

/** A replica's registry hash read back; a field that does not parse is left out. */
function replicaOfFields(id: string, hash: Record<string, string>): ReplicaRecord {
  const groupsOwned = Number(hash.groupsOwned);
  let leases: ReplicaLease[] | undefined;
  try {
    const parsed: unknown = hash.leases === undefined ? undefined : JSON.parse(hash.leases);
    if (Array.isArray(parsed)) leases = parsed as ReplicaLease[];
  } catch {
    leases = undefined;
  }
  return {
    id,
    url: hash.url ?? '',
    ...(hash.groupsOwned !== undefined && Number.isFinite(groupsOwned) ? { groupsOwned } : {}),
    ...(hash.heartbeatAt !== undefined ? { heartbeatAt: hash.heartbeatAt } : {}),
    ...(leases ? { leases } : {}),
  };
}
