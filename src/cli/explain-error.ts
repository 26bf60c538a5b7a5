import { CommanderError } from 'commander';
import { CoordinatorApiError, CoordinatorUnreachableError } from '../client/index.js';
import { CliError, EXIT } from './cli-error.js';
import { RequestError } from './request-error.js';

/** What to do about an error code of the coordinator; `<group>` is replaced by the group. */
const ADVICE: Readonly<Record<string, string>> = {
  UNAUTHENTICATED: 'log in with `coordctl login --username <name>`, or pass --token',
  INVALID_TOKEN:
    'the token is not valid for this coordinator: log in again with `coordctl login`, or pass another --token',
  TOKEN_EXPIRED: 'the token expired: log in again with `coordctl login --username <name>`',
  INVALID_CREDENTIALS: 'check the username and password',
  LOGIN_THROTTLED: 'too many failed logins: wait for the time in Retry-After, then try again',
  LOGIN_BUSY:
    'the coordinator is checking as many passwords as it allows (a flood of logins?): try again after Retry-After',
  FORBIDDEN: 'use a token whose roles allow this (reads need READ, changes need WRITE)',
  GROUP_NOT_PERMITTED: 'use a token whose `groups` claim includes <group>',
  GROUP_NOT_FOUND: 'check the name with `coordctl groups`, or create it with `coordctl apply -f`',
  MIGRATION_NOT_FOUND: 'list the migrations with `coordctl migrations <group>`',
  NOT_FOUND:
    'this coordinator does not serve that path: check --coordinator, and compare `coordctl --version` with GET /coord/v1/monitoring/info (the coordinator may be older)',
  GROUP_EXISTS: 'the group exists already: change it with `coordctl scale` or `coordctl apply -f`',
  GROUP_FROZEN: 'the group is frozen: `coordctl unfreeze <group>` first',
  GROUP_NOT_FROZEN: 'nothing to do: the group is not frozen',
  GROUP_HAS_MEMBERS: 'stop its consumers first, or delete with --force',
  GROUP_NOT_FAILED_CLOSED:
    'recovery is only for a failed-closed group; see `coordctl describe <group>`',
  GROUP_FAILED_CLOSED_ADMIN:
    'the group failed closed: recover it first (`coordctl recovery <group> resume|recreate`)',
  GROUP_FAILED_CLOSED:
    'the group failed closed: see `coordctl describe <group>`, then `coordctl recovery <group> resume|recreate`',
  MIGRATION_IN_PROGRESS:
    'wait for it (`coordctl migrations <group>`) or roll it back (`coordctl rollback <group>`)',
  ROLLBACK_NOT_ALLOWED:
    'the rollback window has passed: scale to the old shard count instead (`coordctl scale <group> <count>`)',
  SHARD_COUNT_UNCHANGED: 'the group already has that shard count: nothing to do',
  RESUME_REFUSED:
    'clients saw a newer metadataVersion than the restored one: restore a newer backup, or `coordctl recovery <group> recreate --shard-count <n>`',
  STORE_UNAVAILABLE:
    'the coordinator answers, but its store is down: check Redis; a change already under way may still be made when it is back, so look (`coordctl describe <group>`) before you try again',
  AUDIT_UNAVAILABLE:
    'the change was made but its audit record could not be written: check Redis; do not repeat the change (see `coordctl describe <group>`)',
  STALE_REVISION: 'the group changed meanwhile: try again',
  FENCED_WRITE: 'the group moved to another replica meanwhile: try again',
  VALIDATION_FAILED: 'fix the request as the message says',
  SHARD_OUT_OF_RANGE:
    'the group has no such shard: shards are numbered from 0 to its shard count less one (`coordctl describe <group>`)',
  TIMESTAMP_IN_FUTURE:
    "give a time before now (the streams Redis's clock): a group moved ahead of entries written later would never see them",
  INVALID_STREAM_ID:
    "give each id as <ms>-<seq> (e.g. 1700000000000-0), not after the streams Redis's clock: `coordctl reset-positions <group> --to-ids 0=<ms>-<seq>,…`",
  CONSUMPTION_PAUSED:
    'shards of the group are paused: see which with `coordctl describe <group>`, then resume them (`coordctl resume <group> --shards …`) first',
  RESET_IN_PROGRESS:
    'a position reset is under way: wait for it to end (`coordctl describe <group>` shows its progress), then try again; one that cannot finish is ended with `coordctl cancel-reset <group>`',
  NO_RESET_IN_PROGRESS:
    'no position reset is under way: the last one ended on its own (`coordctl describe <group>` shows it)',
  SHARD_STREAM_BROKEN:
    "the shard's stream key holds another type (the message names it): fix the key (`DEL` it if nothing of value is in it), then try again",
  STREAMS_UNAVAILABLE:
    'the coordinator cannot read the streams Redis (coordinator.streams.url): check it, then try again',
  FORWARDED_PLAN_TOO_SLOW:
    'nothing was done: the owner could not plan the reset before the forwarding replica gives up; try again, send it to the owner (X-Coord-Owner-Url) directly, or reset fewer shards at a time (--shards)',
};

/** Advice by HTTP status, for codes without their own. */
function adviceByStatus(status: number): string {
  if (status === 401) return ADVICE.UNAUTHENTICATED ?? '';
  if (status === 403) return ADVICE.FORBIDDEN ?? '';
  if (status === 409)
    return 'the group is not in a state that allows this: see `coordctl describe <group>`';
  if (status >= 500)
    return 'the coordinator could not serve this now: try again shortly; if it persists, check its logs and health';
  return 'check the arguments';
}

