import { randomBytes, randomUUID } from 'node:crypto';
import {
  createServer,
  type IncomingMessage,
  type Server,
  type ServerOptions,
  type ServerResponse,
} from 'node:http';
import { hostname } from 'node:os';
import type { AddressInfo } from 'node:net';
import { Cluster, Redis } from 'ioredis';
import { GroupHost } from './actors/group-host.js';
import { Forwarder } from './actors/ownership/forwarder.js';
import { leaseCommandTimeoutMs } from './actors/ownership/lease.js';
import { Replication } from './actors/ownership/replication.js';
import { ReplicaState } from './actors/replica-state.js';
import { replicaTurnBudget } from './actors/turn-budget.js';
import { keyNames } from './store/keys.js';
import { toErrorResponse } from './http/errors.js';
import { isEmbedded, type Settings } from './config/settings.js';
import { SettingsError } from './config/load.js';
import { systemClock, type Clock } from './machines/clock.js';
import { createLogger, type Logger } from './observability/logger.js';
import { Metrics } from './observability/metrics.js';
import { RateLimitedLog } from './observability/rate-limited-log.js';
import { createStore } from './store/index.js';
import { describeFailures } from './store/redis-store.js';
import { redisTarget, seedCredentials } from './store/redis-target.js';
import type { Store } from './store/store.js';
import { createApp } from './http/app.js';
import { createHeartbeatFastPath } from './http/heartbeat-fast-path.js';
import { guardConnections } from './http/socket-deadlines.js';
import { refusedWithoutHost } from './http/connection-errors.js';
import { StoreOutageBound } from './http/store-outage.js';
import { AuditLog } from './http/audit.js';
import { LocalLoginThrottle, StoreLoginThrottle } from './http/auth/login-throttle.js';
import { PasswordCheckGate } from './http/auth/password-check-gate.js';
import { hashPassword } from './http/auth/password-hash.js';
import { ROLES } from './http/auth/roles.js';
import { TokenService } from './http/auth/tokens.js';
import { UserDirectory } from './http/auth/users.js';
import { allRoutes } from './http/routes/index.js';
import type { ReplicaServices, Services } from './http/services.js';
import { VERSION } from './version.js';

export interface CoordinatorOptions {
  readonly clock?: Clock;
  readonly logger?: Logger;
  /** Use this store instead of building one from settings (tests). */
  readonly store?: Store;
  /** Called once with a generated bootstrap admin password (embedded mode only). */
  readonly onBootstrapPassword?: (password: string) => void;
  /** Serve heartbeats through the lean listener in front of express (default true; off: benchmarks, tests). */
  readonly heartbeatFastPath?: boolean;
}

/** A started coordinator: HTTP server, actor host and store. */
export interface RunningCoordinator {
  readonly url: string;
  readonly port: number;
  readonly server: Server;
  readonly services: Services;
  readonly host: GroupHost;
  close(): Promise<void>;
}

async function buildUsers(
  settings: Settings,
  logger: Logger,
  onPassword?: (p: string) => void,
): Promise<UserDirectory> {
  const file = settings.security['users-file'];
  if (file) {
    const users = UserDirectory.fromFile(file);
    logger.info(`loaded ${users.size} users from ${file}`);
    return users;
  }
  let password = settings.security['bootstrap-admin-password'];
  if (!password) {
    if (!isEmbedded(settings)) {
      logger.warn(
        'no users file and no bootstrap admin password: only externally minted tokens are accepted',
      );
      return new UserDirectory([]);
    }
    password = randomBytes(18).toString('base64url');
    onPassword?.(password);
  }
  return new UserDirectory([
    { username: 'admin', passwordHash: await hashPassword(password), roles: [...ROLES] },
  ]);
}

/**
 * The slow-client limits of `coordinator.http.*` as Node's own options. Node enforces the
 * headers and request timeouts on a periodic sweep of open connections (every 30 s by default),
 * so the sweep runs often enough for the shortest limit to be kept to within about half of it.
 * They stay on beside the per-socket deadlines of `src/http/socket-deadlines.ts`, which hold
 * where the sweep does not (docs/operations.md#http-timeouts).
 */
