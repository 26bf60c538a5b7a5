/**
 * The end of a retiring shard. A scale-in removes shards from routing, but a producer that has
 * not yet seen the new routing may still append to a removed shard. So "read to its end" needs
 * an end that no stale producer can write past: the consumer retiring a shard appends a seal
 * entry, and the producer appends only through a script that refuses, atomically, to write
 * after a seal newer than the routing it chose the shard with. Everything before the seal is
 * read by the retiring consumer; nothing a stale producer sends lands after it.
 *
 * The seal entry is `__coord_seal <layoutId> version <layoutVersion>` (the stream prefix's shard
 * layout, which every group on the prefix follows): a producer whose routing is of that layout
 * and older than that version is refused and must refresh its routing; a producer of a newer
 * version (the scale-in was rolled back, or the shard came back with a later scale-out) writes
 * as usual. Consumers ack seal entries and never hand them to
 * the handler. Producers that write with plain XADD must do the same check themselves
 * (docs/protocol.md, "Scale-in and the end of a retiring shard").
 */
import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';

/** First field of a seal entry; its value is the group's lifecycle id. */
export const SEAL_FIELD = '__coord_seal';

/**
 * Which routing sealed a shard: producers of an older version of it are refused. It is the
 * stream prefix's shard layout (id and version), shared by every group on the prefix, so a
 * producer that reads another group's routing is refused by the seal all the same; from a
 * coordinator without layouts, the group's lifecycle and metadata version.
 */
export interface SealVersion {
  readonly lifecycleId: string;
  readonly metadataVersion: number;
}

/** The seal identity of a heartbeat reply or of routing metadata (see {@link SealVersion}). */
export function sealVersionOf(source: {
  readonly lifecycleId: string;
  readonly metadataVersion: number;
  readonly layoutId?: string | undefined;
  readonly layoutVersion?: number | undefined;
}): SealVersion {
  return source.layoutId
    ? { lifecycleId: source.layoutId, metadataVersion: source.layoutVersion ?? 0 }
    : { lifecycleId: source.lifecycleId, metadataVersion: source.metadataVersion };
}

/** Whether a stream entry's fields are a seal. */
export function isSeal(fields: readonly string[]): boolean {
  return fields[0] === SEAL_FIELD;
}

/** Appends the seal; resolves to its entry id. */
export async function appendSeal(redis: Redis, stream: string, seal: SealVersion): Promise<string> {
  const id = await redis.xadd(
    stream,
    '*',
    SEAL_FIELD,
    seal.lifecycleId,
    'version',
    String(seal.metadataVersion),
  );
  return id!;
}

/** Orders two stream entry ids (`<ms>-<seq>`, or `<ms>` alone as `<ms>-0`) by number. */
export function compareStreamIds(a: string, b: string): number {
  const [aMs = '0', aSeq = '0'] = a.split('-');
  const [bMs = '0', bSeq = '0'] = b.split('-');
  const ms = BigInt(aMs) - BigInt(bMs);
  if (ms !== 0n) return ms < 0n ? -1 : 1;
  const seq = BigInt(aSeq) - BigInt(bSeq);
  return seq === 0n ? 0 : seq < 0n ? -1 : 1;
}

/** The append that a seal newer than the routing refuses (`appendUnlessSealed-1.lua`). */
const APPEND_UNLESS_SEALED = readFileSync(
  new URL('../streams/lua/appendUnlessSealed-1.lua', import.meta.url),
  'utf8',
);

let scriptSha: string | null = null;

/** Where an append went: the entry id, or the version of the seal that refused it. */
export type AppendResult = { readonly id: string } | { readonly sealedAt: number };

/** Appends `fields` to `stream` unless a seal newer than `routing` ends it. */
export async function appendUnlessSealed(
  redis: Redis,
  stream: string,
  routing: SealVersion,
  maxLen: number | undefined,
  fields: readonly string[],
): Promise<AppendResult> {
  const args = [
    SEAL_FIELD,
    routing.lifecycleId,
    String(routing.metadataVersion),
    maxLen === undefined ? '' : String(maxLen),
    ...fields,
  ];
  let reply: [number, string];
  try {
    scriptSha ??= (await redis.script('LOAD', APPEND_UNLESS_SEALED)) as string;
    reply = (await redis.evalsha(scriptSha, 1, stream, ...args)) as [number, string];
  } catch (error) {
    // The server lost its script cache (restart, SCRIPT FLUSH, another node): send it whole.
    if (!(error instanceof Error) || !error.message.includes('NOSCRIPT')) throw error;
    reply = (await redis.eval(APPEND_UNLESS_SEALED, 1, stream, ...args)) as [number, string];
  }
  return reply[0] === 1 ? { id: reply[1] } : { sealedAt: Number(reply[1]) };
}
