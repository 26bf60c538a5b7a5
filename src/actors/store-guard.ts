import { CoordinatorError, StoreUnavailableError } from '../errors.js';
import type { Metrics } from '../observability/metrics.js';

/** Runs one store call; see {@link storeGuard}. */
export type StoreGuard = <T>(call: () => Promise<T>) => Promise<T>;

/** Store calls: typed errors pass through, anything else is a store outage (counted). */
export function storeGuard(metrics: Pick<Metrics, 'storeErrors'>): StoreGuard {
  return async (call) => {
    try {
      return await call();
    } catch (error) {
      if (error instanceof CoordinatorError && error.code !== 'STORE_UNAVAILABLE') throw error;
      metrics.storeErrors.inc();
      throw error instanceof CoordinatorError
        ? error
        : new StoreUnavailableError('the store is unavailable', { cause: error });
    }
  };
}