export function httpServerOptions(settings: Settings): ServerOptions {
  const headersTimeout = settings.http['headers-timeout'];
  const requestTimeout = settings.http['request-timeout'];
  const shortest = Math.min(...[headersTimeout, requestTimeout].filter((ms) => ms > 0));
  return {
    // A request without Host is refused in the API's shape (`refusedWithoutHost`), not Node's.
    requireHostHeader: false,
    headersTimeout,
    requestTimeout,
    connectionsCheckingInterval: Number.isFinite(shortest)
      ? Math.min(30_000, Math.max(10, Math.floor(shortest / 2)))
      : 30_000,
  };
}

/**
 * Says at startup whether the store answers, so an unreachable Redis is in the log at once
 * with its address and cause rather than only in the first failed request.
 */
function checkStoreAtStartup(store: Store, logger: Logger): void {
  store.ping().then(
    () => logger.info('store reachable', { store: store.kind }),
    (error: unknown) =>
      logger.error(
        'store unreachable at startup: requests that need it answer 503 STORE_UNAVAILABLE until it is back',
        {
          error: error instanceof Error ? error.message : String(error),
          ...((error as { details?: Record<string, unknown> }).details ?? {}),
        },
      ),
  );
}

/**
 * The store as logs name it, without credentials: `host:port/db` of the Redis URL, or the
 * cluster seeds (a seed given as a URL with credentials by its `host:port`).
 */
export function storeNameOf(settings: Settings): string {
  const nodes = settings.store['cluster-nodes'];
  // The store's type decides, as it does for the store itself (createStore).
  if (settings.store.type === 'redis-cluster') {
    return [...(nodes ?? [])]
      .map((node) => (node.includes('@') ? redisTarget({ clusterNodes: [node] }) : node))
      .join(',');
  }
  try {
    const url = new URL(settings.store.url);
    const db = url.pathname.replace(/^\/+/, '');
    return `${url.hostname}:${url.port || '6379'}${db ? `/${db}` : ''}`;
  } catch {
    return 'the configured Redis';
  }
}

/**
 * Whether the store came back empty although this replica saw groups in it before (its state
 * file, `coordinator.replica.state-dir`, says so): checked once the store answers, loudly
 * (docs/operations.md#lost-metadata). Null when there is nothing to check (embedded mode, or
 * `state-dir` is `none`).
 */
function watchStoreState(
  settings: Settings,
  store: Store,
  context: { clock: Clock; logger: Logger; metrics: Metrics },
): ReplicaState | null {
  const dir = settings.replica['state-dir'];
  if (store.kind === 'memory' || dir === 'none') return null;
  const state = new ReplicaState({
    dir,
    storeName: storeNameOf(settings),
    keyPrefix: settings.store['key-prefix'],
    store,
    intervalMs: settings.store['verify-interval'],
    ...context,
  });
  void state.start();
  return state;
}

/** How long a shutdown waits for the groups to be handed over (then their leases expire). */
export const SHUTDOWN_HANDOVER_MS = 3_000;

