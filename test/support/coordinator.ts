import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import jwt from 'jsonwebtoken';
import { loadSettings } from '../../src/config/load.js';
import type { Clock } from '../../src/machines/clock.js';
import { hashPassword } from '../../src/http/auth/password-hash.js';
import type { Role } from '../../src/http/auth/roles.js';
import { createLogger, type Logger } from '../../src/observability/logger.js';
import { startCoordinator, type RunningCoordinator } from '../../src/server.js';
import { afterAll, beforeAll } from 'vitest';
import {
  randomKeyPrefix,
  startRedisServer,
  waitFor,
  type RedisServerHandle,
} from './redis-server.js';

export const TEST_SECRET = 'test-secret-that-is-at-least-32-characters-long';
export const PASSWORD = 'correct horse battery';

/** One user per role mix the tests need; every password is PASSWORD. */
export const TEST_USERS: Record<string, Role[]> = {
  admin: ['READ', 'WRITE', 'CONSUMER', 'PRODUCER'],
  writer: ['WRITE'],
  reader: ['READ'],
  consumer: ['CONSUMER'],
  producer: ['PRODUCER'],
};

let usersFile: Promise<string> | null = null;

/** A users file shared by the test process (hashing is deliberately slow). */
function testUsersFile(): Promise<string> {
  usersFile ??= (async () => {
    const hash = await hashPassword(PASSWORD);
    const dir = mkdtempSync(join(tmpdir(), 'coord-users-'));
    const file = join(dir, 'users.yaml');
    const lines = Object.entries(TEST_USERS).map(
      ([username, roles]) =>
        `  - username: ${username}\n    passwordHash: "${hash}"\n    roles: [${roles.join(', ')}]`,
    );
    writeFileSync(file, `users:\n${lines.join('\n')}\n`);
    return file;
  })();
  return usersFile;
}

/**
 * A token for any principal, signed with TEST_SECRET as an operator's identity system would
 * mint it (README.md#tokens-roles-and-group-scopes): for tests that need principals other than the TEST_USERS.
 */
export function mintToken(
  sub: string,
  roles: readonly Role[],
  now = Date.now(),
  /** A `groups` claim: the token reaches only these `<streamPrefix>:<consumerGroup>` patterns. */
  groups?: readonly string[],
): string {
  const iat = Math.floor(now / 1000);
  const claims = { sub, roles, iat, exp: iat + 3600, iss: 'stream-coordinator' };
  return jwt.sign(groups ? { ...claims, groups } : claims, TEST_SECRET, { algorithm: 'HS256' });
}

export type StoreKind = 'memory' | 'redis';

export interface TestCoordinator extends RunningCoordinator {
  readonly keyPrefix: string;
  /** A token for a test user (minted directly: logins are tested on their own). */
  token(user: string): string;
  /** fetch against the coordinator with a JSON body and optional user token. */
  call(
    method: string,
    path: string,
    options?: { user?: string; body?: unknown; headers?: Record<string, string> },
  ): Promise<Response>;
}

/**
 * Starts a real coordinator on a free port (real HTTP) over a memory store or the given
 * redis-server, with the test users and a random key prefix.
 */
export async function startTestCoordinator(
  options: {
    store: StoreKind;
    redisUrl?: string;
    clock?: Clock;
    overrides?: Record<string, unknown>;
    /** Default: a silent logger. */
    logger?: Logger;
  } = { store: 'memory' },
): Promise<TestCoordinator> {
  const given = options.overrides?.['store.key-prefix'];
  const keyPrefix = typeof given === 'string' ? given : randomKeyPrefix();
  const settings = loadSettings({
    env: {},
    overrides: {
      'http.port': 0,
      'http.host': '127.0.0.1',
      'store.type': options.store,
      ...(options.redisUrl ? { 'store.url': options.redisUrl } : {}),
      'store.key-prefix': keyPrefix,
      'security.jwt-secret': TEST_SECRET,
      'security.users-file': await testUsersFile(),
      // No state file left behind by every test (the tests of the state file set their own).
      'replica.state-dir': 'none',
      ...options.overrides,
    },
  });
  const running = await startCoordinator(settings, {
    ...(options.clock ? { clock: options.clock } : {}),
    logger: options.logger ?? createLogger({ level: 'error', format: 'text', silent: true }),
  });
  const token = (user: string) => {
    const roles = TEST_USERS[user] ?? [];
    const now = Math.floor((options.clock?.now() ?? Date.now()) / 1000);
    return jwt.sign(
      { sub: user, roles, iat: now, exp: now + 3600, iss: 'stream-coordinator' },
      TEST_SECRET,
      {
        algorithm: 'HS256',
      },
    );
  };
  return {
    ...running,
    keyPrefix,
    token,
    call(method, path, { user, body, headers } = {}) {
      return fetch(`${running.url}${path}`, {
        method,
        headers: {
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...(user ? { authorization: `Bearer ${token(user)}` } : {}),
          ...headers,
        },
        ...(body !== undefined
          ? { body: typeof body === 'string' ? body : JSON.stringify(body) }
          : {}),
      });
    },
  };
}

