import type { BenchContext } from './context.js';
import { KclWorker, leaseKey } from './kcl-baseline.js';
import {
  CONSUMER_TOKEN,
  createGroup,
  fmt,
  median,
  mint,
  nowMs,
  sleep,
  startChild,
  startCoordinator,
  startRedis,
  stopChild,
  verdict,
  type Child,
  type Row,
} from './support.js';
import { freePort, type RedisServerHandle } from '../test/support/redis-server.js';

/*
 * Handoff and crash timings (docs/BENCHMARKS.md#what-the-rows-mean), for the coordinator and for
 * the KCL-style lease-per-shard baseline (bench/kcl-baseline.ts) side by side, on the same Redis,
 * with the same simulated consumers (bench/sim-consumer.ts, one child process each, reporting when
 * they start and stop processing a shard):
 *   - handoff: two consumers share a 64-shard group at steady state; a third joins. Measured from
 *     its join until the moved shards run at it (first and last), and whether a shard ever ran at
 *     two consumers at once (overlap);
 *   - crash: three consumers at steady state; one is SIGKILLed. Measured until every shard it
 *     had runs at a survivor.
 * The replica-kill scenario runs only where `GET /coord/v1/monitoring/replicas` exists.
 */

const SHARDS = 64;
/** The shortest session the coordinator accepts (membership min; its default is 45 s). */
const SESSION_MS = 6_000;
/** `coordinator.membership.heartbeat-interval` (default): what a steady member is advised. */
const ADVISED_INTERVAL_MS = 3_000;

interface Event {
  readonly e: string;
  readonly shard?: number;
  readonly t: number;
}

interface Sim {
  readonly name: string;
  readonly child: Child;
  readonly events: Event[];
  dead: boolean;
}

async function spawnSim(name: string, env: Record<string, string>): Promise<Sim> {
  const child = await startChild(`consumer ${name}`, 'sim-consumer.ts', env, { tsx: true });
  const sim: Sim = { name, child, events: [], dead: false };
  let buffer = '';
  child.process.stdout?.on('data', (chunk: Buffer) => {
    buffer += chunk.toString();
    const lines = buffer.split('\n');
    buffer = lines.pop() ?? '';
    for (const line of lines) if (line.startsWith('{')) sim.events.push(JSON.parse(line) as Event);
  });
  return sim;
}

const go = (sim: Sim) => sim.child.process.stdin?.write('go\n');

/** Which live consumers process each shard now, from their start/stop events. */
function owners(sims: readonly Sim[]): Map<number, string[]> {
  const map = new Map<number, string[]>();
  for (const sim of sims) {
    if (sim.dead) continue;
    const running = new Set<number>();
    for (const ev of sim.events)
      if (ev.e === 'start') running.add(ev.shard as number);
      else if (ev.e === 'stop') running.delete(ev.shard as number);
    for (const shard of running) map.set(shard, [...(map.get(shard) ?? []), sim.name]);
  }
  return map;
}

/** Every shard at exactly one live consumer, within ±1 of even, and no event for `quietMs`. */
async function steady(sims: readonly Sim[], capMs: number, quietMs = 1_000): Promise<boolean> {
  const deadline = Date.now() + capMs;
  while (Date.now() < deadline) {
    const map = owners(sims);
    const counts = new Map<string, number>();
    let single = map.size === SHARDS;
    for (const list of map.values()) {
      if (list.length !== 1) single = false;
      counts.set(list[0] as string, (counts.get(list[0] as string) ?? 0) + 1);
    }
    const live = sims.filter((s) => !s.dead).length;
    const values = [...counts.values()];
    const even = counts.size === live && Math.max(...values) - Math.min(...values) <= 1;
    const last = Math.max(...sims.flatMap((s) => s.events.map((e) => e.t)));
    if (single && even && nowMs() - last >= quietMs) return true;
    await sleep(50);
  }
  return false;
}

async function waitFor(cond: () => boolean, capMs: number): Promise<boolean> {
  const deadline = Date.now() + capMs;
  while (Date.now() < deadline) {
    if (cond()) return true;
    await sleep(20);
  }
  return cond();
}

