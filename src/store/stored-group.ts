import { decodeGroup } from './codec.js';
import type { GroupFields } from './codec.js';
import type { StoredGroup } from './store.js';

/** A metadata hash as the store hands it out: decoded state plus the store-owned fields. */
export function toStoredGroup(fields: GroupFields): StoredGroup {
  return {
    state: decodeGroup(fields),
    revision: Number(fields.storeRevision ?? 0),
    fence: fields.fence ?? '',
  };
}
