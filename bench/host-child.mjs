/*
 * In-process benchmarks of the GroupHost (no HTTP), a child process of bench/run.ts so that its
 * heap and RSS are its own. Runs the compiled dist/ under plain node, with a MemoryStore and the
 * system clock (the deadline sweep and the join debounce run as in production). Members ask for
 * the longest session (30 min) so that building the state never expires anyone.
 *
 *   node bench/host-child.mjs scaling   per-heartbeat cost, 1,024 shards / 2,000 members vs 64 / 32
 *   node bench/host-child.mjs capacity  10,000 groups / 100,000 members vs one group of the same shape
 *
 * Prints progress lines and, last, `RESULT <json>`. Arguments after the mode: rounds, and for
 * capacity the number of groups. BENCH_PROFILE_DIR: see profiled().
 */

import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { clearInterval, setInterval } from 'node:timers';
import { setTimeout as delay } from 'node:timers/promises';
import { GroupHost } from '../dist/actors/group-host.js';
import { loadSettings } from '../dist/config/load.js';
import { systemClock } from '../dist/machines/clock.js';
import { createLogger } from '../dist/observability/logger.js';
import { Metrics } from '../dist/observability/metrics.js';
import { MemoryStore } from '../dist/store/memory-store.js';
import { applyReply } from './member-reply.mjs';

const SESSION = 1_800_000;
const [mode = 'scaling', roundsArg = '5', groupsArg = '10000'] = process.argv.slice(2);
const ROUNDS = Number(roundsArg);
const log = (line) => process.stdout.write(`  ${line}\n`);
const sleep = (ms) => delay(ms);
const rssMiB = () => process.memoryUsage().rss / 2 ** 20;

function newHost() {
  const settings = loadSettings({
    env: {},
    overrides: { 'log.level': 'error', 'limits.max-members-per-group': 10_000 },
  });
  const host = new GroupHost({
    store: new MemoryStore({ keyPrefix: 'bench', auditMaxLen: 1_000 }),
    settings,
    clock: systemClock,
    metrics: new Metrics(),
    logger: createLogger({ level: 'error', format: 'text' }),
    replicaId: 'bench',
  });
  host.start();
  return host;
}

function member(ref, memberId) {
  return {
    ref,
    memberId,
    memberEpoch: 0,
    assignmentEpoch: 0,
    metadataVersion: 0,
    currentAssignments: [],
  };
}

function request(m) {
  return {
    memberId: m.memberId,
    principal: 'bench',
    memberEpoch: m.memberEpoch,
    assignmentEpoch: m.assignmentEpoch,
    metadataVersion: m.metadataVersion,
    currentAssignments: m.currentAssignments,
    revokeProgress: [],
    sessionTimeoutMs: SESSION,
  };
}

/** Runs `fn` over `items` with at most `limit` in flight. */
async function pool(items, limit, fn) {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) await fn(items[next++]);
    }),
  );
}

/**
 * Creates the groups, joins the members, beats until every member is OK and nothing moves for
 * two passes. Only groups not yet steady are beaten again, so building many groups is linear.
 */
async function build(host, prefix, groups, shards, membersPerGroup) {
  const members = [];
  const pending = [];
  const started = Date.now();
  for (let g = 0; g < groups; g++) {
    const ref = { streamPrefix: prefix, consumerGroup: `g${g}` };
    await host.createGroup(ref, shards);
    const group = { members: [], stable: 0 };
    for (let i = 0; i < membersPerGroup; i++) group.members.push(member(ref, `m${i}`));
    members.push(...group.members);
    pending.push(group);
  }
  log(`${prefix}: ${groups} groups created in ${Date.now() - started} ms`);
  let unsteady = pending;
  for (let pass = 0; pass < 400 && unsteady.length > 0; pass++) {
    const changed = new Set();
    await pool(
      unsteady.flatMap((group) => group.members.map((m) => [group, m])),
      256,
      async ([group, m]) => {
        if (applyReply(m, await host.heartbeat(m.ref, request(m)))) changed.add(group);
      },
    );
    for (const group of unsteady) group.stable = changed.has(group) ? 0 : group.stable + 1;
    unsteady = unsteady.filter((group) => group.stable < 2);
    if (groups > 1)
      log(
        `${prefix}: pass ${pass + 1}, ${changed.size} groups changed, ${unsteady.length} not yet steady, ${Date.now() - started} ms`,
      );
    if (changed.size > 0) await sleep(150);
  }
  if (unsteady.length > 0) throw new Error(`${prefix}: ${unsteady.length} groups never steady`);
  const owned = members.reduce((n, m) => n + m.currentAssignments.length, 0);
  if (owned !== groups * shards) throw new Error(`${prefix}: ${owned} of ${groups * shards} owned`);
  return { members, buildMs: Date.now() - started };
}

/**
 * As build(), for many small groups (capacity): 128 groups at a time, each created, then its
 * members beaten one after the other, pass after pass, until every shard is owned and a whole
 * pass moved nothing; a member that dropped revoked shards says so at once (as the SDK's
 * consumer does). As bench/capacity.ts builds the replica over HTTP.
 */