function kill(sim: Sim): number {
  const t0 = nowMs();
  sim.child.process.kill('SIGKILL');
  sim.dead = true;
  return t0;
}

/** Longest time a shard that moved to `to` kept running at its previous owner after `to` started it. */
function overlapMs(sims: readonly Sim[], to: Sim, since: number): number {
  let worst = 0;
  for (const start of to.events.filter((e) => e.e === 'start' && e.t >= since))
    for (const other of sims)
      if (other !== to)
        for (const stop of other.events)
          if (stop.e === 'stop' && stop.shard === start.shard && stop.t >= since)
            worst = Math.max(worst, stop.t - start.t);
  return worst;
}

interface Timing {
  readonly firstMs: number;
  readonly lastMs: number;
  readonly overlapMs: number;
  readonly complete: boolean;
}

// ---------------------------------------------------------------------------------------------
// the coordinator

async function coordinatorSims(
  port: number,
  group: string,
  drainMs: number,
  names: string[],
): Promise<Sim[]> {
  return Promise.all(
    names.map((name) =>
      spawnSim(name, {
        SIM_MODE: 'coordinator',
        SIM_PORT: String(port),
        SIM_STREAM: 'bench',
        SIM_GROUP: group,
        SIM_TOKEN: CONSUMER_TOKEN,
        SIM_MEMBER: name,
        SIM_DRAIN_MS: String(drainMs),
        SIM_SESSION_MS: String(SESSION_MS),
      }),
    ),
  );
}

async function coordinatorHandoff(port: number, drainMs: number, round: number): Promise<Timing> {
  const group = `handoff-${drainMs}-${round}`;
  await createGroup(port, 'bench', group, SHARDS);
  const sims = await coordinatorSims(port, group, drainMs, ['a', 'b', 'c']);
  const [a, b, c] = sims as [Sim, Sim, Sim];
  try {
    go(a);
    go(b);
    if (!(await steady([a, b], 30_000))) throw new Error(`${group}: a and b never steady`);
    // Steadiness is seen 1 s after the last move, which ties it to a and b's heartbeat phase:
    // join at a random point of their heartbeat interval instead.
    await sleep(Math.random() * ADVISED_INTERVAL_MS);
    go(c);
    if (!(await waitFor(() => c.events.some((e) => e.e === 'join'), 5_000)))
      throw new Error('c did not join');
    const t0 = (c.events.find((e) => e.e === 'join') as Event).t;
    const complete = await steady(sims, 30_000, 1_000);
    const starts = c.events.filter((e) => e.e === 'start').map((e) => e.t - t0);
    return {
      firstMs: Math.min(...starts),
      lastMs: Math.max(...starts),
      overlapMs: overlapMs(sims, c, t0),
      complete,
    };
  } finally {
    await Promise.all(sims.map((s) => stopChild(s.child)));
  }
}

async function coordinatorCrash(port: number, drainMs: number): Promise<Timing> {
  const group = `crash-${drainMs}`;
  await createGroup(port, 'bench', group, SHARDS);
  const sims = await coordinatorSims(port, group, drainMs, ['a', 'b', 'c']);
  const [, , c] = sims as [Sim, Sim, Sim];
  try {
    for (const sim of sims) go(sim);
    if (!(await steady(sims, 30_000))) throw new Error(`${group}: never steady`);
    await sleep(Math.random() * ADVISED_INTERVAL_MS);
    return await crashTiming(sims, c, SESSION_MS + 20_000);
  } finally {
    await Promise.all(sims.map((s) => stopChild(s.child)));
  }
}

/** Kills `victim` and waits until every shard it ran runs at a survivor. */
async function crashTiming(sims: Sim[], victim: Sim, capMs: number): Promise<Timing> {
  const theirs = [...owners(sims)].filter(([, o]) => o[0] === victim.name).map(([s]) => s);
  const t0 = kill(victim);
  const complete = await waitFor(() => {
    const map = owners(sims);
    return theirs.every((s) => (map.get(s)?.length ?? 0) === 1);
  }, capMs);
  const starts = sims
    .filter((s) => s !== victim)
    .flatMap((s) =>
      s.events.filter((e) => e.e === 'start' && e.t >= t0 && theirs.includes(e.shard as number)),
    )
    .map((e) => e.t - t0);
  return {
    firstMs: Math.min(...starts),
    lastMs: complete ? Math.max(...starts) : Number.POSITIVE_INFINITY,
    overlapMs: 0,
    complete,
  };
}

