/** The path segments every admin route starts with, compared in lower case. */
const ADMIN_SEGMENTS = ['coord', 'v1', 'admin'] as const;

/**
 * Percent-decoding passes: enough for a proxy that decodes once more than express does; a
 * bound, so a path of nested `%25` costs linear time.
 */
const DECODE_PASSES = 3;

const PERCENT = /%([0-9a-f]{2})/gi;

function startsWithAdmin(segments: readonly string[]): boolean {
  return ADMIN_SEGMENTS.every((want, i) => segments[i] === want);
}

/** `..` removes the segment before it, as a client or proxy resolving dot segments would. */
function resolveDots(segments: readonly string[]): string[] {
  const resolved: string[] = [];
  for (const segment of segments) {
    if (segment === '..') resolved.pop();
    else resolved.push(segment);
  }
  return resolved;
}

/**
 * Whether a request path is under `/coord/v1/admin/` however it is spelt (docs/decisions.md#one-spelling-per-path): any
 * letter case, percent-encoded characters, doubled, trailing or back slashes, `.` and `..`
 * segments. The audit decision rests on this and not on route matching, so a spelling that
 * matches no route is still audited (as operation `unknown`). It errs towards yes: auditing a
 * refused request is harmless, missing one is not. Never throws.
 */
export function isAdminPath(path: string): boolean {
  let decoded = path;
  for (let pass = 0; pass < DECODE_PASSES && decoded.includes('%'); pass++) {
    decoded = decoded.replace(PERCENT, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  }
  const segments = decoded
    .toLowerCase()
    .split(/[/\\]/)
    .filter((segment) => segment !== '' && segment !== '.');
  return startsWithAdmin(segments) || startsWithAdmin(resolveDots(segments));
}
