import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CHANGE,
  PASSWORD,
  startTestCoordinator,
  type TestCoordinator,
} from '../support/coordinator.js';
import { startRedisServer, waitFor, type RedisServerHandle } from '../support/redis-server.js';
import { TcpProxy } from '../support/tcp-proxy.js';

/** Debian's Chromium (`apt-get install chromium`), as in ui.test.ts. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/**
 * The group page's live parts when the connection to the coordinator is cut: the browser talks
 * to the coordinator through a TCP proxy, which drops every open connection at once (as a load
 * balancer or a replica going away does); new connections pass.
 */
describe('the web UI when its live stream is cut', () => {
  let redis: RedisServerHandle;
  let c: TestCoordinator;
  let proxy: TcpProxy;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    expect(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install chromium`).toBe(true);
    redis = await startRedisServer();
    c = await startTestCoordinator({ store: 'redis', redisUrl: redis.url });
    const res = await c.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: 'orders', consumerGroup: 'billing', shardCount: 2, ...CHANGE },
    });
    expect(res.status).toBe(201);
    proxy = await TcpProxy.start(c.url);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
    page = await (await browser.newContext()).newPage();
  });

  afterAll(async () => {
    await browser?.close();
    await proxy?.close();
    await c?.close();
    await redis?.stop();
  });

  const admin = (action: string) =>
    c.call('POST', `/coord/v1/admin/streams/orders/groups/billing/${action}`, {
      user: 'writer',
      body: CHANGE,
    });

  it('follows the transitions again after the stream is cut, and says so meanwhile', async () => {
    await page.goto(`${proxy.url}/coord/ui/`);
    await page.fill('input[name=username]', 'reader');
    await page.fill('input[name=password]', PASSWORD);
    await page.click('#login-form button[type=submit]');
    await page.waitForSelector('#groups-table');
    await page.goto(`${proxy.url}/coord/ui/#/groups/orders/billing`);
    await page.waitForSelector('#transitions li[data-event=CREATE]');
    const top = page.locator('#transitions li.transition').first();
    const live = page.locator('#live-status');
    await waitFor(async () => (await live.getAttribute('data-state')) === 'live');

    // Live before the cut.
    expect((await admin('freeze')).status).toBe(200);
    await waitFor(async () => (await top.getAttribute('data-event')) === 'FREEZE');

    // Cut, and held cut: the page opens no new stream until the proxy passes bytes again.
    proxy.setMode('stall');
    expect(proxy.reset()).toBeGreaterThan(0);
    await waitFor(async () => (await live.getAttribute('data-state')) === 'reconnecting');
    expect(await live.textContent()).toMatch(/^not live: .*reconnecting…$/);
    // A transition while the page has no stream, and one after: both are shown, once each.
    expect((await admin('unfreeze')).status).toBe(200);
    proxy.setMode('pass');
    await waitFor(async () => (await top.getAttribute('data-event')) === 'UNFREEZE', {
      timeoutMs: 15_000,
    });
    await waitFor(async () => (await live.getAttribute('data-state')) === 'live');
    expect((await admin('freeze')).status).toBe(200);
    await waitFor(async () => (await top.getAttribute('data-event')) === 'FREEZE');
    const events = await page
      .locator('#transitions li.transition')
      .evaluateAll((items: Array<{ dataset: Record<string, string | undefined> }>) =>
        items.map((li) => li.dataset.event),
      );
    expect(events.slice(0, 3)).toEqual(['FREEZE', 'UNFREEZE', 'FREEZE']);
    expect(events.filter((e) => e === 'UNFREEZE')).toHaveLength(1);
  });
});
