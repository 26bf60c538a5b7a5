import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compareMembers } from '../../src/store/group-paging.js';

/**
 * The registry is ordered as Redis orders it BYLEX: by the members' UTF-8 bytes. Whatever two
 * strings are compared (ASCII, the rest of the BMP, astral characters, lone surrogates), the
 * order is that of their encodings.
 */
const byBytes = (a: string, b: string) =>
  Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));

const memberArb = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary' }),
  fc.string({ unit: 'grapheme' }),
  fc.string({ unit: fc.constantFrom('a', 'z', '\uE000', '\uFFFF', '\uD83D\uDE00', '\uD800') }),
);

describe('registry member order', () => {
  it('is the order of the UTF-8 bytes', () => {
    fc.assert(
      fc.property(memberArb, memberArb, (a, b) => {
        expect(compareMembers(a, b)).toBe(byBytes(a, b));
        expect(compareMembers(a, a)).toBe(0);
      }),
      { numRuns: 2_000 },
    );
  });

  it('puts a character past the BMP after every BMP character, as UTF-8 does', () => {
    // UTF-16 puts U+1F600 (a surrogate pair) before U+E000; UTF-8 after it.
    expect('\uD83D\uDE00' < '\uE000').toBe(true);
    expect(compareMembers('s\uD83D\uDE00', 's\uE000')).toBe(1);
    expect(compareMembers('s/a', 's/b')).toBe(-1);
  });
});
