import { describe, expect, it } from 'vitest';
import { coordctl } from '../support/cli.js';
import { freePort } from '../support/redis-server.js';

describe('coordctl says which URL it could not reach and why', () => {
  it('a coordinator that does not answer: names its URL and ECONNREFUSED, no stack', async () => {
    const port = await freePort();
    const { code, stderr } = await coordctl([
      'scale',
      'orders:billing',
      '4',
      '--requested-by',
      'test',
      '--reason',
      'unreachable',
      '--coordinator',
      `http://127.0.0.1:${port}`,
      '--token',
      'not-used',
    ]);
    expect(code).toBe(1);
    expect(stderr).toMatch(
      new RegExp(
        `^coordctl: cannot reach the coordinator at http://127\\.0\\.0\\.1:${port}/\\S*: ECONNREFUSED\\n  what to do: check that the coordinator runs and that --coordinator \\(or COORDCTL_URL\\) points at it\\n$`,
      ),
    );
  });

  it('a store that does not answer (backup): names host:port and ECONNREFUSED', async () => {
    const port = await freePort();
    const { code, stderr } = await coordctl(['backup', '--url', `redis://127.0.0.1:${port}`]);
    expect(code).toBe(1);
    expect(stderr).toContain(`Redis at 127.0.0.1:${port} unreachable (ECONNREFUSED)`);
    expect(stderr).not.toMatch(/maxRetriesPerRequest|\n\s+at /);
  });
});
