/**
 * Producer routing: which stream a key goes to. Pure and documented in docs/partitioner.md
 * with test vectors, so producers in any language can implement it.
 */

/** Name producers see in routing metadata. */
export const partitionerName = 'fnv1a32-mod';

/** Shard `i` is the Redis stream `<streamPrefix>:<i>`. */
export function streamNames(streamPrefix: string, shardCount: number): string[] {
  return Array.from({ length: shardCount }, (_, i) => `${streamPrefix}:${i}`);
}

/** 32-bit FNV-1a of the key's UTF-8 bytes. */
export function fnv1a32(key: string): number {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(key)) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash >>> 0;
}

/** The shard of a key: `fnv1a32(utf8(key)) mod shardCount`. */
export function shardForKey(key: string, shardCount: number): number {
  return fnv1a32(key) % shardCount;
}
