import { describe, expect, it } from 'vitest';
import { urlOn } from '../../src/client/url-on.js';

describe('urlOn: a path on a coordinator reached at a base URL', () => {
  it.each([
    ['a base URL without a path', 'http://h:8080', 'http://h:8080/coord/v1/x?a=1'],
    ['a trailing slash', 'http://h:8080/', 'http://h:8080/coord/v1/x?a=1'],
    ["a gateway's prefix", 'https://gw/coordinator', 'https://gw/coordinator/coord/v1/x?a=1'],
    ['a prefix with a trailing slash', 'https://gw/a/b/', 'https://gw/a/b/coord/v1/x?a=1'],
  ])('%s', (_what, base, expected) => {
    expect(urlOn(base, '/coord/v1/x?a=1').href).toBe(expected);
  });
});
