import { describe, expect, it } from 'vitest';
import { CoordinatorError } from '../../src/errors.js';
import { statusOf } from '../../src/http/errors.js';
import { compareStreamIds, isStreamId, validateResetTo } from '../../src/streams/positions.js';

const NOW = 1_700_000_000_000;
const MAX = '18446744073709551615';

/** The code `work` throws, failing when it throws something else or nothing. */
function codeOf(work: () => unknown): string {
  try {
    work();
  } catch (error) {
    expect(error).toBeInstanceOf(CoordinatorError);
    return (error as CoordinatorError).code;
  }
  throw new Error('expected a CoordinatorError, nothing was thrown');
}

describe('isStreamId', () => {
  it.each(['0-0', '0-1', '1-0', '1526919030474-55', `${MAX}-${MAX}`, `${MAX}-0`])(
    'accepts %s',
    (id) => expect(isStreamId(id)).toBe(true),
  );
  it.each([
    ['the time part alone', '1526919030474'],
    ['an empty string', ''],
    ['$', '$'],
    ['the special ids of XRANGE', '-'],
    ['an exclusive bound', '(1-0'],
    ['a negative part', '-1-0'],
    ['a plus sign', '+1-0'],
    ['leading zeros', '01-0'],
    ['leading zeros in the sequence', '1-00'],
    ['a part beyond 64 bits', '18446744073709551616-0'],
    ['a sequence beyond 64 bits', `1-${MAX}0`],
    ['spaces', ' 1-0'],
    ['a trailing newline', '1-0\n'],
    ['three parts', '1-0-0'],
    ['a wildcard sequence', '1-*'],
    ['hexadecimal', '0x1-0'],
    ['a fraction', '1.5-0'],
  ])('refuses %s', (_what, id) => expect(isStreamId(id)).toBe(false));
});

describe('compareStreamIds', () => {
  it('orders by time, then by sequence, as numbers', () => {
    expect(compareStreamIds('1-0', '1-0')).toBe(0);
    expect(compareStreamIds('2-0', '10-0')).toBe(-1);
    expect(compareStreamIds('10-0', '2-0')).toBe(1);
    expect(compareStreamIds('5-9', '5-10')).toBe(-1);
    expect(compareStreamIds('6-0', '5-99')).toBe(1);
  });
  it('is exact beyond 2^53', () => {
    expect(compareStreamIds(`${MAX}-0`, '18446744073709551614-0')).toBe(1);
    expect(compareStreamIds(`1-${MAX}`, '1-18446744073709551614')).toBe(1);
    expect(compareStreamIds('9007199254740993-0', '9007199254740992-0')).toBe(1);
  });
  it('reads a time part alone as sequence 0', () => {
    expect(compareStreamIds('7', '7-0')).toBe(0);
    expect(compareStreamIds('7', '7-1')).toBe(-1);
  });
});

describe('validateResetTo', () => {
  it('passes earliest and latest', () => {
    expect(validateResetTo('earliest', 4, NOW)).toBe('earliest');
    expect(validateResetTo('latest', 4, NOW)).toBe('latest');
  });

  it('passes a timestamp up to now, as a fresh value', () => {
    const given = { timestamp: NOW };
    const valid = validateResetTo(given, 4, NOW);
    expect(valid).toEqual({ timestamp: NOW });
    expect(valid).not.toBe(given);
    expect(validateResetTo({ timestamp: 0 }, 4, NOW)).toEqual({ timestamp: 0 });
  });

  it('refuses a timestamp after now with TIMESTAMP_IN_FUTURE (400)', () => {
    expect(codeOf(() => validateResetTo({ timestamp: NOW + 1 }, 4, NOW))).toBe(
      'TIMESTAMP_IN_FUTURE',
    );
    expect(statusOf('TIMESTAMP_IN_FUTURE')).toBe(400);
  });

  it.each([
    ['a negative timestamp', { timestamp: -1 }],
    ['a fractional timestamp', { timestamp: 1.5 }],
    ['a timestamp as a string', { timestamp: String(NOW) }],
    ['a timestamp beyond safe integers', { timestamp: 2 ** 53 }],
    ['NaN', { timestamp: Number.NaN }],
  ])('refuses %s with VALIDATION_FAILED', (_what, to) => {
    expect(codeOf(() => validateResetTo(to, 4, NOW))).toBe('VALIDATION_FAILED');
  });

  it('passes ids of shards in range, copied', () => {
    const ids = { '0': '0-0', '3': `${NOW}-7` };
    const valid = validateResetTo({ ids }, 4, NOW);
    expect(valid).toEqual({ ids });
    expect((valid as { ids: unknown }).ids).not.toBe(ids);
  });

  it('refuses a shard at or above the count with SHARD_OUT_OF_RANGE (400)', () => {
    expect(codeOf(() => validateResetTo({ ids: { '4': '1-0' } }, 4, NOW))).toBe(
      'SHARD_OUT_OF_RANGE',
    );
    expect(codeOf(() => validateResetTo({ ids: { '0': '1-0', '99': '1-0' } }, 4, NOW))).toBe(
      'SHARD_OUT_OF_RANGE',
    );
    expect(statusOf('SHARD_OUT_OF_RANGE')).toBe(400);
  });

  it.each([
    ['a time part alone', '5'],
    ['$', '$'],
    ['a number', 5],
    ['null', null],
    ['leading zeros', '007-0'],
    ['a part beyond 64 bits', '1-18446744073709551616'],
  ])('refuses %s as an id with INVALID_STREAM_ID (400)', (_what, id) => {
    expect(codeOf(() => validateResetTo({ ids: { '1': id } }, 4, NOW))).toBe('INVALID_STREAM_ID');
    expect(statusOf('INVALID_STREAM_ID')).toBe(400);
  });

  it('refuses an id whose time part is after now with INVALID_STREAM_ID', () => {
    expect(validateResetTo({ ids: { '1': `${NOW}-${MAX}` } }, 4, NOW)).toBeTruthy();
    expect(codeOf(() => validateResetTo({ ids: { '1': `${NOW + 1}-0` } }, 4, NOW))).toBe(
      'INVALID_STREAM_ID',
    );
    expect(codeOf(() => validateResetTo({ ids: { '1': `${MAX}-0` } }, 4, NOW))).toBe(
      'INVALID_STREAM_ID',
    );
  });

  it.each([
    ['another word', 'newest'],
    ['$', '$'],
    ['a number', 0],
    ['null', null],
    ['undefined', undefined],
    ['an array', ['earliest']],
    ['an empty object', {}],
    ['two fields', { timestamp: 1, ids: { '0': '1-0' } }],
    ['an unknown field', { offset: 3 }],
    ['ids as an array', { ids: ['1-0'] }],
    ['ids as null', { ids: null }],
    ['ids naming no shard', { ids: {} }],
    ['a shard key that is no number', { ids: { first: '1-0' } }],
    ['a negative shard key', { ids: { '-1': '1-0' } }],
    ['a shard key with leading zeros', { ids: { '01': '1-0' } }],
    ['a fractional shard key', { ids: { '1.5': '1-0' } }],
  ])('refuses %s with VALIDATION_FAILED', (_what, to) => {
    expect(codeOf(() => validateResetTo(to, 4, NOW))).toBe('VALIDATION_FAILED');
  });
});
