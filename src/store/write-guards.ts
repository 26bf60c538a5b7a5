import { CoordinatorError } from '../errors.js';
import { groupId } from '../machines/types.js';
import type { GroupRef } from '../machines/types.js';
import { decodeGroup, STORE_FIELDS } from './codec.js';
import type { FieldPatch, GroupFields } from './codec.js';

/* Checks both stores run before a write, so they refuse the same inputs the same way. */

const storeOwned = new Set<string>(STORE_FIELDS);

/**
 * Refuses a patch that touches `storeRevision` or `fence`: only the store's own verbs may change
 * them, or a caller could forge ownership or hide a revision regression.
 */
export function assertPatchAllowed(patch: FieldPatch): void {
  const forbidden = [...Object.keys(patch.set), ...patch.del].filter((name) =>
    storeOwned.has(name),
  );
  if (forbidden.length > 0) {
    throw new CoordinatorError(
      'INTERNAL',
      `store-owned fields cannot be patched: ${forbidden.join(', ')}`,
    );
  }
}

/**
 * Refuses to restore fields that are not a metadata hash of `ref`: a backup loaded under the
 * wrong key would silently replace another group.
 */
export function assertImportable(ref: GroupRef, fields: GroupFields): void {
  let valid =
    fields.streamPrefix === ref.streamPrefix && fields.consumerGroup === ref.consumerGroup;
  if (valid) {
    try {
      decodeGroup(fields);
    } catch {
      valid = false;
    }
  }
  if (!valid) {
    throw new CoordinatorError(
      'VALIDATION_FAILED',
      `fields are not a metadata hash of group ${groupId(ref)}`,
    );
  }
}
