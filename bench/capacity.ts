import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { loadSettings } from '../src/config/load.js';
import type { HeartbeatReply } from '../src/machines/protocol.js';
import type { BenchContext } from './context.js';
import { assertAllOk, type LoadResult } from './load.js';
import {
  CONSUMER_TOKEN,
  applyReply,
  benchSettings,
  cpuSecondsOf,
  createGroup,
  fmt,
  gcPausesIn,
  heartbeatBody,
  heartbeatPath,
  median,
  metricIn,
  metricsTextOf,
  procStatFields,
  profilePhase,
  sleep,
  startCoordinator,
  startRedis,
  TICKS_PER_S,
  verdict,
  warmUpScrapes,
  type Child,
  type GcPauses,
  type MemberState,
  type Row,
} from './support.js';
import { runWrk, wrkRequestsScript } from './wrk.js';

/*
 * Capacity of one replica as deployed (goal: 10,000 groups and 100,000 members on one
 * replica in ≤ 1 GiB RSS, heartbeat throughput at that size ≥ 0.8 × the small case).
 *
 * Two coordinator child processes (dist/ under plain node, Redis store, each on its own
 * redis-server, default settings): the large one gets 10,000 groups of 16 shards created through
 * the admin API and 10 members in each joined and driven to steady state over HTTP (keep-alive,
 * a bounded number of groups in flight); the small one holds one group of the same shape. The
 * large process's RSS is read from /proc/<pid>/status (VmRSS) once steady and again after the
 * rounds. Throughput: wrk (its own process, one thread, 64 connections) cycling through every
 * member's steady heartbeat (its own path and body, in a shuffled order, from a random start
 * each round; each request with its own X-Request-Id, as the SDK sends, and as many requests in
 * the small case's cycle as in the large one's, so the generator does the same work in both),
 * interleaved rounds small / large, medians, ratio. CPU time per heartbeat of each
 * coordinator (/proc/<pid>/stat) is printed beside it, and the large replica's CPU use while no
 * heartbeat arrives (lease renewals of its 10,000 groups, the registry, the sweeps).
 * `--profile <dir>` profiles that idle period and each measured round alone (node:inspector in
 * the coordinator, bench/support.ts `profilePhase`) into <dir>/capacity/.
 */

const SHARDS = 16;
const MEMBERS_PER_GROUP = 10;
const GOAL_GROUPS = 10_000;
/** Groups being created and driven to steady state at once while building. */
const GROUPS_IN_FLIGHT = 96;
const SESSION_MS = 1_800_000;

interface Group {
  readonly stream: string;
  readonly group: string;
  readonly members: MemberState[];
}

/** VmRSS and VmHWM of a process in MiB (/proc/<pid>/status). */
export function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) =>
    Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1]);
  return { rss: kb('VmRSS') / 1024, peak: kb('VmHWM') / 1024 };
}

/**
 * Where a process's CPU time went, in s: the main thread's user and system time, and every
 * other thread's (V8's GC and compiler helpers, libuv's pool) from /proc/<pid>/task/; and the
 * whole process's minor page faults (memory the kernel had to map in).
 */
function cpuSplitOf(pid: number): {
  user: number;
  system: number;
  others: number;
  faults: number;
} {
  const times = (path: string) => {
    const fields = procStatFields(path);
    return { user: Number(fields[11]) / TICKS_PER_S, system: Number(fields[12]) / TICKS_PER_S };
  };
  const faults = Number(procStatFields(`/proc/${pid}/stat`)[7]);
  const main = times(`/proc/${pid}/task/${pid}/stat`);
  let others = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    if (tid === String(pid)) continue;
    try {
      const t = times(`/proc/${pid}/task/${tid}/stat`);
      others += t.user + t.system;
    } catch {
      // The thread ended meanwhile.
    }
  }
  return { ...main, others, faults };
}

/** `cpuSplitOf` now minus `from`, in µs per `per` (heartbeats, or ms: `unit`). */
function cpuSplitSince(
  pid: number,
  from: ReturnType<typeof cpuSplitOf>,
  per: number,
  unit = 'hb',
): string {
  const now = cpuSplitOf(pid);
  const us = (s: number) => fmt((s * 1e6) / per);
  return (
    `main ${us(now.user - from.user)} user + ${us(now.system - from.system)} sys, ` +
    `other threads ${us(now.others - from.others)}; ` +
    `${((now.faults - from.faults) / per).toFixed(2)} page faults/${unit}`
  );
}

