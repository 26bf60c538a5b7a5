import { spawn, execFile } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';

/*
 * Real redis-server processes for tests (no mocks): each handle owns a process on a free port
 * with a throwaway working directory. `redis-server` and `redis-cli` must be on PATH.
 */

const execFileAsync = promisify(execFile);
const START_TIMEOUT_MS = 10_000;
const POLL_INTERVAL_MS = 20;

/** Options of {@link startRedisServer}. */
export interface RedisServerOptions {
  /** Standalone only; clusters come from {@link startRedisCluster}. */
  readonly cluster?: false;
  /** Extra redis-server arguments, e.g. `['--appendonly', 'yes']` for persistence tests. */
  readonly extraArgs?: readonly string[];
}

/** A redis-server process started by {@link startRedisServer}. */
export interface RedisServerHandle {
  readonly port: number;
  /** `redis://127.0.0.1:<port>` */
  readonly url: string;
  /** The server's `--dir` (RDB/AOF files of persistence tests land here). */
  readonly dir: string;
  /** SIGTERM, wait for exit, remove the working directory. */
  stop(): Promise<void>;
  /** SIGKILL and wait for exit: an abrupt outage. The directory stays for restart(). */
  kill(): Promise<void>;
  /** Starts the server again on the same port and directory, resolving once it answers PING. */
  restart(): Promise<void>;
  /** SIGSTOP: the server keeps its connections open and answers nothing (a stall). */
  pause(): void;
  /** SIGCONT after {@link pause}: queued commands are answered. */
  resume(): void;
  /** One shared ioredis client for assertions; closed by stop(). */
  client(): Redis;
}

/** A 3-master Redis Cluster started by {@link startRedisCluster}. */
export interface RedisClusterHandle {
  /** `127.0.0.1:<port>` of each master. */
  readonly nodes: string[];
  /** One assertion client per master (each holds part of the slots); closed by stop(). */
  clients(): Redis[];
  stop(): Promise<void>;
}

/** A key prefix no other test uses: `test-<random>:coord`. */
export function randomKeyPrefix(): string {
  return `test-${randomBytes(6).toString('hex')}:coord`;
}

/** A port nobody listens on right now (the OS picks it; it is free again once we close). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (address !== null && typeof address === 'object') resolve(address.port);
        else reject(new Error('no port assigned'));
      });
    });
  });
}

/**
 * Polls `check` until it returns true, failing after `timeoutMs`. The one waiting primitive of
 * the tests: a condition with a deadline, never a fixed sleep.
 */
export async function waitFor(
  check: () => boolean | Promise<boolean>,
  options: { timeoutMs?: number; intervalMs?: number; what?: string } = {},
): Promise<void> {
  const deadline = Date.now() + (options.timeoutMs ?? 5_000);
  let lastError: unknown;
  for (;;) {
    try {
      if (await check()) return;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() >= deadline) {
      throw new Error(`timed out waiting for ${options.what ?? 'condition'}`, { cause: lastError });
    }
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? POLL_INTERVAL_MS));
  }
}

