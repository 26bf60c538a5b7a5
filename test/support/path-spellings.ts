import fc from 'fast-check';

/*
 * Spellings of a route's path for property tests (docs/decisions.md#one-spelling-per-path): each literal character kept,
 * its letter case flipped, percent-encoded, or (a '/') doubled, and trailing slashes added.
 */

/** One way to write one character of a path's literal part. */
export type Spelling =
  | { kind: 'keep' }
  | { kind: 'flipCase' }
  | { kind: 'percent'; upperHex: boolean }
  | { kind: 'slashes'; count: number };

const KEEP: Spelling = { kind: 'keep' };

/** At least the longest template in tokens: one spelling per token, the rest unused. */
export const MAX_TOKENS = 64;

/** Mostly kept, so a spelling is often one or two changes away from the canonical path. */
const charSpelling: fc.Arbitrary<Spelling> = fc.oneof(
  { arbitrary: fc.constant(KEEP), weight: 12 },
  { arbitrary: fc.constant({ kind: 'flipCase' } as const), weight: 1 },
  {
    arbitrary: fc.boolean().map((upperHex) => ({ kind: 'percent', upperHex }) as const),
    weight: 1,
  },
  {
    arbitrary: fc.integer({ min: 2, max: 3 }).map((count) => ({ kind: 'slashes', count }) as const),
    weight: 1,
  },
);

/**
 * The character spellings and trailing slashes of one path, and which kinds of change it
 * applies: a spelling with only case changes, or only a trailing slash, is as likely as one
 * with all of them. Shrinks towards the canonical path.
 */
export interface PathSpelling {
  readonly kinds: readonly Spelling['kind'][];
  readonly hows: readonly Spelling[];
  readonly trailing: number;
}

export const pathSpelling: fc.Arbitrary<PathSpelling> = fc.record({
  kinds: fc.subarray(['flipCase', 'percent', 'slashes'] as const),
  hows: fc.array(charSpelling, { minLength: MAX_TOKENS, maxLength: MAX_TOKENS }),
  trailing: fc.integer({ min: 0, max: 2 }),
});

/** The path template split into literal characters and `:param` tokens. */
export function tokens(template: string): string[] {
  return template
    .split(/(:[A-Za-z]+)/)
    .flatMap((part) => (part.startsWith(':') ? [part] : [...part]));
}

function spell(char: string, how: Spelling): string {
  switch (how.kind) {
    case 'keep':
      return char;
    case 'flipCase':
      return char === char.toLowerCase() ? char.toUpperCase() : char.toLowerCase();
    case 'percent': {
      const hex = char.charCodeAt(0).toString(16).padStart(2, '0');
      return `%${how.upperHex ? hex.toUpperCase() : hex}`;
    }
    case 'slashes':
      return char === '/' ? char.repeat(how.count) : char;
  }
}

/** The template with its `:param`s filled in from `params` ('x' when missing). */
export function canonicalPath(template: string, params: Readonly<Record<string, string>>): string {
  return template.replace(/:([A-Za-z]+)/g, (_, name: string) => params[name] ?? 'x');
}

/** A spelling of the template: parameters as given, literal characters respelt. */
export function spelt(
  template: string,
  params: Readonly<Record<string, string>>,
  { kinds, hows, trailing }: PathSpelling,
): string {
  const how = (i: number): Spelling => {
    const chosen = hows[i] ?? KEEP;
    // The leading '/' is the request-target syntax, not a spelling: node refuses anything
    // else before the app sees it.
    if (i === 0 && chosen.kind === 'percent') return KEEP;
    return kinds.includes(chosen.kind) ? chosen : KEEP;
  };
  const parts = tokens(template);
  if (parts.length > MAX_TOKENS) throw new Error(`${template}: more than ${MAX_TOKENS} tokens`);
  const path = parts
    .map((part, i) => (part.startsWith(':') ? (params[part.slice(1)] ?? 'x') : spell(part, how(i))))
    .join('');
  return path + '/'.repeat(trailing);
}
