/*
 * The coordinator under test, as a child process of the benchmarks (bench/support.ts startCoordinator): Redis store
 * (BENCH_REDIS_URL), HS256 secret BENCH_JWT_SECRET, heartbeat fast path on unless
 * BENCH_FAST_PATH=0, defaults for everything else but the settings in BENCH_OVERRIDES (JSON). Prints `LISTENING <port>`.
 *
 * Plain JavaScript so that plain `node` runs it against the compiled coordinator (dist/, as
 * `npm start` runs it); with BENCH_SERVER_DIR=src and `--import tsx` it runs the sources.
 *
 * Profiles of a phase only (bench/support.ts `profilePhase`): the line `PROFILE START` on stdin
 * starts the V8 CPU profiler (node:inspector), `PROFILE STOP <file>` writes what it took since
 * into <file> and prints `PROFILED <file>`.
 *
 * BENCH_LOOP_TURNS=<file>: at exit, appends to <file> how long the event loop's turns and the
 * GC pauses were (bench/loop-turns.mjs).
 */

import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';

const dir = process.env.BENCH_SERVER_DIR === 'src' ? '../src' : '../dist';
const { loadSettings } = await import(`${dir}/config/load.js`);
const { createLogger } = await import(`${dir}/observability/logger.js`);
const { startCoordinator } = await import(`${dir}/server.js`);

const redisUrl = process.env.BENCH_REDIS_URL;
const secret = process.env.BENCH_JWT_SECRET;
if (!redisUrl || !secret) throw new Error('BENCH_REDIS_URL and BENCH_JWT_SECRET are required');

const settings = loadSettings({
  env: {},
  overrides: {
    'http.port': 0,
    'http.host': '127.0.0.1',
    'store.type': 'redis',
    'store.url': redisUrl,
    'store.key-prefix': 'bench:coord',
    'security.jwt-secret': secret,
    'log.level': 'error',
    // Per-benchmark settings (session timeouts, lease TTL, replica id, ...).
    ...JSON.parse(process.env.BENCH_OVERRIDES ?? '{}'),
  },
});
const coordinator = await startCoordinator(settings, {
  heartbeatFastPath: process.env.BENCH_FAST_PATH !== '0',
  logger: createLogger({ level: 'error', format: 'text' }),
});
process.stdout.write(`LISTENING ${coordinator.port}\n`);

let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  coordinator.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.on('SIGTERM', stop);
// The parent holds our stdin open: when it goes away, so do we.
process.stdin.on('end', stop);
process.stdin.resume();

let session = null;
/*
 * BENCH_HEAP_SAMPLING=live|major|minor: a profiled phase also samples allocations (V8's
 * sampling heap profiler) into <name>.heapprofile: `live` counts what is still alive when the
 * phase ends, `major` adds what died in the old generation meanwhile (it outlived the young GCs:
 * garbage that grows the heap until a full GC), `minor` adds what died young too.
 */
const heapSampling = (() => {
  const kind = process.env.BENCH_HEAP_SAMPLING;
  if (!kind) return null;
  if (!['live', 'major', 'minor'].includes(kind))
    throw new Error(`BENCH_HEAP_SAMPLING is live, major or minor, not ${kind}`);
  return {
    samplingInterval: 16_384,
    includeObjectsCollectedByMajorGC: kind !== 'live',
    includeObjectsCollectedByMinorGC: kind === 'minor',
  };
})();
let pending = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  pending += chunk;
  let newline;
  while ((newline = pending.indexOf('\n')) >= 0) {
    const line = pending.slice(0, newline).trim();
    pending = pending.slice(newline + 1);
    void profileCommand(line);
  }
});

async function profileCommand(line) {
  if (line === 'PROFILE START') {
    session = new Session();
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.start');
    if (heapSampling !== null) await session.post('HeapProfiler.startSampling', heapSampling);
  } else if (line.startsWith('PROFILE STOP ') && session) {
    const file = line.slice('PROFILE STOP '.length);
    const { profile } = await session.post('Profiler.stop');
    if (heapSampling !== null) {
      const sampled = await session.post('HeapProfiler.stopSampling');
      writeFileSync(file.replace(/\.cpuprofile$/, '.heapprofile'), JSON.stringify(sampled.profile));
    }
    session.disconnect();
    session = null;
    writeFileSync(file, JSON.stringify(profile));
    process.stdout.write(`PROFILED ${file}\n`);
  }
}

// Diagnostics (bench/loop-turns.mjs): how long the event loop's turns and GC pauses were.
if (process.env.BENCH_LOOP_TURNS) {
  const { recordLoopTurns } = await import('./loop-turns.mjs');
  recordLoopTurns(process.env.BENCH_LOOP_TURNS);
}
