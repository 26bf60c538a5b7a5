import type { GroupRef } from '../machines/types.js';

/**
 * Key names (docs/architecture.md#store-layout), built here and nowhere else.
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
  /**
   * The shard layouts of every stream prefix (one hash, a field per prefix), in the registry's
   * Redis Cluster slot so one script reads both.
   */
  layouts(): string;
  replicas(): string;
  replica(id: string): string;
  audit(): string;

  /*
   * Lost metadata (docs/operations.md#lost-metadata).
   */
  /** Lifecycles of the group deleted on purpose (a hash lifecycleId -> epoch ms), in its slot. */
  deleted(ref: GroupRef): string;

  /*
   * Login throttling (docs/operations.md#login-throttling).
   */
  /** Failed logins of one user and client address (`id`: a hex digest of both), with a TTL. */
  loginFailures(id: string): string;
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
    layouts: () => inSlotOf(`${prefix}:groups`, `${prefix}:layouts`),
    replicas: () => `${prefix}:replicas`,
    replica: (id) => `${prefix}:replica:${id}`,
    audit: () => `${prefix}:audit`,
    deleted: (ref) => `${prefix}:${groupTag(ref)}:deleted`,
    loginFailures: (id) => `${prefix}:login-failures:${id}`,
  };
}

/** Registry member of a group in `kp:groups`: the JSON pair `[streamPrefix, consumerGroup]`. */
export function registryMember(ref: GroupRef): string {
  return JSON.stringify([ref.streamPrefix, ref.consumerGroup]);
}

export function parseRegistryMember(member: string): GroupRef {
  const [streamPrefix, consumerGroup] = JSON.parse(member) as [string, string];
  return { streamPrefix, consumerGroup };
}

/**
 * `name`, tagged so that it lives in the Redis Cluster slot of `key`: with `key`'s own hash tag
 * when it has one, else with the whole of `key` (whose slot is then that of the tag's text).
 * Both stay under the key prefix, so ACL key patterns on the prefix cover them.
 */
function inSlotOf(key: string, name: string): string {
  const open = key.indexOf('{');
  const close = open >= 0 ? key.indexOf('}', open + 1) : -1;
  return close > open + 1 ? `${name}:${key.slice(open, close + 1)}` : `${name}:{${key}}`;
}
