/** Settings both examples read from the environment, and how they stop. */
import { CoordinatorApiError, CoordinatorClient } from 'stream-coordinator/client';

export const streamPrefix = process.env['STREAM_PREFIX'] ?? 'orders';
export const consumerGroup = process.env['CONSUMER_GROUP'] ?? 'billing';
export const redisUrl = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';

/**
 * A client from COORD_URL and either COORD_TOKEN or COORD_USERNAME / COORD_PASSWORD; exits
 * with a message when neither is set.
 */
export function coordinatorClient(): CoordinatorClient {
  const baseUrl = (process.env['COORD_URL'] ?? 'http://127.0.0.1:8080').split(',');
  const token = process.env['COORD_TOKEN'];
  if (token) return new CoordinatorClient({ baseUrl, token });
  const password = process.env['COORD_PASSWORD'];
  if (!password) fail('settings', 'set COORD_TOKEN, or COORD_USERNAME and COORD_PASSWORD');
  return new CoordinatorClient({
    baseUrl,
    username: process.env['COORD_USERNAME'] ?? 'admin',
    password,
  });
}

/** An error as one line: `403 GROUP_NOT_PERMITTED: ...` for the coordinator's answers. */
export function describeError(error: unknown): string {
  if (error instanceof CoordinatorApiError) {
    return `${error.status} ${error.code}: ${error.message}`;
  }
  const text = error instanceof Error ? error.message : String(error);
  return text.split('\n')[0] ?? text;
}

/** Prints what went wrong in one line and exits with code 1. */
export function fail(what: string, error: unknown): never {
  console.error(`${what}: ${describeError(error)}`);
  process.exit(1);
}

/**
 * On the first SIGINT or SIGTERM, runs `close` (which ends within its own time bound) and
 * exits with code 0; a second signal exits at once with code 1. `stopping()` says whether a
 * signal came, so the main flow can tell an error caused by closing from a real one.
 */
export function closeOnSignals(close: () => Promise<void>): { stopping(): boolean } {
  let stopping = false;
  const stop = () => {
    if (stopping) process.exit(1);
    stopping = true;
    void close().finally(() => process.exit(0));
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  return { stopping: () => stopping };
}
