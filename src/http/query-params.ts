import { z } from 'zod';

/*
 * The one reading of query parameters (README.md#api-at-a-glance), used by every route's query
 * schema. The query parser leaves a parameter a string, or an array of strings when it was given
 * more than once: that is refused, naming the parameter, rather than read as one of its values
 * or as NaN. A number is plain decimal digits: no sign, spaces, fraction, exponent or `0x`, which
 * `Number()` would read (`0x10` as 16, `1e2` as 100, ` 5` as 5, an empty value as 0).
 */

/** Most digits a numeric query parameter may have (every one is at most 2^53 - 1). */
const MAX_DIGITS = 16;
const DIGITS = new RegExp(`^[0-9]{1,${MAX_DIGITS}}$`);

/** The message of a parameter given more than once; the default message for anything else. */
const givenOnce = {
  error: (issue: { readonly input?: unknown }) =>
    Array.isArray(issue.input) ? 'given more than once: give it once' : undefined,
};

/** A text parameter of at most `max` characters. */
export function queryText(max: number) {
  return z.string(givenOnce).max(max);
}

/** Text matching `pattern` (a whole value), else `message`. */
export function queryMatching(pattern: RegExp, message: string) {
  return z.string(givenOnce).regex(pattern, message);
}

/** One of `values`. */
export function queryEnum<const T extends readonly [string, ...string[]]>(values: T) {
  return z.enum(values, givenOnce);
}

/** A decimal integer from `min` to `max` (at most 2^53 - 1). */
export function queryInteger(min: number, max: number = Number.MAX_SAFE_INTEGER) {
  return z
    .string(givenOnce)
    .regex(DIGITS, `must be a decimal integer, digits only (${min}..${max})`)
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));
}

/** Decimal integers from `min` to `max` separated by commas (`0,2,3`), at most `maxItems`. */
export function queryIntegerList(min: number, max: number, maxItems: number) {
  const digits = String(max).length;
  return z
    .string(givenOnce)
    .max(maxItems * (digits + 1))
    .regex(
      new RegExp(`^[0-9]{1,${digits}}(,[0-9]{1,${digits}})*$`),
      'must be decimal integers separated by commas, e.g. 0,2,3',
    )
    .transform((text) => text.split(',').map(Number))
    .pipe(z.array(z.number().int().min(min).max(max)).min(1).max(maxItems));
}
