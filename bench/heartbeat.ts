import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { randomBytes } from 'node:crypto';
import jwt from 'jsonwebtoken';
import type { Redis } from 'ioredis';
import type { HeartbeatReply } from '../src/machines/protocol.js';
import { startRedisServer, type RedisServerHandle } from '../test/support/redis-server.js';
import { runLoad, type LoadResult } from './load.js';

/*
 * Heartbeat benchmark (DESIGN.md §12, docs/BENCHMARKS.md). In one run it measures, with the
 * same load generator (this process) and the same request bytes:
 *   - bare:    a bare node:http server answering the same heartbeat JSON (the ceiling),
 *   - express: the coordinator with every request through express (heartbeatFastPath: false),
 *   - fast:    the coordinator as shipped (heartbeat fast path in front of express),
 * each server a child process, each coordinator on a redis-server of its own started here on
 * a free port. The coordinators run the compiled dist/ under plain node, as `npm start` does
 * (`npm run bench` builds first); `--server src` runs the TypeScript sources through tsx. A group of --shards shards with --members members that joined and reached
 * steady state (OK); every connection re-sends one member's steady-state heartbeat. Rounds are
 * interleaved (bare, express, fast, bare, ...) so drift on a noisy machine hits all three.
 * Redis commands are counted per steady-state heartbeat: CONFIG RESETSTAT before each
 * coordinator round, INFO commandstats after. Only 127.0.0.1 is used; the run stops itself.
 */

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    duration: { type: 'string', default: '3' },
    warmup: { type: 'string', default: '2' },
    connections: { type: 'string', default: '32' },
    members: { type: 'string', default: '32' },
    shards: { type: 'string', default: '64' },
    server: { type: 'string', default: 'dist' },
  },
});
const SERVER_DIR = args.server;
if (SERVER_DIR !== 'dist' && SERVER_DIR !== 'src') throw new Error('--server is dist or src');
const ROUNDS = Number(args.rounds);
const DURATION_MS = Number(args.duration) * 1_000;
const WARMUP_MS = Number(args.warmup) * 1_000;
const CONNECTIONS = Number(args.connections);
const MEMBERS = Number(args.members);
const SHARDS = Number(args.shards);
for (const [name, value] of Object.entries({ ROUNDS, DURATION_MS, CONNECTIONS, MEMBERS, SHARDS }))
  if (!Number.isInteger(value) || value < 1) throw new Error(`bad --${name.toLowerCase()}`);

/** The whole run, setup included, must end within this; past it everything is stopped. */
const HARD_LIMIT_MS = 115_000;
const STREAM = 'bench';
const GROUP = 'g';
const HEARTBEAT_PATH = `/coord/v1/consumer/streams/${STREAM}/groups/${GROUP}/heartbeat`;
const SECRET = randomBytes(32).toString('base64url');
const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));

function mint(roles: string[]): string {
  const now = Math.floor(Date.now() / 1000);
  return jwt.sign(
    { sub: 'bench', roles, iat: now, exp: now + 3600, iss: 'stream-coordinator' },
    SECRET,
    { algorithm: 'HS256' },
  );
}
const CONSUMER_TOKEN = mint(['CONSUMER']);

// ---------------------------------------------------------------------------------------------
// child processes

interface Child {
  readonly name: string;
  readonly process: ChildProcess;
  readonly port: number;
}
const children: Child[] = [];
const redisServers: RedisServerHandle[] = [];

/** Starts `node [--import tsx] <file>` and resolves once it prints `LISTENING <port>`. */
function startChild(
  name: string,
  file: string,
  env: Record<string, string>,
  tsx = false,
): Promise<Child> {
  const child = spawn(process.execPath, [...(tsx ? ['--import', 'tsx'] : []), here(file)], {
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${name} did not start within 30 s`));
    }, 30_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${code}) before listening: ${output}`));
    });
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const port = /LISTENING (\d+)/.exec(output)?.[1];
      if (port) {
        clearTimeout(timer);
        const started = { name, process: child, port: Number(port) };
        children.push(started);
        resolve(started);
      }
    });
  });
}

