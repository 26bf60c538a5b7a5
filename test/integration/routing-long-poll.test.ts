import { describe, expect, it } from 'vitest';
import { CHANGE, useCoordinator, type TestCoordinator } from '../support/coordinator.js';

/** Far longer than the answer is allowed to take, so a reply at the end of the wait shows. */
const WAIT_MS = 30_000;
/** What "at once" allows on a busy machine. */
const PROMPT_MS = 5_000;

describe('a routing long poll ends when the group leaves the replica', () => {
  let c: TestCoordinator;
  useCoordinator({ store: 'memory' }, (coordinator) => (c = coordinator));

  it('deleted while a producer waits: 404 GROUP_NOT_FOUND at once, not at the end of waitMs', async () => {
    const path = '/coord/v1/routing/streams/lp-gone/groups/g';
    const created = await c.call('PUT', '/coord/v1/admin/streams/lp-gone/groups/g', {
      user: 'writer',
      body: { shardCount: 2, ...CHANGE },
    });
    expect(created.status).toBe(201);
    const first = await c.call('GET', path, { user: 'producer' });
    const { metadataVersion } = (await first.json()) as { metadataVersion: number };

    const started = performance.now();
    const polled = fetch(`${c.url}${path}?afterVersion=${metadataVersion}&waitMs=${WAIT_MS}`, {
      headers: { authorization: `Bearer ${c.token('producer')}` },
      signal: AbortSignal.timeout(WAIT_MS + 5_000),
    });
    // The poll is held before the group is deleted.
    await expect.poll(() => openLongPolls(c)).toBe(1);
    const deleted = await c.call('DELETE', '/coord/v1/admin/streams/lp-gone/groups/g', {
      user: 'writer',
      body: CHANGE,
    });
    expect(deleted.status).toBeLessThan(300);

    const res = await polled;
    const took = performance.now() - started;
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('GROUP_NOT_FOUND');
    expect(took).toBeLessThan(PROMPT_MS);
  });

  it('abandoned by its client: no longer held (nor counted) until the end of its wait', async () => {
    const path = '/coord/v1/routing/streams/lp-left/groups/g';
    const created = await c.call('PUT', '/coord/v1/admin/streams/lp-left/groups/g', {
      user: 'writer',
      body: { shardCount: 2, ...CHANGE },
    });
    expect(created.status).toBe(201);
    const first = await c.call('GET', path, { user: 'producer' });
    const { metadataVersion } = (await first.json()) as { metadataVersion: number };

    const abort = new AbortController();
    const polled = fetch(`${c.url}${path}?afterVersion=${metadataVersion}&waitMs=${WAIT_MS}`, {
      headers: { authorization: `Bearer ${c.token('producer')}` },
      signal: abort.signal,
    }).catch(() => null);
    await expect.poll(() => openLongPolls(c)).toBe(1);
    abort.abort();
    await polled;
    await expect.poll(() => openLongPolls(c), { timeout: PROMPT_MS }).toBe(0);
  });
});

async function openLongPolls(c: TestCoordinator): Promise<number> {
  const metric = await c.services.metrics.routingLongPolls.get();
  return metric.values[0]?.value ?? 0;
}
