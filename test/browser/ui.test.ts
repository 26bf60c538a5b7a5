import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CHANGE,
  PASSWORD,
  TEST_SECRET,
  startTestCoordinator,
  type TestCoordinator,
} from '../support/coordinator.js';
import { SimulatedMember } from '../support/members.js';
import {
  freePort,
  startRedisServer,
  waitFor,
  type RedisServerHandle,
} from '../support/redis-server.js';

/** Debian's Chromium (`apt-get install chromium`; `.ci/run` installs it when missing). */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/**
 * Screenshots go to a temporary folder; `UPDATE_SCREENSHOTS=1 npm test -- test/browser` writes
 * them to docs/screenshots/ instead (a test run must not change tracked files).
 */
const SCREENSHOTS = process.env.UPDATE_SCREENSHOTS
  ? new URL('../../docs/screenshots/', import.meta.url).pathname
  : `${mkdtempSync(join(tmpdir(), 'coord-ui-'))}/`;

/** A zone with a half-hour offset and no daylight saving: times must name it. */
const ZONE = 'Asia/Kolkata';
const ZONE_OFFSET_MS = 5.5 * 3600_000;

/**
 * What the streams hold before the page opens (the shards of `orders` are the streams
 * `orders:0` … `orders:7`, read by both groups): billing read 2 of shard 0's 6 entries without
 * acknowledging them (4 behind, 2 pending, 1 dead letter) and never read shard 1 (3 behind, no
 * consumer group); audit-trail is caught up everywhere.
 */
async function seedStreams(redis: Redis): Promise<void> {
  for (let i = 0; i < 6; i++) await redis.xadd('orders:0', '*', 'n', String(i));
  for (let i = 0; i < 3; i++) await redis.xadd('orders:1', '*', 'n', String(i));
  await redis.xadd('orders:0:dead', '*', 'n', 'poison');
  await redis.xgroup('CREATE', 'orders:0', 'billing', '0');
  await redis.xreadgroup('GROUP', 'billing', 'c1', 'COUNT', 2, 'STREAMS', 'orders:0', '>');
  for (let shard = 2; shard < 8; shard++) {
    await redis.xgroup('CREATE', `orders:${shard}`, 'billing', '$', 'MKSTREAM');
  }
  for (let shard = 0; shard < 8; shard++) {
    await redis.xgroup('CREATE', `orders:${shard}`, 'audit-trail', '$', 'MKSTREAM');
  }
}

/** Logs a page in through the form and waits for the groups list. */
async function logIn(page: Page, url: string, user: string): Promise<void> {
  await page.goto(`${url}/coord/ui/`);
  await page.fill('input[name=username]', user);
  await page.fill('input[name=password]', PASSWORD);
  await page.click('#login-form button[type=submit]');
}

/** The little of the DOM the page functions below use (the tests are typed without the DOM). */
interface DomRect {
  readonly x: number;
  readonly y: number;
  readonly width: number;
  readonly height: number;
}
interface DomElement {
  readonly textContent: string | null;
  readonly dataset: Record<string, string | undefined>;
  getBoundingClientRect(): DomRect;
  querySelector(selector: string): DomElement | null;
  querySelectorAll(selector: string): ArrayLike<DomElement>;
  contains(other: unknown): boolean;
}
interface DomWindow {
  readonly document: {
    elementFromPoint(x: number, y: number): unknown;
    createRange(): { selectNodeContents(node: unknown): void; getBoundingClientRect(): DomRect };
  };
  readonly sessionStorage: { getItem(key: string): string | null; clear(): void };
  readonly localStorage: { readonly length: number };
}

/** Bounding boxes of elements of the page, in CSS pixels. */
interface Box {
  readonly x: number;
  readonly y: number;
  readonly width: number;
  readonly height: number;
  readonly text: string;
}
const overlap = (a: Box, b: Box) =>
  a.x < b.x + b.width - 1 &&
  b.x < a.x + a.width - 1 &&
  a.y < b.y + b.height - 1 &&
  b.y < a.y + a.height - 1;