/**
 * What to do about `STORE_UNAVAILABLE`: the coordinator was reached and answered; its store
 * (named by address and cause when the answer says, never with credentials) was not.
 */
function storeDownAdvice(details: Readonly<Record<string, unknown>> | undefined): string {
  const store = typeof details?.store === 'string' ? details.store : null;
  const why = typeof details?.cause === 'string' ? details.cause : null;
  if (store === null) return ADVICE.STORE_UNAVAILABLE ?? '';
  return (
    `the coordinator answers, but its store (Redis at ${store}${why ? `: ${why}` : ''}) is down: ` +
    'check Redis; a change already under way may still be made when it is back, so look (`coordctl describe <group>`) before you try again'
  );
}

/**
 * What to do about `RESUME_REFUSED`: the restored metadata is older than what clients saw (the
 * refusal's details give both versions), or there is no metadata to resume at all.
 */
function resumeRefusedAdvice(details: Readonly<Record<string, unknown>> | undefined): string {
  if (typeof details?.storedMetadataVersion === 'number') return ADVICE.RESUME_REFUSED ?? '';
  return 'there is no metadata to resume: restore it (`coordctl restore --group <group> --in <backup>`), then `coordctl recovery <group> resume`; or `coordctl recovery <group> recreate --shard-count <n>`';
}

/**
 * What to do about `SHARD_COUNT_MISMATCH`: the count is the stream prefix's, so the advice is
 * about the prefix and the groups on it (docs/protocol.md#one-shard-layout-per-stream-prefix),
 * not the group asked for (which may not exist yet).
 */
function shardCountMismatchAdvice(
  details: Readonly<Record<string, unknown>> | undefined,
): string | null {
  const sp = details?.streamPrefix;
  const count = details?.shardCount;
  const groups = Array.isArray(details?.groups) ? details.groups : [];
  const other: unknown = groups[0];
  if (typeof sp !== 'string' || typeof count !== 'number' || typeof other !== 'string') return null;
  return `stream prefix ${sp} has ${count} shards (every group on it has the same count): give ${count} (or no count), or scale the prefix (\`coordctl scale ${sp}:${other} <count>\`) first`;
}

/** `<streamPrefix>:<consumerGroup>` from a group URL, if it is one. */
function groupOf(url: string): string | null {
  const match = /\/streams\/([^/]+)\/groups\/([^/?]+)/.exec(new URL(url).pathname);
  return match?.[1] && match[2]
    ? `${decodeURIComponent(match[1])}:${decodeURIComponent(match[2])}`
    : null;
}

/** `<streamPrefix>:<consumerGroup>` of the group an error's details name, if they name one. */
function namedGroup(details: Readonly<Record<string, unknown>> | undefined): string | null {
  const sp = details?.streamPrefix;
  const cg = details?.consumerGroup;
  return typeof sp === 'string' && typeof cg === 'string' && sp !== '' && cg !== ''
    ? `${sp}:${cg}`
    : null;
}

/** What to do about a refusal: from its details where the advice depends on them. */
function adviceFor(cause: CoordinatorApiError): string {
  switch (cause.code) {
    case 'STORE_UNAVAILABLE':
      return storeDownAdvice(cause.details);
    case 'RESUME_REFUSED':
      return resumeRefusedAdvice(cause.details);
    case 'SHARD_COUNT_MISMATCH':
      return shardCountMismatchAdvice(cause.details) ?? adviceByStatus(cause.status);
    default:
      return ADVICE[cause.code] ?? adviceByStatus(cause.status);
  }
}

/** An API error or network failure of one request: what failed, and what to do. */
function explainRequest(error: RequestError): string {
  const what = `${error.method} ${error.url}`;
  const { cause } = error;
  if (cause instanceof CoordinatorApiError) {
    // A refusal about another group (one on the same stream prefix) names it in its details:
    // the advice is about that group, not the one in the URL.
    const group = namedGroup(cause.details) ?? groupOf(error.url) ?? '<group>';
    const advice = adviceFor(cause).replaceAll('<group>', group);
    const id = cause.requestId ? ` (request id ${cause.requestId})` : '';
    return `${what} failed: ${cause.status} ${cause.code}: ${cause.message}${id}\n  what to do: ${advice}`;
  }
  if (cause instanceof CoordinatorUnreachableError) {
    return `${cause.message}\n  what to do: check that the coordinator runs and that --coordinator (or COORDCTL_URL) points at it`;
  }
  return `${what} failed: ${cause instanceof Error ? cause.message : String(cause)}`;
}

/** The message and exit code for an error that reached the top of `coordctl`. */
export function explainError(error: unknown): { message: string | null; exitCode: number } {
  if (error instanceof CommanderError) {
    // commander has printed the usage error (or help/version) itself
    return { message: null, exitCode: error.exitCode };
  }
  if (error instanceof CliError)
    return { message: error.message || null, exitCode: error.exitCode };
  if (error instanceof RequestError)
    return { message: explainRequest(error), exitCode: EXIT.FAILED };
  return {
    message: error instanceof Error ? error.message : String(error),
    exitCode: EXIT.FAILED,
  };
}
