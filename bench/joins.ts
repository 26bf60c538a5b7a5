import { rendezvousOwner } from '../src/actors/ownership/rendezvous.js';
import { joinBody } from '../test/support/members.js';
import { freePort } from '../test/support/redis-server.js';
import type { BenchContext } from './context.js';
import { assertAllOk, sendEach, type LoadResult } from './load.js';
import {
  CONSUMER_TOKEN,
  createGroup,
  fmt,
  heartbeatBody,
  heartbeatPath,
  median,
  nowMs,
  ownerNamedBy,
  postBytes,
  profilePhase,
  sleep,
  startCoordinator,
  startChild,
  startRedis,
  steadyGroup,
  stopChild,
  verdict,
  type Child,
  type Row,
} from './support.js';
import { runWrk, wrkScript } from './wrk.js';

/*
 * Joins (goal: 5,000 members joining one 1,024-shard group at ≥ 1,000 joins/s while another
 * group's heartbeat p99 stays ≤ 10 ms). Over HTTP against the coordinator (dist/, Redis store).
 * Group B (64 shards, 32 members at steady state) is loaded by wrk in its own process, 8
 * connections, in 1 s windows: first with nothing else going on (the baseline), then during two
 * join phases of 5,000 members each, into a 1,024-shard group of no members each time (both
 * created, and their joins built, before the baseline: what is measured is the flood, not a
 * group's creation or the client building its requests):
 *   - as fast as it goes: 64 in flight, each connection sending its next join on its answer:
 *     the joins/s row (B's p99 then is reported, without a goal); it also warms the join path;
 *   - paced: the joins offered at 1,050/s (open loop, just above the goal rate; up to 64 in
 *     flight), B's p99 over the windows begun while joins were being answered: the p99 row.
 * Before the joins, five windows beside a process that keeps one core busy (bench/busy-core.mjs):
 * what any core's worth of work on the machine costs B, the floor under the flood's ratio.
 * The joins go out as prebuilt bytes on raw keep-alive sockets (bench/load.ts `sendEach`): a
 * fetch client took 2.9 s of CPU over a 4.2 s join phase in one run, on the two cores the
 * coordinator needs too. A join counts when its reply carries a member epoch. Each phase stops
 * at a time cap, and what joined by then is reported.
 */

const MEMBERS = 5_000;
const SHARDS = 1_024;
const PACED_PER_SECOND = 1_050;

interface JoinPhase {
  readonly joined: number;
  readonly failed: number;
  /** Joins per second, from the phase's start to the last answer. */
  readonly rate: number;
  readonly elapsedS: number;
  /** Rates over the first and the last 1,000 joins: how a join's cost grows with the group. */
  readonly first: number;
  readonly last: number;
  /**
   * B's wrk windows begun while joins were still being answered: the last one also holds the
   * recompute after the last join (100 ms later) and its write.
   */
  readonly windows: LoadResult[];
}

/** Prebuilt joins of `MEMBERS` members into `group` of `stream`, as bytes for `port`. */
function joinRequests(port: number, stream: string, group: string): Buffer[] {
  const path = heartbeatPath(stream, group);
  return Array.from({ length: MEMBERS }, (_, i) =>
    postBytes(
      port,
      path,
      CONSUMER_TOKEN,
      joinBody(`joiner-${String(i).padStart(5, '0')}`, {
        revokeProgress: [],
        sessionTimeoutMs: 1_800_000,
      }),
    ),
  );
}

interface FloodOptions {
  readonly port: number;
  readonly requests: readonly Buffer[];
  /** Offered at this rate (open loop, up to 64 in flight); unset: as fast as 64 in flight go. */
  readonly ratePerSecond?: number;
  readonly capMs: number;
  /** One window of the other group's load, run again and again while joins are answered. */
  readonly load: () => Promise<LoadResult>;
  readonly log: (line: string) => void;
  /** Runs the joins (a profile of them, with --profile). */
  readonly profiled: (work: () => Promise<void>) => Promise<void>;
}

