import type { Clock } from '../machines/clock.js';
import type { GroupRef } from '../machines/types.js';
import type { Logger } from '../observability/logger.js';
import type { StreamsReader } from '../streams/streams-reader.js';
import type { GroupEntry, GroupEvent } from './group-entry.js';

/**
 * What work the replica does on the groups it serves on its own needs: sealing retiring shards
 * nobody reads (`retired-shards.ts`), moving the positions of a reset (`position-resets.ts`).
 */
export interface ReplicaWorkOptions {
  /** Null when the coordinator does not know where the streams are. */
  readonly reader: StreamsReader | null;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly entries: () => readonly GroupEntry[];
  /** Runs `work` on the group's entry with its mailbox held; `GROUP_MOVED` when owned elsewhere. */
  readonly withEntry: <T>(ref: GroupRef, work: (entry: GroupEntry) => Promise<T>) => Promise<T>;
  /** Sends an event through the group's chart and commits what it changed. */
  readonly dispatch: (entry: GroupEntry, event: GroupEvent) => Promise<unknown>;
}
