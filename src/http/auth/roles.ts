export const ROLES = ['READ', 'WRITE', 'CONSUMER', 'PRODUCER'] as const;
export type Role = (typeof ROLES)[number];

/** The authenticated caller of a request. */
export interface Principal {
  readonly name: string;
  readonly roles: readonly Role[];
}