/** Sends the joins on 64 connections and loads the other group meanwhile, window by window. */
async function flood(o: FloodOptions): Promise<JoinPhase> {
  let joined = 0;
  let failed = 0;
  const joinedAt: number[] = [];
  const started = nowMs();
  const clientCpu = process.cpuUsage();
  const deadline = started + o.capMs;
  let joining = true;
  const joiners = o.profiled(() =>
    sendEach({
      port: o.port,
      connections: 64,
      requests: o.requests,
      ...(o.ratePerSecond ? { ratePerSecond: o.ratePerSecond } : {}),
      keepGoing: () => nowMs() < deadline,
      abortAfterMs: o.capMs + 30_000,
      onResponse: (_i, status, body) => {
        if (
          status === 200 &&
          (JSON.parse(body.toString()) as { memberEpoch: number }).memberEpoch > 0
        ) {
          joined++;
          joinedAt.push(nowMs());
        } else failed++;
      },
    }).finally(() => (joining = false)),
  );
  const windows: LoadResult[] = [];
  while (joining) {
    windows.push(await o.load());
    // B's answers in the window: its p99 is about the (answers / 100)-th slowest of them.
    const last = windows.at(-1);
    o.log(
      `  ${fmt(joined)} joined, B p99 ${fmt(last?.p99Ms ?? NaN, 1)} ms of ${fmt(last?.completed ?? NaN)} answers`,
    );
  }
  await joiners;
  const cpu = process.cpuUsage(clientCpu);
  const elapsedS = ((joinedAt.at(-1) ?? nowMs()) - started) / 1000;
  // Joins from..to-1: to-from-1 intervals between the first and the last of them.
  const rateOf = (from: number, to: number) =>
    (to - from - 1) / (((joinedAt[to - 1] ?? NaN) - (joinedAt[from] ?? NaN)) / 1000);
  const result: JoinPhase = {
    joined,
    failed,
    rate: joined / elapsedS,
    elapsedS,
    first: joined >= 1000 ? rateOf(0, 1000) : NaN,
    last: joined >= 1000 ? rateOf(joined - 1000, joined) : NaN,
    windows,
  };
  o.log(
    `  ${fmt(joined)} joined in ${elapsedS.toFixed(1)} s (${fmt(failed)} failed), ${fmt(result.rate)}/s; ` +
      `first 1,000 at ${fmt(result.first)}/s, last 1,000 at ${fmt(result.last)}/s; ` +
      `this process (the joining client) used ${fmt((cpu.user + cpu.system) / 1000)} ms of CPU`,
  );
  return result;
}

/**
 * Five of B's windows while a child process keeps one core busy (bench/busy-core.mjs) and the
 * coordinator has nothing else to do: what a second core's worth of work on the machine costs
 * B's p99 when none of it is the coordinator's. A flood's ratio can be no better than this one
 * on the same machine, whatever the coordinator does with its own loop.
 */
async function besideBusyCore(
  load: () => Promise<LoadResult>,
  log: (line: string) => void,
): Promise<LoadResult[]> {
  const spinner = await startChild('busy core', 'busy-core.mjs', {});
  try {
    const windows: LoadResult[] = [];
    for (let i = 0; i < 5; i++) windows.push(await load());
    log(
      `  beside a busy core, no joins: B p99 ${windows.map((w) => fmt(w.p99Ms, 1)).join(', ')} ms`,
    );
    return windows;
  } finally {
    await stopChild(spinner);
  }
}