/**
 * From the coordinator's own `/metrics`: its GC pauses so far, and the heartbeats it answered
 * again from the fast path's memory (`coord_heartbeats_repeated_total`).
 */
async function metricsOf(port: number): Promise<{ gc: GcPauses; repeated: number }> {
  const text = await metricsTextOf(port);
  const repeated = metricIn(text, 'coord_heartbeats_repeated_total');
  return { gc: gcPausesIn(text), repeated };
}

/**
 * Where a replica's memory is, from its own `/metrics` (prom-client's Node.js gauges), in MiB:
 * each V8 heap space's size and what of it is in use (old, new, code, large objects), and
 * memory outside the heap (Buffers, strings handed to native code). RSS above their sum is the
 * allocator's and the process's own.
 */
async function heapSpacesOf(port: number): Promise<string> {
  const text = await metricsTextOf(port);
  const mib = (bytes: number) => fmt(bytes / 1_048_576);
  const space = (name: string, label: string) =>
    `${label} ${mib(metricIn(text, `coord_process_nodejs_heap_space_size_used_bytes{space="${name}"}`))}` +
    `/${mib(metricIn(text, `coord_process_nodejs_heap_space_size_total_bytes{space="${name}"}`))}`;
  return (
    `heap used/size MiB: ${space('old', 'old')}, ${space('new', 'new')}, ` +
    `${space('large_object', 'large objects')}, ${space('code', 'code')}; ` +
    `external ${mib(metricIn(text, 'coord_process_nodejs_external_memory_bytes'))}`
  );
}

/**
 * The GC pauses since `from`: young-generation (minor) and major ones, their number, mean and
 * main-thread µs per heartbeat (`per`): with Node's default young generation this is where
 * the large and the small case parted (docs/BENCHMARKS.md).
 */
function gcPausesSince(from: GcPauses, now: GcPauses, per: number): string {
  const since = (kind: string) => {
    const a = from.get(kind) ?? { count: 0, seconds: 0 };
    const b = now.get(kind) ?? { count: 0, seconds: 0 };
    return { count: b.count - a.count, ms: (b.seconds - a.seconds) * 1_000 };
  };
  const minor = since('minor');
  const [major, incremental] = [since('major'), since('incremental')];
  const old = { count: major.count + incremental.count, ms: major.ms + incremental.ms };
  const mean = (k: { count: number; ms: number }) => (k.count === 0 ? 0 : k.ms / k.count);
  return (
    `GC ${fmt(((minor.ms + old.ms) * 1_000) / per)} µs/hb: ` +
    `${minor.count} minor of ${fmt(mean(minor), 1)} ms, ` +
    `${old.count} major/incremental of ${fmt(mean(old), 1)} ms`
  );
}

function newMembers(count: number): MemberState[] {
  return Array.from({ length: count }, (_, i) => ({
    memberId: `member-${String(i).padStart(5, '0')}`,
    memberEpoch: 0,
    assignmentEpoch: 0,
    metadataVersion: 0,
    currentAssignments: [],
  }));
}

/**
 * Keep-alive connections for building the state: node:http's client costs this process about
 * half the CPU that fetch does, and the coordinator shares the two cores with it.
 */
const agent = new Agent({ keepAlive: true, maxSockets: GROUPS_IN_FLIGHT });

/**
 * POSTs `body` as JSON with the token over {@link agent}: the status and the reply's text. A
 * request on a kept-alive socket that the coordinator closed as idle (`coordinator.http.
 * keep-alive-timeout`) just as it was sent fails with ECONNRESET (or EPIPE) before the
 * coordinator read it; it is sent once more, as node's documentation advises (`reusedSocket`).
 * A request the coordinator did handle before such a reset would be sent twice: in this build
 * a heartbeat repeated, or a group created twice, which fails the run with its 409.
 */
async function postKeepAlive(
  port: number,
  path: string,
  token: string,
  body: unknown,
): Promise<{ status: number; text: string }> {
  try {
    return await postOnce(port, path, token, body);
  } catch (error) {
    if (!(error instanceof ResetOnReuse)) throw error;
    return postOnce(port, path, token, body);
  }
}

