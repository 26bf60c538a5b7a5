/*
 * A diagnostic of the coordinator under a benchmark (bench/coordinator-server.mjs with
 * BENCH_LOOP_TURNS=<file>): how long each turn of the event loop took (from one check phase to
 * the next, with the process's CPU time in it), and the GC pauses by kind. At exit it appends
 * to <file> a line of GC totals, the wall and CPU time of the turns over 8 ms
 * (BENCH_LONG_TURN_MS to change it), a histogram of turn lengths, and one line per such turn:
 * `<start µs> <end µs> <ms> cpu <ms>[ gc <kind> <ms>, ...]` on the monotonic clock that
 * `--cpu-prof` profiles use (so that a profile's samples can be cut to the long turns), with the
 * GC pauses over 1 ms that fell in it. The CPU time counts every thread of the process (GC
 * helpers too): a turn with less CPU than wall time waited for a core. Another group's heartbeat
 * waits for the turn it arrives in: its p99 follows the longest turns.
 *
 * It costs: a setImmediate per turn keeps the loop from ever waiting in poll (it spins when
 * idle) and reads the CPU time each turn. For diagnosis only; no figure of record uses it.
 */

import { appendFileSync } from 'node:fs';
import { PerformanceObserver, constants, performance } from 'node:perf_hooks';
import { setImmediate } from 'node:timers';

const LONG_MS = Number(process.env.BENCH_LONG_TURN_MS ?? 8);
const BUCKETS_MS = [1, 2, 5, 10, 20, 50, 100];
const GC_KINDS = {
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
};

export function recordLoopTurns(file) {
  const counts = new Array(BUCKETS_MS.length + 1).fill(0);
  const long = [];
  const gc = {};
  /** GC pauses over 1 ms, as [start, end] on the turns' clock (µs), by kind. */
  const pauses = [];
  // performance.now() (ms since timeOrigin) onto process.hrtime (µs).
  const originUs = Number(process.hrtime.bigint() / 1000n) - performance.now() * 1000;
  let wallLong = 0;
  let cpuLong = 0;
  let last = process.hrtime.bigint();
  let lastCpu = process.cpuUsage();

  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const kind = GC_KINDS[entry.detail?.kind] ?? String(entry.detail?.kind);
      const g = (gc[kind] ??= { n: 0, ms: 0, over5ms: 0, maxMs: 0 });
      g.n++;
      g.ms += entry.duration;
      if (entry.duration > 5) g.over5ms++;
      g.maxMs = Math.max(g.maxMs, entry.duration);
      if (entry.duration > 1) {
        const start = originUs + entry.startTime * 1000;
        pauses.push([start, start + entry.duration * 1000, kind]);
      }
    }
  }).observe({ entryTypes: ['gc'] });

  const turn = () => {
    const now = process.hrtime.bigint();
    const cpu = process.cpuUsage(lastCpu);
    lastCpu = process.cpuUsage();
    const ms = Number(now - last) / 1e6;
    const cpuMs = (cpu.user + cpu.system) / 1000;
    let bucket = 0;
    while (bucket < BUCKETS_MS.length && ms > BUCKETS_MS[bucket]) bucket++;
    counts[bucket]++;
    if (ms > LONG_MS) {
      long.push([last / 1000n, now / 1000n, ms, cpuMs]);
      wallLong += ms;
      cpuLong += cpuMs;
    }
    last = now;
    setImmediate(turn);
  };
  setImmediate(turn);

  process.on('exit', () => {
    const round = (_key, value) => (typeof value === 'number' ? Number(value.toFixed(1)) : value);
    // Each long turn with the GC pauses that fell in it (ms, by kind).
    const lines = long.map(([from, to, ms, cpuMs]) => {
      const inTurn = pauses.filter(([s, e]) => e > Number(from) && s < Number(to));
      const gcMs = inTurn.map(([s, e, kind]) => `${kind} ${((e - s) / 1000).toFixed(1)}`);
      return `${from} ${to} ${ms.toFixed(1)} cpu ${cpuMs.toFixed(1)}${gcMs.length ? ` gc ${gcMs.join(', ')}` : ''}`;
    });
    const histogram = BUCKETS_MS.map((b, i) => `<=${b}ms:${counts[i]}`).join(' ');
    appendFileSync(
      file,
      `gc ${JSON.stringify(gc, round)}\n` +
        `turns over ${LONG_MS} ms: wall ${wallLong.toFixed(0)} ms, cpu ${cpuLong.toFixed(0)} ms\n` +
        `turns ${histogram} >${BUCKETS_MS.at(-1)}ms:${counts[BUCKETS_MS.length]}\n` +
        lines.join('\n') +
        '\n',
    );
  });
}
