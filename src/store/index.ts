import { CoordinatorError } from '../errors.js';
import { MemoryStore } from './memory-store.js';
import { RedisStore } from './redis-store.js';
import type { Store } from './store.js';

/** What `coordinator.store.*` and `coordinator.audit.max-len` select. */
export interface CreateStoreOptions {
  readonly type: 'memory' | 'redis' | 'redis-cluster';
  /** Standalone Redis URL (type `redis`). @default 'redis://127.0.0.1:6379' */
  readonly url?: string | undefined;
  /** Startup nodes (type `redis-cluster`), `host:port` each. */
  readonly clusterNodes?: readonly string[] | undefined;
  readonly keyPrefix: string;
  readonly auditMaxLen: number;
  /** @default 2000 */
  readonly connectTimeoutMs?: number | undefined;
  /** @default 2000 */
  readonly commandTimeoutMs?: number | undefined;
}

/** Builds the store of the configured runtime mode (docs/architecture.md#runtime-modes). */
export function createStore(options: CreateStoreOptions): Store {
  const { keyPrefix, auditMaxLen, connectTimeoutMs, commandTimeoutMs } = options;
  switch (options.type) {
    case 'memory':
      return new MemoryStore({ keyPrefix, auditMaxLen });
    case 'redis':
      return new RedisStore({
        keyPrefix,
        auditMaxLen,
        connectTimeoutMs,
        commandTimeoutMs,
        url: options.url,
      });
    case 'redis-cluster':
      if (!options.clusterNodes || options.clusterNodes.length === 0) {
        throw new CoordinatorError(
          'VALIDATION_FAILED',
          'store type redis-cluster needs coordinator.store.cluster-nodes',
        );
      }
      return new RedisStore({
        keyPrefix,
        auditMaxLen,
        connectTimeoutMs,
        commandTimeoutMs,
        clusterNodes: options.clusterNodes,
      });
  }
}

export type {
  Store,
  StoredGroup,
  GroupRevision,
  GroupPage,
  AuditRecord,
  AuditQuery,
  StoreHealth,
  ReplicaRecord,
} from './store.js';
export { MemoryStore } from './memory-store.js';
export type { MemoryStoreOptions } from './memory-store.js';
export { RedisStore } from './redis-store.js';
export type { RedisStoreOptions } from './redis-store.js';
export { ScriptStatus } from './script-status.js';
