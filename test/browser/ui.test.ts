import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CHANGE,
  PASSWORD,
  startTestCoordinator,
  type TestCoordinator,
} from '../support/coordinator.js';
import { SimulatedMember } from '../support/members.js';
import { waitFor } from '../support/redis-server.js';

/** Debian's Chromium (`apt-get install chromium`; `.ci/run` installs it when missing). */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/**
 * Screenshots go to a temporary folder; `UPDATE_SCREENSHOTS=1 npm test -- test/browser` writes
 * them to docs/screenshots/ instead (a test run must not change tracked files).
 */
const SCREENSHOTS = process.env.UPDATE_SCREENSHOTS
  ? new URL('../../docs/screenshots/', import.meta.url).pathname
  : `${mkdtempSync(join(tmpdir(), 'coord-ui-'))}/`;

describe('the web UI at /coord/ui/, in a real browser', () => {
  let c: TestCoordinator;
  let browser: Browser;
  let page: Page;
  const members: SimulatedMember[] = [];

  beforeAll(async () => {
    expect(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install chromium`).toBe(true);
    mkdirSync(SCREENSHOTS, { recursive: true });
    c = await startTestCoordinator({
      store: 'memory',
      overrides: {
        'membership.assignment-debounce': '0ms',
        'migration.rollback-window': '10m',
      },
    });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
    page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    // Everything the page loads must come from the coordinator itself (offline, no CDN).
    page.on('request', (request) => {
      if (!request.url().startsWith(c.url)) throw new Error(`UI fetched ${request.url()}`);
    });
    for (const group of ['billing', 'audit-trail']) {
      const res = await c.call('POST', '/coord/v1/admin/groups', {
        user: 'writer',
        body: { streamPrefix: 'orders', consumerGroup: group, shardCount: 8, ...CHANGE },
      });
      expect(res.status).toBe(201);
    }
  });

  afterAll(async () => {
    await browser?.close();
    await c?.close();
  });

  const beatAll = () => Promise.all(members.map((m) => m.beat()));

  it('logs in and lists the groups with status, phase, members and owner', async () => {
    await page.goto(`${c.url}/coord/ui/`);
    await page.fill('input[name=username]', 'admin');
    await page.fill('input[name=password]', PASSWORD);
    await page.click('#login-form button[type=submit]');
    await page.waitForSelector('#groups-table');
    const rows = await page.locator('#groups-table tbody tr').allInnerTexts();
    expect(rows.join('\n')).toContain('orders:billing');
    expect(rows.join('\n')).toMatch(/orders:billing\s+ACTIVE\s+empty\s+8\s+0/);
    await page.fill('#group-filter', 'trail');
    expect(await page.locator('#groups-table tbody tr').count()).toBe(1);
    await page.screenshot({ path: `${SCREENSHOTS}groups.png` });
  });

  it('shows simulated consumers joining: the shard grid and the statechart change live', async () => {
    await page.goto(`${c.url}/coord/ui/#/groups/orders/billing`);
    await page.waitForSelector('#shard-grid');
    expect(await page.locator('#shard-grid .shard.released').count()).toBe(8);
    await page.waitForSelector('#statechart svg');
    expect(await page.getAttribute('#statechart', 'data-active')).toContain('membership_empty');

    for (const id of ['worker-a', 'worker-b']) {
      members.push(new SimulatedMember(c, id, 'orders', 'billing'));
    }
    // Three rounds of heartbeats, then the members keep heartbeating, as consumers do, until
    // the page shows every shard owned by the two: how many rounds that takes depends on when
    // the (0 ms) debounced recomputes ran, which a loaded machine delays (with three fixed
    // rounds the page still showed shards unowned after 10 s in a clean-clone CI run).
    await beatAll();
    await beatAll();
    await beatAll();
    const assigned = page.locator('#shard-grid .shard.assigned');
    const owners = async () =>
      new Set(
        await Promise.all(
          (await page.locator('#shard-grid .shard').all()).map((shard) =>
            shard.getAttribute('data-owner'),
          ),
        ),
      );
    await waitFor(
      async () => {
        if ((await assigned.count()) === 8 && (await owners()).size === 2) return true;
        await beatAll();
        return false;
      },
      { timeoutMs: 10_000, intervalMs: 200 },
    );
    expect(await owners()).toEqual(new Set(['worker-a', 'worker-b']));
    await waitFor(
      async () => {
        await beatAll();
        return ((await page.getAttribute('#statechart', 'data-active')) ?? '').includes(
          'membership_stable',
        );
      },
      { timeoutMs: 10_000, intervalMs: 200 },
    );
    expect(await page.locator('#members-table tbody tr').count()).toBe(2);
    // The live stream shows the transitions as they happen.
    await waitFor(async () => (await page.locator('#transitions li').count()) > 0);
    await page.screenshot({ path: `${SCREENSHOTS}group.png`, fullPage: true });
  });

  it('starts a scale and rolls it back from the UI, each asking for a reason', async () => {
    await page.click('#scale');
    await page.fill('#ask-fields input[name=shardCount]', '12');
    await page.fill('#ask-fields input[name=reason]', 'peak season from the UI');
    await page.click('#ask-ok');
    await page.waitForSelector('#active-migration');
    await waitFor(async () => (await page.textContent('#shard-count')) === '12');
    await page.screenshot({ path: `${SCREENSHOTS}migration.png`, fullPage: true });

    await page.click('#rollback');
    await page.fill('#ask-fields input[name=reason]', 'changed our minds');
    await page.click('#ask-ok');
    await waitFor(async () => (await page.textContent('#shard-count')) === '8');
    // The rollback is a migration of its own back to 8; the scale it undid is ROLLED_BACK.
    await waitFor(async () =>
      ((await page.textContent('#migrations')) ?? '').includes('ROLLBACK 12 → 8'),
    );
    await waitFor(async () =>
      ((await page.textContent('#migration-history')) ?? '').includes('ROLLED_BACK'),
    );
    const res = await c.call(
      'GET',
      '/coord/v1/monitoring/streams/orders/groups/billing/migrations',
      {
        user: 'reader',
      },
    );
    const body = (await res.json()) as {
      active: { kind: string; reason: string; requestedBy: string };
      migrations: Array<{ kind: string; state: string; reason: string }>;
    };
    expect(body.active).toMatchObject({
      kind: 'ROLLBACK',
      reason: 'changed our minds',
      requestedBy: 'admin',
    });
    expect(body.migrations[0]).toMatchObject({
      state: 'ROLLED_BACK',
      reason: 'peak season from the UI',
    });
  });

  it('a change made without a reason is refused by the form, not sent', async () => {
    const before = await (
      await c.call('GET', '/coord/v1/monitoring/audit?limit=1000', { user: 'reader' })
    ).json();
    await page.click('#freeze');
    await page.click('#ask-ok'); // reason empty: the browser's validation keeps the dialog open
    expect(await page.locator('#ask').isVisible()).toBe(true);
    await page.click('#ask button[value=cancel]');
    const after = await (
      await c.call('GET', '/coord/v1/monitoring/audit?limit=1000', { user: 'reader' })
    ).json();
    expect(JSON.stringify(after)).toEqual(JSON.stringify(before));
  });

  it('shows the audit entries of what the UI did, with principal and reason', async () => {
    await page.goto(`${c.url}/coord/ui/#/audit`);
    await page.waitForSelector('#audit-table');
    const text = await page.textContent('#audit-table');
    expect(text).toContain('peak season from the UI');
    expect(text).toContain('changed our minds');
    expect(text).toContain('admin'); // the principal who logged in to the UI
    await page.screenshot({ path: `${SCREENSHOTS}audit.png` });
  });

  it('serves mermaid locally and answers unknown UI files with 404', async () => {
    const mermaid = await fetch(`${c.url}/coord/ui/vendor/mermaid.min.js`);
    expect(mermaid.status).toBe(200);
    expect(mermaid.headers.get('content-type')).toMatch(/javascript/);
    const missing = await fetch(`${c.url}/coord/ui/nope.js`);
    expect(missing.status).toBe(404);
  });
});
