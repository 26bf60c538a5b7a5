import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/machines/clock.js';
import { createLogger } from '../../src/observability/logger.js';
import { RateLimitedLog } from '../../src/observability/rate-limited-log.js';

function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>);
      done();
    },
  });
  return { logger: createLogger({ level: 'debug', format: 'json', stream }), lines };
}

describe('expected refusals are logged rate-limited', () => {
  it('writes at most linesPerWindow lines per key and window, then says how many it left out', () => {
    const { logger, lines } = capture();
    const clock = new ManualClock(0);
    const log = new RateLimitedLog(logger, clock, { linesPerWindow: 2, windowMs: 1_000 });
    for (let i = 0; i < 10; i++) log.warn('FENCED_WRITE|a|g', 'request refused', { i });
    expect(lines.map((l) => l.i)).toEqual([0, 1]);
    clock.advance(1_000);
    log.warn('FENCED_WRITE|a|g', 'request refused', { i: 10 });
    expect(lines[2]).toMatchObject({ level: 'warn', i: 10, suppressed: 8 });
    log.warn('FENCED_WRITE|a|g', 'request refused', { i: 11 });
    expect(lines[3]).not.toHaveProperty('suppressed');
  });

  it('limits each key on its own', () => {
    const { logger, lines } = capture();
    const log = new RateLimitedLog(logger, new ManualClock(0), { linesPerWindow: 1 });
    for (let i = 0; i < 5; i++) {
      log.warn('GROUP_FAILED_CLOSED|a|g', 'request refused', { group: 'a' });
      log.warn('GROUP_FAILED_CLOSED|b|g', 'request refused', { group: 'b' });
    }
    expect(lines.map((l) => l.group)).toEqual(['a', 'b']);
  });

  it('remembers a bounded number of keys: past maxKeys the oldest is forgotten', () => {
    const { logger, lines } = capture();
    const log = new RateLimitedLog(logger, new ManualClock(0), { linesPerWindow: 1, maxKeys: 3 });
    for (const key of ['k0', 'k1', 'k2']) log.warn(key, 'request refused', { key });
    log.warn('k0', 'request refused', { key: 'k0' });
    expect(lines).toHaveLength(3);
    log.warn('k3', 'request refused', { key: 'k3' });
    log.warn('k0', 'request refused', { key: 'k0' });
    expect(lines.map((l) => l.key)).toEqual(['k0', 'k1', 'k2', 'k3', 'k0']);
  });
});
