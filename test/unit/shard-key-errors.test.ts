import { ReplyError as AnyReplyError } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { isKeyError } from '../../src/client/shard-reader.js';

/** ioredis's class for an error Redis answered (typed `any` there). */
const ReplyError = AnyReplyError as new (message: string) => Error;

// What the consumer keeps a shard for (its key is broken) and what makes it give every shard
// back (the streams Redis cannot be read): a misread turns one bad key into a group-wide
// outage, or an outage into a shard that is never given back.
describe('an error about one shard stream key', () => {
  it('is a reply about the key: WRONGTYPE, NOGROUP', () => {
    expect(
      isKeyError(
        new ReplyError('WRONGTYPE Operation against a key holding the wrong kind of value'),
      ),
    ).toBe(true);
    expect(
      isKeyError(new ReplyError("NOGROUP No such key 'orders:1' or consumer group 'billing'")),
    ).toBe(true);
  });

  it('is not a reply about the server, nor a failure to reach it', () => {
    expect(isKeyError(new ReplyError('LOADING Redis is loading the dataset in memory'))).toBe(
      false,
    );
    expect(
      isKeyError(new ReplyError("READONLY You can't write against a read only replica.")),
    ).toBe(false);
    expect(isKeyError(new Error('connect ECONNREFUSED 127.0.0.1:6390'))).toBe(false);
    expect(isKeyError(new Error('WRONGTYPE but not from Redis'))).toBe(false);
    expect(isKeyError('WRONGTYPE')).toBe(false);
  });
});
