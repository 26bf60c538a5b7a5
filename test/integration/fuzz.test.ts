import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHANGE, startTestCoordinator, type TestCoordinator } from '../support/coordinator.js';

/** Property: whatever the input, the API answers below 500 with a coded error body. */
describe('fuzzing the API with fast-check', () => {
  let c: TestCoordinator;
  beforeAll(async () => {
    c = await startTestCoordinator({ store: 'memory' });
    await c.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: 'fz', consumerGroup: 'g', shardCount: 2, ...CHANGE },
    });
  });
  afterAll(async () => c?.close());

  async function check(res: Response): Promise<void> {
    expect(res.status).toBeLessThan(500);
    expect(res.headers.get('x-request-id')).toBeTruthy();
    if (res.status >= 400) {
      const body = (await res.json()) as { error?: { code?: unknown; message?: unknown } };
      expect(body.error?.code).toMatch(/^[A-Z_]+$/);
      expect(typeof body.error?.message).toBe('string');
      expect(JSON.stringify(body)).not.toMatch(/\n\s+at /);
    } else {
      await res.arrayBuffer();
    }
  }

  const jsonish = fc.oneof(
    fc.jsonValue(),
    fc.record({
      username: fc.oneof(fc.string(), fc.integer(), fc.constant(null)),
      password: fc.oneof(fc.string(), fc.integer(), fc.array(fc.string())),
    }),
    fc.record(
      {
        streamPrefix: fc.oneof(
          fc.string(),
          fc.constantFrom('ok', '', ' ', '../x', 'a'.repeat(300)),
        ),
        consumerGroup: fc.oneof(fc.string(), fc.constantFrom('g', 'a:b', '\u0000')),
        shardCount: fc.oneof(fc.integer(), fc.double(), fc.string(), fc.constant(null)),
        requestedBy: fc.oneof(fc.string(), fc.constant(undefined)),
        reason: fc.oneof(fc.string(), fc.integer()),
      },
      { requiredKeys: [] },
    ),
  );

  it('login bodies never cause a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          jsonish.map((v) => JSON.stringify(v)),
          fc.string(),
        ),
        async (raw) => {
          await check(
            await fetch(`${c.url}/coord/v1/auth/login`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: raw,
            }),
          );
        },
      ),
      { numRuns: 150 },
    );
  });

  it('admin bodies, headers and path names never cause a 5xx', async () => {
    const segment = fc.oneof(
      fc.string({ maxLength: 40 }),
      fc.constantFrom('fz', 'g', '%', '%2F', '..', 'a%00b', '%E0%A4%A'),
    );
    const headers = fc.record(
      {
        'content-type': fc.constantFrom(
          'application/json',
          'text/plain',
          'application/x-www-form-urlencoded',
          'application/json; charset=latin1',
          '',
        ),
        'x-request-id': fc.string({ maxLength: 200 }).filter((s) => /^[\x20-\x7e]*$/.test(s)),
        authorization: fc.oneof(
          fc.constant(`Bearer ${c?.token('writer') ?? ''}`),
          fc.string().filter((s) => /^[\x20-\x7e]*$/.test(s)),
          fc.constant('Bearer '),
        ),
      },
      { requiredKeys: [] },
    );
    const op = fc.constantFrom(
      '',
      '/freeze',
      '/unfreeze',
      '/producers/pause',
      '/producers/resume',
      '/nope',
    );
    const method = fc.constantFrom('POST', 'PUT', 'DELETE', 'GET', 'PATCH');
    await fc.assert(
      fc.asyncProperty(
        method,
        segment,
        segment,
        op,
        headers,
        jsonish,
        async (m, sp, cg, suffix, h, body) => {
          const path = `/coord/v1/admin/streams/${encodeURIComponent(sp)}/groups/${cg}${suffix}`;
          const safePath = /[\s#?]/.test(path) ? '/coord/v1/admin/groups' : path;
          const res = await fetch(`${c.url}${safePath}`, {
            method: m,
            headers: { authorization: `Bearer ${c.token('writer')}`, ...h },
            ...(m === 'GET' ? {} : { body: JSON.stringify(body) }),
          });
          await check(res);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('create bodies with a valid token never cause a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(jsonish, async (body) => {
        await check(
          await c.call('POST', '/coord/v1/admin/groups', {
            user: 'writer',
            body: JSON.stringify(body),
          }),
        );
      }),
      { numRuns: 150 },
    );
  });
});
