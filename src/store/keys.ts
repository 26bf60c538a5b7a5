import type { GroupRef } from '../machines/types.js';

/**
 * Key names of DESIGN.md §4, built here and nowhere else.
 * `kp` is `coordinator.store.key-prefix`; a group's keys share the Redis Cluster hash tag
 * `{<streamPrefix>:<consumerGroup>}` so one Lua script can touch all of them.
 */
export interface KeyNames {
  readonly prefix: string;
  groupTag(ref: GroupRef): string;
  metadata(ref: GroupRef): string;
  lease(ref: GroupRef): string;
  /** Beside (never inside) the metadata: why the group failed closed, kept across restarts. */
  failure(ref: GroupRef): string;
  groups(): string;
  replicas(): string;
  replica(id: string): string;
  audit(): string;
}

export function keyNames(prefix: string): KeyNames {
  const groupTag = (ref: GroupRef) => `{${ref.streamPrefix}:${ref.consumerGroup}}`;
  return {
    prefix,
    groupTag,
    metadata: (ref) => `${prefix}:${groupTag(ref)}:metadata`,
    lease: (ref) => `${prefix}:${groupTag(ref)}:lease`,
    failure: (ref) => `${prefix}:${groupTag(ref)}:failure`,
    groups: () => `${prefix}:groups`,
    replicas: () => `${prefix}:replicas`,
    replica: (id) => `${prefix}:replica:${id}`,
    audit: () => `${prefix}:audit`,
  };
}

/** Registry member of a group in `kp:groups`: the JSON pair DESIGN.md §4 names. */
export function registryMember(ref: GroupRef): string {
  return JSON.stringify([ref.streamPrefix, ref.consumerGroup]);
}

export function parseRegistryMember(member: string): GroupRef {
  const [streamPrefix, consumerGroup] = JSON.parse(member) as [string, string];
  return { streamPrefix, consumerGroup };
}