export async function joins(ctx: BenchContext): Promise<Row[]> {
  const capMs = ctx.quick ? 30_000 : 90_000;
  const windowMs = 1_000;
  const redis = await startRedis();
  const coordinator = await startCoordinator('coordinator', redis);
  // --profile: each join phase alone (node:inspector in the coordinator), not the setup.
  const profiles = ctx.profileDir('joins');
  const port = coordinator.port;
  const b = await steadyGroup(port, 'bench', 'b', 64, 32);
  const script = wrkScript(
    heartbeatPath('bench', 'b'),
    CONSUMER_TOKEN,
    b.members.map((m) => JSON.stringify(heartbeatBody(m))),
  );
  // A window with a non-2xx answer or a socket error fails the benchmark (as throughput's do).
  const load = async () =>
    assertAllOk(await runWrk({ port, script, connections: 8, durationMs: windowMs }), 'group B');
  ctx.log(
    `  ${MEMBERS.toLocaleString('en-US')} joins into a ${SHARDS}-shard group, as fast as 64 in flight go, then ` +
      `paced at ${fmt(PACED_PER_SECOND)}/s, cap ${capMs / 1000} s each; group B (64 shards / 32 members) under wrk, 8 connections, 1 s windows`,
  );

  // The groups the joins go into exist, and their joins are built, before anything is measured:
  // the flood is what is measured, not the creation of a group or the client's own work.
  const joinsInto = async (group: string): Promise<Buffer[]> => {
    // A stream prefix of its own: every group on a prefix has the prefix's shard count.
    await createGroup(port, `bench-${group}`, group, SHARDS);
    return joinRequests(port, `bench-${group}`, group);
  };
  const fastJoins = await joinsInto('fast');
  const pacedJoins = await joinsInto('paced');

  await load(); // warm-up
  const quiet: LoadResult[] = [];
  for (let i = 0; i < 5; i++) quiet.push(await load());
  const busy = await besideBusyCore(load, (line) => ctx.log(line));

  const phase = (group: string, requests: readonly Buffer[], ratePerSecond?: number) =>
    flood({
      port,
      requests,
      ...(ratePerSecond ? { ratePerSecond } : {}),
      capMs,
      load,
      log: (line) => ctx.log(line),
      profiled: (work) => profilePhase(coordinator, profiles, `join-phase-${group}`, work),
    });

  ctx.log('  as fast as it goes:');
  const fast = await phase('fast', fastJoins);
  ctx.log(`  paced at ${fmt(PACED_PER_SECOND)}/s:`);
  const paced = await phase('paced', pacedJoins, PACED_PER_SECOND);

  const quietP99 = median(quiet.map((r) => r.p99Ms));
  const pacedP99s = paced.windows.map((r) => r.p99Ms);
  const pacedP99 = median(pacedP99s);
  const pacedWorst = Math.max(...pacedP99s);
  const fastWorst = Math.max(...fast.windows.map((r) => r.p99Ms));
  const busyWorst = Math.max(...busy.map((r) => r.p99Ms));
  const all = (p: JoinPhase) => p.joined === MEMBERS;
  const joinedOf = (p: JoinPhase) =>
    `${fmt(p.joined)}/${fmt(MEMBERS)} joined${all(p) ? '' : p.failed > 0 ? `, ${fmt(p.failed)} failed` : ` by the ${capMs / 1000} s cap`}`;
  return [
    {
      bench: 'joins',
      metric: `joins/s into 1,024 shards, 64 in flight (${joinedOf(fast)})`,
      value: fmt(fast.rate),
      baseline: `first 1k ${fmt(fast.first)}/s, last 1k ${fmt(fast.last)}/s`,
      ratio: '-',
      goal: '>= 1,000/s',
      verdict: verdict(all(fast) && fast.rate >= 1000),
    },
    {
      bench: 'joins',
      metric: `other group heartbeat p99 ms, joins paced at ${fmt(PACED_PER_SECOND)}/s (median of ${pacedP99s.length} windows; ${joinedOf(paced)} at ${fmt(paced.rate)}/s)`,
      value: fmt(pacedP99, 1),
      baseline: `quiet ${fmt(quietP99, 1)}`,
      ratio: `${(pacedP99 / quietP99).toFixed(1)} x`,
      goal: '<= 10 ms',
      verdict: verdict(
        all(paced) && paced.rate >= 1000 && pacedP99s.length > 0 && pacedWorst <= 10,
      ),
    },
    {
      bench: 'joins',
      metric: 'other group heartbeat p99 ms, joins paced (worst window)',
      value: fmt(pacedWorst, 1),
      baseline: `quiet ${fmt(quietP99, 1)}`,
      ratio: `${(pacedWorst / quietP99).toFixed(1)} x`,
      goal: '-',
      verdict: '-',
    },
    {
      bench: 'joins',
      metric: `other group heartbeat p99 ms, unpaced flood, 64 in flight (worst window; ${joinedOf(fast)} at ${fmt(fast.rate)}/s)`,
      value: fmt(fastWorst, 1),
      baseline: `quiet ${fmt(quietP99, 1)}`,
      ratio: `${(fastWorst / quietP99).toFixed(1)} x`,
      goal: '<= 10 ms, <= 3 x quiet',
      verdict: verdict(
        all(fast) && fast.rate >= 1000 && fastWorst <= 10 && fastWorst <= 3 * quietP99,
      ),
    },
    {
      bench: 'joins',
      metric:
        'other group heartbeat p99 ms, no joins, a busy loop on one core beside it (worst of 5 windows)',
      value: fmt(busyWorst, 1),
      baseline: `quiet ${fmt(quietP99, 1)}`,
      ratio: `${(busyWorst / quietP99).toFixed(1)} x`,
      goal: '- (info)',
      verdict: '-',
    },
  ];
}

/*
 * Joins apart (informative): the same unpaced flood, into a group that another replica on the
 * same machine owns. Two coordinator processes on one Redis; group B is owned by one of them
 * and loaded by wrk as in `joins` (five quiet windows, then windows while joins are answered);
 * the 5,000 joins go straight to the other, which owns the flood's group (its name chosen by
 * the owners' rendezvous hash, then checked against `X-Coord-Owner`) and answers no steady
 * heartbeats, so it never rests its work. What it shows: what the flood costs another group
 * when the two do not share an event loop and a heap, only the machine's cores
 * (docs/architecture.md#fairness-between-groups).
 */
