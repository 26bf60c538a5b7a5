/**
 * What the chaos run's child processes (consumer-process.ts, producer-process.ts) share: their
 * settings, read from the environment the run gives them (`common` in chaos.ts).
 */
import { CoordinatorClient } from '../../src/client/index.js';

/** A setting the chaos run passes; a missing one is a bug of the run, so it throws. */
export const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is required`);
  return value;
};

/** The coordinators, Redis and group every child of the run works with. */
export function chaosGroup() {
  return {
    client: new CoordinatorClient({
      baseUrl: env('CHAOS_COORDINATORS').split(','),
      token: env('CHAOS_TOKEN'),
    }),
    redis: env('CHAOS_REDIS'),
    streamPrefix: env('CHAOS_STREAM'),
    consumerGroup: env('CHAOS_GROUP'),
  };
}
