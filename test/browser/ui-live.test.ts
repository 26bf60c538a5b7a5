import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
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
    for (const group of ['billing', 'shipping']) {
      const res = await c.call('POST', '/coord/v1/admin/groups', {
        user: 'writer',
        body: { streamPrefix: 'orders', consumerGroup: group, shardCount: 2, ...CHANGE },
      });
      expect(res.status).toBe(201);
    }
    proxy = await TcpProxy.start(c.url);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
  });

  beforeEach(async () => {
    // A new tab for each test: its own sessionStorage, so each logs in through the form.
    await page?.context().close();
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

  /** Logs in through the form (at the proxy's origin) and opens the group's page. */
  const openGroup = async (via = proxy) => {
    await page.goto(`${via.url}/coord/ui/`);
    await page.fill('input[name=username]', 'reader');
    await page.fill('input[name=password]', PASSWORD);
    await page.click('#login-form button[type=submit]');
    await page.waitForSelector('#groups-table');
    await page.goto(`${via.url}/coord/ui/#/groups/orders/billing`);
  };

  it('follows the transitions again after the stream is cut, and says so meanwhile', async () => {
    await openGroup();
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

  it('stops reading the groups list once the page shows something else', async () => {
    const requests: string[] = [];
    page.on('request', (request) => requests.push(new URL(request.url()).pathname));
    await openGroup();
    const opened = requests.length;
    const since = () => requests.slice(opened);
    // The group page reads its group every 2 s; the list read every group's lag every 5 s.
    // Six reads of the group later the list, had it still been reading, would have read again.
    const detail = '/coord/v1/monitoring/streams/orders/groups/billing';
    await waitFor(() => since().filter((path) => path === detail).length >= 6, {
      timeoutMs: 20_000,
    });
    expect(since().filter((path) => path.includes('/groups/shipping'))).toEqual([]);
  });

  it('asks to log in again when the login ends while a group page is open', async () => {
    await openGroup();
    await page.waitForSelector('#group-status');
    // The token stops being valid (it expired, or the signing secret changed): every read of
    // the page's refresh is answered 401 from now on.
    await page.evaluate("sessionStorage.setItem('coord.token', 'no-longer-valid')");
    await page.waitForSelector('#login-form', { timeout: 10_000 });
    expect(await page.locator('p.error').count()).toBeLessThanOrEqual(1);
  });

  it('says once, not at every refresh, that it shows an old reading while it cannot read', async () => {
    // This tab's own way in, which goes away as a replica that dies does: new connections to
    // it are refused.
    let door = await TcpProxy.start(c.url);
    let failed = 0; // reads of the group that failed
    page.on('requestfailed', (request) => {
      if (new URL(request.url()).pathname === '/coord/v1/monitoring/streams/orders/groups/billing')
        failed += 1;
    });
    try {
      await openGroup(door);
      await page.waitForSelector('#group-status');
      expect(await page.locator('#refresh-problem').isHidden()).toBe(true);
      const status = await page.textContent('#group-status');
      await door.close();
      // Three refreshes of the page fail.
      await waitFor(() => failed >= 3, { timeoutMs: 20_000 });
      expect(await page.locator('p.error:visible').count()).toBe(1);
      expect(await page.textContent('#refresh-problem')).toMatch(
        /^Not up to date: the group could not be read \(.+\); shown as read at \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} \S+, trying again every 2 s\.$/,
      );
      // What the page shows is still there, marked as old.
      expect(await page.textContent('#group-status')).toBe(status);
      expect(await page.getAttribute('main', 'data-stale')).toBe('');
      // Back: the next refresh reads it, and the page is current again.
      door = await TcpProxy.start(c.url, Number(new URL(door.url).port));
      await waitFor(async () => (await page.getAttribute('main', 'data-stale')) === null, {
        timeoutMs: 10_000,
      });
      expect(await page.locator('#refresh-problem').isHidden()).toBe(true);
      expect(await page.locator('p.error:visible').count()).toBe(0);
    } finally {
      await door.close().catch(() => undefined);
    }
  });

  it('says a link with a broken escape names no page, rather than keep the last page up', async () => {
    await openGroup();
    await page.waitForSelector('#group-status');
    // A link cut in the middle of an escape (`%E0%A4` is the start of a character).
    await page.goto(`${proxy.url}/coord/ui/#/groups/orders/ship%E0%A4`);
    await page.waitForSelector('main p.error');
    expect(await page.textContent('main p.error')).toBe(
      'Not a page of this UI: #/groups/orders/ship%E0%A4 (a broken %-escape)',
    );
    expect(await page.locator('#group-status').count()).toBe(0);
  });
});
