/**
 * The streams reader on a real redis-server: a group's shards are read a slice at a time, in
 * order, so that a large group's reading never puts thousands of commands and their replies
 * into one turn of the event loop (docs/architecture.md#fairness-between-groups), and a reading
 * that timed out sends nothing more.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { READ_SLICE, StreamsReader } from '../../src/streams/streams-reader.js';
import { startRedisServer, type RedisServerHandle } from '../support/redis-server.js';

let server: RedisServerHandle;
let redis: Redis;
let reader: StreamsReader;

beforeAll(async () => {
  server = await startRedisServer();
  redis = server.client();
  reader = new StreamsReader({ url: server.url });
});
afterAll(async () => {
  await reader.close();
  await server.stop();
});

/** Wraps `reader`'s client: counts what it sends, each command `delayMs` late when asked. */
function instrumented(reader: StreamsReader, delayMs = 0) {
  const client = (reader as unknown as { client: Redis }).client;
  const send = client.sendCommand.bind(client);
  const counts = { sent: 0, inFlight: 0, most: 0 };
  client.sendCommand = (command: Parameters<Redis['sendCommand']>[0]) => {
    counts.sent++;
    counts.inFlight++;
    counts.most = Math.max(counts.most, counts.inFlight);
    const settled = () => counts.inFlight--;
    command.promise.then(settled, settled);
    if (delayMs === 0) return send(command);
    setTimeout(() => void send(command), delayMs);
    return command.promise;
  };
  return { counts, restore: () => (client.sendCommand = send) };
}

describe('StreamsReader.read', () => {
  it('reads a 300-shard group a slice at a time, every reading in the order asked', async () => {
    const prefix = `orders-${randomBytes(4).toString('hex')}`;
    const shards = 300;
    const streams = Array.from({ length: shards }, (_, shard) => `${prefix}:${shard}`);
    // Shard n holds n % 7 entries; every other one has the group, reading none of them.
    const setup = redis.pipeline();
    streams.forEach((stream, shard) => {
      for (let i = 0; i < shard % 7; i++) setup.xadd(stream, '*', 'n', String(i));
      if (shard % 2 === 0) setup.xgroup('CREATE', stream, 'billing', '0', 'MKSTREAM');
    });
    await setup.exec();

    // What the reader has sent and not yet had answered, at most, over the whole read.
    const { counts, restore } = instrumented(reader);
    try {
      const readings = await reader.read(streams, 'billing');
      expect(readings.map((r) => r.stream)).toEqual(streams);
      readings.forEach((reading, shard) => {
        expect(reading.length).toBe(shard % 7);
        expect(reading.noConsumerGroup).toBe(shard % 2 === 1 && shard % 7 > 0);
      });
      // A script call and two XLENs (the group's dead letters and the shared ones) per stream,
      // one slice at a time.
      expect(counts.most).toBeLessThanOrEqual(3 * READ_SLICE);
      expect(counts.most).toBeGreaterThan(0);
    } finally {
      restore();
    }
  });

  it('sends no further slice once the reading timed out', async () => {
    const slow = new StreamsReader({ url: server.url, timeoutMs: 100 });
    // Every command answered 30 ms late: each slice takes about that long.
    const { counts, restore } = instrumented(slow, 30);
    try {
      const streams = Array.from({ length: 1_024 }, (_, shard) => `late:${shard}`);
      await expect(slow.read(streams, 'billing')).rejects.toMatchObject({
        code: 'STREAMS_UNAVAILABLE',
      });
      const sentByThen = counts.sent;
      expect(sentByThen).toBeLessThan(2 * streams.length);
      // What was sent before the timeout is answered; nothing more goes out.
      await vi.waitFor(() => expect(counts.inFlight).toBe(0));
      expect(counts.sent).toBe(sentByThen);
    } finally {
      restore();
      await slow.close();
    }
  });

  it('bounded per slice, reads on past the whole bound as long as each slice is answered in time', async () => {
    // Each command answered 400 ms late: 5 slices in a row take at least 2 s, twice the 1 s
    // bound, while one slice needs 400 ms of it (a large group on a distant Redis).
    const far = new StreamsReader({ url: server.url, timeoutMs: 1_000 });
    // Connected first: only the reading's own commands are late (and counted).
    await far.read(['warm:0'], 'billing');
    const { counts, restore } = instrumented(far, 400);
    try {
      const streams = Array.from({ length: 5 * READ_SLICE }, (_, shard) => `far:${shard}`);
      await expect(far.read(streams, 'billing')).rejects.toMatchObject({
        code: 'STREAMS_UNAVAILABLE',
      });
      await vi.waitFor(() => expect(counts.inFlight).toBe(0), { timeout: 5_000 });
      const sentBefore = counts.sent;
      const readings = await far.read(streams, 'billing', { bound: 'slice' });
      expect(readings.map((r) => r.stream)).toEqual(streams);
      expect(readings.every((r) => r.missing && r.error === null)).toBe(true);
      expect(counts.sent - sentBefore).toBe(3 * streams.length);
    } finally {
      restore();
      await far.close();
    }
  });

  it('bounded per slice, a slice not answered in time is STREAMS_UNAVAILABLE and ends the reading', async () => {
    const slow = new StreamsReader({ url: server.url, timeoutMs: 100 });
    await slow.read(['warm:0'], 'billing');
    // Every command answered 1 s late: ten times the bound of its slice.
    const { counts, restore } = instrumented(slow, 1_000);
    try {
      const streams = Array.from({ length: 4 * READ_SLICE }, (_, shard) => `stuck:${shard}`);
      await expect(slow.read(streams, 'billing', { bound: 'slice' })).rejects.toMatchObject({
        code: 'STREAMS_UNAVAILABLE',
      });
      await vi.waitFor(() => expect(counts.inFlight).toBe(0), { timeout: 5_000 });
      // The first slice only.
      expect(counts.sent).toBe(3 * READ_SLICE);
    } finally {
      restore();
      await slow.close();
    }
  });
});