/** A request on a reused socket that the server had closed: never read by it. */
class ResetOnReuse extends Error {}

function postOnce(
  port: number,
  path: string,
  token: string,
  body: unknown,
): Promise<{ status: number; text: string }> {
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
          authorization: `Bearer ${token}`,
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        res.on('error', reject);
      },
    );
    req.on('error', (error: NodeJS.ErrnoException) =>
      reject(
        req.reusedSocket && (error.code === 'ECONNRESET' || error.code === 'EPIPE')
          ? new ResetOnReuse(error.message, { cause: error })
          : error,
      ),
    );
    req.end(payload);
  });
}

/** One heartbeat of `m` over HTTP, its reply applied; true if anything moved. */
async function beat(port: number, g: Group, m: MemberState): Promise<boolean> {
  const res = await postKeepAlive(
    port,
    heartbeatPath(g.stream, g.group),
    CONSUMER_TOKEN,
    heartbeatBody(m, m.memberEpoch === 0 ? { sessionTimeoutMs: SESSION_MS } : {}),
  );
  if (res.status !== 200) throw new Error(`heartbeat ${g.stream}: ${res.status} ${res.text}`);
  return applyReply(m, JSON.parse(res.text) as HeartbeatReply);
}

/**
 * Creates the group and beats its members one after the other, pass after pass, until every
 * shard is owned and a whole pass moved nothing: each reply then repeats what its member holds,
 * so nothing is left to move (the rounds are checked on a sample afterwards). One after the
 * other, a member that gives shards up is heard before the others ask for them, so a group is
 * steady in three passes (join, assignment, check). Members ask for the longest session (30 min) so that building
 * never expires anyone. Returns the number of heartbeats sent.
 */
async function steadyGroup(port: number, g: Group): Promise<number> {
  await createGroup(port, g.stream, g.group, SHARDS, postKeepAlive);
  let sent = 0;
  for (let pass = 0; pass < 200; pass++) {
    let moved = false;
    for (const m of g.members) {
      const held = m.currentAssignments.length;
      if (await beat(port, g, m)) moved = true;
      sent++;
      // Revoked shards are dropped at once, and said so at once (as the SDK's consumer does).
      if (m.memberEpoch > 0 && m.currentAssignments.length < held) {
        await beat(port, g, m);
        sent++;
      }
    }
    const owned = g.members.reduce((n, m) => n + m.currentAssignments.length, 0);
    if (!moved && owned === SHARDS) return sent;
    // A join's recompute is debounced (100 ms): give it the time before asking again.
    if (pass === 0) await sleep(100);
  }
  throw new Error(`${g.stream}/${g.group}: no steady state`);
}

/** Builds `count` groups on the coordinator at `port`, printing progress. */
export async function build(
  ctx: BenchContext,
  name: string,
  port: number,
  pid: number,
  count: number,
): Promise<{
  groups: Group[];
  ms: number;
  heartbeats: number;
  cpu: { coordinator: number; bench: number };
}> {
  const groups: Group[] = Array.from({ length: count }, (_, i) => ({
    stream: `cap-${String(i).padStart(5, '0')}`,
    group: 'g',
    members: newMembers(MEMBERS_PER_GROUP),
  }));
  const started = Date.now();
  const cpuFrom = cpuSecondsOf(pid);
  const ownCpuFrom = process.cpuUsage();
  let next = 0;
  let done = 0;
  let heartbeats = 0;
  const progress =
    count > 1
      ? setInterval(() => {
          const s = (Date.now() - started) / 1000;
          ctx.log(
            `  ${name}: ${fmt(done)} of ${fmt(count)} groups steady, ${fmt(heartbeats)} heartbeats ` +
              `(${fmt(heartbeats / s)}/s), ${s.toFixed(0)} s`,
          );
        }, 10_000)
      : null;
  try {
    await Promise.all(
      Array.from({ length: Math.min(GROUPS_IN_FLIGHT, count) }, async () => {
        while (next < count) {
          const sent = await steadyGroup(port, groups[next++] as Group);
          heartbeats += sent;
          done++;
        }
      }),
    );
  } finally {
    if (progress) clearInterval(progress);
  }
  const own = process.cpuUsage(ownCpuFrom);
  return {
    groups,
    ms: Date.now() - started,
    heartbeats,
    cpu: { coordinator: cpuSecondsOf(pid) - cpuFrom, bench: (own.user + own.system) / 1e6 },
  };
}

