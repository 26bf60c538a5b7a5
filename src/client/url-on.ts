/**
 * The URL of `path` (absolute, `/coord/v1/…`, with its query) on a coordinator reached at
 * `base`, keeping the base's own path: a gateway that routes by prefix
 * (`https://gateway/coordinator`) gets `https://gateway/coordinator/coord/v1/…`, where
 * `new URL(path, base)` would drop the prefix.
 */
export function urlOn(base: string, path: string): URL {
  const root = new URL(base);
  const prefix = root.pathname.replace(/\/+$/, '');
  return new URL(`${prefix}${path}`, root.origin);
}