describe('the web UI at /coord/ui/, in a real browser', () => {
  let c: TestCoordinator;
  let redis: RedisServerHandle;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  const members: SimulatedMember[] = [];

  beforeAll(async () => {
    expect(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install chromium`).toBe(true);
    mkdirSync(SCREENSHOTS, { recursive: true });
    // One real redis-server: the store (so replicas hold leases) and the streams the groups read.
    redis = await startRedisServer();
    await seedStreams(redis.client());
    c = await startTestCoordinator({
      store: 'redis',
      redisUrl: redis.url,
      overrides: {
        'membership.assignment-debounce': '0ms',
        'migration.rollback-window': '10m',
        'streams.url': redis.url,
      },
    });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
    context = await browser.newContext({
      viewport: { width: 1400, height: 1000 },
      timezoneId: ZONE,
    });
    page = await context.newPage();
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
    await redis?.stop();
  });

  const beatAll = () => Promise.all(members.map((m) => m.beat()));

  it('logs in and lists the groups with status, phase, members, lag and owner', async () => {
    await logIn(page, c.url, 'admin');
    await page.waitForSelector('#groups-table');
    const rows = await page.locator('#groups-table tbody tr').allInnerTexts();
    expect(rows.join('\n')).toContain('orders:billing');
    expect(rows.join('\n')).toMatch(/orders:billing\s+ACTIVE\s+empty\s+8\s+0/);
    // The lag column: entries and seconds behind, coloured when behind.
    const billing = page.locator('#groups-table tr', { hasText: 'orders:billing' }).locator('.lag');
    const trail = page
      .locator('#groups-table tr', { hasText: 'orders:audit-trail' })
      .locator('.lag');
    await waitFor(async () => (await billing.getAttribute('data-lag-entries')) === '7');
    expect(await billing.getAttribute('class')).toContain('behind');
    expect(await billing.textContent()).toMatch(/^7 entries · [\d.]+ (ms|s)$/);
    await waitFor(async () => (await trail.textContent()) === 'caught up');
    expect(await trail.getAttribute('class')).toContain('caught-up');
    await page.screenshot({ path: `${SCREENSHOTS}groups.png` });
    await page.fill('#group-filter', 'trail');
    expect(await page.locator('#groups-table tbody tr').count()).toBe(1);
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
    // The live stream shows the transitions as they happen: each as a line, never as JSON.
    await waitFor(async () => (await page.locator('#transitions li.transition').count()) > 0);
    expect(await page.textContent('#transitions')).not.toContain('{"');
  });

  it('shows what just happened on load, and then live, with the cause of each transition', async () => {
    await page.reload();
    await page.waitForSelector('#transitions li.transition');
    // On load, before anything new happens: the transitions the owner kept.
    const joins = page.locator('#transitions li.transition[data-event=HEARTBEAT]', {
      hasText: 'worker-a joined',
    });
    expect(await joins.count()).toBe(1);
    expect(await joins.locator('.cause').textContent()).toBe('heartbeat of worker-a');
    expect(await joins.locator('.changes').textContent()).toMatch(/membership: empty → /);
    expect(await page.locator('#transitions li[data-event=CREATE]').count()).toBe(1);
    expect(await page.textContent('#transitions')).not.toContain('{"');

    // Live: an admin request appears on top, with the principal and who asked for it.
    const before = await page.locator('#transitions li.transition').count();
    const freeze = await c.call('POST', '/coord/v1/admin/streams/orders/groups/billing/freeze', {
      user: 'writer',
      body: { requestedBy: 'ops-carol', reason: 'look at it' },
    });
    expect(freeze.status).toBe(200);
    const top = page.locator('#transitions li.transition').first();
    await waitFor(async () => (await top.getAttribute('data-event')) === 'FREEZE', {
      timeoutMs: 3000,
    });
    expect(await page.locator('#transitions li.transition').count()).toBe(before + 1);
    // The principal, who it was done for, and the request id (the audit record's).
    expect(await top.locator('.cause').textContent()).toMatch(
      /^by writer, requested by ops-carol \(request \S+\)$/,
    );
    expect(await top.locator('.changes').textContent()).toBe('lifecycle: active → frozen');
    await waitFor(async () => (await page.textContent('#group-status')) === 'FROZEN');
    await c.call('POST', '/coord/v1/admin/streams/orders/groups/billing/unfreeze', {
      user: 'writer',
      body: CHANGE,
    });
    await waitFor(async () => (await top.getAttribute('data-event')) === 'UNFREEZE');

    // Every time names its date and zone: this page runs in Asia/Kolkata (UTC+5:30).
    const stamp = top.locator('time');
    const iso = (await stamp.getAttribute('title')) ?? '';
    const local = new Date(Date.parse(iso) + ZONE_OFFSET_MS).toISOString();
    expect(await stamp.textContent()).toBe(`${local.slice(0, 10)} ${local.slice(11, 23)} GMT+5:30`);
    for (const cell of await page.locator('#members-table time').allTextContents()) {
      expect(cell).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} GMT\+5:30$/);
    }
  });

  it("shows each shard's lag next to its owner, and the group's total lag over time", async () => {
    const row = (shard: number) => page.locator(`#lag-table tr[data-shard="${shard}"]`);
    await page.waitForSelector('#lag-table');
    const cells = async (shard: number) => row(shard).locator('td').allTextContents();
    const [, owner0, lag0, pending0, stuck0, dead0, stream0] = await cells(0);
    expect(['worker-a', 'worker-b']).toContain(owner0);
    expect(lag0).toMatch(/^4 · /);
    expect(pending0).toBe('2');
    expect(stuck0).toMatch(/^\d+(\.\d+)? (ms|s|min)/);
    expect(dead0).toBe('1');
    expect(stream0).toBe('orders:0');
    const [, , lag1, pending1, stuck1, dead1, stream1] = await cells(1);
    expect(lag1).toMatch(/^3 · /);
    expect([pending1, stuck1, dead1]).toEqual(['0', '–', '0']);
    expect(stream1).toContain('no consumer group');
    expect(await row(2).locator('.lag-bar').getAttribute('class')).toContain('caught-up');
    // The bars compare the shards: shard 0 (4 behind) is the longest, shard 1 (3) 3/4 of it.
    const width = (shard: number) =>
      row(shard)
        .locator('.fill')
        .evaluate((el: DomElement) => el.getBoundingClientRect().width);
    expect((await width(1)) / (await width(0))).toBeCloseTo(0.75, 1);
    expect(await page.textContent('#lag-totals')).toContain('2 of 8');

    // The chart samples the total as the page refreshes, and follows new entries.
    const chart = page.locator('#lag-chart');
    await waitFor(async () => Number(await chart.getAttribute('data-samples')) >= 2);
    expect(await chart.getAttribute('data-last')).toBe('7');
    for (let i = 0; i < 5; i++) await redis.client().xadd('orders:3', '*', 'n', String(i));
    await waitFor(async () => (await chart.getAttribute('data-last')) === '12', {
      timeoutMs: 8000,
    });
    expect(await page.locator('#lag-chart polyline').getAttribute('points')).toMatch(/ /);
    // Entries keep coming faster than they are read, measurement after measurement (the
    // owner's metrics refresh, run here rather than waiting for its interval): the group is
    // FALLING_BEHIND, and the page says so.
    for (let i = 0; i < 5; i++) {
      await redis.client().xadd('orders:4', '*', 'n', String(i));
      await c.host.refreshLag();
    }
    await waitFor(async () => (await page.locator('#hints .hint.FALLING_BEHIND').count()) === 1);
    await page.locator('#lag').screenshot({ path: `${SCREENSHOTS}lag.png` });
    await page.screenshot({ path: `${SCREENSHOTS}group.png`, fullPage: true });
  });

  it('draws the statechart legibly: one diagram per region, no label over another', async () => {
    const regions = page.locator('#statechart figure.region');
    await waitFor(async () => (await page.locator('#statechart figure.region svg').count()) === 4);
    expect(
      await regions.evaluateAll((fs: DomElement[]) => fs.map((f) => f.dataset.region)),
    ).toEqual(['lifecycle', 'membership', 'consumption', 'migration']);
    for (const region of await regions.all()) {
      const { labels, nodes } = await region.evaluate((figure: DomElement) => {
        const box = (el: DomElement) => {
          const r = el.getBoundingClientRect();
          return { x: r.x, y: r.y, width: r.width, height: r.height, text: el.textContent ?? '' };
        };
        // A label's text as drawn (its lines), not the box mermaid wraps it in.
        const { document } = globalThis as unknown as DomWindow;
        const textBox = (el: DomElement) => {
          const range = document.createRange();
          range.selectNodeContents(el.querySelector('p') ?? el);
          const r = range.getBoundingClientRect();
          return { x: r.x, y: r.y, width: r.width, height: r.height, text: el.textContent ?? '' };
        };
        return {
          labels: Array.from(figure.querySelectorAll('span.edgeLabel'))
            .map(textBox)
            .filter((b) => b.width > 0 && b.text.trim() !== ''),
          nodes: Array.from(figure.querySelectorAll('g.node')).map(box),
        };
      });
      for (let i = 0; i < labels.length; i++) {
        for (let j = i + 1; j < labels.length; j++) {
          const [a, b] = [labels[i]!, labels[j]!];
          expect(overlap(a, b), `${a.text} / ${b.text}: ${JSON.stringify([a, b])}`).toBe(false);
        }
        for (const node of nodes) {
          expect(overlap(labels[i]!, node), `${labels[i]!.text} on ${node.text}`).toBe(false);
        }
      }
    }
    // FREEZE is shown, on top (nothing covers it), at a readable size.
    const freeze = page.locator('#statechart figure[data-region=lifecycle] span.edgeLabel', {
      hasText: /^FREEZE$/,
    });
    await freeze.scrollIntoViewIfNeeded();
    const seen = await freeze.evaluate((el: DomElement) => {
      const r = el.getBoundingClientRect();
      const { document } = globalThis as unknown as DomWindow;
      const top = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
      return { height: r.height, onTop: !!top && el.contains(top) };
    });
    expect(seen.onTop).toBe(true);
    expect(seen.height).toBeGreaterThanOrEqual(12);
    // The current states are marked; the migration region speaks the API's vocabulary.
    expect(await page.getAttribute('#statechart', 'data-active')).toContain(
      'group_lifecycle_active',
    );
    expect(await page.textContent('#statechart figure[data-region=migration]')).toContain(
      'no active migration',
    );
    // Zoom: in makes it larger, Fit brings it back to its column.
    const svgWidth = () =>
      page
        .locator('#statechart figure[data-region=membership] svg')
        .evaluate((el: DomElement) => el.getBoundingClientRect().width);
    const fitted = await svgWidth();
    await page.click('#chart-zoom-in');
    expect(await svgWidth()).toBeGreaterThan(fitted * 1.1);
    expect(await page.textContent('#chart-zoom')).toMatch(/^\d+ %$/);
    await page.click('#chart-fit');
    expect(await svgWidth()).toBeCloseTo(fitted, 0);
    await page.locator('#statechart-section').screenshot({ path: `${SCREENSHOTS}statechart.png` });
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
    // The timeline names the scale, who asked for it, and the migration in the API's words.
    const scale = page.locator('#transitions li[data-event=SCALE]').first();
    // Who asked: the request's principal and its id (the audit record's request id).
    expect(await scale.locator('.cause').textContent()).toMatch(/by admin \(request [0-9a-f-]+\)/);
    expect(await scale.locator('.changes').textContent()).toContain(
      'migration: none active → IN_PROGRESS',
    );
  });

  it('shows the migration states the API (and so the CLI) shows, and never a stale one', async () => {
    const path = '/coord/v1/monitoring/streams/orders/groups/billing/migrations';
    type Migrations = {
      active: { kind: string; state: string; toShardCount: number } | null;
      migrations: Array<{ state: string }>;
    };
    const read = async () =>
      (await (await c.call('GET', path, { user: 'reader' })).json()) as Migrations;
    // The rollback converges once the members report what they own.
    await waitFor(
      async () => {
        await beatAll();
        return (await read()).active?.state === 'CONVERGED';
      },
      { timeoutMs: 10_000, intervalMs: 200 },
    );
    await waitFor(
      async () => (await page.getAttribute('#active-migration', 'data-state')) === 'CONVERGED',
    );
    const scaled = await c.call('POST', '/coord/v1/admin/streams/orders/groups/billing/scale', {
      user: 'writer',
      body: { shardCount: 10, ...CHANGE },
    });
    expect(scaled.status).toBe(202);
    // The page that is open follows the change live.
    await waitFor(
      async () => ((await page.textContent('#active-migration')) ?? '').includes('SCALE 8 → 10'),
      { timeoutMs: 3000 },
    );
    // A page opened right after the change shows it at once: nothing older, nothing cached.
    const fresh = page; // the same tab: its login lives in the tab's sessionStorage
    await fresh.goto('about:blank');
    await fresh.goto(`${c.url}/coord/ui/#/groups/orders/billing`);
    await fresh.waitForSelector('#active-migration');
    expect(await fresh.textContent('#active-migration')).toContain('SCALE 8 → 10');
    expect(await fresh.textContent('#shard-count')).toBe('10');
    const api = await read();
    const states = await fresh
      .locator('#migration-history tbody tr td:nth-child(3)')
      .allTextContents();
    expect(states).toEqual(api.migrations.map((m) => m.state));
    expect(states.slice(0, 2)).toEqual(['COMPLETED', 'ROLLED_BACK']);
    expect(await fresh.textContent('#active-migration')).toContain(api.active?.state ?? '?');
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

  it("shows each replica's groups and leases", async () => {
    await page.goto(`${c.url}/coord/ui/#/replicas`);
    await page.waitForSelector('#replicas-table');
    const row = page.locator('#replicas-table tbody tr').first();
    expect(await row.textContent()).toContain('(this one)');
    await waitFor(async () => (await row.locator('ul.leases li').count()) === 2);
    const leases = await row
      .locator('ul.leases li')
      .evaluateAll((items: DomElement[]) => items.map((li) => li.dataset.group).sort());
    expect(leases).toEqual(['orders:audit-trail', 'orders:billing']);
    expect(await row.locator('ul.leases li').first().textContent()).toMatch(
      /held [\d.]+ (ms|s|min)/,
    );
    expect(await row.locator('time').textContent()).toMatch(/ GMT\+5:30$/);
    await page.screenshot({ path: `${SCREENSHOTS}replicas.png` });
    await row.locator('a', { hasText: 'orders:billing' }).click();
    await page.waitForSelector('#shard-grid');
  });

  it('is refused to a token without READ, and keeps no secret in the page', async () => {
    const other = await browser.newContext({ timezoneId: ZONE });
    const writer = await other.newPage();
    await logIn(writer, c.url, 'writer');
    await writer.waitForSelector('.error');
    expect(await writer.textContent('.error')).toContain('FORBIDDEN');
    expect(await writer.locator('#groups-table').count()).toBe(0);
    await writer.goto(`${c.url}/coord/ui/#/groups/orders/billing`);
    await writer.waitForSelector('.error');
    expect(await writer.locator('#shard-grid, #lag-table, #transitions li').count()).toBe(0);
    await other.close();

    // The admin's page: the token only in the tab's sessionStorage, nowhere in the document.
    const token = await page.evaluate(() =>
      (globalThis as unknown as DomWindow).sessionStorage.getItem('coord.token'),
    );
    expect(token).toBeTruthy();
    const html = await page.content();
    for (const secret of [token ?? '', PASSWORD, TEST_SECRET]) expect(html).not.toContain(secret);
    expect(
      await page.evaluate(() => (globalThis as unknown as DomWindow).localStorage.length),
    ).toBe(0);
  });

  it('shows lag as n/a, with the reason, where the streams are unknown or down', async () => {
    const down = await freePort();
    const coordinators = await Promise.all([
      startTestCoordinator({ store: 'memory' }),
      startTestCoordinator({
        store: 'memory',
        overrides: { 'streams.url': `redis://127.0.0.1:${down}` },
      }),
    ]);
    try {
      const other = await browser.newContext({ timezoneId: ZONE });
      const probe = await other.newPage();
      const reasons: string[] = [];
      for (const coordinator of coordinators) {
        await coordinator.call('PUT', '/coord/v1/admin/streams/elsewhere/groups/g', {
          user: 'writer',
          body: { shardCount: 2, ...CHANGE },
        });
        await logIn(probe, coordinator.url, 'admin');
        const cell = probe.locator('#groups-table .lag');
        await waitFor(async () => (await cell.textContent()) === 'n/a', { timeoutMs: 5000 });
        reasons.push((await cell.getAttribute('title')) ?? '');
        await probe.goto(`${coordinator.url}/coord/ui/#/groups/elsewhere/g`);
        await probe.waitForSelector('#lag-problem');
        reasons.push((await probe.textContent('#lag-problem')) ?? '');
        await probe.evaluate(() => (globalThis as unknown as DomWindow).sessionStorage.clear());
      }
      expect(reasons[0]).toContain('coordinator.streams.url');
      expect(reasons[1]).toContain('coordinator.streams.url');
      expect(reasons[2]).toContain('STREAMS_UNAVAILABLE');
      expect(reasons[3]).toContain('STREAMS_UNAVAILABLE');
      await other.close();
    } finally {
      await Promise.all(coordinators.map((x) => x.close()));
    }
  });

  describe('consumption control', () => {
    /**
     * refunds:ops on three shards, held by one simulated member: its consumer group has read
     * and acknowledged the four entries of shard 0; shard 1 has a dead letter.
     */
    // `c` is started by the outer beforeAll: the member calls it through this.
    const coordinator = { call: (...args: Parameters<TestCoordinator['call']>) => c.call(...args) };
    const member = new SimulatedMember(coordinator, 'm-refunds', 'refunds', 'ops');
    const ids: string[] = [];
    const consumptionPath = '/coord/v1/monitoring/streams/refunds/groups/ops';
    const holdAll = () =>
      waitFor(
        async () => {
          await member.beat();
          return member.owned.length === 3;
        },
        { what: 'the member to hold every shard', intervalMs: 100 },
      );
    const stateShown = (p: Page, state: string) =>
      waitFor(async () => (await p.textContent('#consumption-state')) === state, {
        what: `the page to show ${state}`,
        timeoutMs: 10_000,
      });

    beforeAll(async () => {
      const res = await c.call('POST', '/coord/v1/admin/groups', {
        user: 'writer',
        body: { streamPrefix: 'refunds', consumerGroup: 'ops', shardCount: 3, ...CHANGE },
      });
      expect(res.status).toBe(201);
      const streams = redis.client();
      for (let i = 0; i < 4; i++) ids.push((await streams.xadd('refunds:0', '*', 'n', String(i)))!);
      await streams.xgroup('CREATE', 'refunds:0', 'ops', '0');
      await streams.xreadgroup('GROUP', 'ops', 'c1', 'COUNT', 10, 'STREAMS', 'refunds:0', '>');
      await streams.xack('refunds:0', 'ops', ...ids);
      await streams.xadd('refunds:1:dead', '*', 'n', 'poison');
      await holdAll();
    });

    it('pauses a shard from the UI with a reason: pausing, then paused, and audited', async () => {
      await holdAll();
      await page.goto(`${c.url}/coord/ui/#/groups/refunds/ops`);
      await page.waitForSelector('#shard-grid .shard[data-shard="1"] .shard-toggle');
      expect(await page.textContent('#consumption-state')).toBe('running');
      // The dead letters of each shard stay in view next to the controls.
      await page.waitForSelector('#lag-table tr[data-shard="1"]');
      expect(await page.textContent('#lag-table tr[data-shard="1"] td:nth-child(6)')).toBe('1');

      await page.click('#shard-grid .shard[data-shard="1"] .shard-toggle');
      expect(await page.textContent('#ask-title')).toBe('Pause consumption of shard 1');
      await page.fill('#ask-fields input[name=reason]', 'poison message on shard 1');
      await page.click('#ask-ok');
      // The member still holds it, so the group is pausing until the member gives it up.
      await stateShown(page, 'pausing');
      expect(await page.textContent('#paused-shards')).toBe('1');
      await waitFor(
        async () => {
          await member.beat();
          return (await page.textContent('#consumption-state')) === 'paused';
        },
        { what: 'paused once the member gave shard 1 up', timeoutMs: 10_000, intervalMs: 200 },
      );
      expect(member.owned).toEqual([0, 2]);
      await waitFor(
        async () =>
          (await page.getAttribute('#shard-grid .shard[data-shard="1"]', 'data-paused')) === 'true',
      );
      expect(
        await page.getAttribute('#shard-grid .shard[data-shard="1"] .shard-toggle', 'data-action'),
      ).toBe('resume');
      await page.locator('#consumption').screenshot({ path: `${SCREENSHOTS}consumption.png` });

      const audit = await c.call(
        'GET',
        '/coord/v1/monitoring/audit?streamPrefix=refunds&consumerGroup=ops',
        { user: 'reader' },
      );
      const { records } = (await audit.json()) as {
        records: Array<{ operation: string; requestedBy: string; reason: string; status: number }>;
      };
      expect(records[0]).toMatchObject({
        operation: 'consumption',
        requestedBy: 'admin',
        reason: 'poison message on shard 1',
        status: 200,
      });

      await page.click('#resume-all');
      await page.fill('#ask-fields input[name=reason]', 'poison message removed');
      await page.click('#ask-ok');
      await stateShown(page, 'running');
      expect(await page.textContent('#paused-shards')).toBe('–');
    });

    it('the reset dialog shows the plan before it executes, then the reset until it ends', async () => {
      await holdAll();
      await page.click('#reset-positions');
      await page.waitForSelector('#reset-dialog[open]');
      expect(await page.isDisabled('#reset-execute')).toBe(true);
      await page.selectOption('#reset-form select[name=to]', 'earliest');
      await page.fill('#reset-form input[name=shards]', '0');
      await page.fill('#reset-form input[name=reason]', 'replay refunds from the UI');
      await page.click('#reset-plan');
      await page.waitForSelector('#reset-plan-table tbody tr[data-shard="0"]');
      const cells = await page
        .locator('#reset-plan-table tbody tr[data-shard="0"] td')
        .allTextContents();
      expect(cells).toEqual(['0', ids[3], '0-0', '4', '0', '0']);
      expect(await page.textContent('#reset-plan-summary')).toBe(
        '1 of 1 shard(s) change: 4 entries delivered again, 0 skipped.',
      );
      // Planning changed nothing.
      const before = (await (await c.call('GET', consumptionPath, { user: 'reader' })).json()) as {
        consumption: { state: string; lastReset: unknown };
      };
      expect(before.consumption).toMatchObject({ state: 'running', lastReset: null });

      let asked = '';
      page.once('dialog', (dialog) => {
        asked = dialog.message();
        void dialog.accept();
      });
      expect(await page.isDisabled('#reset-execute')).toBe(false);
      await page.click('#reset-execute');
      expect(asked).toContain('Move 1 shard(s) of refunds:ops? 4 entries will be delivered again');
      // The member holds shard 0: the reset waits for it to give the shard up, and says so.
      await page.waitForSelector('#reset-progress[data-stage="pausing"]');
      expect(await page.textContent('#reset-progress')).toContain('0 of 1 shards moved');
      expect(await page.textContent('#consumption-state')).toBe('resetting');
      await waitFor(
        async () => {
          await member.beat();
          return (await page.locator('#last-reset').count()) === 1;
        },
        { what: 'the reset to end', timeoutMs: 10_000, intervalMs: 200 },
      );
      expect(await page.textContent('#last-reset')).toContain('done');
      expect(await page.textContent('#last-reset')).toContain(
        '1 of 1 shard(s) moved: 4 entries delivered again, 0 skipped (requested by admin: replay refunds from the UI)',
      );
      await stateShown(page, 'running');
      expect(await page.locator('#reset-progress').count()).toBe(0);
      // The consumer group's position moved back: a new reader gets the four entries again.
      const reply = (await redis
        .client()
        .xreadgroup('GROUP', 'ops', 'c2', 'COUNT', 10, 'STREAMS', 'refunds:0', '>')) as
        [string, [string, string[]][]][] | null;
      expect((reply?.[0]?.[1] ?? []).map(([id]) => id)).toEqual(ids);
    });

    it('cancels a reset its member does not let through: nothing moved, the shards read again', async () => {
      await holdAll();
      await page.goto(`${c.url}/coord/ui/#/groups/refunds/ops`);
      await page.waitForSelector('#shard-grid .shard-toggle');
      expect(await page.isDisabled('#cancel-reset')).toBe(true);
      // The member holds shard 0 and, beating no more, does not give it up: the reset waits.
      const started = await c.call('POST', '/coord/v1/admin/streams/refunds/groups/ops/positions', {
        user: 'admin',
        body: { to: 'earliest', shards: [0], dryRun: false, ...CHANGE },
        headers: { 'x-request-id': 'ui-cancel' },
      });
      expect(started.status).toBe(202);
      await page.waitForSelector('#reset-progress[data-stage="pausing"]', { timeout: 10_000 });
      await page.waitForSelector('#cancel-reset:not([disabled])');
      await page.click('#cancel-reset');
      expect(await page.textContent('#ask-title')).toBe(
        'Cancel the position reset where it got to',
      );
      await page.fill('#ask-fields input[name=reason]', 'member stuck on shard 0');
      await page.click('#ask-ok');
      await page.waitForSelector('#last-reset[data-reset-id="ui-cancel"]', { timeout: 10_000 });
      expect(await page.textContent('#last-reset')).toContain(
        'Last reset ui-cancel to earliest: cancelled',
      );
      expect(await page.textContent('#last-reset')).toContain(
        '0 of 1 shard(s) moved: 0 entries delivered again, 0 skipped',
      );
      await stateShown(page, 'running');
      expect(await page.isDisabled('#cancel-reset')).toBe(true);
      const view = (await (await c.call('GET', consumptionPath, { user: 'reader' })).json()) as {
        consumption: {
          lastReset: { resetId: string; cancelled: boolean; moves: { moved: boolean }[] };
        };
      };
      expect(view.consumption.lastReset).toMatchObject({
        resetId: 'ui-cancel',
        cancelled: true,
        moves: [{ moved: false }],
      });
    });

    it('offers no change to a token without WRITE: the controls are disabled', async () => {
      const other = await browser.newContext({ timezoneId: ZONE });
      const reader = await other.newPage();
      await logIn(reader, c.url, 'reader');
      await reader.waitForSelector('#groups-table');
      await reader.goto(`${c.url}/coord/ui/#/groups/refunds/ops`);
      await reader.waitForSelector('#shard-grid .shard-toggle');
      expect(await reader.textContent('#consumption-state')).toBe('running');
      for (const control of [
        '#pause-all',
        '#resume-all',
        '#reset-positions',
        '#cancel-reset',
        '#scale',
        '#freeze',
      ]) {
        expect(await reader.isDisabled(control), control).toBe(true);
        expect(await reader.getAttribute(control, 'title')).toContain('WRITE role');
      }
      const toggles = reader.locator('#shard-grid .shard-toggle');
      expect(await toggles.count()).toBe(3);
      for (let i = 0; i < 3; i++) expect(await toggles.nth(i).isDisabled()).toBe(true);
      // The admin's page offers them.
      await page.goto(`${c.url}/coord/ui/#/groups/refunds/ops`);
      await page.waitForSelector('#shard-grid .shard-toggle');
      expect(await page.isDisabled('#pause-all')).toBe(false);
      expect(await page.locator('#shard-grid .shard-toggle').nth(0).isDisabled()).toBe(false);
      await other.close();
    });
  });

  it('serves mermaid locally and answers unknown UI files with 404', async () => {
    const mermaid = await fetch(`${c.url}/coord/ui/vendor/mermaid.min.js`);
    expect(mermaid.status).toBe(200);
    expect(mermaid.headers.get('content-type')).toMatch(/javascript/);
    const missing = await fetch(`${c.url}/coord/ui/nope.js`);
    expect(missing.status).toBe(404);
  });
});
