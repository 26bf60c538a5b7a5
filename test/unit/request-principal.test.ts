/**
 * A request's principal comes from its bearer token (`principalOfRequest`), remembered by the
 * Authorization header's text while the token is valid: the header is parsed and the token
 * verified once, and a remembered token that expires is refused like any expired token.
 */
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { principalOfRequest } from '../../src/http/auth/passport.js';
import { TokenService } from '../../src/http/auth/tokens.js';
import { ManualClock } from '../../src/machines/clock.js';

const request = (authorization: string | undefined) =>
  ({
    headers: authorization === undefined ? {} : { authorization },
    rawHeaders: authorization === undefined ? [] : ['Authorization', authorization],
  }) as unknown as IncomingMessage;

describe('the principal of a request', () => {
  it('is remembered by the header while its token is valid, and refused once it expired', () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const tokens = new TokenService('x'.repeat(40), 60_000, clock);
    const { accessToken } = tokens.sign({ name: 'svc', roles: ['CONSUMER'] });
    const header = `Bearer ${accessToken}`;
    expect(principalOfRequest(tokens, request(header))).toEqual({
      name: 'svc',
      roles: ['CONSUMER'],
    });
    expect(tokens.remembered(header)).toEqual({ name: 'svc', roles: ['CONSUMER'] });
    // The same header again, as a new string: the remembered principal.
    expect(principalOfRequest(tokens, request(`Bearer ${accessToken}`))).toEqual({
      name: 'svc',
      roles: ['CONSUMER'],
    });
    clock.advance(60_000);
    expect(() => principalOfRequest(tokens, request(header))).toThrow(
      expect.objectContaining({ code: 'TOKEN_EXPIRED' }),
    );
    // Forgotten once refused, and refused again when verified anew.
    expect(tokens.remembered(header)).toBeUndefined();
    expect(() => principalOfRequest(tokens, request(header))).toThrow(
      expect.objectContaining({ code: 'TOKEN_EXPIRED' }),
    );
  });

  it('does not take a header it remembers for another one', () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const tokens = new TokenService('x'.repeat(40), 60_000, clock);
    const a = tokens.sign({ name: 'a', roles: ['CONSUMER'] }).accessToken;
    const b = tokens.sign({ name: 'b', roles: ['READ'] }).accessToken;
    expect(principalOfRequest(tokens, request(`Bearer ${a}`)).name).toBe('a');
    expect(principalOfRequest(tokens, request(`Bearer ${b}`)).name).toBe('b');
    expect(principalOfRequest(tokens, request(`Bearer ${a}`)).name).toBe('a');
    expect(() => principalOfRequest(tokens, request(`Bearer ${a}x`))).toThrow(
      expect.objectContaining({ code: 'INVALID_TOKEN' }),
    );
    expect(() => principalOfRequest(tokens, request(undefined))).toThrow(
      expect.objectContaining({ code: 'UNAUTHENTICATED' }),
    );
  });
});
