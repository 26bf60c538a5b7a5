import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { BUSY_SHARE, MIN_BUSY_SHARE } from '../actors/turn-budget.js';
import { parseDuration } from './duration.js';

const duration = (fallback: string) =>
  z
    .union([z.string(), z.number()])
    .default(fallback)
    .transform((value, ctx) => {
      const ms = parseDuration(value);
      if (ms === null) {
        ctx.addIssue({
          code: 'custom',
          message: `not a duration (use e.g. 500ms, 30s, 5m, 7d): ${String(value)}`,
        });
        return z.NEVER;
      }
      return ms;
    });

const int = (fallback: number, min: number, max: number) =>
  z.coerce.number().int().min(min).max(max).default(fallback);

/** The highest `limits.max-shard-count` a coordinator can be configured with. */
export const MAX_SHARD_COUNT_LIMIT = 1_000_000;

/**
 * Every setting (README.md#settings), with its default. Durations are parsed to milliseconds.
 * Keys are the Spring-style names, nested by their dots.
 */
export const settingsSchema = z.object({
  http: z
    .object({
      port: int(8080, 0, 65535),
      host: z.string().default('0.0.0.0'),
      'advertised-url': z.string().url().optional(),
      /** Time to receive a request's headers; 0: no limit. */
      'headers-timeout': duration('10s'),
      /**
       * Time to receive a whole request (headers and body); 0: no limit. Node applies it to
       * receiving only, so long polls and event streams answering later are not cut.
       */
      'request-timeout': duration('30s'),
      /** An idle keep-alive connection is closed after this. */
      'keep-alive-timeout': duration('5s'),
    })
    .prefault({})
    .refine(
      (http) =>
        http['request-timeout'] === 0 ||
        http['headers-timeout'] === 0 ||
        http['headers-timeout'] <= http['request-timeout'],
      {
        message: 'must not exceed coordinator.http.request-timeout',
        path: ['headers-timeout'],
      },
    ),
  store: z
    .object({
      type: z.enum(['memory', 'redis', 'redis-cluster']).default('memory'),
      url: z.string().default('redis://127.0.0.1:6379'),
      'cluster-nodes': z
        .union([z.array(z.string()), z.string()])
        .default([])
        .transform((v) =>
          typeof v === 'string'
            ? v
                .split(',')
                .map((s) => s.trim())
                .filter(Boolean)
            : v,
        ),
      'key-prefix': z
        .string()
        .regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$/, 'letters, digits, ".", "_", ":" and "-" only')
        .default('redis-stream:coord'),
      'verify-interval': duration('5s'),
    })
    .prefault({}),
  security: z
    .object({
      'jwt-secret': z.string().min(32, 'must be at least 32 characters').optional(),
      'token-ttl': duration('7d'),
      'users-file': z.string().optional(),
      'bootstrap-admin-password': z.string().min(8, 'must be at least 8 characters').optional(),
      'login-max-failures': int(5, 1, 1000),
      'login-throttle-window': duration('1m'),
      'login-max-concurrent-checks': int(2, 1, 64),
      'login-max-queued-checks': int(8, 0, 10_000),
    })
    .prefault({}),
  membership: z
    .object({
      'session-timeout': duration('45s'),
      'heartbeat-interval': duration('3s'),
      'rebalance-timeout': duration('60s'),
      'rebalance-heartbeat-interval': duration('250ms'),
      'assignment-debounce': duration('100ms'),
      'assignment-debounce-max': duration('1s'),
      'sweep-interval': duration('250ms'),
    })
    .prefault({}),
  migration: z.object({ 'rollback-window': duration('30m') }).prefault({}),
  lease: z.object({ ttl: duration('10s') }).prefault({}),
  /** Requests one replica forwards to a group's owner (docs/operations.md#a-paused-owner). */
  forwarding: z
    .object({
      /**
       * How long the owner has to start its answer (its response headers) before the forwarding
       * replica answers 503 `OWNER_UNAVAILABLE` itself; a held heartbeat or a long poll gets the
       * wait it asked for on top.
       */
      'answer-timeout': duration('2s').refine((ms) => ms > 0, 'must be more than 0'),
    })
    .prefault({}),
  replica: z
    .object({
      id: z.string().min(1).max(128).optional(),
      /**
       * Where the replica keeps what must survive its store (docs/operations.md#lost-metadata):
       * whether it has seen groups in the store, so a store that comes back empty is noticed at
       * startup. `none`: kept nowhere.
       */
      'state-dir': z.string().min(1).default(join(tmpdir(), 'stream-coordinator')),
    })
    .prefault({}),
  'coordination-version': z
    .object({ min: int(1, 1, 1_000_000), max: int(1, 1, 1_000_000) })
    .prefault({}),
  /** The data streams the groups read (docs/operations.md#lag). */
  streams: z
    .object({
      /**
       * Redis holding the shard streams: one URL, or several comma-separated seeds of a Redis
       * Cluster. Default: the store's Redis in redis modes; none in embedded mode.
       */
      url: z.string().min(1).optional(),
      /** The `url` is a Redis Cluster (its seeds). */
      cluster: z
        .union([z.boolean(), z.enum(['true', 'false'])])
        .transform((v) => v === true || v === 'true')
        .default(false),
      /** How long a group's lag reading is reused (a dashboard refreshing each second). */
      'lag-cache': duration('1s'),
      /** How often each owner refreshes the lag metrics of its groups; 0: never. */
      'lag-interval': duration('15s'),
      /** Most groups whose lag one replica reads per interval (the rest wait their turn). */
      'lag-budget': int(1000, 1, 1_000_000),
      /** Also one lag series per shard (cardinality: shards × groups). */
      'lag-shard-metrics': z
        .union([z.boolean(), z.enum(['true', 'false'])])
        .transform((v) => v === true || v === 'true')
        .default(false),
    })
    .prefault({}),
  /** How the replica's event loop is shared between groups (docs/architecture.md#fairness-between-groups). */
  fairness: z
    .object({
      /**
       * The share of the loop that busy groups' work (joins, rebalances, their answers) gets
       * while steady heartbeats are answered; 1: it never rests.
       */
      'busy-share': z.coerce
        .number()
        .min(MIN_BUSY_SHARE, `must be at least ${MIN_BUSY_SHARE}`)
        .max(1, 'must be at most 1')
        .default(BUSY_SHARE),
    })
    .prefault({}),
  audit: z
    .object({
      'max-len': int(100_000, 100, 100_000_000),
      /** Records of refusals a caller without a valid token can cause, per minute and replica. */
      'denied-per-minute': int(10, 0, 1_000_000),
    })
    .prefault({}),
  limits: z
    .object({
      'max-shard-count': int(1024, 1, MAX_SHARD_COUNT_LIMIT),
      'max-body-bytes': int(65_536, 1024, 16 * 1024 * 1024),
      'max-members-per-group': int(10_000, 1, 1_000_000),
    })
    .prefault({}),
  log: z
    .object({
      level: z.enum(['error', 'warn', 'info', 'debug']).default('info'),
      format: z.enum(['json', 'text']).default('text'),
    })
    .prefault({}),
});

export type Settings = z.infer<typeof settingsSchema>;

/** Whether the coordinator runs on its embedded default (MemoryStore, one replica). */
export function isEmbedded(settings: Settings): boolean {
  return settings.store.type === 'memory';
}