async function buildGroups(host, prefix, groups, shards, membersPerGroup) {
  const all = [];
  const started = Date.now();
  let done = 0;
  const progress = setInterval(
    () => log(`${prefix}: ${done} of ${groups} groups steady, ${Date.now() - started} ms`),
    10_000,
  );
  const steady = async (g) => {
    const ref = { streamPrefix: prefix, consumerGroup: `g${g}` };
    await host.createGroup(ref, shards);
    const members = Array.from({ length: membersPerGroup }, (_, i) => member(ref, `m${i}`));
    for (let pass = 0; pass < 200; pass++) {
      let moved = false;
      for (const m of members) {
        const held = m.currentAssignments.length;
        if (applyReply(m, await host.heartbeat(ref, request(m)))) moved = true;
        if (m.memberEpoch > 0 && m.currentAssignments.length < held)
          applyReply(m, await host.heartbeat(ref, request(m)));
      }
      const owned = members.reduce((n, m) => n + m.currentAssignments.length, 0);
      if (!moved && owned === shards) return members;
      if (pass === 0) await sleep(100);
    }
    throw new Error(`${prefix}/g${g}: no steady state`);
  };
  try {
    await pool(
      Array.from({ length: groups }, (_, g) => g),
      128,
      async (g) => {
        all.push(...(await steady(g)));
        done++;
      },
    );
  } finally {
    clearInterval(progress);
  }
  return { members: all, buildMs: Date.now() - started };
}

/**
 * Steady heartbeats for `ms` from `concurrency` loops over the members: heartbeats/s. Each is
 * asked as the HTTP layer asks it (`steadyTicket`, then `heartbeat` if that says null).
 */
async function measure(host, members, ms, concurrency) {
  let done = 0;
  let bad = 0;
  let i = 0;
  const deadline = performance.now() + ms;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < deadline) {
        const m = members[i++ % members.length];
        // As the HTTP layer asks (answerHeartbeat): at once when the group can, else in turn.
        const heartbeat = request(m);
        const reply =
          host.steadyTicket(m.ref, heartbeat)?.reply ?? (await host.heartbeat(m.ref, heartbeat));
        if (reply.outcome !== 'OK') bad++;
        done++;
      }
    }),
  );
  if (bad > 0) throw new Error(`${bad} heartbeats were not OK in steady state`);
  return done / ((performance.now() - started) / 1_000);
}

/**
 * With BENCH_PROFILE_DIR set, a CPU profile of the measured rounds only (not of building the
 * state), written there as `<mode>.cpuprofile`.
 */
async function profiled(fn) {
  const dir = process.env.BENCH_PROFILE_DIR;
  if (!dir) return fn();
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  try {
    return await fn();
  } finally {
    const { profile } = await session.post('Profiler.stop');
    writeFileSync(join(dir, `${mode}.cpuprofile`), JSON.stringify(profile));
    session.disconnect();
  }
}

async function interleave(cases, ms, concurrency) {
  for (const c of cases) await measure(c.host, c.members, 500, concurrency); // warm-up
  return profiled(() => rounds(cases, ms, concurrency));
}

async function rounds(cases, ms, concurrency) {
  const rates = Object.fromEntries(cases.map((c) => [c.name, []]));
  for (let round = 1; round <= ROUNDS; round++) {
    const line = [];
    for (const c of cases) {
      const rate = await measure(c.host, c.members, ms, concurrency);
      rates[c.name].push(rate);
      line.push(`${c.name} ${Math.round(rate).toLocaleString('en-US')}/s`);
    }
    log(`round ${round}/${ROUNDS}: ${line.join(', ')}`);
  }
  return rates;
}

if (mode === 'scaling') {
  const small = newHost();
  const large = newHost();
  const s = await build(small, 'small', 1, 64, 32);
  log(`64 shards / 32 members at steady state in ${s.buildMs} ms`);
  const l = await build(large, 'large', 1, 1024, 2000);
  log(`1,024 shards / 2,000 members at steady state in ${l.buildMs} ms`);
  // One heartbeat at a time: the cost of one heartbeat, not of a queue.
  const rates = await interleave(
    [
      { name: 'small', host: small, members: s.members },
      { name: 'large', host: large, members: l.members },
    ],
    1_500,
    1,
  );
  process.stdout.write(
    `RESULT ${JSON.stringify({ rates, buildMs: { small: s.buildMs, large: l.buildMs } })}\n`,
  );
  await Promise.all([small.close(), large.close()]);
} else if (mode === 'capacity') {
  const groups = Number(groupsArg);
  globalThis.gc?.();
  const rssStart = rssMiB();
  const small = newHost();
  const s = await buildGroups(small, 'small', 1, 16, 10);
  globalThis.gc?.();
  const rssSmall = rssMiB();
  log(`small: 1 group, 10 members, 16 shards; RSS ${rssSmall.toFixed(0)} MiB`);
  const large = newHost();
  const l = await buildGroups(large, 'large', groups, 16, 10);
  globalThis.gc?.();
  const rssLarge = rssMiB();
  log(
    `large: ${groups.toLocaleString('en-US')} groups, ${l.members.length.toLocaleString('en-US')} members, 16 shards each, ` +
      `built in ${(l.buildMs / 1000).toFixed(1)} s; RSS ${rssLarge.toFixed(0)} MiB`,
  );
  const rates = await interleave(
    [
      { name: 'small', host: small, members: s.members },
      { name: 'large', host: large, members: l.members },
    ],
    1_500,
    64,
  );
  globalThis.gc?.();
  const heap = process.memoryUsage();
  process.stdout.write(
    `RESULT ${JSON.stringify({
      rates,
      rss: { start: rssStart, small: rssSmall, large: rssLarge, end: rssMiB() },
      heapUsedMiB: heap.heapUsed / 2 ** 20,
      buildMs: l.buildMs,
      members: l.members.length,
    })}\n`,
  );
  await Promise.all([small.close(), large.close()]);
} else {
  throw new Error(`unknown mode ${mode}`);
}
process.exit(0);
