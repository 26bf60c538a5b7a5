import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { hostname } from 'node:os';
import type { AddressInfo } from 'node:net';
import { GroupHost } from './actors/group-host.js';
import { isEmbedded, type Settings } from './config/settings.js';
import { SettingsError } from './config/load.js';
import { systemClock, type Clock } from './machines/clock.js';
import { createLogger, type Logger } from './observability/logger.js';
import { Metrics } from './observability/metrics.js';
import { createStore } from './store/index.js';
import type { Store } from './store/store.js';
import { createApp } from './http/app.js';
import { createHeartbeatFastPath } from './http/heartbeat-fast-path.js';
import { AuditLog } from './http/audit.js';
import { LoginThrottle } from './http/auth/login-throttle.js';
import { hashPassword } from './http/auth/password-hash.js';
import { ROLES } from './http/auth/roles.js';
import { TokenService } from './http/auth/tokens.js';
import { UserDirectory } from './http/auth/users.js';
import { allRoutes } from './http/routes/index.js';
import type { Services } from './http/services.js';
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

/** Builds every part from settings and starts listening. */
export async function startCoordinator(
  settings: Settings,
  options: CoordinatorOptions = {},
): Promise<RunningCoordinator> {
  const clock = options.clock ?? systemClock;
  const logger =
    options.logger ?? createLogger({ level: settings.log.level, format: settings.log.format });
  const metrics = new Metrics({ defaultMetrics: true });
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
  const host = new GroupHost({ store, settings, clock, metrics, logger, replicaId });
  const services: Services = {
    settings,
    store,
    coordinator: host,
    tokens: new TokenService(jwtSecret, settings.security['token-ttl'], clock),
    users,
    throttle: new LoginThrottle(
      settings.security['login-max-failures'],
      settings.security['login-throttle-window'],
      clock,
    ),
    audit: new AuditLog(store, clock),
    metrics,
    logger,
    clock,
    replicaId,
    version: VERSION,
  };
  const app = createApp(services, allRoutes(settings, VERSION), jwtSecret);
  const fastPath = options.heartbeatFastPath === false ? null : createHeartbeatFastPath(services);
  const server = createServer((req, res) => {
    if (!fastPath?.handle(req, res)) app(req, res);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(settings.http.port, settings.http.host, () => resolve());
  });
  host.start();
  const port = (server.address() as AddressInfo).port;
  const shownHost =
    settings.http.host === '0.0.0.0' || settings.http.host === '::'
      ? '127.0.0.1'
      : settings.http.host;
  const url = `http://${shownHost}:${port}`;
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
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await host.close();
      await store.close();
    },
  };
}
