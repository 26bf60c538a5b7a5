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