async function stopChild(child: Child): Promise<void> {
  if (child.process.exitCode !== null || child.process.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.process.once('exit', () => resolve()));
  child.process.kill('SIGTERM');
  const timer = setTimeout(() => child.process.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}

async function cleanup(): Promise<void> {
  await Promise.allSettled(children.map(stopChild));
  await Promise.allSettled(redisServers.map((r) => r.stop()));
}

// ---------------------------------------------------------------------------------------------
// HTTP against the coordinator (setup only; the load uses prebuilt bytes)

async function post(port: number, path: string, token: string, body: unknown) {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
  return { status: res.status, path: res.headers.get('x-coord-path'), text: await res.text() };
}

interface MemberState {
  readonly memberId: string;
  memberEpoch: number;
  assignmentEpoch: number;
  metadataVersion: number;
  currentAssignments: number[];
  last: HeartbeatReply | null;
}

function heartbeatBody(m: MemberState) {
  return {
    memberId: m.memberId,
    memberEpoch: m.memberEpoch,
    assignmentEpoch: m.assignmentEpoch,
    metadataVersion: m.metadataVersion,
    currentAssignments: m.currentAssignments,
    revokeProgress: [],
  };
}

/** Creates the group, joins every member and beats until all are OK and nothing moves. */
async function reachSteadyState(
  port: number,
  expectPath: string | null,
): Promise<{ members: MemberState[]; reply: string }> {
  const created = await post(port, '/coord/v1/admin/groups', mint(['WRITE']), {
    streamPrefix: STREAM,
    consumerGroup: GROUP,
    shardCount: SHARDS,
    requestedBy: 'bench',
    reason: 'heartbeat benchmark',
  });
  if (created.status !== 201) throw new Error(`create group: ${created.status} ${created.text}`);
  const members: MemberState[] = Array.from({ length: MEMBERS }, (_, i) => ({
    memberId: `member-${String(i).padStart(3, '0')}`,
    memberEpoch: 0,
    assignmentEpoch: 0,
    metadataVersion: 0,
    currentAssignments: [],
    last: null,
  }));
  let stablePasses = 0;
  let lastText = '';
  for (let pass = 0; pass < 200 && stablePasses < 2; pass++) {
    let changed = false;
    await Promise.all(
      members.map(async (m) => {
        const res = await post(port, HEARTBEAT_PATH, CONSUMER_TOKEN, heartbeatBody(m));
        if (res.status !== 200) throw new Error(`heartbeat: ${res.status} ${res.text}`);
        if (res.path !== expectPath)
          throw new Error(`expected X-Coord-Path ${expectPath}, got ${res.path}`);
        const reply = JSON.parse(res.text) as HeartbeatReply;
        // Honest member: revoked shards are dropped (DONE) at once.
        const next = reply.outcome === 'FENCED_MEMBER_EPOCH' ? [] : [...reply.assignedShards];
        if (
          reply.outcome !== 'OK' ||
          reply.memberEpoch !== m.memberEpoch ||
          next.join() !== m.currentAssignments.join()
        )
          changed = true;
        m.memberEpoch = reply.outcome === 'FENCED_MEMBER_EPOCH' ? 0 : reply.memberEpoch;
        m.assignmentEpoch = reply.assignmentEpoch;
        m.metadataVersion = reply.metadataVersion;
        m.currentAssignments = next;
        m.last = reply;
        if (m === members[0]) lastText = res.text;
      }),
    );
    stablePasses = changed ? 0 : stablePasses + 1;
    if (changed) await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const owned = members.reduce((n, m) => n + m.currentAssignments.length, 0);
  if (stablePasses < 2 || owned !== SHARDS)
    throw new Error(`no steady state: ${owned}/${SHARDS} shards owned`);
  return { members, reply: lastText };
}

function requestBytes(port: number, members: readonly MemberState[]): Buffer[] {
  return members.map((m) => {
    const body = Buffer.from(JSON.stringify(heartbeatBody(m)));
    const head =
      `POST ${HEARTBEAT_PATH} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n` +
      `Authorization: Bearer ${CONSUMER_TOKEN}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${body.length}\r\n\r\n`;
    return Buffer.concat([Buffer.from(head), body]);
  });
}

// ---------------------------------------------------------------------------------------------
// Redis command counting

/** Commands this script itself sends around a round; not the coordinator's. */
const OWN_COMMANDS = new Set(['config|resetstat', 'info', 'command|info']);
const SCRIPT_COMMANDS = new Set(['eval', 'evalsha', 'eval_ro', 'evalsha_ro', 'fcall', 'fcall_ro']);

async function commandCalls(client: Redis): Promise<Map<string, number>> {
  const stats = await client.info('commandstats');
  const calls = new Map<string, number>();
  for (const m of stats.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
    if (!OWN_COMMANDS.has(m[1] as string)) calls.set(m[1] as string, Number(m[2]));
  return calls;
}

const writeFlagCache = new Map<string, boolean>();
/** A write command (flag `write`), or a script, which may write. */
async function isWrite(client: Redis, command: string): Promise<boolean> {
  if (SCRIPT_COMMANDS.has(command)) return true;
  let known = writeFlagCache.get(command);
  if (known === undefined) {
    const info = (await client.call('COMMAND', 'INFO', command)) as unknown[][];
    known = JSON.stringify(info[0]?.[2] ?? []).includes('"write"');
    writeFlagCache.set(command, known);
  }
  return known;
}

// ---------------------------------------------------------------------------------------------
// the run

interface Target {
  readonly key: 'bare' | 'express' | 'fast';
  readonly label: string;
  readonly port: number;
  readonly requests: Buffer[];
  readonly redis: RedisServerHandle | null;
  readonly rounds: LoadResult[];
  readonly calls: Map<string, number>;
}

async function heartbeatOutcomes(port: number): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return new Map(
    [...text.matchAll(/^coord_heartbeats_total\{outcome="([A-Z_]+)"\} (\d+)$/gm)].map((m) => [
      m[1] as string,
      Number(m[2]),
    ]),
  );
}

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[mid] ?? NaN)
    : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
};
const pad = (s: string | number, n: number) => String(s).padStart(n);
const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

