import { CoordinatorError } from '../errors.js';
import { decodeGroup } from './codec.js';
import type { GroupFields } from './codec.js';
import type { StoredGroup } from './store.js';

/** A metadata hash as the store hands it out: decoded state plus the store-owned fields. */
export function toStoredGroup(fields: GroupFields): StoredGroup {
  let state;
  try {
    state = decodeGroup(fields);
  } catch (error) {
    throw new CoordinatorError(
      'METADATA_CORRUPT',
      `the metadata hash cannot be read: ${(error as Error).message}`,
      {
        cause: error,
      },
    );
  }
  return {
    state,
    revision: Number(fields.storeRevision ?? 0),
    fence: fenceOf(fields.fence),
  };
}

/**
 * The integer fence of a hash; 0 for a hash without one or with a token from before fences were
 * counters (never a valid fence: the next claim starts a real one).
 */
export function fenceOf(value: string | undefined): number {
  return value !== undefined && /^[1-9]\d*$/.test(value) ? Number(value) : 0;
}