export async function joinsApart(ctx: BenchContext): Promise<Row[]> {
  const capMs = ctx.quick ? 30_000 : 90_000;
  const redis = await startRedis();
  const ids = ['r1', 'r2'];
  const replicas = new Map<string, Child>();
  for (const id of ids) {
    const port = await freePort();
    const overrides = {
      'replica.id': id,
      'http.port': port,
      'http.advertised-url': `http://127.0.0.1:${port}`,
    };
    replicas.set(id, await startCoordinator(`replica ${id}`, redis, overrides));
  }
  await sleep(2_000); // both registered, each knows the other
  const replica = (id: string) => replicas.get(id) as Child;
  const owners = ids.map((id) => ({ id }));
  const ownerOf = (streamPrefix: string, consumerGroup: string) =>
    rendezvousOwner({ streamPrefix, consumerGroup }, owners)?.id ?? '';
  const bOwner = ownerOf('bench', 'b');
  const b = await steadyGroup(replica(bOwner).port, 'bench', 'b', 64, 32);
  // The flood's group: the first name the other replica owns.
  let group = '';
  for (let i = 0; group === ''; i++)
    if (ownerOf(`bench-apart-${i}`, `apart-${i}`) !== bOwner) group = `apart-${i}`;
  const stream = `bench-${group}`;
  const floodOwner = ownerOf(stream, group);
  const floodPort = replica(floodOwner).port;
  await createGroup(floodPort, stream, group, SHARDS);
  const bPath = heartbeatPath('bench', 'b');
  const bSays = await ownerNamedBy(replica(bOwner).port, bPath, heartbeatBody(b.members[0]!));
  if (bSays !== bOwner) throw new Error(`group B is owned by ${bSays}, not ${bOwner}`);
  // A body the route refuses (400, nothing joins or leaves); its answer still names the owner.
  const floodSays = await ownerNamedBy(floodPort, heartbeatPath(stream, group), {
    memberId: 'owner-probe',
    memberEpoch: -1,
  });
  if (floodSays !== floodOwner)
    throw new Error(`group ${group} is owned by ${floodSays}, not ${floodOwner}`);

  const script = wrkScript(
    bPath,
    CONSUMER_TOKEN,
    b.members.map((m) => JSON.stringify(heartbeatBody(m))),
  );
  const bPort = replica(bOwner).port;
  const load = async () =>
    assertAllOk(
      await runWrk({ port: bPort, script, connections: 8, durationMs: 1_000 }),
      'group B',
    );
  ctx.log(
    `  group B (64 shards / 32 members) on ${bOwner} under wrk, 8 connections, 1 s windows; ` +
      `${MEMBERS.toLocaleString('en-US')} joins into a ${SHARDS.toLocaleString('en-US')}-shard group on ${floodOwner}, as fast as 64 in flight go`,
  );
  const requests = joinRequests(floodPort, stream, group);
  await load(); // warm-up
  const quiet: LoadResult[] = [];
  for (let i = 0; i < 5; i++) quiet.push(await load());
  const profiles = ctx.profileDir('joins-apart');
  const apart = await flood({
    port: floodPort,
    requests,
    capMs,
    load,
    log: (line) => ctx.log(line),
    // --profile: both replicas during the flood; B's is the loop that delays B's answers.
    profiled: (work) =>
      profilePhase(replica(bOwner), profiles, 'join-phase-apart-b-replica', () =>
        profilePhase(replica(floodOwner), profiles, 'join-phase-apart-flood-replica', work),
      ),
  });
  const quietP99 = median(quiet.map((r) => r.p99Ms));
  const worst = Math.max(...apart.windows.map((r) => r.p99Ms));
  const joined = `${fmt(apart.joined)}/${fmt(MEMBERS)} joined`;
  return [
    {
      bench: 'joins-apart',
      metric: `joins/s into 1,024 shards another replica owns, 64 in flight (${joined})`,
      value: fmt(apart.rate),
      baseline: `first 1k ${fmt(apart.first)}/s, last 1k ${fmt(apart.last)}/s`,
      ratio: '-',
      goal: '- (info)',
      verdict: '-',
    },
    {
      bench: 'joins-apart',
      metric: `other group heartbeat p99 ms, its replica's neighbour flooded (worst window; ${joined} at ${fmt(apart.rate)}/s)`,
      value: fmt(worst, 1),
      baseline: `quiet ${fmt(quietP99, 1)}`,
      ratio: `${(worst / quietP99).toFixed(1)} x`,
      goal: '- (info)',
      verdict: '-',
    },
  ];
}