async function main(): Promise<void> {
  const startedAt = Date.now();
  const cpu = cpus();
  console.log('stream-coordinator heartbeat benchmark (bench/heartbeat.ts)');
  console.log(
    `machine: ${cpu.length} CPU cores (${cpu[0]?.model.trim() ?? 'unknown'}), load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}, Node ${process.version}`,
  );
  console.log(
    `         the load generator (this process, pid ${process.pid}), the servers and redis-server share these cores`,
  );

  if (SERVER_DIR === 'dist' && !existsSync(here('../dist/server.js')))
    throw new Error('dist/ is missing: run `npm run build` first (`npm run bench` does)');
  // Two redis-servers and two coordinators, started together.
  const [redisExpress, redisFast] = await Promise.all([startRedisServer(), startRedisServer()]);
  redisServers.push(redisExpress, redisFast);
  const coordinator = (name: string, redis: RedisServerHandle, fast: boolean) =>
    startChild(
      name,
      'coordinator-server.mjs',
      {
        BENCH_REDIS_URL: redis.url,
        BENCH_JWT_SECRET: SECRET,
        BENCH_FAST_PATH: fast ? '1' : '0',
        BENCH_SERVER_DIR: SERVER_DIR,
      },
      SERVER_DIR === 'src',
    );
  const [expressChild, fastChild] = await Promise.all([
    coordinator('coordinator (express only)', redisExpress, false),
    coordinator('coordinator (fast path)', redisFast, true),
  ]);
  await Promise.all([redisExpress, redisFast].map((r) => r.client().config('RESETSTAT')));
  const [expressSetup, fastSetup] = await Promise.all([
    reachSteadyState(expressChild.port, null),
    reachSteadyState(fastChild.port, 'fast'),
  ]);
  // The counter's own check: the joins and the rebalance did write.
  const setupCalls = await commandCalls(redisFast.client());
  let setupWrites = 0;
  for (const [command, n] of setupCalls)
    if (await isWrite(redisFast.client(), command)) setupWrites += n;
  const bareChild = await startChild('bare node:http', 'bare-server.mjs', {
    BENCH_REPLY: fastSetup.reply,
  });
  const redisVersion = /redis_version:(\S+)/.exec(await redisFast.client().info('server'))?.[1];
  console.log(
    `setup: coordinators from ${SERVER_DIR === 'dist' ? 'dist/ (compiled) under plain node' : 'src/ through tsx'}; ` +
      `${MEMBERS} members of a ${SHARDS}-shard group at steady state (all OK) on each, ` +
      `Redis store (redis-server ${redisVersion ?? '?'}), reply ${Buffer.byteLength(fastSetup.reply)} bytes, ` +
      `request ${requestBytes(fastChild.port, fastSetup.members)[0]?.length ?? 0} bytes`,
  );
  console.log(
    `load:  ${CONNECTIONS} keep-alive connections, 1 request in flight each, steady-state heartbeats ` +
      `(connection i re-sends member i mod ${MEMBERS}); ${ROUNDS} rounds x ${DURATION_MS / 1000} s per target, ` +
      `interleaved, after a ${WARMUP_MS / 1000} s warm-up each\n`,
  );

  const targets: Target[] = [
    {
      key: 'bare',
      label: 'bare node:http',
      port: bareChild.port,
      requests: requestBytes(bareChild.port, fastSetup.members),
      redis: null,
      rounds: [],
      calls: new Map(),
    },
    {
      key: 'express',
      label: 'coordinator, express only',
      port: expressChild.port,
      requests: requestBytes(expressChild.port, expressSetup.members),
      redis: redisExpress,
      rounds: [],
      calls: new Map(),
    },
    {
      key: 'fast',
      label: 'coordinator, fast path',
      port: fastChild.port,
      requests: requestBytes(fastChild.port, fastSetup.members),
      redis: redisFast,
      rounds: [],
      calls: new Map(),
    },
  ];
  const load = (t: Target, durationMs: number) =>
    runLoad({
      host: '127.0.0.1',
      port: t.port,
      connections: CONNECTIONS,
      requests: t.requests,
      durationMs,
    });

  for (const t of targets) await load(t, WARMUP_MS);
  const outcomesBefore = new Map<string, Map<string, number>>();
  for (const t of targets) if (t.redis) outcomesBefore.set(t.key, await heartbeatOutcomes(t.port));

  for (let round = 1; round <= ROUNDS; round++) {
    const line: string[] = [];
    for (const t of targets) {
      const client = t.redis?.client();
      if (client) await client.config('RESETSTAT');
      const result = await load(t, DURATION_MS);
      if (client)
        for (const [command, n] of await commandCalls(client))
          t.calls.set(command, (t.calls.get(command) ?? 0) + n);
      t.rounds.push(result);
      const non2xx = [...result.statuses].filter(([s]) => s < 200 || s > 299);
      if (non2xx.length > 0 || result.socketErrors > 0)
        throw new Error(
          `${t.label}: non-2xx ${JSON.stringify(non2xx)}, socket errors ${result.socketErrors}`,
        );
      line.push(`${t.key} ${fmt(result.requestsPerSecond)}/s`);
    }
    console.log(`round ${round}/${ROUNDS}: ${line.join(', ')}`);
  }

  // Every measured heartbeat must have been a steady-state OK.
  for (const t of targets) {
    if (!t.redis) continue;
    const before = outcomesBefore.get(t.key) ?? new Map<string, number>();
    const after = await heartbeatOutcomes(t.port);
    const delta = [...after]
      .map(([o, n]) => [o, n - (before.get(o) ?? 0)] as const)
      .filter(([, n]) => n > 0);
    const ok = delta.find(([o]) => o === 'OK')?.[1] ?? 0;
    if (delta.some(([o]) => o !== 'OK'))
      throw new Error(`${t.label}: outcomes other than OK under load: ${JSON.stringify(delta)}`);
    const served = t.rounds.reduce((n, r) => n + r.completed, 0);
    if (ok < served) throw new Error(`${t.label}: ${ok} OK outcomes for ${served} answers`);
  }

  // ---- report
  const bareRps = median(targets[0]?.rounds.map((r) => r.requestsPerSecond) ?? []);
  console.log(
    `\nthroughput and latency (median of ${ROUNDS} rounds; latency is per request, closed loop of ${CONNECTIONS})`,
  );
  console.log(
    `${'target'.padEnd(28)}${pad('req/s', 9)}${pad('p50 ms', 9)}${pad('p99 ms', 9)}${pad('vs bare', 9)}   req/s per round`,
  );
  for (const t of targets) {
    const rps = median(t.rounds.map((r) => r.requestsPerSecond));
    console.log(
      `${t.label.padEnd(28)}${pad(fmt(rps), 9)}${pad(fmt(median(t.rounds.map((r) => r.p50Ms)), 2), 9)}` +
        `${pad(fmt(median(t.rounds.map((r) => r.p99Ms)), 2), 9)}${pad(`${((100 * rps) / bareRps).toFixed(1)}%`, 9)}` +
        `   ${t.rounds.map((r) => fmt(r.requestsPerSecond)).join(' ')}`,
    );
  }

  const expressRps = median(targets[1]?.rounds.map((r) => r.requestsPerSecond) ?? []);
  const fastRps = median(targets[2]?.rounds.map((r) => r.requestsPerSecond) ?? []);
  console.log(`fast path vs express only: ${(fastRps / expressRps).toFixed(1)}x`);

  console.log(
    '\nRedis commands per steady-state heartbeat (CONFIG RESETSTAT before each round, INFO commandstats after)',
  );
  console.log(
    `${'target'.padEnd(28)}${pad('heartbeats', 11)}${pad('commands', 10)}${pad('per hb', 9)}${pad('writes', 8)}   commands seen`,
  );
  for (const t of targets) {
    if (!t.redis) continue;
    const client = t.redis.client();
    const heartbeats = t.rounds.reduce((n, r) => n + r.completed, 0);
    let total = 0;
    let writes = 0;
    for (const [command, n] of t.calls) {
      total += n;
      if (await isWrite(client, command)) writes += n;
    }
    const seen = [...t.calls].map(([c, n]) => `${c}=${n}`).join(' ') || '-';
    console.log(
      `${t.label.padEnd(28)}${pad(fmt(heartbeats), 11)}${pad(fmt(total), 10)}${pad((total / heartbeats).toFixed(4), 9)}${pad(writes, 8)}   ${seen}`,
    );
    if (writes > 0) throw new Error(`${t.label}: ${writes} write commands during steady state`);
  }
  console.log(
    `(counter check: setting up the fast-path coordinator's group took ${fmt(
      [...setupCalls.values()].reduce((a, b) => a + b, 0),
    )} commands, ${setupWrites} of them writes: ${[...setupCalls].map(([c, n]) => `${c}=${n}`).join(' ')})`,
  );
  console.log(`\ndone in ${((Date.now() - startedAt) / 1000).toFixed(1)} s`);
}

const hardLimit = setTimeout(() => {
  console.error(`bench: still running after ${HARD_LIMIT_MS / 1000} s, stopping`);
  void cleanup().finally(() => process.exit(1));
}, HARD_LIMIT_MS);
let exitCode = 0;
process.once('SIGINT', () => {
  void cleanup().finally(() => process.exit(130));
});
try {
  await main();
} catch (error) {
  console.error(
    `bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
  );
  exitCode = 1;
} finally {
  clearTimeout(hardLimit);
  await cleanup();
}
process.exit(exitCode);
