/**
 * Where a Redis connection goes, as log lines and errors name it: `host:port` of the standalone
 * URL, or of each Cluster startup node joined by commas; never the credentials.
 */
export function redisTarget(addresses: {
  readonly url?: string | undefined;
  readonly clusterNodes?: readonly string[] | undefined;
}): string {
  return addresses.clusterNodes?.length
    ? addresses.clusterNodes.map(hostAndPort).join(',')
    : hostAndPort(addresses.url ?? 'redis://127.0.0.1:6379');
}

/** `redis://user:pw@host:port/0` → `host:port`: never the credentials. */
function hostAndPort(address: string): string {
  try {
    const url = new URL(address.includes('://') ? address : `redis://${address}`);
    return `${url.hostname}:${url.port || '6379'}`;
  } catch {
    return 'the configured address';
  }
}

/**
 * The credentials the Redis Cluster seeds carry (`redis://user:password@host:port`), for every
 * node of the cluster: ioredis uses a seed's own URL only for that seed, and connects to the
 * masters it finds through CLUSTER SLOTS (the others, a seed's name resolved to an address, a
 * promoted replica) with the client's options alone, which Redis then answers NOAUTH. The first
 * seed that names a password gives them; none when no seed does.
 */
export function seedCredentials(seeds: readonly string[] | undefined): {
  username?: string;
  password?: string;
} {
  for (const seed of seeds ?? []) {
    let url: URL;
    try {
      url = new URL(seed.includes('://') ? seed : `redis://${seed}`);
    } catch {
      continue;
    }
    if (url.password === '') continue;
    const password = decodeURIComponent(url.password);
    return url.username === ''
      ? { password }
      : { username: decodeURIComponent(url.username), password };
  }
  return {};
}
