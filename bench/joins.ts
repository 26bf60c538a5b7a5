import { joinBody } from '../test/support/members.js';
import type { BenchContext } from './context.js';
import type { LoadResult } from './load.js';
import {
  CONSUMER_TOKEN,
  createGroup,
  fmt,
  heartbeatBody,
  heartbeatPath,
  median,
  nowMs,
  post,
  startCoordinator,
  startRedis,
  steadyGroup,
  verdict,
  type Row,
} from './support.js';
import { runWrk, wrkScript } from './wrk.js';

/*
 * Joins (issue 10: 5,000 members joining one 1,024-shard group at ≥ 1,000 joins/s while another
 * group's heartbeat p99 stays ≤ 10 ms). Over HTTP against the coordinator (dist/, Redis store).
 * Group B (64 shards, 32 members at steady state) is loaded by wrk in its own process, 8
 * connections, in 2 s windows: first with nothing else going on (the baseline), then while this
 * process sends the joins into group J, 64 in flight. A join counts when its reply carries a
 * member epoch. The join phase stops at a time cap, and what joined by then is reported.
 */

const MEMBERS = 5_000;
const SHARDS = 1_024;

export async function joins(ctx: BenchContext): Promise<Row[]> {
  const capMs = ctx.quick ? 30_000 : 90_000;
  const windowMs = 2_000;
  const redis = await startRedis();
  const coordinator = await startCoordinator('coordinator', redis, {}, ctx.profileFlags('joins'));
  const port = coordinator.port;
  const b = await steadyGroup(port, 'bench', 'b', 64, 32);
  await createGroup(port, 'bench', 'j', SHARDS);
  const script = wrkScript(
    heartbeatPath('bench', 'b'),
    CONSUMER_TOKEN,
    b.members.map((m) => JSON.stringify(heartbeatBody(m))),
  );
  const load = () => runWrk({ port, script, connections: 8, durationMs: windowMs });
  ctx.log(
    `  ${MEMBERS.toLocaleString('en-US')} joins into a ${SHARDS}-shard group, 64 in flight, cap ${capMs / 1000} s; ` +
      `group B (64 shards / 32 members) under wrk, 8 connections, 2 s windows`,
  );

  await load(); // warm-up
  const quiet: LoadResult[] = [];
  for (let i = 0; i < 3; i++) quiet.push(await load());

  const joinPath = heartbeatPath('bench', 'j');
  let next = 0;
  let joined = 0;
  let failed = 0;
  const joinedAt: number[] = [];
  const started = nowMs();
  const deadline = started + capMs;
  const joiners = Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next < MEMBERS && nowMs() < deadline) {
        const memberId = `joiner-${String(next++).padStart(5, '0')}`;
        const res = await post(
          port,
          joinPath,
          CONSUMER_TOKEN,
          joinBody(memberId, { revokeProgress: [], sessionTimeoutMs: 1_800_000 }),
        );
        if (
          res.status === 200 &&
          (JSON.parse(res.text) as { memberEpoch: number }).memberEpoch > 0
        ) {
          joined++;
          joinedAt.push(nowMs());
        } else failed++;
      }
    }),
  );
  let joining = true;
  void joiners.finally(() => (joining = false));
  const during: LoadResult[] = [];
  while (joining) {
    during.push(await load());
    ctx.log(
      `  ${joined.toLocaleString('en-US')} joined, B p99 ${fmt(during.at(-1)?.p99Ms ?? NaN, 1)} ms`,
    );
  }
  await joiners;
  const elapsedS = ((joinedAt.at(-1) ?? nowMs()) - started) / 1000;
  const rate = joined / elapsedS;
  // Rate over the first and the last 1,000 joins: how a join's cost grows with the group.
  const rateOf = (from: number, to: number) =>
    (to - from) / (((joinedAt[to - 1] ?? NaN) - (joinedAt[from] ?? NaN)) / 1000);
  const first = joined >= 1000 ? rateOf(0, 1000) : NaN;
  const last = joined >= 1000 ? rateOf(joined - 1000, joined) : NaN;
  ctx.log(
    `  ${joined} joined in ${elapsedS.toFixed(1)} s (${failed} failed); first 1,000 at ${fmt(first)}/s, last 1,000 at ${fmt(last)}/s`,
  );
  const quietP99 = median(quiet.map((r) => r.p99Ms));
  const joinP99 = median(during.map((r) => r.p99Ms));
  const worstP99 = Math.max(...during.map((r) => r.p99Ms));
  const all = joined === MEMBERS;
  return [
    {
      bench: 'joins',
      metric: `joins/s into 1,024 shards (${fmt(joined)}/${fmt(MEMBERS)} joined${all ? '' : ` by the ${capMs / 1000} s cap`})`,
      value: fmt(rate),
      baseline: `first 1k ${fmt(first)}/s, last 1k ${fmt(last)}/s`,
      ratio: '-',
      goal: '>= 1,000/s',
      verdict: verdict(all && rate >= 1000),
    },
    {
      bench: 'joins',
      metric: 'other group heartbeat p99 ms during joins (median window)',
      value: fmt(joinP99, 1),
      baseline: `quiet ${fmt(quietP99, 1)}`,
      ratio: `${(joinP99 / quietP99).toFixed(1)} x`,
      goal: '<= 10 ms',
      verdict: verdict(worstP99 <= 10 && joinP99 <= 10),
    },
    {
      bench: 'joins',
      metric: 'other group heartbeat p99 ms during joins (worst window)',
      value: fmt(worstP99, 1),
      baseline: `quiet ${fmt(quietP99, 1)}`,
      ratio: `${(worstP99 / quietP99).toFixed(1)} x`,
      goal: '-',
      verdict: '-',
    },
  ];
}
