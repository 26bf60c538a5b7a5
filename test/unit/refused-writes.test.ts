/**
 * Which Redis errors say that the store answers but refuses writes
 * (docs/operations.md#when-the-store-is-down), and which word names the refusal.
 */
import { describe, expect, it } from 'vitest';
import { writeRefusalOf } from '../../src/store/refused-writes.js';

describe('writeRefusalOf', () => {
  it('names the refusal by the first word of the error', () => {
    expect(writeRefusalOf(new Error("READONLY You can't write against a read only replica."))).toBe(
      'READONLY',
    );
    expect(
      writeRefusalOf(new Error("OOM command not allowed when used memory > 'maxmemory'.")),
    ).toBe('OOM');
    expect(writeRefusalOf(new Error('NOPERM User x has no permissions to access a key'))).toBe(
      'NOPERM',
    );
    expect(writeRefusalOf(new Error('MISCONF Redis is configured to save RDB snapshots'))).toBe(
      'MISCONF',
    );
  });

  it('finds it inside a script error and behind a discarded transaction', () => {
    expect(writeRefusalOf(new Error('ERR Error running script: READONLY You cannot write'))).toBe(
      'READONLY',
    );
    const aborted = Object.assign(new Error('EXECABORT Transaction discarded'), {
      previousErrors: [new Error("READONLY You can't write against a read only replica.")],
    });
    expect(writeRefusalOf(aborted)).toBe('READONLY');
  });

  it('is null for anything else', () => {
    expect(writeRefusalOf(new Error('connect ECONNREFUSED 127.0.0.1:6379'))).toBeNull();
    expect(writeRefusalOf(new Error('Command timed out'))).toBeNull();
    expect(writeRefusalOf(new Error('NOSCRIPT No matching script'))).toBeNull();
    expect(writeRefusalOf(new Error('ERR wrong number of arguments'))).toBeNull();
    expect(writeRefusalOf(null)).toBeNull();
  });
});
