/**
 * Whether Redis answered `error` about one key (docs/operations.md#a-broken-shard-stream): a
 * shard's stream key holds another type (`WRONGTYPE`), or its consumer group is gone
 * (`NOGROUP`). Redis is reachable then, and the other shards read on: such an error is this
 * shard's trouble, not the streams', and never counts as a stall.
 */
export function isKeyError(error: unknown): boolean {
  if (!(error instanceof Error) || error.name !== 'ReplyError') return false;
  return /^(WRONGTYPE|NOGROUP)\b/.test(error.message);
}
