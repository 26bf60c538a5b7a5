import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import jwt from 'jsonwebtoken';
import type { Redis } from 'ioredis';
import type { HeartbeatReply } from '../src/machines/protocol.js';
import { COORDINATOR_NODE_FLAGS } from '../src/node-flags.js';
import { startRedisServer, type RedisServerHandle } from '../test/support/redis-server.js';
import { applyReply } from './member-reply.mjs';

/*
 * What every benchmark of `bench/run.ts` shares: child processes (servers, simulated consumers),
 * redis-servers, tokens, setup over HTTP, Redis command counting, medians and result rows.
 */

export const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));

/** One line of the final table: a figure, the baseline it is compared with, and the goal. */
export interface Row {
  readonly bench: string;
  readonly metric: string;
  readonly value: string;
  readonly baseline: string;
  readonly ratio: string;
  readonly goal: string;
  /** `met`, `MISSED`, or `-` when the row has no goal. */
  readonly verdict: string;
}

export const verdict = (met: boolean | null) => (met === null ? '-' : met ? 'met' : 'MISSED');

export const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[mid] ?? NaN)
    : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
};

export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.max(0, Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1))] ?? NaN;
}

export const fmt = (n: number, digits = 0) =>
  Number.isFinite(n)
    ? n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })
    : String(n);

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Wall-clock milliseconds with sub-millisecond resolution, comparable across processes. */
export const nowMs = () => performance.timeOrigin + performance.now();

// ---------------------------------------------------------------------------------------------
// tokens

export const SECRET = randomBytes(32).toString('base64url');

export function mint(roles: string[], sub = 'bench'): string {
  const now = Math.floor(Date.now() / 1000);
  return jwt.sign({ sub, roles, iat: now, exp: now + 3600, iss: 'stream-coordinator' }, SECRET, {
    algorithm: 'HS256',
  });
}
export const CONSUMER_TOKEN = mint(['CONSUMER']);
export const WRITE_TOKEN = mint(['WRITE', 'READ']);

// ---------------------------------------------------------------------------------------------
// child processes and redis-servers, all stopped by cleanup()

export interface Child {
  readonly name: string;
  readonly process: ChildProcess;
  readonly port: number;
  /** Everything the child printed on stdout so far. */
  output(): string;
}
const children: Child[] = [];
const redisServers: RedisServerHandle[] = [];

/** Clock ticks per second of the times in /proc/<pid>/stat (USER_HZ, 100 on Linux). */
export const TICKS_PER_S = 100;

/**
 * The fields of a `/proc/<pid>/stat` (or `/proc/<pid>/task/<tid>/stat`) file after the command
 * name, which may hold spaces: [7] minor faults, [11] user and [12] system time in ticks.
 */
