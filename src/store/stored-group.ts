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
    fence: fields.fence ?? '',
  };
}
