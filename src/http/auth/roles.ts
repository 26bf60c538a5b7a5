import { CoordinatorError } from '../../errors.js';

export const ROLES = ['READ', 'WRITE', 'CONSUMER', 'PRODUCER'] as const;
export type Role = (typeof ROLES)[number];

/** `<streamPrefix>:<consumerGroup>`, either part `*` (see `group-scope.ts`). */
export interface GroupPattern {
  readonly streamPrefix: string;
  readonly consumerGroup: string;
}

/** The authenticated caller of a request. */
export interface Principal {
  readonly name: string;
  readonly roles: readonly Role[];
  /** The groups a scoped token reaches (README.md#tokens-roles-and-group-scopes); undefined: every group. */
  readonly groups?: readonly GroupPattern[] | undefined;
}

/**
 * The one role check of the express pipeline and the heartbeat fast path: any one of `roles`
 * grants access, otherwise 403 FORBIDDEN.
 */
export function assertAnyRole(principal: Principal, roles: readonly Role[]): void {
  if (!roles.some((role) => principal.roles.includes(role))) {
    throw new CoordinatorError('FORBIDDEN', `this call needs one of the roles ${roles.join(', ')}`);
  }
}