/** Fisher–Yates with a fixed seed: the same order every run, groups interleaved. */
function shuffled<T>(items: readonly T[]): T[] {
  const out = [...items];
  let seed = 0x2545f491;
  for (let i = out.length - 1; i > 0; i--) {
    seed = (seed * 1103515245 + 12345) >>> 0;
    const j = seed % (i + 1);
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

/**
 * The steady heartbeats wrk sends: `count` requests, each member's in turn (its group's path and
 * its body) in a fixed shuffled order, each with an `X-Request-Id` of its own as the SDK sends
 * (a UUID per request). Both cases get the same count, the large replica's member count, so the
 * generator's work is the same in both: its table of prebuilt requests is as large (LuaJIT
 * interns equal strings: the ids make each request its own string), and the ratio measures the
 * coordinator's state, not wrk's (docs/BENCHMARKS.md, capacity).
 */
function steadyRequests(groups: readonly Group[], count: number) {
  const beats = shuffled(
    groups.flatMap((g) =>
      g.members.map((m) => ({
        path: heartbeatPath(g.stream, g.group),
        body: JSON.stringify(heartbeatBody(m)),
      })),
    ),
  );
  return Array.from({ length: count }, (_, i) => ({
    ...(beats[i % beats.length] as { path: string; body: string }),
    requestId: randomUUID(),
  }));
}

/** Beats a sample of members once more: each must be answered OK with nothing moved. */
async function checkSteady(port: number, groups: readonly Group[], sample: number) {
  const picked = shuffled(groups.flatMap((g) => g.members.map((m) => [g, m] as const))).slice(
    0,
    sample,
  );
  let next = 0;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (next < picked.length) {
        const [g, m] = picked[next++] as readonly [Group, MemberState];
        if (await beat(port, g, m))
          throw new Error(`${g.stream}/${m.memberId} was not steady after the rounds`);
      }
    }),
  );
}

/** A coordinator child's process id. */
const pidOf = (c: Child) => c.process.pid as number;

/** The large and the small replica's CPU while no request arrives, in % of a core. */
interface IdleCpu {
  readonly large: number;
  readonly small: number;
  /** The large replica's busiest second. */
  readonly largePeak: number;
  readonly seconds: number;
}

/**
 * Both replicas' CPU while no request arrives, over one interval of the lag refresh (the
 * coordinator's `streams.lag-interval`, with `BENCH_SETTINGS` over the default): lease renewals,
 * the registry, the sweeps, and the refresh's one pass over its budget of groups, which takes a
 * few hundred milliseconds in one burst each interval on a replica of thousands of groups. A
 * shorter window would hold that burst or not, by chance. Sampled each second from /proc.
 */
async function idleCpu(
  ctx: BenchContext,
  replicas: { readonly large: Child; readonly small: Child },
  profiles: string | null,
): Promise<IdleCpu> {
  const settings = loadSettings({ env: {}, overrides: benchSettings() });
  const seconds = Math.ceil(settings.streams['lag-interval'] / 1000);
  const largeFrom = cpuSecondsOf(pidOf(replicas.large));
  const smallFrom = cpuSecondsOf(pidOf(replicas.small));
  const split = cpuSplitOf(pidOf(replicas.large));
  const perSecond: number[] = [];
  await profilePhase(replicas.large, profiles, 'large-idle', async () => {
    let last = largeFrom;
    for (let i = 0; i < seconds; i++) {
      await sleep(1_000);
      const now = cpuSecondsOf(pidOf(replicas.large));
      perSecond.push((now - last) * 100);
      last = now;
    }
  });
  const idle = {
    large: ((cpuSecondsOf(pidOf(replicas.large)) - largeFrom) / seconds) * 100,
    small: ((cpuSecondsOf(pidOf(replicas.small)) - smallFrom) / seconds) * 100,
    largePeak: Math.max(...perSecond),
    seconds,
  };
  ctx.log(
    `  idle over ${seconds} s (one lag interval): large ${idle.large.toFixed(1)} % of a core ` +
      `(each second: ${perSecond.map((p) => p.toFixed(0)).join(' ')}), small ${idle.small.toFixed(1)} %; ` +
      `large, ms per s: ${cpuSplitSince(pidOf(replicas.large), split, seconds * 1_000, 'ms')}`,
  );
  return idle;
}

