import { describe, expect, it } from 'vitest';
import { CHANGE, useCoordinator, type TestCoordinator } from '../support/coordinator.js';
import { rawConnect } from '../support/raw-http.js';

/*
 * An events stream whose client stops reading (a stalled tab, a stuck proxy) must not keep
 * every transition of a busy group in the coordinator's memory for as long as it stays
 * connected: past a bound of unread events it is cut off (docs/operations.md#http-timeouts).
 */

/** Far more transitions than the socket buffers and the bound hold together (about 850 B each). */
const MOST_TRANSITIONS = 30_000;
const WORKERS = 8;

async function cutCount(c: TestCoordinator): Promise<number> {
  const metric = await c.services.metrics.eventStreamsCut.get();
  return metric.values[0]?.value ?? 0;
}

describe('an events stream whose client does not read', () => {
  let c: TestCoordinator;
  // Joins are not held back for other groups' sake here: the test is about the stream.
  useCoordinator(
    {
      store: 'memory',
      overrides: { 'fairness.busy-share': 1, 'membership.assignment-debounce': '0ms' },
    },
    (coordinator) => (c = coordinator),
  );

  it('is cut off once its unread backlog passes the bound, and the replica lets it go', async () => {
    const created = await c.call('PUT', '/coord/v1/admin/streams/slow-reader/groups/g', {
      user: 'writer',
      body: { shardCount: 1, ...CHANGE },
    });
    expect(created.status).toBe(201);

    const reader = await rawConnect(c.port);
    reader.socket.write(
      'GET /coord/v1/monitoring/streams/slow-reader/groups/g/events HTTP/1.1\r\nHost: x\r\n' +
        `Authorization: Bearer ${c.token('reader')}\r\n\r\n`,
    );
    await reader.until((text) => text.includes('event: snapshot'), 5_000);
    // From here on the client reads nothing.
    reader.socket.pause();

    // Members join and leave (one transition each, with a long member id) until the stream is
    // cut, or far past what the socket buffers and the bound could hold.
    let transitions = 0;
    // Driven through the replica's own coordinator (not HTTP) to make them quickly: the stream
    // under test is the real one, on its real socket.
    const ref = { streamPrefix: 'slow-reader', consumerGroup: 'g' };
    const worker = async (n: number) => {
      const memberId = `${'m'.repeat(120)}-${n}`;
      const beat = (memberEpoch: number) =>
        c.services.coordinator.heartbeat(ref, {
          memberId,
          memberEpoch,
          assignmentEpoch: 0,
          metadataVersion: 0,
          currentAssignments: [],
          revokeProgress: [],
          principal: 'consumer',
        });
      while (transitions < MOST_TRANSITIONS && (await cutCount(c)) === 0) {
        await beat(0);
        await beat(-1);
        transitions += 2;
      }
    };
    await Promise.all(Array.from({ length: WORKERS }, (_, n) => worker(n)));
    expect(await cutCount(c)).toBe(1);

    // Read again: what the sockets held before the cut arrives, then the connection's end (an
    // open stream would go on with keep-alives, never closing).
    reader.socket.resume();
    await reader.until(() => reader.isClosed(), 10_000);
  });
});