/** Waits until each of `replicas` lists every replica of `ids` as live, with its URL. */
export async function waitUntilSeenByEach(
  replicas: Iterable<TestCoordinator>,
  ids: readonly string[],
): Promise<void> {
  for (const c of replicas) {
    await waitFor(() => ids.every((id) => c.services.replicas?.urlOf(id)), {
      what: `${ids.join(', ')} seen by each replica`,
    });
  }
}

/**
 * One replica of several on one redis-server (docs/architecture.md#replicas-leases-and-fences):
 * the shared key prefix, its own replica id, a short lease (1.5 s) so that moves are quick, and
 * `overrides` over all of them.
 */
export function startReplicaOn(
  redisUrl: string,
  keyPrefix: string,
  replicaId: string,
  overrides: Record<string, unknown> = {},
): Promise<TestCoordinator> {
  return startTestCoordinator({
    store: 'redis',
    redisUrl,
    overrides: {
      'store.key-prefix': keyPrefix,
      'replica.id': replicaId,
      'lease.ttl': '1500ms',
      ...overrides,
    },
  });
}

/** {@link startReplicaOn} with the given session timeout. */
export function startTestReplica(
  redisUrl: string,
  keyPrefix: string,
  replicaId: string,
  sessionTimeout: string,
): Promise<TestCoordinator> {
  return startReplicaOn(redisUrl, keyPrefix, replicaId, {
    'membership.session-timeout': sessionTimeout,
  });
}

/** The change fields every admin mutation needs. */
export const CHANGE = { requestedBy: 'test-suite', reason: 'integration test' };

/**
 * Membership timing for SDK tests: heartbeats every 200 ms, 30 ms during a rebalance, and
 * assignments recomputed 20 ms after a change, so joins and handovers settle in tens of ms.
 */
export const QUICK_MEMBERSHIP = {
  'membership.heartbeat-interval': '200ms',
  'membership.rebalance-heartbeat-interval': '30ms',
  'membership.assignment-debounce': '20ms',
} as const;

/**
 * For a `describe` block: before its tests, starts a redis-server (for the redis store) and a
 * coordinator on it, handed to `use`; after them, stops both.
 */
export function useCoordinator(
  options: { store: StoreKind; clock?: Clock; overrides?: Record<string, unknown> },
  use: (coordinator: TestCoordinator, redis: RedisServerHandle | null) => void,
): void {
  let redis: RedisServerHandle | null = null;
  let coordinator: TestCoordinator | null = null;
  beforeAll(async () => {
    if (options.store === 'redis') redis = await startRedisServer();
    coordinator = await startTestCoordinator({
      ...options,
      ...(redis ? { redisUrl: redis.url } : {}),
    });
    use(coordinator, redis);
  });
  afterAll(async () => {
    await coordinator?.close();
    await redis?.stop();
  });
}

/** What `GET /monitoring/streams/{s}/groups/{g}` answers, as far as the tests read it. */
export interface GroupView {
  status: string;
  failureReason: string | null;
  metadataVersion: number;
  assignmentEpoch: number;
  lifecycleId: string;
  highestVersionSeen: number;
  rollbackSignals: { count: number; highestVersionSeen: number; lastSource: string } | null;
}

/** Reads one group's monitoring view as a READ user. */
export async function groupView(
  c: TestCoordinator,
  streamPrefix: string,
  consumerGroup = 'g',
): Promise<GroupView> {
  const res = await c.call(
    'GET',
    `/coord/v1/monitoring/streams/${streamPrefix}/groups/${consumerGroup}`,
    {
      user: 'reader',
    },
  );
  return (await res.json()) as GroupView;
}

/** `POST …/recovery` as a WRITE user; `request` is `{action, shardCount?}` (the change fields are added). */
export function recover(
  c: TestCoordinator,
  streamPrefix: string,
  request: Record<string, unknown>,
  consumerGroup = 'g',
) {
  return c.call(
    'POST',
    `/coord/v1/admin/streams/${streamPrefix}/groups/${consumerGroup}/recovery`,
    {
      user: 'writer',
      body: { ...request, ...CHANGE },
    },
  );
}

/**
 * A coordinator on a memory store that reads the data streams on `streamsUrl`, with fresh lag
 * readings and quick heartbeats and recomputes: the set-up of the SDK-and-streams tests
 * (dead letters, consumption control, and their CLI tests).
 */
export function startStreamsCoordinator(streamsUrl: string): Promise<TestCoordinator> {
  return startTestCoordinator({
    store: 'memory',
    overrides: {
      'streams.url': streamsUrl,
      'streams.lag-cache': '0ms',
      'membership.heartbeat-interval': '200ms',
      'membership.assignment-debounce': '20ms',
    },
  });
}
