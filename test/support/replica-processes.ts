/**
 * Coordinator replicas (and other scripts) as real child processes started from source with
 * tsx, for the end-to-end tests: every process is tracked so that all of them are killed
 * whatever happens, and signals go to one process by its PID.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Cluster, Redis } from 'ioredis';
import jwt from 'jsonwebtoken';
import { afterAll, beforeAll, it } from 'vitest';
import type { Role } from '../../src/http/auth/roles.js';
import { freePort, randomKeyPrefix, waitFor } from './redis-server.js';

const ROOT = resolve(import.meta.dirname, '../..');
/** The tsconfig tsx runs the children with (see the comment in it). */
const TSX_TSCONFIG = resolve(import.meta.dirname, 'tsx-runtime.tsconfig.json');

/** The JWT secret every replica of a test shares. */
export const REPLICA_SECRET = 'replica-secret-that-is-at-least-32-characters-long';

/** One child process and its exit. */
export interface Child {
  readonly name: string;
  readonly process: ChildProcess;
  readonly exited: Promise<number | null>;
  /** `undefined` while it runs; the exit code (null: killed by a signal) once it exited. */
  exitCode: number | null | undefined;
}

/** Every child process of a run, each writing its output to `<dir>/<name>.out`. */
export class ChildProcesses {
  private readonly all: Child[] = [];
  /** Output files go here; removed by {@link ChildProcesses.cleanUp} unless kept. */
  readonly dir: string;

  constructor(label: string) {
    this.dir = mkdtempSync(join(tmpdir(), `${label}-`));
  }

  /**
   * Starts `script` (a path from the repository root; `.ts` through tsx, `.js` as it is) with
   * `env` over ours.
   */
  start(name: string, script: string, env: Record<string, string>): Child {
    const out = openSync(join(this.dir, `${name}.out`), 'a');
    const args = script.endsWith('.ts') ? ['--import', 'tsx', script] : [script];
    const proc = spawn(process.execPath, args, {
      cwd: ROOT,
      env: { ...process.env, TSX_TSCONFIG_PATH: TSX_TSCONFIG, ...env },
      stdio: ['ignore', out, out],
    });
    closeSync(out);
    const child: Child = {
      name,
      process: proc,
      exitCode: undefined,
      exited: new Promise((done) => {
        proc.once('exit', (code) => {
          child.exitCode = code;
          done(code);
        });
      }),
    };
    this.all.push(child);
    return child;
  }

  /** What a child wrote so far (stdout and stderr). */
  output(name: string): string {
    try {
      return readFileSync(join(this.dir, `${name}.out`), 'utf8');
    } catch {
      return '';
    }
  }

  /** Sends `signal` to the child's PID, if it still runs. */
  signal(child: Child, signal: NodeJS.Signals): void {
    if (child.exitCode === undefined && child.process.pid !== undefined) {
      process.kill(child.process.pid, signal);
    }
  }

  /** SIGKILL by PID (a stopped process is killed too) and wait for the exit. */
  async kill(child: Child): Promise<void> {
    this.signal(child, 'SIGKILL');
    await child.exited;
  }

  async killAll(): Promise<void> {
    await Promise.all(this.all.map((child) => this.kill(child)));
  }

