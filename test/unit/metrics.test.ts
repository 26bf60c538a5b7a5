import { describe, expect, it } from 'vitest';
import { Metrics } from '../../src/observability/metrics.js';

/*
 * Heartbeats are handed to prom-client in runs (Metrics.recordHeartbeat): whatever reads the
 * metrics must still see every heartbeat recorded before it read them.
 */

async function read(metrics: Metrics) {
  const text = await metrics.registry.metrics();
  const value = (pattern: RegExp) => Number(pattern.exec(text)?.[1] ?? 0);
  return {
    ok: value(/^coord_heartbeats_total\{outcome="OK"\} (\d+)$/m),
    failed: value(/^coord_heartbeats_total\{outcome="STORE_UNAVAILABLE"\} (\d+)$/m),
    count: value(/^coord_heartbeat_duration_seconds_count (\d+)$/m),
    fast: value(/^coord_heartbeat_duration_seconds_bucket\{le="0.0005"\} (\d+)$/m),
    sum: value(/^coord_heartbeat_duration_seconds_sum (\S+)$/m),
  };
}

describe('heartbeat metrics', () => {
  it('every heartbeat recorded is read, a few or more than one run of them', async () => {
    const metrics = new Metrics();
    metrics.recordHeartbeat('OK', 0.0001);
    metrics.recordHeartbeat('STORE_UNAVAILABLE', 0.2);
    expect(await read(metrics)).toEqual({ ok: 1, failed: 1, count: 2, fast: 1, sum: 0.2001 });
    for (let i = 0; i < 1_500; i++) metrics.recordHeartbeat('OK', 0.002);
    const after = await read(metrics);
    expect(after).toMatchObject({ ok: 1_501, failed: 1, count: 1_502, fast: 1 });
    expect(after.sum).toBeCloseTo(0.2001 + 1_500 * 0.002, 9);
    // Read through the metric object itself as well.
    metrics.recordHeartbeat('OK', 0.0001);
    const counted = await metrics.heartbeats.get();
    expect(counted.values.find((v) => v.labels.outcome === 'OK')?.value).toBe(1_502);
  });
});
