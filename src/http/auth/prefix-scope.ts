import { CoordinatorError } from '../../errors.js';
import type { Store } from '../../store/store.js';
import { permitsGroup } from './group-scope.js';
import type { Principal } from './roles.js';

/**
 * 403 GROUP_NOT_PERMITTED when a scoped caller asks for a change that moves the shard count of
 * the group's stream prefix (a scale, a rollback, a desired state with another count) while
 * the prefix holds groups its token does not reach: the prefix moves as a whole, every group on
 * it migrates (docs/protocol.md#one-shard-layout-per-stream-prefix), so the change is one to
 * those groups too (README.md#tokens-roles-and-group-scopes). `shardCount`, when given, is the
 * count asked for: the prefix's own count moves nothing and is let through. An unscoped caller,
 * and a prefix whose groups the token all reaches, pass.
 */
export async function assertPrefixPermitted(
  store: Pick<Store, 'readLayouts'>,
  principal: Principal | null,
  ref: { readonly streamPrefix: string; readonly consumerGroup: string },
  shardCount?: number,
): Promise<void> {
  if (!principal?.groups) return;
  const [layout] = await store.readLayouts([ref.streamPrefix]);
  if (!layout || (shardCount !== undefined && layout.shardCount === shardCount)) return;
  const outside = Object.keys(layout.groups).some(
    (group) => group !== ref.consumerGroup && !permitsGroup(principal, ref.streamPrefix, group),
  );
  if (!outside) return;
  throw new CoordinatorError(
    'GROUP_NOT_PERMITTED',
    `the shard count of stream prefix ${ref.streamPrefix} is every group's on it, and the ` +
      'access token does not reach all of them: a token that does must move it',
  );
}
