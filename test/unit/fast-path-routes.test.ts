import { describe, expect, it } from 'vitest';
import {
  RecentMap,
  REMEMBERED_ROUTES,
  REST_GENERATIONS,
} from '../../src/http/heartbeat-fast-path.js';
import { HEARTBEAT_PATH } from '../../src/http/routes/consumer.js';

/*
 * The heartbeat fast path remembers each heartbeat URL with its members' steady replies
 * (src/http/heartbeat-fast-path.ts): a replica at the capacity goal (10,000 groups,
 * docs/BENCHMARKS.md#what-the-rows-mean) must keep every one of them, or it rebuilds routes and
 * replies on every pass over its members.
 */

describe('the routes the heartbeat fast path remembers', () => {
  it('keep every group of a replica at the capacity goal, with long names', () => {
    const routes = new RecentMap<object>(REMEMBERED_ROUTES.entries, REMEMBERED_ROUTES.chars);
    const urls = Array.from({ length: 10_000 }, (_, i) =>
      HEARTBEAT_PATH.replace(':stream', `orders-eu-west-1-partition-stream-${i}`).replace(
        ':group',
        `billing-consumer-group-${i}`,
      ),
    );
    const kept = urls.map((url) => {
      const route = {};
      routes.set(url, route);
      return route;
    });
    // Every route is still the one set, however often the replica cycles through its groups.
    for (let pass = 0; pass < 3; pass++)
      urls.forEach((url, i) => expect(routes.get(url)).toBe(kept[i]));
  });
});

describe('the heartbeat bodies the fast path remembers (RecentMap with rest)', () => {
  /** One pass over `keys`: get each, set it when missed; returns the hits. */
  function pass(map: RecentMap<string>, keys: readonly string[]): number {
    let hits = 0;
    for (const key of keys) {
      if (map.get(key) !== undefined) hits++;
      else map.set(key, key);
    }
    return hits;
  }
  const keys = (count: number, tag = 'k') => Array.from({ length: count }, (_, i) => `${tag}${i}`);

  it('a working set it mostly holds does not make it rest: 20,000 members hit as often as without rest', () => {
    const bodies = new RecentMap<string>(16_384, 4 << 20, { rest: true });
    const plain = new RecentMap<string>(16_384, 4 << 20);
    const members = keys(20_000);
    pass(bodies, members);
    pass(plain, members);
    for (let round = 0; round < 3; round++) {
      const hits = pass(bodies, members);
      expect(hits).toBe(pass(plain, members));
      expect(hits).toBeGreaterThan(members.length * 0.8);
    }
  });

  it('more distinct bodies than it holds (100,000 members): it stops remembering for a while, then tries again', () => {
    const bodies = new RecentMap<string>(16_384, 4 << 20, { rest: true });
    const members = keys(100_000);
    expect(pass(bodies, members)).toBe(0);
    // Resting: a new body is not remembered (without rest it would be).
    bodies.set('new', 'new');
    expect(bodies.get('new')).toBeUndefined();
    const plain = new RecentMap<string>(16_384, 4 << 20);
    pass(plain, members);
    plain.set('new', 'new');
    expect(plain.get('new')).toBe('new');
    // Within REST_GENERATIONS × 16,384 sets, it remembers again.
    let sets = 0;
    do {
      bodies.set('probe', 'probe');
      sets++;
    } while (bodies.get('probe') === undefined);
    expect(sets).toBeLessThanOrEqual(REST_GENERATIONS * 16_384 + 1);
  });
});
