import { Redis } from 'ioredis';
import type { Benchmark } from './context.js';
import { commandCalls, median, startRedis, verdict, type Row } from './support.js';
import { StreamsReader } from '../src/streams/streams-reader.js';

/*
 * The cost of the lag refresh (docs/operations.md#lag): each owner reads the lag of up to
 * `coordinator.streams.lag-budget` (1,000) of its groups per `lag-interval`, 16 groups at a time,
 * each group one Lua call per shard plus the dead-letter XLEN, auto-pipelined. Measured here on
 * 10,000 groups of 4 shards on one redis-server, against the same readings made the way a user
 * writes them by hand (XLEN, XINFO GROUPS and XPENDING per stream, one awaited call after
 * another), in interleaved rounds. Reported: wall time and replica CPU per interval's budget,
 * Redis commands per group, and how long a whole 10,000-group sweep takes.
 */

const GROUPS = 10_000;
const SHARDS = 4;
const BUDGET = 1_000;
const CONCURRENCY = 16;

async function fill(redis: Redis, groups: number): Promise<void> {
  for (let g = 0; g < groups; g += 250) {
    const pipeline = redis.pipeline();
    for (let i = g; i < Math.min(groups, g + 250); i++) {
      for (let s = 0; s < SHARDS; s++) {
        const stream = `bench-${i}:${s}`;
        for (let e = 0; e < 5; e++) pipeline.xadd(stream, '*', 'key', `k${e}`);
        pipeline.xgroup('CREATE', stream, 'g', '0');
        pipeline.xreadgroup('GROUP', 'g', 'c', 'COUNT', 2, 'STREAMS', stream, '>');
      }
    }
    await pipeline.exec();
  }
}

/** Reads `groups` groups (from `first`), `CONCURRENCY` at a time; returns wall ms and CPU ms. */
async function timed(
  groups: number,
  first: number,
  readGroup: (group: number) => Promise<unknown>,
): Promise<{ wallMs: number; cpuMs: number }> {
  const cpu = process.cpuUsage();
  const start = performance.now();
  for (let i = 0; i < groups; i += CONCURRENCY) {
    const batch = [];
    for (let j = i; j < Math.min(groups, i + CONCURRENCY); j++) batch.push(readGroup(first + j));
    await Promise.all(batch);
  }
  const used = process.cpuUsage(cpu);
  return { wallMs: performance.now() - start, cpuMs: (used.user + used.system) / 1000 };
}

const streamsOf = (group: number) =>
  Array.from({ length: SHARDS }, (_, s) => `bench-${group}:${s}`);

export const lag: Benchmark = async (ctx) => {
  const groups = ctx.quick ? 2_000 : GROUPS;
  const rounds = ctx.quick ? 3 : 5;
  const server = await startRedis();
  const admin = new Redis(server.url);
  ctx.log(`filling ${groups} groups × ${SHARDS} shards (5 entries, 2 delivered, each)`);
  await fill(admin, groups);
  const reader = new StreamsReader({ url: server.url });
  const byHand = new Redis(server.url);
  const ours = (group: number) => reader.read(streamsOf(group), 'g');
  const handWritten = async (group: number) => {
    for (const stream of streamsOf(group)) {
      await byHand.xlen(stream);
      await byHand.xinfo('GROUPS', stream);
      await byHand.xpending(stream, 'g', '-', '+', 1);
      await byHand.xlen(`${stream}:dead`);
    }
  };
  const oursRuns: Array<{ wallMs: number; cpuMs: number }> = [];
  const handRuns: Array<{ wallMs: number; cpuMs: number }> = [];
  let commandsPerGroup = 0;
  for (let round = 0; round < rounds; round++) {
    const first = (round * BUDGET) % Math.max(1, groups - BUDGET);
    const before = await commandCalls(admin);
    oursRuns.push(await timed(BUDGET, first, ours));
    const after = await commandCalls(admin);
    let calls = 0;
    for (const [command, n] of after) calls += n - (before.get(command) ?? 0);
    commandsPerGroup = calls / BUDGET;
    handRuns.push(await timed(BUDGET, first, handWritten));
  }
  const sweep = await timed(groups, 0, ours);
  await reader.close();
  admin.disconnect();
  byHand.disconnect();
  const wall = median(oursRuns.map((r) => r.wallMs));
  const cpu = median(oursRuns.map((r) => r.cpuMs));
  const handWall = median(handRuns.map((r) => r.wallMs));
  const handCpu = median(handRuns.map((r) => r.cpuMs));
  ctx.log(
    `lag-budget ${BUDGET} groups: ${wall.toFixed(0)} ms wall, ${cpu.toFixed(0)} ms CPU (by hand ${handWall.toFixed(0)} ms, ${handCpu.toFixed(0)} ms CPU); ${commandsPerGroup.toFixed(1)} Redis commands per group (script calls and the commands inside them); all ${groups} groups in ${(sweep.wallMs / 1000).toFixed(1)} s`,
  );
  const ratio = wall / handWall;
  const rows: Row[] = [
    {
      bench: 'lag',
      metric: `refresh of ${BUDGET} groups × ${SHARDS} shards, wall ms`,
      value: wall.toFixed(0),
      baseline: `${handWall.toFixed(0)} (XINFO by hand)`,
      ratio: `${ratio.toFixed(2)} ×`,
      goal: '≤ 1 × by hand; ≤ 15 s interval',
      verdict: verdict(ratio <= 1 && wall < 15_000),
    },
    {
      bench: 'lag',
      metric: 'replica CPU per group read, ms',
      value: (cpu / BUDGET).toFixed(3),
      baseline: (handCpu / BUDGET).toFixed(3),
      ratio: `${(cpu / handCpu).toFixed(2)} ×`,
      goal: '-',
      verdict: '-',
    },
    {
      bench: 'lag',
      metric: `all ${groups} groups, one sweep, s`,
      value: (sweep.wallMs / 1000).toFixed(1),
      baseline: '-',
      ratio: '-',
      goal: `≤ ${(groups / BUDGET) * 15} s (${groups / BUDGET} intervals)`,
      verdict: verdict(sweep.wallMs / 1000 <= (groups / BUDGET) * 15),
    },
  ];
  return rows;
};
