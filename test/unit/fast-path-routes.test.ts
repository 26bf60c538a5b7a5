import { describe, expect, it } from 'vitest';
import { RecentMap, REMEMBERED_ROUTES } from '../../src/http/heartbeat-fast-path.js';
import { HEARTBEAT_PATH } from '../../src/http/routes/consumer.js';

/*
 * The heartbeat fast path remembers each heartbeat URL with its members' steady replies
 * (src/http/heartbeat-fast-path.ts): a replica at the capacity goal (10,000 groups, issue 10)
 * must keep every one of them, or it rebuilds routes and replies on every pass over its members.
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
