import { describe, expect, it } from 'vitest';
import { CHANGE, useCoordinator, type TestCoordinator } from '../support/coordinator.js';

/* Query parameters as a client sends them over HTTP (src/http/query-params.ts). */

interface ErrorAnswer {
  error: { code: string; message: string };
}

describe('query parameters over HTTP', () => {
  let c: TestCoordinator;
  useCoordinator({ store: 'memory' }, (coordinator) => {
    c = coordinator;
  });

  async function refused(path: string): Promise<string> {
    const res = await c.call('GET', path, { user: 'admin' });
    const body = (await res.json()) as ErrorAnswer;
    expect(res.status, path).toBe(400);
    expect(body.error.code).toBe('VALIDATION_FAILED');
    return body.error.message;
  }

  it('refuses a parameter given twice, naming it', async () => {
    expect(await refused('/coord/v1/monitoring/groups?limit=1&limit=2')).toBe(
      'query.limit: given more than once: give it once',
    );
    expect(await refused('/coord/v1/monitoring/audit?streamPrefix=a&streamPrefix=b')).toBe(
      'query.streamPrefix: given more than once: give it once',
    );
  });

  it('reads numbers as plain decimal digits only', async () => {
    const create = await c.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: 'q', consumerGroup: 'g', shardCount: 1, ...CHANGE },
    });
    expect(create.status).toBe(201);
    for (const limit of ['0x10', '1e2', '%205', '', '+5', '5.0']) {
      expect(await refused(`/coord/v1/monitoring/groups?limit=${limit}`)).toMatch(
        /^query\.limit: /,
      );
    }
    // An empty afterVersion was read as 0: a long poll nobody asked for.
    expect(await refused('/coord/v1/routing/streams/q/groups/g?afterVersion=&waitMs=10')).toMatch(
      /^query\.afterVersion: /,
    );
    const res = await c.call('GET', '/coord/v1/monitoring/groups?limit=010', { user: 'reader' });
    expect(res.status).toBe(200);
  });
});
