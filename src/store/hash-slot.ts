/** Hash slots of a Redis Cluster. */
export const HASH_SLOTS = 16_384;

/**
 * The Redis Cluster hash slot of `key` (CRC16-XMODEM of its hash tag, or of the whole key, mod
 * 16,384), as `CLUSTER KEYSLOT` computes it: keys of one slot may go in one script call.
 */
export function hashSlot(key: string): number {
  const bytes = Buffer.from(key, 'utf8');
  let start = 0;
  let end = bytes.length;
  const open = bytes.indexOf(0x7b); // {
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1); // }
    // Only a non-empty tag counts: `{}` hashes the whole key.
    if (close > open + 1) {
      start = open + 1;
      end = close;
    }
  }
  let crc = 0;
  for (let i = start; i < end; i++) {
    crc ^= (bytes[i] as number) << 8;
    for (let bit = 0; bit < 8; bit++) {
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
  }
  return crc % HASH_SLOTS;
}
