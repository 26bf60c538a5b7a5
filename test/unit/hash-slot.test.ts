import { describe, expect, it } from 'vitest';
import { hashSlot } from '../../src/store/hash-slot.js';

describe('hashSlot (Redis Cluster key slots)', () => {
  it('is CRC16-XMODEM mod 16,384, as redis-cli CLUSTER KEYSLOT answers', () => {
    expect(hashSlot('123456789')).toBe(0x31c3); // the CRC's check value
    expect(hashSlot('somekey')).toBe(11_058);
    expect(hashSlot('foo')).toBe(12_182);
  });

  it('hashes only the first non-empty hash tag', () => {
    expect(hashSlot('foo{hash_tag}')).toBe(hashSlot('hash_tag'));
    expect(hashSlot('{user1000}.following')).toBe(hashSlot('{user1000}.followers'));
    // Values of CLUSTER KEYSLOT on redis-server 7.0.
    expect(hashSlot('kp:{orders:billing}:lease')).toBe(16_124);
    expect(hashSlot('foo{}{bar}')).toBe(8_363); // an empty tag: the whole key
    expect(hashSlot('foo{{bar}}zap')).toBe(4_015); // the tag is `{bar`
  });
});
