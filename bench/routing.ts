import { freePort } from '../test/support/redis-server.js';
import type { BenchContext } from './context.js';
import {
  CONSUMER_TOKEN,
  cpuSecondsOf,
  fmt,
  heartbeatBody,
  heartbeatPath,
  median,
  metricsTextOf,
  ownerNamedBy,
  sleep,
  startCoordinator,
  startRedis,
  steadyGroup,
  verdict,
  type Child,
  type Row,
} from './support.js';
import { runWrk, wrkScript } from './wrk.js';

/*
 * Owner-direct clients against a load balancer's spread (docs/operations.md#owner-direct-clients):
 * two replicas on one Redis, one steady group owned by one of them. The same wrk load of steady
 * heartbeats goes, in interleaved rounds, straight to the owner (what the SDK's routing "owner"
 * does) and to the other replica, which forwards every heartbeat to the owner (what "any" does
 * behind a balancer, for the share of requests that land on a non-owner). Reported: the CPU per
 * heartbeat summed over both replicas and the p99, direct against forwarded, and the forwarded
 * requests the non-owner counted (coord_forwarded_requests_total), which stay flat when direct.
 */

const STREAM = 'bench-routing';
const GROUP = 'g';
const SHARDS = 16;
const MEMBERS = 16;

/** coord_forwarded_requests_total summed over its outcomes. */
async function forwardedOf(port: number): Promise<number> {
  const text = await metricsTextOf(port);
  let sum = 0;
  for (const match of text.matchAll(/^coord_forwarded_requests_total(?:\{[^}]*\})? (\S+)$/gm))
    sum += Number(match[1]);
  return sum;
}

export async function routing(ctx: BenchContext): Promise<Row[]> {
  const rounds = ctx.quick ? 2 : 3;
  const durationMs = ctx.quick ? 2_000 : 3_000;
  const connections = 32;
  const redis = await startRedis();
  const [port1, port2] = [await freePort(), await freePort()];
  const overrides = (id: string, port: number) => ({
    'replica.id': id,
    'http.port': port,
    'http.advertised-url': `http://127.0.0.1:${port}`,
  });
  const r1 = await startCoordinator('replica r1', redis, overrides('r1', port1));
  const r2 = await startCoordinator('replica r2', redis, overrides('r2', port2));
  await sleep(2_000); // both registered, each knows the other's advertised URL
  const { members } = await steadyGroup(r1.port, STREAM, GROUP, SHARDS, MEMBERS);
  const path = heartbeatPath(STREAM, GROUP);
  const ownerId = await ownerNamedBy(r1.port, path, heartbeatBody(members[0]!));
  const [owner, other]: [Child, Child] = ownerId === 'r2' ? [r2, r1] : [r1, r2];
  const script = wrkScript(
    path,
    CONSUMER_TOKEN,
    members.map((m) => JSON.stringify(heartbeatBody(m))),
  );
  ctx.log(
    `  ${MEMBERS} members of a ${SHARDS}-shard group owned by ${ownerId ?? '?'}; wrk, ${connections} connections; ` +
      `${rounds} interleaved rounds x ${durationMs / 1000} s, direct (to the owner) then forwarded (to the other)`,
  );
  const pids = [owner.process.pid as number, other.process.pid as number];
  const cpu = () => pids.reduce((s, pid) => s + cpuSecondsOf(pid), 0);
  const targets = [
    { key: 'direct', port: owner.port },
    { key: 'forwarded', port: other.port },
  ] as const;
  for (const t of targets) await runWrk({ port: t.port, script, connections, durationMs: 1_000 });
  const results = new Map<
    string,
    { cpuUs: number; p99: number; rps: number; forwarded: number }[]
  >();
  for (let round = 1; round <= rounds; round++) {
    const line: string[] = [];
    for (const t of targets) {
      const fromCpu = cpu();
      const fromForwarded = await forwardedOf(other.port);
      const r = await runWrk({ port: t.port, script, connections, durationMs });
      const cpuUs = ((cpu() - fromCpu) * 1e6) / r.completed;
      const forwarded = (await forwardedOf(other.port)) - fromForwarded;
      results.set(t.key, [
        ...(results.get(t.key) ?? []),
        { cpuUs, p99: r.p99Ms, rps: r.requestsPerSecond, forwarded },
      ]);
      line.push(
        `${t.key} ${fmt(r.requestsPerSecond)}/s p99 ${fmt(r.p99Ms, 1)} ms ${fmt(cpuUs, 1)} µs CPU (both replicas), ${fmt(forwarded)} forwarded`,
      );
    }
    ctx.log(`  round ${round}/${rounds}: ${line.join(', ')}`);
  }
  const med = (key: string, f: (v: { cpuUs: number; p99: number; rps: number }) => number) =>
    median((results.get(key) ?? []).map(f));
  const directCpu = med('direct', (v) => v.cpuUs);
  const forwardedCpu = med('forwarded', (v) => v.cpuUs);
  const directP99 = med('direct', (v) => v.p99);
  const forwardedP99 = med('forwarded', (v) => v.p99);
  const directForwards = (results.get('direct') ?? []).reduce((s, v) => s + v.forwarded, 0);
  return [
    {
      bench: 'routing',
      metric: 'CPU µs per steady heartbeat, both replicas, owner-direct',
      value: fmt(directCpu, 1),
      baseline: `forwarded ${fmt(forwardedCpu, 1)}`,
      ratio: `${fmt(directCpu / forwardedCpu, 2)} ×`,
      goal: '< 1 ×',
      verdict: verdict(directCpu < forwardedCpu),
    },
    {
      bench: 'routing',
      metric: `heartbeat p99 ms, ${connections} conns, owner-direct`,
      value: fmt(directP99, 1),
      baseline: `forwarded ${fmt(forwardedP99, 1)}`,
      ratio: `${fmt(directP99 / forwardedP99, 2)} ×`,
      goal: '-',
      verdict: '-',
    },
    {
      bench: 'routing',
      metric: 'requests forwarded while clients go to the owner',
      value: fmt(directForwards),
      baseline: '-',
      ratio: '-',
      goal: '0',
      verdict: verdict(directForwards === 0),
    },
  ];
}
