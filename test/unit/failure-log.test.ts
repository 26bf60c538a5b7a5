import { describe, expect, it } from 'vitest';
import { CoordinatorError, GroupMovedError, type ErrorCode } from '../../src/errors.js';
import { logRequestFailure } from '../../src/http/failure-log.js';
import type { Services } from '../../src/http/services.js';
import { ManualClock } from '../../src/machines/clock.js';
import { RateLimitedLog } from '../../src/observability/rate-limited-log.js';
import { captureLogs } from '../support/logs.js';

/** The two parts of the services the failure log writes to, with a real logger. */
function services(level: 'debug' | 'info' | 'warn' = 'debug') {
  const logs = captureLogs(level);
  const clock = new ManualClock(0);
  const used = { logger: logs.logger, rateLimitedLog: new RateLimitedLog(logs.logger, clock) };
  return { logs, clock, services: used as unknown as Services };
}

const request = (n = 0) => ({
  method: 'POST',
  path: '/coord/v1/consumer/streams/orders/groups/billing/heartbeat',
  requestId: `req-${n}`,
  streamPrefix: 'orders',
  consumerGroup: 'billing',
});

/** A refusal as the coordinator raises it: an error with a stack. */
const refusal = (code: ErrorCode) =>
  code === 'GROUP_MOVED'
    ? new GroupMovedError(null)
    : new CoordinatorError(code, `refused: ${code}`);

describe('expected refusals are not errors (docs/operations.md#logs)', () => {
  it.each([
    ['GROUP_MOVED', 503, 'info'],
    ['LEASE_NOT_HELD', 503, 'info'],
    ['OWNER_MOVING', 503, 'info'],
    ['OWNER_UNAVAILABLE', 503, 'info'],
    ['FENCED_WRITE', 503, 'info'],
    ['GROUP_FAILED_CLOSED', 503, 'info'],
    ['LOGIN_THROTTLED', 429, 'info'],
    ['LOGIN_BUSY', 503, 'warn'],
    ['STORE_UNAVAILABLE', 503, 'warn'],
    ['STALE_REVISION', 503, 'warn'],
    ['AUDIT_UNAVAILABLE', 503, 'warn'],
    ['METADATA_CORRUPT', 503, 'warn'],
  ] as const)(
    '%s is logged at %s… as "request refused", no stack, 5 a minute',
    (code, status, level) => {
      const { logs, clock, services: s } = services();
      for (let i = 0; i < 8; i++) logRequestFailure(s, request(i), status, code, refusal(code));
      expect(logs.lines).toHaveLength(5);
      for (const line of logs.lines) {
        expect(line).toMatchObject({
          level,
          message: 'request refused',
          code,
          status,
          streamPrefix: 'orders',
          consumerGroup: 'billing',
          reason: `${refusal(code).message}`,
        });
      }
      expect(logs.text()).not.toMatch(/\sat |stack/);
      clock.advance(60_000);
      logRequestFailure(s, request(9), status, code, refusal(code));
      expect(logs.lines.at(-1)).toMatchObject({ level, suppressed: 3 });
    },
  );

  it('an unexpected 5xx is an error with its stack', () => {
    const { logs, services: s } = services();
    logRequestFailure(s, request(), 500, 'INTERNAL', new Error('boom'));
    expect(logs.lines).toEqual([
      expect.objectContaining({ level: 'error', message: 'request failed', code: 'INTERNAL' }),
    ]);
    expect(String(logs.lines[0]?.error)).toMatch(/boom\n\s+at /);
  });

  it('refusals logged at info cost nothing at a warn log level', () => {
    const { logs, services: s } = services('warn');
    for (let i = 0; i < 3; i++) {
      logRequestFailure(s, request(i), 503, 'GROUP_MOVED', refusal('GROUP_MOVED'));
    }
    logRequestFailure(s, request(), 503, 'STORE_UNAVAILABLE', refusal('STORE_UNAVAILABLE'));
    expect(logs.lines.map((l) => l.code)).toEqual(['STORE_UNAVAILABLE']);
  });
});
