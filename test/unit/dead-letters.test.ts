/**
 * The pure parts of dead letters (docs/protocol.md#dead-letters): the stream's name, reading a
 * dead letter back, where a replay sends it, the error kept, and the consumer's retry policy.
 */
import { describe, expect, it } from 'vitest';
import { chosenShards } from '../../src/actors/dead-letters.js';
import { retryPolicy } from '../../src/client/consumer.js';
import { CoordinatorError } from '../../src/errors.js';
import { shardForKey } from '../../src/machines/routing.js';
import {
  deadLetterStream,
  errorText,
  MAX_ERROR_CHARS,
  parseDeadLetter,
  REPLAY_FOR_FIELD,
  replayShard,
  replayTarget,
} from '../../src/streams/dead-letters.js';

describe('dead letters', () => {
  it("live in <streamPrefix>:<shard>:dead:<group>, older SDKs' in the shared <streamPrefix>:<shard>:dead", () => {
    expect(deadLetterStream('orders:eu:3', 'billing')).toBe('orders:eu:3:dead:billing');
    expect(deadLetterStream('orders:eu:3', null)).toBe('orders:eu:3:dead');
  });

  it('a replay marked for one group is skipped by the others and handed to it without the mark', () => {
    const flat = [REPLAY_FOR_FIELD, 'billing', 'key', 'k', 'n', '1'];
    expect(replayTarget(flat, 'emails')).toEqual({ skip: true, for: 'billing' });
    expect(replayTarget(flat, 'billing')).toEqual({ skip: false, fields: ['key', 'k', 'n', '1'] });
    expect(replayTarget(['key', 'k'], 'emails')).toEqual({ skip: false, fields: ['key', 'k'] });
    // A dead letter of a replayed message: its mark is not one of the message's fields.
    const again = ['originalId', '2-0', 'deliveries', '3', 'error', '', ...flat];
    expect(parseDeadLetter(0, '9-9', again, 'key')?.fields).toEqual(['key', 'k', 'n', '1']);
  });

  it('read back: the three fields first, then the entry, its key found by the key field', () => {
    const flat = ['originalId', '1-0', 'deliveries', '5', 'error', 'boom', 'id', '7', 'key', 'k'];
    expect(parseDeadLetter(2, '9-1', flat, 'key')).toEqual({
      shard: 2,
      shared: false,
      id: '9-1',
      originalId: '1-0',
      deliveries: 5,
      error: 'boom',
      key: 'k',
      fields: ['id', '7', 'key', 'k'],
    });
    expect(parseDeadLetter(2, '9-1', flat, 'id')?.key).toBe('7');
    expect(parseDeadLetter(2, '9-1', flat, 'other')?.key).toBeNull();
  });

  it('an entry that is not a dead letter reads as null', () => {
    expect(parseDeadLetter(0, '1-0', ['key', 'k'], 'key')).toBeNull();
    expect(
      parseDeadLetter(0, '1-0', ['originalId', '1-0', 'error', 'x', 'deliveries', '1'], 'key'),
    ).toBeNull();
    expect(
      parseDeadLetter(0, '1-0', ['originalId', '1-0', 'deliveries', 'two', 'error', ''], 'key'),
    ).toBeNull();
  });

  it('a replay sends a keyed entry where its key routes now, a keyless one to its own shard', () => {
    for (const key of ['a', 'b', 'order-17', 'ü']) {
      expect(replayShard({ shard: 0, key }, 4)).toBe(shardForKey(key, 4));
      expect(replayShard({ shard: 0, key }, 7)).toBe(shardForKey(key, 7));
    }
    expect(replayShard({ shard: 2, key: null }, 4)).toBe(2);
    // Its own shard was removed by a scale-in: the shard it folds onto.
    expect(replayShard({ shard: 5, key: null }, 4)).toBe(1);
  });

  it('keep the first line of the error, clipped', () => {
    expect(errorText(new Error('first\nsecond'))).toBe('first');
    expect(errorText('plain')).toBe('plain');
    expect(errorText(new TypeError(''))).toBe('TypeError');
    const long = errorText(new Error('x'.repeat(5_000)));
    expect(long).toHaveLength(MAX_ERROR_CHARS);
    expect(long.endsWith('…')).toBe(true);
  });
});

describe("the consumer's retry policy", () => {
  it('is off unless maxDeliveries or retryBackoffMs is set', () => {
    expect(retryPolicy(undefined, undefined)).toBeNull();
    expect(retryPolicy(3, undefined)).toEqual({ backoffMs: 1_000, maxDeliveries: 3 });
    expect(retryPolicy(3, 50)).toEqual({ backoffMs: 50, maxDeliveries: 3 });
    expect(retryPolicy(undefined, 50)).toEqual({ backoffMs: 50, maxDeliveries: null });
  });

  it('refuses values that make no sense', () => {
    for (const bad of [0, -1, 1.5, Number.NaN])
      expect(() => retryPolicy(bad, undefined), String(bad)).toThrow(RangeError);
    expect(() => retryPolicy(3, -1)).toThrow(RangeError);
  });
});

describe('the shards a dead-letter request chooses', () => {
  it('every shard of the group when it names none; those it names, ascending, once each', () => {
    expect(chosenShards([2, 0, 1], undefined, 'body.shards')).toEqual([0, 1, 2]);
    expect(chosenShards([0, 1, 2, 3], [3, 1, 3], 'body.shards')).toEqual([1, 3]);
  });

  it('a shard the group does not have is a 400 naming it and the field', () => {
    let error: unknown;
    try {
      chosenShards([0, 1], [1, 4, 9], 'query.shards');
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(CoordinatorError);
    const { code, message, details } = error as CoordinatorError;
    expect(code).toBe('VALIDATION_FAILED');
    expect(message).toBe('not a shard of the group: 4, 9 (its shards: 0, 1)');
    expect(details).toEqual({ issues: [{ field: 'query.shards', message }] });
  });
});