export async function capacity(ctx: BenchContext): Promise<Row[]> {
  const groupCount = ctx.quick ? 2_000 : GOAL_GROUPS;
  const rounds = ctx.quick ? 3 : 7;
  const durationMs = 3_000;
  const connections = 64;
  const full = groupCount === GOAL_GROUPS;
  const label = `${fmt(groupCount)} groups / ${fmt(groupCount * MEMBERS_PER_GROUP)} members`;
  ctx.log(
    `  one replica as deployed (dist/, Redis store, default settings, HTTP): ${label} x ${SHARDS} shards` +
      `${full ? '' : ' (--quick: fewer groups than the goal, no verdict)'} vs 1 group of that shape on a second ` +
      `coordinator; wrk ${connections} connections, ${rounds} interleaved rounds x ${durationMs / 1000} s`,
  );
  // --profile: the idle period and each measured round, each profiled alone (not the build).
  const profiles = ctx.profileDir('capacity');
  const large = await startCoordinator('coordinator (large)', await startRedis());
  const small = await startCoordinator('coordinator (small)', await startRedis());
  const rssBefore = memoryOf(pidOf(large)).rss;

  const s = await build(ctx, 'small', small.port, pidOf(small), 1);
  const l = await build(ctx, 'large', large.port, pidOf(large), groupCount);
  ctx.log(
    `  large: ${label} at steady state in ${(l.ms / 1000).toFixed(0)} s ` +
      `(${fmt(groupCount)} groups created, ${fmt(l.heartbeats)} heartbeats, ${fmt(l.heartbeats / (l.ms / 1000))}/s; ` +
      `CPU s: coordinator ${fmt(l.cpu.coordinator)}, this process ${fmt(l.cpu.bench)})`,
  );

  await sleep(2_000);
  const steadyMem = memoryOf(pidOf(large));
  const smallMem = memoryOf(pidOf(small));
  ctx.log(
    `  RSS: large ${fmt(steadyMem.rss)} MiB (${fmt(rssBefore)} at start, peak so far ${fmt(steadyMem.peak)}), ` +
      `small ${fmt(smallMem.rss)} MiB; large ${await heapSpacesOf(large.port)}`,
  );
  const idle = await idleCpu(ctx, { large, small }, profiles);

  // BENCH_CAPACITY_GROUPS=<n> (diagnostic): wrk drives only the first n groups of the large
  // replica, which still holds them all: the cost of a large heap apart from that of touching
  // many groups' state.
  const driven = Number(process.env.BENCH_CAPACITY_GROUPS ?? 0) || l.groups.length;
  if (driven < l.groups.length)
    ctx.log(`  BENCH_CAPACITY_GROUPS: wrk drives ${fmt(driven)} of the large replica's groups`);
  // Both cases cycle as many requests (see steadyRequests).
  const requests = driven * MEMBERS_PER_GROUP;
  const cases = [
    { key: 'small', child: small, groups: s.groups },
    { key: 'large', child: large, groups: l.groups.slice(0, driven) },
  ].map((c) => ({
    ...c,
    script: wrkRequestsScript(CONSUMER_TOKEN, steadyRequests(c.groups, requests)),
  }));
  // Each run starts at a random place in the cycle, so that every round reaches other members.
  const run = (c: (typeof cases)[number], ms: number) =>
    runWrk({
      port: c.child.port,
      script: c.script,
      connections,
      durationMs: ms,
      args: [String(Math.floor(Math.random() * requests))],
    });
  for (const c of cases) await run(c, 1_000); // warm-up
  // Every round reads each coordinator's /metrics: warm up with such reads too (wrk runs
  // whole seconds).
  for (const c of cases) await warmUpScrapes(c.child.port, () => run(c, 1_000));
  const results = new Map<string, Array<LoadResult & { cpuUs: number }>>();
  for (let round = 1; round <= rounds; round++) {
    const line: string[] = [];
    for (const c of cases) {
      const from = await metricsOf(c.child.port);
      const cpuFrom = cpuSecondsOf(pidOf(c.child));
      const splitFrom = cpuSplitOf(pidOf(c.child));
      const r = await profilePhase(c.child, profiles, `${c.key}-round-${round}`, () =>
        run(c, durationMs),
      );
      const cpuUs = ((cpuSecondsOf(pidOf(c.child)) - cpuFrom) * 1e6) / r.completed;
      const split = cpuSplitSince(pidOf(c.child), splitFrom, r.completed);
      const now = await metricsOf(c.child.port);
      const gc = gcPausesSince(from.gc, now.gc, r.completed);
      // Every steady heartbeat should be a repeat: the large case's cost is then its memory's.
      const repeated = `${fmt(((now.repeated - from.repeated) / r.completed) * 100)} % repeated from memory`;
      assertAllOk(r, c.key);
      results.set(c.key, [...(results.get(c.key) ?? []), { ...r, cpuUs }]);
      const wrkUs =
        r.generatorCpuSeconds === undefined
          ? ''
          : `; wrk ${fmt((r.generatorCpuSeconds * 1e6) / r.completed, 1)} µs CPU/request`;
      line.push(
        `${c.key} ${fmt(r.requestsPerSecond)}/s p99 ${fmt(r.p99Ms, 1)} ms ${fmt(cpuUs)} µs CPU/hb (${split}; ${gc}; ${repeated}${wrkUs})`,
      );
    }
    ctx.log(`  round ${round}/${rounds}: ${line.join(', ')}`);
  }
  const endMem = memoryOf(pidOf(large));
  await checkSteady(large.port, l.groups, 1_000);
  ctx.log(
    `  RSS after the rounds: large ${fmt(endMem.rss)} MiB (peak ${fmt(endMem.peak)}; ${await heapSpacesOf(large.port)}); ` +
      '1,000 members checked still steady',
  );

  const med = (key: string, f: (r: LoadResult & { cpuUs: number }) => number) =>
    median((results.get(key) ?? []).map(f));
  const smallRps = med('small', (r) => r.requestsPerSecond);
  const largeRps = med('large', (r) => r.requestsPerSecond);
  const smallCpu = med('small', (r) => r.cpuUs);
  const largeCpu = med('large', (r) => r.cpuUs);
  const rss = Math.max(steadyMem.rss, endMem.rss);
  const ratio = largeRps / smallRps;
  return [
    {
      bench: 'capacity',
      metric: `replica RSS MiB, ${label} (Redis store)`,
      value: fmt(rss),
      baseline: `1 group: ${fmt(smallMem.rss)}`,
      ratio: '-',
      goal: '<= 1,024 MiB',
      verdict: full ? verdict(rss <= 1024) : '-',
    },
    {
      bench: 'capacity',
      metric: `steady heartbeats/s at that size, HTTP, ${connections} conns (wrk${driven < l.groups.length ? `, ${fmt(driven)} groups driven` : ''})`,
      value: fmt(largeRps),
      baseline: `1 group: ${fmt(smallRps)}`,
      ratio: `${ratio.toFixed(2)} x`,
      goal: '>= 0.8 x',
      verdict: full && driven === l.groups.length ? verdict(ratio >= 0.8) : '-',
    },
    {
      bench: 'capacity',
      metric: 'coordinator CPU µs per steady heartbeat at that size',
      value: fmt(largeCpu),
      baseline: `1 group: ${fmt(smallCpu)}`,
      ratio: `${(largeCpu / smallCpu).toFixed(2)} x`,
      goal: '-',
      verdict: '-',
    },
    {
      bench: 'capacity',
      metric: `replica CPU % of a core while idle, over one lag interval (${idle.seconds} s; busiest second ${idle.largePeak.toFixed(0)} %)`,
      value: idle.large.toFixed(1),
      baseline: `1 group: ${idle.small.toFixed(1)}`,
      ratio: '-',
      goal: '-',
      verdict: '-',
    },
    {
      bench: 'capacity',
      metric: 'building that state over HTTP, s',
      value: fmt(l.ms / 1000),
      baseline: `${fmt(l.heartbeats)} heartbeats`,
      ratio: '-',
      goal: '-',
      verdict: '-',
    },
  ];
}