// ---------------------------------------------------------------------------------------------
// the KCL-style baseline

async function kclSims(redis: RedisServerHandle, prefix: string, names: string[]): Promise<Sim[]> {
  return Promise.all(
    names.map((name) =>
      spawnSim(name, {
        SIM_MODE: 'kcl',
        SIM_REDIS_URL: redis.url,
        SIM_KCL_PREFIX: prefix,
        SIM_MEMBER: name,
        SIM_SHARDS: String(SHARDS),
      }),
    ),
  );
}

/** Leases already balanced over `names`, as a KCL application at steady state has them. */
async function seedLeases(
  redis: RedisServerHandle,
  prefix: string,
  names: string[],
  ttlMs: number,
) {
  const pipeline = redis.client().pipeline();
  for (let s = 0; s < SHARDS; s++)
    pipeline.set(leaseKey(prefix, s), names[s % names.length] as string, 'PX', ttlMs);
  await pipeline.exec();
}

// ---------------------------------------------------------------------------------------------

export async function handoff(ctx: BenchContext): Promise<Row[]> {
  const redis = await startRedis();
  const coordinator = await startCoordinator('coordinator', redis, {}, ctx.profileFlags('handoff'));
  const rounds = ctx.quick ? 1 : 3;
  const kclDefaults = new KclWorker({
    redis: redis.client(),
    keyPrefix: 'x',
    workerId: 'x',
    shardCount: SHARDS,
    onStart: () => undefined,
    onStop: () => undefined,
  });
  ctx.log(
    `  ${SHARDS} shards; coordinator: consumers heartbeat at the advised heartbeatIntervalMs, session ${SESSION_MS} ms ` +
      `(the minimum accepted), ${rounds} handoff rounds per drain; KCL-style: failover ${kclDefaults.failoverMs} ms, ` +
      `renewer every ${kclDefaults.renewerIntervalMs} ms, taker every ${kclDefaults.takerIntervalMs} ms, 1 steal per cycle`,
  );
  const rows: Row[] = [];
  /** The coordinator's figures, compared with the KCL-style ones once those are measured. */
  const versusKcl: Array<{ index: number; ms: number; scenario: 'handoff' | 'crash' }> = [];
  let kclHandoffMs: number;
  let kclCrashMs: number;
  const fmtMs = (n: number) => (Number.isFinite(n) ? fmt(n) : 'never');

  for (const drainMs of [0, 500]) {
    const timings: Timing[] = [];
    for (let round = 1; round <= rounds; round++) {
      const t = await coordinatorHandoff(coordinator.port, drainMs, round);
      ctx.log(
        `  coordinator handoff, drain ${drainMs} ms, round ${round}: first moved shard running at the new owner after ` +
          `${fmt(t.firstMs)} ms, last ${fmt(t.lastMs)} ms, overlap ${fmt(t.overlapMs)} ms${t.complete ? '' : ' (not balanced within 30 s)'}`,
      );
      timings.push(t);
    }
    const last = median(timings.map((t) => t.lastMs));
    const overlap = Math.max(...timings.map((t) => t.overlapMs));
    versusKcl.push({ index: rows.length, ms: last, scenario: 'handoff' });
    rows.push({
      bench: 'handoff',
      metric: `coordinator: join -> all moved shards running, drain ${drainMs} ms`,
      value: `${fmt(last)} ms`,
      baseline: `first ${fmt(median(timings.map((t) => t.firstMs)))} ms, overlap ${fmt(overlap)} ms`,
      ratio: '-',
      goal: `<= ${drainMs + 300} ms`,
      verdict: verdict(last <= drainMs + 300 && timings.every((t) => t.complete)),
    });
  }
  for (const drainMs of [0, 500]) {
    const t = await coordinatorCrash(coordinator.port, drainMs);
    ctx.log(
      `  coordinator crash, drain ${drainMs} ms: killed consumer's shards running again after ${fmtMs(t.lastMs)} ms (first ${fmt(t.firstMs)} ms)`,
    );
    versusKcl.push({ index: rows.length, ms: t.lastMs, scenario: 'crash' });
    rows.push({
      bench: 'crash',
      metric: `coordinator: SIGKILL -> shards owned again, drain ${drainMs} ms`,
      value: `${fmtMs(t.lastMs)} ms`,
      baseline: `session ${SESSION_MS} ms`,
      ratio: '-',
      goal: `<= ${SESSION_MS + 300} ms`,
      verdict: verdict(t.lastMs <= SESSION_MS + 300),
    });
  }

  // KCL-style handoff: a third worker joins two that hold 32 leases each.
  {
    const prefix = 'kcl:handoff';
    await seedLeases(redis, prefix, ['a', 'b'], kclDefaults.failoverMs);
    const sims = await kclSims(redis, prefix, ['a', 'b', 'c']);
    const [a, b, c] = sims as [Sim, Sim, Sim];
    try {
      go(a);
      go(b);
      if (!(await steady([a, b], 10_000))) throw new Error('kcl: a and b never steady');
      go(c);
      await waitFor(
        () => c.events.some((e) => e.e === 'start'),
        kclDefaults.takerIntervalMs + 5_000,
      );
      const t0 = (c.events.find((e) => e.e === 'join') as Event).t;
      const first = c.events.find((e) => e.e === 'start');
      const firstMs = first ? first.t - t0 : Number.POSITIVE_INFINITY;
      // The old owner notices at its next renewal; until then both process the shard.
      await waitFor(
        () => [a, b].some((s) => s.events.some((e) => e.e === 'stop' && e.shard === first?.shard)),
        kclDefaults.renewerIntervalMs + 2_000,
      );
      const overlap = overlapMs(sims, c, t0);
      const target = Math.ceil(SHARDS / 3);
      const projected = firstMs + (target - 1) * kclDefaults.takerIntervalMs;
      kclHandoffMs = projected;
      ctx.log(
        `  KCL-style handoff: first moved shard running at the new worker after ${fmtMs(firstMs)} ms, ` +
          `old owner still ran it for ${fmt(overlap)} ms more; the other ${target - 1} steals come one per taker cycle: ` +
          `balanced after about ${fmt(projected / 1000, 0)} s (projected, not measured)`,
      );
      rows.push({
        bench: 'handoff',
        metric: 'KCL-style: join -> first moved shard running',
        value: `${fmtMs(firstMs)} ms`,
        baseline: `overlap ${fmt(overlap)} ms`,
        ratio: '-',
        goal: '-',
        verdict: '-',
      });
      rows.push({
        bench: 'handoff',
        metric: `KCL-style: join -> all ${target} moved shards running`,
        value: `~${fmt(projected / 1000)} s`,
        baseline: 'projected: 1 steal / taker cycle',
        ratio: '-',
        goal: '-',
        verdict: '-',
      });
    } finally {
      await Promise.all(sims.map((s) => stopChild(s.child)));
    }
  }

  // KCL-style crash: three workers, one SIGKILLed at a random moment of the taker interval.
  {
    const prefix = 'kcl:crash';
    await seedLeases(redis, prefix, ['a', 'b', 'c'], kclDefaults.failoverMs);
    const sims = await kclSims(redis, prefix, ['a', 'b', 'c']);
    try {
      for (const sim of sims) go(sim);
      if (!(await steady(sims, 10_000))) throw new Error('kcl: never steady');
      const phase = Math.random() * kclDefaults.takerIntervalMs;
      await sleep(phase);
      const t = await crashTiming(
        sims,
        sims[2] as Sim,
        kclDefaults.failoverMs + kclDefaults.takerIntervalMs + 5_000,
      );
      ctx.log(
        `  KCL-style crash (killed ${fmt(phase)} ms after steady state; each worker's taker at its own phase): shards running again after ${fmtMs(t.lastMs)} ms ` +
          `(expected: failover - renewer interval ${kclDefaults.failoverMs - kclDefaults.renewerIntervalMs} ms .. ` +
          `failover + taker interval ${kclDefaults.failoverMs + kclDefaults.takerIntervalMs} ms; waited up to ` +
          `${kclDefaults.failoverMs + kclDefaults.takerIntervalMs + 5_000} ms)`,
      );
      kclCrashMs = t.lastMs;
      rows.push({
        bench: 'crash',
        metric: 'KCL-style: SIGKILL -> shards owned again',
        value: `${fmtMs(t.lastMs)} ms`,
        baseline: `failover ${kclDefaults.failoverMs} ms`,
        ratio: '-',
        goal: '-',
        verdict: '-',
      });
    } finally {
      await Promise.all(sims.map((s) => stopChild(s.child)));
    }
  }
  for (const { index, ms, scenario } of versusKcl) {
    const kcl = scenario === 'handoff' ? kclHandoffMs : kclCrashMs;
    rows[index] = { ...(rows[index] as Row), ratio: `${(ms / kcl).toFixed(3)} x KCL` };
  }
  return rows;
}