/** Sends one command on a short-lived connection; rejects when nobody answers. */
async function probe(port: number, ...command: [string, ...string[]]): Promise<unknown> {
  const client = new Redis({
    port,
    host: '127.0.0.1',
    lazyConnect: true,
    retryStrategy: () => null,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 500,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return await client.call(...command);
  } finally {
    client.disconnect();
  }
}

interface RunningServer {
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  /** Set once the process has exited (crash during start, or stopped). */
  exitCode: number | null | undefined;
  output: string;
}

function launch(args: readonly string[]): RunningServer {
  const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const server: RunningServer = {
    child,
    exitCode: undefined,
    output: '',
    exited: new Promise<void>((resolve) => {
      child.once('exit', (code) => {
        server.exitCode = code;
        resolve();
      });
      child.once('error', (error) => {
        server.output += String(error);
        server.exitCode = null;
        resolve();
      });
    }),
  };
  const collect = (chunk: Buffer) => {
    server.output = (server.output + chunk.toString()).slice(-4_000);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  return server;
}

/** A test server's arguments: its port on 127.0.0.1, its directory, no persistence. */
function baseArgs(port: number, dir: string): string[] {
  return [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--save',
    '',
    '--appendonly',
    'no',
  ];
}

async function startProcess(port: number, args: readonly string[]): Promise<RunningServer> {
  const server = launch(args);
  try {
    // A server that exits while starting (a port already bound) fails the start at once.
    const exited = server.exited.then(() => {
      throw new Error(`redis-server exited (${server.exitCode}): ${server.output}`);
    });
    // Once started, its exit (a stop) is nobody's failure.
    exited.catch(() => undefined);
    await Promise.race([
      exited,
      waitFor(async () => server.exitCode === undefined && (await probe(port, 'PING')) === 'PONG', {
        timeoutMs: START_TIMEOUT_MS,
        what: `redis-server on port ${port} to answer PING`,
      }),
    ]);
  } catch (error) {
    await signal(server, 'SIGKILL');
    throw new Error(`${(error as Error).message}\n${server.output}`, { cause: error });
  }
  return server;
}

/** How long a restart waits for its port to be free again before it fails. */
const PORT_TAKEN_TIMEOUT_MS = 10_000;

/**
 * Starts the server again on the port its clients know. While it was down, that port may have
 * been bound by something else on the machine (another test's connection took it as its local
 * port): the bind fails with "Address already in use", and it is tried again until the port is
 * free or {@link PORT_TAKEN_TIMEOUT_MS} passed.
 */
async function restartOnPort(port: number, args: readonly string[]): Promise<RunningServer> {
  const deadline = Date.now() + PORT_TAKEN_TIMEOUT_MS;
  for (;;) {
    try {
      return await startProcess(port, args);
    } catch (error) {
      const taken = (error as Error).message.includes('Address already in use');
      if (!taken || Date.now() >= deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

async function signal(server: RunningServer, name: 'SIGTERM' | 'SIGKILL'): Promise<void> {
  if (server.exitCode === undefined) {
    // A paused server would not act on SIGTERM until continued.
    server.child.kill('SIGCONT');
    server.child.kill(name);
  }
  await server.exited;
}

/**
 * Starts a redis-server on a free port without persistence (`--save "" --appendonly no`, which
 * `extraArgs` may override) and resolves once it answers PING.
 */
export async function startRedisServer(
  options: RedisServerOptions = {},
): Promise<RedisServerHandle> {
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), 'coord-redis-'));
  const args = [...baseArgs(port, dir), ...(options.extraArgs ?? [])];
  let server = await startProcess(port, args);
  let assertionClient: Redis | undefined;
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    dir,
    async stop() {
      assertionClient?.disconnect();
      await signal(server, 'SIGTERM');
      await rm(dir, { recursive: true, force: true });
    },
    async kill() {
      await signal(server, 'SIGKILL');
    },
    async restart() {
      await signal(server, 'SIGTERM');
      server = await restartOnPort(port, args);
    },
    pause() {
      server.child.kill('SIGSTOP');
    },
    resume() {
      server.child.kill('SIGCONT');
    },
    client() {
      if (!assertionClient) {
        assertionClient = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 1 });
        // Outages are what some tests are about: a refused reconnect is expected, not news.
        assertionClient.on('error', () => undefined);
      }
      return assertionClient;
    },
  };
}

async function clusterState(port: number): Promise<string> {
  const info = String(await probe(port, 'CLUSTER', 'INFO'));
  return /cluster_state:(\w+)/.exec(info)?.[1] ?? 'unknown';
}

/** Attempts at a cluster node's ports before giving up (see {@link startClusterNode}). */
const CLUSTER_NODE_ATTEMPTS = 5;

/**
 * Starts one cluster-enabled redis-server on a free port. A cluster node also listens on its
 * port + 10000 (the cluster bus), which nothing reserved: when either port was taken between
 * the choice and the bind (redis-server exits with "Address already in use"), it tries
 * another port.
 */
async function startClusterNode(dir: string): Promise<{ port: number; server: RunningServer }> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    if (port + 10_000 > 65_535) continue;
    try {
      const server = await startProcess(port, [
        ...baseArgs(port, dir),
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        join(dir, `nodes-${port}.conf`),
      ]);
      return { port, server };
    } catch (error) {
      const inUse = (error as Error).message.includes('Address already in use');
      if (!inUse || attempt >= CLUSTER_NODE_ATTEMPTS) throw error;
    }
  }
}

/** How long `redis-cli --cluster create` may take (about 2 s here, idle; see below). */
const CLUSTER_CREATE_TIMEOUT_MS = 30_000;

/** Attempts at a whole cluster before giving up (see {@link startRedisCluster}). */
const CLUSTER_ATTEMPTS = 2;

