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

/**
 * Redis's error about `key` (`<key>: WRONGTYPE …`), as a shard's `error` shows it in a lag
 * reading or a dead-letter answer; any other failure is rethrown (the streams cannot be read).
 */
export function keyErrorText(key: string, error: unknown): string {
  if (!isKeyError(error)) throw error;
  // A script's error ends with where in the script it came from: not the operator's concern.
  return `${key}: ${(error as Error).message.replace(/ script: .*$/s, '')}`;
}
