import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock } from '../machines/clock.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { Store } from '../store/store.js';

/** What the state file says of one store and key prefix. */
export interface ReplicaStateRecord {
  /** The store (`host:port`, or the cluster seeds) and the key prefix the record is about. */
  readonly store: string;
  readonly keyPrefix: string;
  /** Epoch ms of the first time a replica saw a group registered there (null: never). */
  readonly sawGroupsAt: number | null;
}

/** Options of {@link ReplicaState}. */
export interface ReplicaStateOptions {
  /** `coordinator.replica.state-dir`. */
  readonly dir: string;
  /** The store as the log names it: `host:port` (or the cluster seeds), never credentials. */
  readonly storeName: string;
  readonly keyPrefix: string;
  readonly store: Pick<Store, 'listGroups'>;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics: Pick<Metrics, 'storeEmptied'>;
  /** How often the store is looked at until groups were seen there (and the first check retried). */
  readonly intervalMs: number;
}

/**
 * What a replica must remember of its store across its own restarts, in a small local file
 * (docs/operations.md#lost-metadata): whether it has ever seen groups registered in the store.
 * A marker kept in the store would be wiped with the store; this file is not. A replica that
 * starts against a store that holds no group although the file says groups were seen there
 * says so at error level, in one line naming the store and what to do, and sets
 * `coord_store_emptied` to 1. The file is named after the store and the key prefix, so replicas
 * of other deployments sharing the directory do not mix.
 */
export class ReplicaState {
  /** The state file of this store and key prefix. */
  readonly file: string;
  private record: ReplicaStateRecord | null = null;
  private checked = false;
  private cancel: (() => void) | null = null;
  private stopped = false;
  private running: Promise<void> = Promise.resolve();

  constructor(private readonly options: ReplicaStateOptions) {
    const key = createHash('sha256')
      .update(`${options.storeName}\n${options.keyPrefix}`)
      .digest('hex')
      .slice(0, 16);
    this.file = join(options.dir, `store-${key}.json`);
  }

  /**
   * Checks the store now (logging an emptied store), then looks again every interval until
   * groups were seen and recorded; resolves after the first look (which never rejects: a store
   * that does not answer is looked at again later). Returns the function that stops it.
   */
  async start(): Promise<() => void> {
    this.running = this.look();
    await this.running;
    if (this.stopped) return () => undefined;
    this.cancel = this.options.clock.every(this.options.intervalMs, () => {
      if (this.checked && this.sawGroups()) {
        this.stop();
        return;
      }
      this.running = this.running.then(() => this.look());
    });
    return () => this.stop();
  }

  /** Stops looking at the store. */
  stop(): void {
    this.stopped = true;
    this.cancel?.();
    this.cancel = null;
  }

  /** One look: the first that reaches the store is the startup check; later ones record groups seen. */
  async look(): Promise<void> {
    const { store, logger } = this.options;
    let hasGroups: boolean;
    try {
      hasGroups = (await store.listGroups({ limit: 1 })).groups.length > 0;
    } catch {
      return; // the store does not answer: looked at again on the next interval
    }
    try {
      this.record ??= await this.read();
      if (!this.checked) {
        this.checked = true;
        const since = this.record?.sawGroupsAt;
        if (!hasGroups && since !== null && since !== undefined) this.emptied(since);
      }
      if (hasGroups && !this.sawGroups()) {
        this.record = {
          store: this.options.storeName,
          keyPrefix: this.options.keyPrefix,
          sawGroupsAt: this.options.clock.now(),
        };
        await this.write(this.record);
      }
    } catch (error) {
      logger.warn(
        'could not use the replica state file; an emptied store is not noticed at startup',
        {
          file: this.file,
          error: error instanceof Error ? error.message : String(error),
        },
      );
      this.stop();
    }
  }

  private sawGroups(): boolean {
    const since = this.record?.sawGroupsAt;
    return since !== null && since !== undefined;
  }

  private emptied(sawGroupsAt: number): void {
    const { storeName, keyPrefix, logger, metrics } = this.options;
    metrics.storeEmptied.set(1);
    logger.error(
      `store ${storeName} holds no group under key prefix ${keyPrefix}, but this replica saw ` +
        `groups there before (since ${new Date(sawGroupsAt).toISOString()}): the store lost its ` +
        'data (restarted without persistence, flushed, or replaced). Restore the metadata backup ' +
        '(coordctl restore) and RESUME each group, or RECREATE it; clients that remember a group ' +
        'get 503 GROUP_FAILED_CLOSED (METADATA_LOST) until then. If the store was emptied on ' +
        `purpose, delete ${this.file}. See docs/operations.md#lost-metadata`,
      { store: storeName, keyPrefix, stateFile: this.file },
    );
  }

  private async read(): Promise<ReplicaStateRecord | null> {
    let text: string;
    try {
      text = await readFile(this.file, 'utf8');
    } catch (error) {
      if ((error as { code?: unknown }).code === 'ENOENT') return null;
      throw error;
    }
    const parsed = JSON.parse(text) as Partial<ReplicaStateRecord>;
    return {
      store: String(parsed.store ?? this.options.storeName),
      keyPrefix: String(parsed.keyPrefix ?? this.options.keyPrefix),
      sawGroupsAt: typeof parsed.sawGroupsAt === 'number' ? parsed.sawGroupsAt : null,
    };
  }

  /** Written to a temporary file first, then renamed: a crash never leaves half a file. */
  private async write(record: ReplicaStateRecord): Promise<void> {
    await mkdir(this.options.dir, { recursive: true });
    const temporary = `${this.file}.${process.pid}.tmp`;
    await writeFile(temporary, `${JSON.stringify(record)}\n`, { mode: 0o600 });
    await rename(temporary, this.file);
  }
}