export function procStatFields(path: string): string[] {
  const stat = readFileSync(path, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** User + system CPU seconds a process has used (/proc/<pid>/stat). */
export function cpuSecondsOf(pid: number): number {
  const fields = procStatFields(`/proc/${pid}/stat`);
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_S;
}

/** A coordinator's own `/metrics`, as text. */
export async function metricsTextOf(port: number): Promise<string> {
  return (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
}

/**
 * `/metrics` reads in a warm-up, each followed by a short run of heartbeats
 * ({@link warmUpScrapes}).
 */
const WARM_UP_SCRAPES = 8;

/**
 * The end of a warm-up for rounds that read the coordinator's `/metrics` (an express route, as
 * a replica's scrape is): {@link WARM_UP_SCRAPES} times, a read and then `load`. After a run of
 * heartbeats through the fast path, each of the first few express requests makes V8 deoptimize
 * up to thirty functions of node's HTTP internals that both paths share (`--trace-deopt`: "wrong
 * map", 30, 22, 19, 20, 5 and then 0 per read in one run), which then run unoptimized until
 * compiled again; a replica gets over that with its first scrapes and health checks. Without
 * this, the first rounds measure it (docs/BENCHMARKS.md, throughput).
 */
export async function warmUpScrapes(port: number, load: () => Promise<unknown>): Promise<void> {
  for (let i = 0; i < WARM_UP_SCRAPES; i++) {
    await metricsTextOf(port);
    await load();
  }
}

/** The value of an unlabelled metric in a coordinator's `/metrics` text; NaN when absent. */
export function metricIn(text: string, name: string): number {
  const line = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return Number(line?.[1] ?? NaN);
}

/** A coordinator's GC pauses so far, by kind: count and seconds. */
export type GcPauses = Map<string, { count: number; seconds: number }>;

/** The GC pauses in a coordinator's `/metrics` text (`coord_process_nodejs_gc_duration_seconds`). */
export function gcPausesIn(text: string): GcPauses {
  const pauses: GcPauses = new Map();
  const line = /^coord_process_nodejs_gc_duration_seconds_(sum|count)\{kind="(\w+)"\} (\S+)$/gm;
  for (const [, what, kind, value] of text.matchAll(line)) {
    const entry = pauses.get(kind!) ?? { count: 0, seconds: 0 };
    if (what === 'sum') entry.seconds = Number(value);
    else entry.count = Number(value);
    pauses.set(kind!, entry);
  }
  return pauses;
}

/**
 * Starts `node [--import tsx] [flags] bench/<file>` and resolves once it prints `LISTENING <port>`
 * (`LISTENING 0` for children that listen on nothing).
 */
export function startChild(
  name: string,
  file: string,
  env: Record<string, string>,
  options: { tsx?: boolean; nodeFlags?: string[]; args?: string[] } = {},
): Promise<Child> {
  const child = spawn(
    process.execPath,
    [
      ...(options.nodeFlags ?? []),
      ...(options.tsx ? ['--import', 'tsx'] : []),
      here(file),
      ...(options.args ?? []),
    ],
    { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'inherit'] },
  );
  return new Promise((resolve, reject) => {
    let output = '';
    let resolved = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${name} did not start within 60 s`));
    }, 60_000);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (!resolved) reject(new Error(`${name} exited (${code ?? signal}) before listening`));
    });
    const log = process.env.BENCH_CHILD_STDOUT;
    /** The last line of what the child printed so far, while it has no end yet. */
    let partial = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      const text = chunk.toString();
      if (log) partial = appendChildOutput(log, name, partial + text);
      output += text;
      if (resolved) return;
      const port = /LISTENING (\d+)/.exec(output)?.[1];
      if (port) {
        resolved = true;
        clearTimeout(timer);
        const started = { name, process: child, port: Number(port), output: () => output };
        children.push(started);
        resolve(started);
      }
    });
  });
}

/**
 * Appends the complete lines of a child's stdout to `file` (`BENCH_CHILD_STDOUT`), each with
 * the wall clock in ms and the child's name, to line up what a child printed
 * (`--trace-deopt`) with the rounds; returns the unfinished last line, for the next chunk.
 */
function appendChildOutput(file: string, name: string, text: string): string {
  const at = Date.now();
  const lines = text.split('\n');
  const rest = lines.pop() ?? '';
  const complete = lines.filter((line) => line.length > 0);
  if (complete.length > 0)
    appendFileSync(file, complete.map((line) => `${at} ${name}: ${line}\n`).join(''));
  return rest;
}

export async function stopChild(child: Child, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.process.exitCode !== null || child.process.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.process.once('exit', () => resolve()));
  child.process.kill(signal);
  const timer = setTimeout(() => child.process.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

export async function startRedis(): Promise<RedisServerHandle> {
  const redis = await startRedisServer();
  redisServers.push(redis);
  return redis;
}

export async function cleanup(): Promise<void> {
  await Promise.allSettled(children.splice(0).map((c) => stopChild(c)));
  await Promise.allSettled(redisServers.splice(0).map((r) => r.stop()));
}

/** A coordinator child process (compiled dist/ under plain node) on `redis`. */
export function startCoordinator(
  name: string,
  redis: RedisServerHandle,
  overrides: Record<string, string | number> = {},
  nodeFlags: string[] = [],
): Promise<Child> {
  return startChild(
    name,
    'coordinator-server.mjs',
    {
      BENCH_REDIS_URL: redis.url,
      BENCH_JWT_SECRET: SECRET,
      // BENCH_SETTINGS (docs/BENCHMARKS.md#running) wins: an A/B of a setting.
      BENCH_OVERRIDES: JSON.stringify({ ...overrides, ...benchSettings() }),
    },
    // With the V8 flags the coordinator is deployed with (npm start, the image).
    {
      nodeFlags: [
        ...(process.env.BENCH_NO_FLAGS === '1' ? [] : COORDINATOR_NODE_FLAGS),
        // Diagnosis (docs/BENCHMARKS.md): e.g. --trace-deopt, with BENCH_CHILD_STDOUT.
        ...(process.env.BENCH_NODE_FLAGS ?? '').split(/\s+/).filter(Boolean),
        ...nodeFlags,
      ],
    },
  );
}

/** `BENCH_SETTINGS`: settings (dotted names, as in a config file) for every coordinator. */
export function benchSettings(): Record<string, string | number | boolean> {
  const text = process.env.BENCH_SETTINGS;
  if (!text) return {};
  const parsed: unknown = JSON.parse(text);
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new Error(`BENCH_SETTINGS is not a JSON object: ${text}`);
  return parsed as Record<string, string | number | boolean>;
}

/**
 * Runs `work` with the coordinator child's CPU profiler on (bench/coordinator-server.mjs,
 * node:inspector) and writes what it took into `<dir>/<name>.cpuprofile`: the profile of that
 * phase alone, not of the process's whole life. Without a `dir`, only runs `work`.
 */
export async function profilePhase<T>(
  child: Child,
  dir: string | null,
  name: string,
  work: () => Promise<T>,
): Promise<T> {
  if (dir === null) return work();
  const file = join(dir, `${name}.cpuprofile`);
  child.process.stdin?.write('PROFILE START\n');
  const result = await work();
  const written = new Promise<void>((resolve) => {
    const check = () => {
      if (child.output().includes(`PROFILED ${file}\n`)) {
        child.process.stdout?.off('data', check);
        resolve();
      }
    };
    child.process.stdout?.on('data', check);
  });
  child.process.stdin?.write(`PROFILE STOP ${file}\n`);
  await written;
  return result;
}

// ---------------------------------------------------------------------------------------------
// HTTP setup against a coordinator (the measured load uses prebuilt bytes)

export const heartbeatPath = (stream: string, group: string) =>
  `/coord/v1/consumer/streams/${stream}/groups/${group}/heartbeat`;

export async function post(port: number, path: string, token: string, body: unknown) {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}

/**
 * The owner a replica names (`X-Coord-Owner`) in its answer to a consumer's POST of `body` to
 * `path`; any answer names it, a refusal too.
 */
export async function ownerNamedBy(port: number, path: string, body: unknown) {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${CONSUMER_TOKEN}` },
    body: JSON.stringify(body),
  });
  await res.arrayBuffer();
  return res.headers.get('x-coord-owner');
}

export async function createGroup(
  port: number,
  stream: string,
  group: string,
  shards: number,
  send: typeof post = post,
) {
  const created = await send(port, '/coord/v1/admin/groups', WRITE_TOKEN, {
    streamPrefix: stream,
    consumerGroup: group,
    shardCount: shards,
    requestedBy: 'bench',
    reason: 'benchmark',
  });
  if (created.status !== 201) throw new Error(`create group: ${created.status} ${created.text}`);
}

export interface MemberState {
  readonly memberId: string;
  memberEpoch: number;
  assignmentEpoch: number;
  metadataVersion: number;
  currentAssignments: number[];
}

export function heartbeatBody(m: MemberState, extra: Record<string, unknown> = {}) {
  return {
    memberId: m.memberId,
    memberEpoch: m.memberEpoch,
    assignmentEpoch: m.assignmentEpoch,
    metadataVersion: m.metadataVersion,
    currentAssignments: m.currentAssignments,
    revokeProgress: [],
    ...extra,
  };
}

export { applyReply };

/**
 * Creates the group, joins `count` members and beats until all are OK and nothing moves for two
 * passes. Members ask for the longest session (30 min) so that setup time never expires them.
 */
export async function steadyGroup(
  port: number,
  stream: string,
  group: string,
  shards: number,
  count: number,
): Promise<{ members: MemberState[]; reply: string }> {
  await createGroup(port, stream, group, shards);
  const members: MemberState[] = Array.from({ length: count }, (_, i) => ({
    memberId: `member-${String(i).padStart(5, '0')}`,
    memberEpoch: 0,
    assignmentEpoch: 0,
    metadataVersion: 0,
    currentAssignments: [],
  }));
  let stable = 0;
  let lastText = '';
  for (let pass = 0; pass < 300 && stable < 2; pass++) {
    let changed = false;
    await Promise.all(
      members.map(async (m) => {
        const res = await post(
          port,
          heartbeatPath(stream, group),
          CONSUMER_TOKEN,
          heartbeatBody(m, { sessionTimeoutMs: 1_800_000 }),
        );
        if (res.status !== 200) throw new Error(`heartbeat: ${res.status} ${res.text}`);
        if (applyReply(m, JSON.parse(res.text) as HeartbeatReply)) changed = true;
        if (m === members[0]) lastText = res.text;
      }),
    );
    stable = changed ? 0 : stable + 1;
    if (changed) await sleep(50);
  }
  const owned = members.reduce((n, m) => n + m.currentAssignments.length, 0);
  if (stable < 2 || owned !== shards)
    throw new Error(`${stream}/${group}: no steady state, ${owned}/${shards} shards owned`);
  return { members, reply: lastText };
}

/** Each member's steady-state heartbeat as raw HTTP/1.1 request bytes. */
export function requestBytes(
  port: number,
  path: string,
  members: readonly MemberState[],
): Buffer[] {
  return members.map((m) => postBytes(port, path, CONSUMER_TOKEN, heartbeatBody(m)));
}

/** A POST of `body` as JSON, as raw HTTP/1.1 request bytes. */
export function postBytes(port: number, path: string, token: string, body: unknown): Buffer {
  const json = Buffer.from(JSON.stringify(body));
  const head =
    `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n` +
    `Authorization: Bearer ${token}\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${json.length}\r\n\r\n`;
  return Buffer.concat([Buffer.from(head), json]);
}

// ---------------------------------------------------------------------------------------------
// Redis command counting (INFO commandstats, no MONITOR)

/** Commands the bench itself sends around a round; not the coordinator's. */
const OWN_COMMANDS = new Set(['config|resetstat', 'info', 'command|info']);
const SCRIPT_COMMANDS = new Set(['eval', 'evalsha', 'eval_ro', 'evalsha_ro', 'fcall', 'fcall_ro']);

export async function commandCalls(client: Redis): Promise<Map<string, number>> {
  const stats = await client.info('commandstats');
  const calls = new Map<string, number>();
  for (const m of stats.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
    if (!OWN_COMMANDS.has(m[1] as string)) calls.set(m[1] as string, Number(m[2]));
  return calls;
}

const writeFlags = new Map<string, boolean>();
/** A write command (flag `write`), or a script, which may write. */
export async function isWrite(client: Redis, command: string): Promise<boolean> {
  if (SCRIPT_COMMANDS.has(command)) return true;
  let known = writeFlags.get(command);
  if (known === undefined) {
    const info = (await client.call('COMMAND', 'INFO', command)) as unknown[][];
    known = JSON.stringify(info[0]?.[2] ?? []).includes('"write"');
    writeFlags.set(command, known);
  }
  return known;
}

export async function countWrites(client: Redis, calls: Map<string, number>): Promise<number> {
  let writes = 0;
  for (const [command, n] of calls) if (await isWrite(client, command)) writes += n;
  return writes;
}

/** `coordinator.store.key-prefix` of the coordinators bench/coordinator-server.mjs starts. */
export const COORD_KEY_PREFIX = 'bench:coord';

/** Writes Redis reported on the coordinator's keys since the watch began (see {@link watchWrites}). */
export interface WrittenKeys {
  /** Writes to group data: metadata, failure records, the group registry, the audit stream. */
  readonly data: number;
  /** Writes on timers, whatever the load: the replica registry and group lease renewals. */
  readonly background: number;
  /** The group data written, by key and event (`key:event` → count). */
  readonly events: ReadonlyMap<string, number>;
}

/**
 * Watches every write on the coordinator's keys through keyspace notifications (no MONITOR): a
 * steady heartbeat must write nothing, so any write to group data counts against it, while the
 * replica registry refresh and the lease renewals run on timers whatever the load and are
 * counted apart. `settle()` returns what was written up to the moment it is called.
 */
export async function watchWrites(
  redis: RedisServerHandle,
  keyPrefix = COORD_KEY_PREFIX,
): Promise<{ settle(): Promise<WrittenKeys>; reset(): void; stop(): Promise<void> }> {
  const client = redis.client();
  await client.config('SET', 'notify-keyspace-events', 'KA');
  const subscriber = client.duplicate();
  subscriber.on('error', () => undefined);
  let data = 0;
  let background = 0;
  const events = new Map<string, number>();
  subscriber.on('pmessage', (_pattern: string, channel: string, event: string) => {
    const key = channel.slice(channel.indexOf(':') + 1);
    const timed =
      key === `${keyPrefix}:replicas` ||
      key.startsWith(`${keyPrefix}:replica:`) ||
      key.endsWith(':lease');
    if (timed) {
      background++;
      return;
    }
    data++;
    const name = `${key}:${event}`;
    events.set(name, (events.get(name) ?? 0) + 1);
  });
  await subscriber.psubscribe(`__keyspace@*__:${keyPrefix}:*`);
  return {
    // Notifications are sent as the command runs: a PING answered on the subscriber's
    // connection comes after every one sent before it.
    async settle() {
      await subscriber.ping();
      return { data, background, events: new Map(events) };
    },
    reset() {
      data = 0;
      background = 0;
      events.clear();
    },
    async stop() {
      await subscriber.quit();
      await client.config('SET', 'notify-keyspace-events', '');
    },
  };
}

/**
 * Runs `node [flags] bench/<file> [args]` to its end, echoing its progress lines, and resolves
 * with the JSON it printed after `RESULT `.
 */
export function runToResult<T>(
  file: string,
  args: string[],
  nodeFlags: string[] = [],
  env: Record<string, string> = {},
): Promise<T> {
  const child = spawn(process.execPath, [...nodeFlags, here(file), ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      const text = chunk.toString();
      output += text;
      for (const line of text.split('\n'))
        if (line && !line.startsWith('RESULT ')) console.log(line);
    });
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      const json = /^RESULT (.*)$/m.exec(output)?.[1];
      if (code !== 0 || !json)
        reject(new Error(`${file} ${args.join(' ')}: exit ${code ?? signal}`));
      else resolve(JSON.parse(json) as T);
    });
  });
}
