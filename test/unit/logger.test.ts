import { describe, expect, it } from 'vitest';
import { redact } from '../../src/observability/logger.js';

describe('secrets never reach a log line', () => {
  it('redacts secret-looking fields at any depth and keeps the rest', () => {
    const line = redact({
      username: 'ops',
      password: 'hunter22',
      headers: { authorization: 'Bearer eyJ...', 'x-request-id': 'r-1' },
      settings: { security: { 'jwt-secret': 's3cr3t', 'token-ttl': 1 } },
      users: [{ username: 'a', passwordHash: 'scrypt$...' }],
    });
    expect(line).toEqual({
      username: 'ops',
      password: '[redacted]',
      headers: { authorization: '[redacted]', 'x-request-id': 'r-1' },
      settings: { security: { 'jwt-secret': '[redacted]', 'token-ttl': '[redacted]' } },
      users: [{ username: 'a', passwordHash: '[redacted]' }],
    });
    expect(JSON.stringify(line)).not.toMatch(/hunter22|eyJ|s3cr3t|scrypt/);
  });
});
