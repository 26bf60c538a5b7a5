import { describe, expect, it } from 'vitest';
import { FULL_PROFILE, runChaos, SHORT_PROFILE } from './chaos.js';

/*
 * `npm test` runs the short profile; `CHAOS_PROFILE=full` the full one (6 consumers,
 * 2 producers, 50,000 messages, two consumers SIGKILLed, a replica killed and restarted, scaled
 * 8 → 16 → 6 and a migration rolled back). `CHAOS_REPLICAS` sets the replica count (default 3).
 */
const profile = process.env['CHAOS_PROFILE'] === 'full' ? FULL_PROFILE : SHORT_PROFILE;
const limitMs = profile.name === 'full' ? 1_200_000 : 180_000;

describe(`chaos run (${profile.name} profile, ${profile.replicas} replica(s))`, () => {
  it(
    'every sent message is processed, no shard is processed by two consumers at once, no invariant breaks',
    async () => {
      const result = await runChaos(profile, (line) => console.log(`[chaos] ${line}`));
      console.log(
        `[chaos] sent ${result.sent}, processed ${result.processed}, duplicates ${result.duplicates}, ` +
          `lost ${result.lost.length}, overlaps ${result.overlaps.length}, invariant violations ` +
          `${result.invariantViolations}, ${(result.durationMs / 1000).toFixed(1)} s`,
      );
      expect(result.sent).toBe(profile.messages);
      expect(result.lost.slice(0, 20)).toEqual([]);
      expect(result.overlaps.slice(0, 5)).toEqual([]);
      expect(result.invariantViolations).toBe(0);
      expect(result.converged).toBe(true);
    },
    limitMs,
  );
});