// ---------------------------------------------------------------------------------------------
// replica SIGKILL (runs once replicas exist)

export async function replicaKill(ctx: BenchContext): Promise<Row[]> {
  const redis = await startRedis();
  const ttlMs = 10_000;
  const [port1, port2] = [await freePort(), await freePort()];
  const overrides = (id: string, port: number) => ({
    'replica.id': id,
    'lease.ttl': `${ttlMs}ms`,
    'http.port': port,
    'http.advertised-url': `http://127.0.0.1:${port}`,
  });
  const r1 = await startCoordinator('replica r1', redis, overrides('r1', port1));
  const probe = await fetch(`http://127.0.0.1:${r1.port}/coord/v1/monitoring/replicas`, {
    headers: { authorization: `Bearer ${mint(['READ'])}` },
  });
  if (probe.status === 404) {
    ctx.log('  GET /coord/v1/monitoring/replicas: 404, replicas have not landed: not available');
    return [
      {
        bench: 'replica',
        metric: 'replica SIGKILL -> its groups served again',
        value: 'not available',
        baseline: '-',
        ratio: '-',
        goal: `<= ${ttlMs + 1000} ms`,
        verdict: '-',
      },
    ];
  }
  const r2 = await startCoordinator('replica r2', redis, overrides('r2', port2));
  await sleep(2_000); // both registered
  const path = '/coord/v1/consumer/streams/bench-replica/groups/replica/heartbeat';
  await createGroup(r1.port, 'bench-replica', 'replica', 8);
  const beat = (port: number) =>
    fetch(`http://127.0.0.1:${port}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${CONSUMER_TOKEN}` },
      body: JSON.stringify({
        memberId: 'm',
        memberEpoch: 0,
        assignmentEpoch: 0,
        metadataVersion: 0,
        currentAssignments: [],
        revokeProgress: [],
      }),
    });
  const first = await beat(r1.port);
  const owner = first.headers.get('x-coord-owner');
  const [victim, survivor] = owner === 'r2' ? [r2, r1] : [r1, r2];
  const t0 = nowMs();
  victim.process.kill('SIGKILL');
  let servedMs = Number.POSITIVE_INFINITY;
  while (nowMs() - t0 < ttlMs + 15_000) {
    const res = await beat(survivor.port).catch(() => null);
    if (res?.status === 200) {
      servedMs = nowMs() - t0;
      break;
    }
    await sleep(50);
  }
  ctx.log(`  replica ${owner ?? '?'} SIGKILLed: group served again after ${fmt(servedMs)} ms`);
  return [
    {
      bench: 'replica',
      metric: 'replica SIGKILL -> its groups served again',
      value: `${fmt(servedMs)} ms`,
      baseline: `lease TTL ${ttlMs} ms`,
      ratio: '-',
      goal: `<= ${ttlMs + 1000} ms`,
      verdict: verdict(servedMs <= ttlMs + 1000),
    },
  ];
}