/**
 * Starts three cluster-enabled masters, joins them with `redis-cli --cluster create`, and
 * resolves once every node reports `cluster_state:ok`. `--cluster create` waits for the nodes
 * to agree, about 2 s on an idle machine; a clean CI run once had it killed at a 10 s limit
 * while the other test files loaded both cores. It gets 30 s now, and a cluster that still does
 * not form is stopped and started again once on fresh ports, the error naming what redis-cli
 * printed.
 */
export async function startRedisCluster(): Promise<RedisClusterHandle> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startRedisClusterOnce();
    } catch (error) {
      if (attempt >= CLUSTER_ATTEMPTS) throw error;
    }
  }
}

async function startRedisClusterOnce(): Promise<RedisClusterHandle> {
  const dir = await mkdtemp(join(tmpdir(), 'coord-redis-cluster-'));
  const servers: RunningServer[] = [];
  const ports: number[] = [];
  const stopAll = async () => {
    await Promise.all(servers.map((server) => signal(server, 'SIGTERM')));
    await rm(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < 3; i++) {
      const { port, server } = await startClusterNode(dir);
      ports.push(port);
      servers.push(server);
    }
    const nodes = ports.map((port) => `127.0.0.1:${port}`);
    await execFileAsync(
      'redis-cli',
      ['--cluster', 'create', ...nodes, '--cluster-replicas', '0', '--cluster-yes'],
      { timeout: CLUSTER_CREATE_TIMEOUT_MS },
    ).catch((error: Error & { stdout?: string; stderr?: string; killed?: boolean }) => {
      const said = `${error.stdout ?? ''}${error.stderr ?? ''}`.trim().split('\n').slice(-5);
      const why = error.killed ? `killed after ${CLUSTER_CREATE_TIMEOUT_MS} ms` : 'failed';
      throw new Error(`redis-cli --cluster create ${why}; it said: ${said.join(' | ')}`);
    });
    await waitFor(
      async () => (await Promise.all(ports.map(clusterState))).every((state) => state === 'ok'),
      { timeoutMs: START_TIMEOUT_MS, what: 'cluster_state:ok on every node' },
    );
    let assertionClients: Redis[] | undefined;
    return {
      nodes,
      clients() {
        assertionClients ??= ports.map(
          (port) => new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 1 }),
        );
        return assertionClients;
      },
      async stop() {
        for (const client of assertionClients ?? []) client.disconnect();
        await stopAll();
      },
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

/** The master of `cluster` that serves `slot`, by its index in `cluster.nodes`. */
export async function slotOwner(cluster: RedisClusterHandle, slot: number): Promise<number> {
  const ranges = await cluster.clients()[0]!.cluster('SLOTS');
  const master = ranges.find(([from, to]) => from <= slot && slot <= to)?.[2];
  if (!master) throw new Error(`no node serves slot ${slot}`);
  const owner = cluster.nodes.indexOf(`${master[0]}:${master[1]}`);
  if (owner < 0)
    throw new Error(`slot ${slot} is served by ${master[0]}:${master[1]}, not a test node`);
  return owner;
}

/**
 * Moves the hash slot of `key`, with every key in it, to another master of `cluster` by hand,
 * as `redis-cli --cluster reshard` does (SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE on
 * every master). Clients that knew the old owner get MOVED for the slot afterwards. Resolves to
 * the slot and the index of its new master.
 */
export async function moveSlotOf(
  cluster: RedisClusterHandle,
  key: string,
): Promise<{ slot: number; from: number; to: number }> {
  const clients = cluster.clients();
  const slot = Number(await clients[0]!.cluster('KEYSLOT', key));
  const from = await slotOwner(cluster, slot);
  const to = (from + 1) % clients.length;
  const ids = await Promise.all(clients.map(async (c) => String(await c.cluster('MYID'))));
  const [host, port] = cluster.nodes[to]!.split(':') as [string, string];
  await clients[to]!.cluster('SETSLOT', slot, 'IMPORTING', ids[from]!);
  await clients[from]!.cluster('SETSLOT', slot, 'MIGRATING', ids[to]!);
  for (;;) {
    const keys = await clients[from]!.cluster('GETKEYSINSLOT', slot, 100);
    if (keys.length === 0) break;
    await clients[from]!.migrate(host, Number(port), '', 0, 5_000, 'KEYS', ...keys);
  }
  // The new owner first, then the old one, then the rest, as redis-cli does.
  for (const i of [to, from, ...clients.keys()].filter((v, n, all) => all.indexOf(v) === n)) {
    await clients[i]!.cluster('SETSLOT', slot, 'NODE', ids[to]!);
  }
  return { slot, from, to };
}