function within(work: Promise<void>, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    void work.finally(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/**
 * `coordinator.http.advertised-url`, or where this replica can be reached: the bound address,
 * or this machine's host name when bound to every interface (a warning says to set the URL).
 */
function advertisedUrlOf(settings: Settings, bound: AddressInfo, logger: Logger): string {
  const given = settings.http['advertised-url'];
  if (given) return given.replace(/\/+$/, '');
  const wildcard = bound.address === '0.0.0.0' || bound.address === '::';
  if (wildcard && !isEmbedded(settings)) {
    logger.warn(
      'coordinator.http.advertised-url is not set and the server listens on every interface: ' +
        `advertising http://${hostname()}:${bound.port}; set the URL other replicas must use`,
    );
  }
  const host = wildcard
    ? hostname()
    : bound.family === 'IPv6'
      ? `[${bound.address}]`
      : bound.address;
  return `http://${host}:${bound.port}`;
}

/** The Redis connection leases are taken on (its own, so a slow store call never delays a renew). */
function leaseClientOf(settings: Settings): Redis | Cluster {
  const nodes = settings.store['cluster-nodes'];
  const redisOptions = {
    maxRetriesPerRequest: 1,
    connectTimeout: 2_000,
    commandTimeout: leaseCommandTimeoutMs(settings.lease.ttl),
  };
  // Its failures reach log lines (a lease lost while Redis is down says why): described as the
  // store's are, never by ioredis' retry bookkeeping.
  // The store's type decides, as it does for the store (createStore): cluster nodes left set
  // beside `redis` would take the leases on another Redis than the one the claims check them on.
  const cluster = settings.store.type === 'redis-cluster';
  const addresses = { url: settings.store.url, clusterNodes: cluster ? (nodes ?? []) : [] };
  if (cluster) {
    return describeFailures(
      new Cluster([...(nodes ?? [])], {
        redisOptions: { ...redisOptions, ...seedCredentials(nodes) },
      }),
      'lease command',
      addresses,
    );
  }
  return describeFailures(new Redis(settings.store.url, redisOptions), 'lease command', addresses);
}

/** Builds every part from settings and starts listening. */
export async function startCoordinator(
  settings: Settings,
  options: CoordinatorOptions = {},
): Promise<RunningCoordinator> {
  const clock = options.clock ?? systemClock;
  const logger =
    options.logger ?? createLogger({ level: settings.log.level, format: settings.log.format });
  const metrics = new Metrics({ defaultMetrics: true });
  const shareBefore = replicaTurnBudget.busyShare;
  replicaTurnBudget.setShare(settings.fairness['busy-share']);
  metrics.watchRests(() => replicaTurnBudget.restedMs);
  let jwtSecret = settings.security['jwt-secret'];
  if (!jwtSecret) {
    if (!isEmbedded(settings))
      throw new SettingsError('coordinator.security.jwt-secret is required outside embedded mode');
    jwtSecret = randomBytes(32).toString('base64url');
    logger.info('embedded mode: using a random JWT secret (tokens do not survive a restart)');
  }
  const replicaId =
    settings.replica.id ?? `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  const store =
    options.store ??
    createStore({
      type: settings.store.type,
      url: settings.store.url,
      clusterNodes: settings.store['cluster-nodes'],
      keyPrefix: settings.store['key-prefix'],
      auditMaxLen: settings.audit['max-len'],
    });
  const users = await buildUsers(settings, logger, options.onBootstrapPassword);
  const services: {
    -readonly [K in keyof Services]: Services[K];
  } = {
    settings,
    store,
    coordinator: null as unknown as GroupHost,
    tokens: new TokenService(jwtSecret, settings.security['token-ttl'], clock),
    users,
    // Several replicas share one count per caller through the store; one process keeps its own.
    throttle:
      store.kind === 'memory'
        ? new LocalLoginThrottle(
            settings.security['login-max-failures'],
            settings.security['login-throttle-window'],
            clock,
          )
        : new StoreLoginThrottle(
            store,
            settings.security['login-max-failures'],
            settings.security['login-throttle-window'],
          ),
    passwordChecks: new PasswordCheckGate(
      settings.security['login-max-concurrent-checks'],
      settings.security['login-max-queued-checks'],
      () => metrics.loginChecksRefused.inc(),
    ),
    audit: new AuditLog(store, clock, settings.audit['denied-per-minute']),
    metrics,
    logger,
    rateLimitedLog: new RateLimitedLog(logger, clock),
    clock,
    replicaId,
    version: VERSION,
  };
  // Requests waiting on a store that is down are answered within a bound
  // (docs/operations.md#when-the-store-is-down); the memory store is never down.
  const outage = store.kind === 'memory' ? null : new StoreOutageBound(store);
  if (outage) services.outage = outage;
  const app = createApp(services, allRoutes(settings, VERSION));
  const fastPath = options.heartbeatFastPath === false ? null : createHeartbeatFastPath(services);
  const server = createServer(httpServerOptions(settings));
  // Node's own slow-client checks stay on; these per-socket deadlines hold where its periodic
  // sweep does not, and what its parser refuses gets the API's JSON error shape
  // (docs/operations.md#http-timeouts).
  const deadlines = guardConnections(server, {
    headersTimeoutMs: settings.http['headers-timeout'],
    requestTimeoutMs: settings.http['request-timeout'],
  });
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    deadlines.request(req, res);
    if (refusedWithoutHost(req, res)) return;
    if (!fastPath?.handle(req, res)) app(req, res);
  });
  server.keepAliveTimeout = settings.http['keep-alive-timeout'];
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(settings.http.port, settings.http.host, () => resolve());
  });
  const bound = server.address() as AddressInfo;
  const port = bound.port;
  const wildcard = settings.http.host === '0.0.0.0' || settings.http.host === '::';
  const shownHost = wildcard ? '127.0.0.1' : settings.http.host;
  const url = `http://${shownHost}:${port}`;
  const advertisedUrl = advertisedUrlOf(settings, bound, logger);
  services.advertisedUrl = advertisedUrl;

  // Several replicas on one store (docs/architecture.md#replicas-leases-and-fences): registry, rendezvous owner, Redlock leases,
  // forwarding. Embedded mode (memory store) is one replica with no leases.
  let replication: Replication | null = null;
  let leaseClient: Redis | Cluster | null = null;
  let forwarder: Forwarder | null = null;
  if (!isEmbedded(settings) && store.kind !== 'memory') {
    leaseClient = leaseClientOf(settings);
    leaseClient.on('error', () => undefined); // reported through the store's own client
    replication = new Replication({
      store,
      self: { id: replicaId, url: advertisedUrl },
      clients: [leaseClient],
      leaseKey: (ref) => keyNames(settings.store['key-prefix']).lease(ref),
      leaseTtlMs: settings.lease.ttl,
      // The registry entry's TTL and refresh follow the lease TTL (`registryTiming`): a dead or
      // paused replica leaves the live set before its leases expire.
      metrics,
      logger,
    });
    forwarder = new Forwarder({
      replicaId,
      secret: jwtSecret,
      metrics,
      logger,
      answerTimeoutMs: settings.forwarding['answer-timeout'],
      writeError: (res, error) => {
        const requestId = String(res.getHeader('X-Request-Id') ?? '');
        const { status, body } = toErrorResponse(error, requestId);
        const json = JSON.stringify(body);
        res.writeHead(status, {
          'Content-Type': 'application/json; charset=utf-8',
          'Content-Length': Buffer.byteLength(json),
        });
        res.end(json);
      },
    });
    const { ownership } = replication;
    const live = replication;
    const replicas: ReplicaServices = {
      forwarder,
      secret: jwtSecret,
      ownerOf: (ref) => {
        const owner = ownership.ownerOf(ref);
        return owner.self ? replicaId : owner.owner;
      },
      ownersVersion: () => ownership.ownersVersion(),
      urlOf: (id) => live.urlOf(id),
      list: () => live.list(),
      // Its entry written within the entry's TTL, and in the live set as last read (without
      // this replica once it leaves).
      joined: () => live.joined(),
    };
    services.replicas = replicas;
  }
  const host = new GroupHost({
    store,
    settings,
    clock,
    metrics,
    logger,
    replicaId,
    ...(replication ? { ownership: replication.ownership } : {}),
  });
  services.coordinator = host;
  replication?.attach({
    heldGroups: () => host.heldGroups(),
    release: (ref) => host.release(ref),
  });
  host.start();
  if (replication) {
    await replication.start().catch((error: unknown) =>
      logger.error('could not register in the replica registry; retrying every second', {
        error: error instanceof Error ? error.message : String(error),
      }),
    );
  }
  const bindAddress =
    bound.family === 'IPv6' ? `[${bound.address}]:${port}` : `${bound.address}:${port}`;
  logger.info(
    `stream-coordinator listening on ${url} (bound to ${bindAddress}, store ${store.kind}` +
      `${isEmbedded(settings) ? ', embedded' : ''}, replica ${replicaId}, advertised ${advertisedUrl})`,
    { bindAddress, url, advertisedUrl },
  );
  if (store.kind !== 'memory') checkStoreAtStartup(store, logger);
  const storeState = watchStoreState(settings, store, { clock, logger, metrics });
  let closed = false;
  return {
    url,
    port,
    server,
    services,
    host,
    async close() {
      if (closed) return;
      closed = true;
      // What waits is answered at full speed from now on (docs/architecture.md#fairness-between-groups).
      const releaseRests = replicaTurnBudget.holdRests();
      try {
        storeState?.stop();
        // Hand every group over while still answering (forwarding to the new owners), bounded.
        if (replication) await within(replication.leave(), SHUTDOWN_HANDOVER_MS);
        // Held heartbeats are answered (decided on the groups as they are now), not cut off.
        await within(host.releaseHeld(), SHUTDOWN_HANDOVER_MS);
        await new Promise((resolve) => setImmediate(resolve));
        if (fastPath) await within(fastPath.flushed(), SHUTDOWN_HANDOVER_MS);
      } finally {
        releaseRests();
        replicaTurnBudget.setShare(shareBefore);
      }
      deadlines.stop();
      outage?.stop();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      forwarder?.close();
      await host.close();
      leaseClient?.disconnect();
      await store.close();
    },
  };
}