  /** Kills every child; removes the output folder unless `keep` (a failed run's evidence). */
  async cleanUp(keep = false): Promise<void> {
    await this.killAll();
    if (!keep) rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A token signed with {@link REPLICA_SECRET}. */
export function replicaToken(sub: string, roles: readonly Role[]): string {
  const now = Math.floor(Date.now() / 1000);
  return jwt.sign(
    { sub, roles, iat: now, exp: now + 3600, iss: 'stream-coordinator' },
    REPLICA_SECRET,
    { algorithm: 'HS256' },
  );
}

/** Where the replicas keep their state: one redis-server, or a Redis Cluster's seed nodes. */
export type ReplicaStore =
  | { readonly type: 'redis'; readonly url: string }
  | { readonly type: 'redis-cluster'; readonly nodes: readonly string[] };

/** Options of {@link startReplicaSet}. */
export interface ReplicaSetOptions {
  readonly count: number;
  readonly store: ReplicaStore;
  readonly keyPrefix: string;
  /** Extra environment (COORDINATOR_* settings) given to every replica. */
  readonly env?: Record<string, string>;
  /** Replica ids are `<idPrefix>-<i>`. @default 'replica' */
  readonly idPrefix?: string;
}

/**
 * N coordinator replicas (`dist/main.js`) on one store with a shared key prefix and JWT secret,
 * each with its own port, `coordinator.replica.id` and `coordinator.http.advertised-url`.
 * Replica `i` keeps its port and id across restarts.
 */
export class ReplicaSet {
  readonly ids: readonly string[];
  private readonly replicas: Child[] = [];

  private constructor(
    private readonly children: ChildProcesses,
    private readonly options: ReplicaSetOptions,
    readonly urls: readonly string[],
  ) {
    const prefix = options.idPrefix ?? 'replica';
    this.ids = urls.map((_, i) => `${prefix}-${i}`);
  }

  /** Picks free ports and starts every replica, resolving once all are healthy. */
  static async start(children: ChildProcesses, options: ReplicaSetOptions): Promise<ReplicaSet> {
    const ports = await Promise.all(Array.from({ length: options.count }, () => freePort()));
    const set = new ReplicaSet(
      children,
      options,
      ports.map((port) => `http://127.0.0.1:${port}`),
    );
    for (let i = 0; i < options.count; i++) set.replicas.push(set.launch(i));
    await Promise.all(set.replicas.map((_, i) => set.healthy(i)));
    return set;
  }

  /** The environment replica `i` starts with: every setting the tests rely on, spelled out. */
  environment(i: number): Record<string, string> {
    const { store } = this.options;
    return {
      COORDINATOR_HTTP_PORT: new URL(this.urls[i]!).port,
      COORDINATOR_HTTP_HOST: '127.0.0.1',
      COORDINATOR_HTTP_ADVERTISED_URL: this.urls[i]!,
      COORDINATOR_REPLICA_ID: this.ids[i]!,
      COORDINATOR_STORE_TYPE: store.type,
      ...(store.type === 'redis'
        ? { COORDINATOR_STORE_URL: store.url }
        : { COORDINATOR_STORE_CLUSTER_NODES: store.nodes.join(',') }),
      COORDINATOR_STORE_KEY_PREFIX: this.options.keyPrefix,
      COORDINATOR_SECURITY_JWT_SECRET: REPLICA_SECRET,
      COORDINATOR_LOG_LEVEL: 'warn',
      // No state file left behind by every test (the tests of the state file set their own).
      COORDINATOR_REPLICA_STATE_DIR: 'none',
      ...this.options.env,
    };
  }

  private launch(i: number): Child {
    // The compiled coordinator, as `npm start` runs it (the test setup keeps dist/ current).
    return this.children.start(this.ids[i]!, 'dist/main.js', this.environment(i));
  }

  /** The running process of replica `i`. */
  process(i: number): Child {
    return this.replicas[i]!;
  }

  /** Resolves once replica `i` answers its health check. */
  async healthy(i: number): Promise<void> {
    await waitFor(
      async () => {
        const child = this.replicas[i]!;
        if (child.exitCode !== undefined) {
          throw new Error(`${child.name} exited (${child.exitCode}): ${this.tail(i)}`);
        }
        return (await fetch(`${this.urls[i]}/coord/v1/monitoring/health`)).ok;
      },
      { timeoutMs: 90_000, intervalMs: 200, what: `${this.ids[i]} healthy` },
    );
  }

  /** The last lines replica `i` wrote (for failure messages). */
  tail(i: number): string {
    return this.children.output(this.ids[i]!).split('\n').slice(-20).join('\n');
  }

  /** SIGKILL replica `i` by PID and wait for its exit. */
  async kill(i: number): Promise<void> {
    await this.children.kill(this.replicas[i]!);
  }

  /** SIGTERM replica `i`; resolves with its exit code once it exited. */
  async terminate(i: number): Promise<number | null> {
    this.children.signal(this.replicas[i]!, 'SIGTERM');
    return this.replicas[i]!.exited;
  }

  /** SIGSTOP replica `i`: it keeps its sockets but runs nothing, as in a long GC pause. */
  pause(i: number): void {
    this.children.signal(this.replicas[i]!, 'SIGSTOP');
  }

  /** SIGCONT a paused replica. */
  resume(i: number): void {
    this.children.signal(this.replicas[i]!, 'SIGCONT');
  }

  /** Starts replica `i` again (same port, id and URL) and waits until it is healthy. */
  async restart(i: number): Promise<void> {
    if (this.replicas[i]!.exitCode === undefined) throw new Error(`${this.ids[i]} still runs`);
    this.replicas[i] = this.launch(i);
    await this.healthy(i);
  }

  /** Index of the replica with this id. */
  indexOf(id: string): number {
    const i = this.ids.indexOf(id);
    if (i === -1) throw new Error(`no replica ${id}`);
    return i;
  }

  /** The indexes of replicas whose process runs. */
  running(): number[] {
    return this.replicas.flatMap((child, i) => (child.exitCode === undefined ? [i] : []));
  }

  /** Replica `i`'s `/metrics` text. */
  async metrics(i: number): Promise<string> {
    return (await fetch(`${this.urls[i]}/metrics`)).text();
  }
}

/** The store a {@link replicaSuite} runs its replicas on, with a client to read it. */
export interface SuiteStore {
  readonly store: ReplicaStore;
  /** For assertions on what the replicas really wrote. */
  readonly client: Redis | Cluster;
  /** Stops the store and closes `client`. */
  stop(): Promise<void>;
}

/** What {@link replicaSuite} started (read once its beforeAll ran). */
export interface StartedReplicas {
  readonly set: ReplicaSet;
  /** The store's client (see {@link SuiteStore.client}). */
  readonly client: Redis | Cluster;
  readonly keyPrefix: string;
}

/** The replica set of a describe block, and its `it`. */
export interface ReplicaSuite extends StartedReplicas {
  /** `it` given the started replicas, noting a failure so that their output is kept. */
  readonly step: (
    name: string,
    body: (replicas: StartedReplicas) => Promise<void>,
    timeoutMs: number,
  ) => void;
}

/**
 * The replica set of a describe block: beforeAll starts the store and `count` replicas on it
 * (a random key prefix, `env` over the defaults); afterAll kills them and stops the store. The
 * replicas' output is kept, and `say` tells where, when the set did not start or a step failed.
 */
export function replicaSuite(
  label: string,
  options: {
    readonly count: number;
    readonly env?: Record<string, string>;
    readonly startStore: () => Promise<SuiteStore>;
    readonly say: (line: string) => void;
  },
): ReplicaSuite {
  let store: SuiteStore | null = null;
  let children: ChildProcesses | null = null;
  let started: { set: ReplicaSet; keyPrefix: string } | null = null;
  let failed = false;
  const get = (): StartedReplicas => {
    if (!started || !store) throw new Error(`${label}: the replica set has not started`);
    return { ...started, client: store.client };
  };

  beforeAll(async () => {
    store = await options.startStore();
    children = new ChildProcesses(label);
    const keyPrefix = randomKeyPrefix();
    const set = await ReplicaSet.start(children, {
      count: options.count,
      store: store.store,
      keyPrefix,
      env: options.env,
    });
    started = { set, keyPrefix };
  }, 120_000);

  afterAll(async () => {
    const keep = failed || started === null;
    if (keep && children) options.say(`replica logs kept in ${children.dir}`);
    await children?.cleanUp(keep);
    await store?.stop();
  });

  return {
    get set() {
      return get().set;
    },
    get client() {
      return get().client;
    },
    get keyPrefix() {
      return get().keyPrefix;
    },
    step: (name, body, timeoutMs) =>
      it(
        name,
        async () => {
          try {
            await body(get());
          } catch (error) {
            failed = true;
            throw error;
          }
        },
        timeoutMs,
      ),
  };
}

/**
 * Sum of one Prometheus metric over the label sets that contain every given `label="value"`
 * pair (all label sets when none is given).
 */
export function metricSum(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  const pattern = new RegExp(`^${name}(?:\\{([^}]*)\\})? (\\S+)$`, 'gm');
  for (const match of text.matchAll(pattern)) {
    const set = match[1] ?? '';
    if (Object.entries(labels).every(([k, v]) => set.includes(`${k}="${v}"`))) {
      sum += Number(match[2]);
    }
  }
  return sum;
}

/**
 * The owner each replica names for `path` (`X-Coord-Owner` of a 200 answer; null for any other
 * answer), asking them all at once with `token`, each bounded to 10 s.
 */
export async function ownersNamed(
  urls: readonly string[],
  path: string,
  token: string,
): Promise<Array<string | null>> {
  return Promise.all(
    urls.map(async (url) => {
      const res = await fetch(`${url}${path}`, {
        headers: { authorization: `Bearer ${token}` },
        signal: AbortSignal.timeout(10_000),
      });
      await res.body?.cancel();
      return res.status === 200 ? res.headers.get('x-coord-owner') : null;
    }),
  );
}
