import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BeforeResponse, ForwardOutcome } from '../actors/ownership/forwarder.js';
import {
  FORWARD_SIGNATURE_HEADER,
  FORWARDED_BY_HEADER,
  isTrustedForward,
  FORWARD_DEADLINE_HEADER,
  isLateForward,
  OWNER_HEADER,
  OWNER_URL_HEADER,
} from '../actors/ownership/forwarder.js';
import { CoordinatorError, GroupMovedError } from '../errors.js';
import { permitsGroup } from './auth/group-scope.js';
import { principalOfRequest } from './auth/passport.js';
import type { Principal } from './auth/roles.js';
import { MAX_HEARTBEAT_WAIT_MS } from '../machines/protocol.js';
import { logRequestFailure } from './failure-log.js';
import { MAX_WAIT_MS } from './routes/routing.js';
import type { Services } from './services.js';
import { FORWARDED_HEADROOM_MS } from './store-outage.js';

/**
 * Whether `req` came from another replica of this deployment (README.md, "Running several
 * replicas"): its forwarded-by
 * header carries a valid signature under the shared secret. A forwarded-by header without a
 * valid signature is removed, so the request is treated (audited, forwarded) like any other.
 */
export function acceptForwarded(services: Services, req: IncomingMessage): boolean | 'late' {
  const replicas = services.replicas;
  if (req.headers[FORWARDED_BY_HEADER] === undefined) return false;
  if (replicas && isTrustedForward(req, replicas.secret)) {
    return isLateForward(req, services.clock.now()) ? 'late' : true;
  }
  delete req.headers[FORWARDED_BY_HEADER];
  delete req.headers[FORWARD_SIGNATURE_HEADER];
  delete req.headers[FORWARD_DEADLINE_HEADER];
  return false;
}

/**
 * The answer to a forwarded request that came too late (see {@link acceptForwarded}): 503
 * `OWNER_UNAVAILABLE`, nothing done; its forwarder told the caller so already.
 */
export function lateForwardError(): CoordinatorError {
  return new CoordinatorError(
    'OWNER_UNAVAILABLE',
    'the forwarded request came after its deadline (this replica was paused): nothing was done',
    { details: { reason: 'late' } },
  );
}

/**
 * How long the work of a request another replica forwarded here may take before it must be
 * answered (docs/operations.md#a-paused-owner): until its forward deadline, never more than
 * `coordinator.forwarding.answer-timeout` from now, less {@link FORWARDED_HEADROOM_MS} so that
 * the answer reaches the forwarder before it gives up on this replica. Null for a request sent
 * here directly: no bound.
 */
export function forwardedAnswerWithinMs(
  services: Services,
  req: IncomingMessage,
  forwarded: boolean,
): number | null {
  if (!forwarded) return null;
  const answerTimeoutMs = services.settings.forwarding['answer-timeout'];
  const deadline = Number(req.headers[FORWARD_DEADLINE_HEADER]);
  const left = Number.isFinite(deadline)
    ? Math.min(deadline - Date.now(), answerTimeoutMs)
    : answerTimeoutMs;
  return Math.max(0, left - FORWARDED_HEADROOM_MS);
}

/** The group's owner as this replica sees it (`X-Coord-Owner`); null while it moves. */
export function groupOwnerOf(
  services: Services,
  streamPrefix: string,
  consumerGroup: string,
): string | null {
  return services.replicas
    ? services.replicas.ownerOf({ streamPrefix, consumerGroup })
    : services.replicaId;
}

/** Sets `X-Coord-Owner` to the group's owner as this replica sees it (none while it moves). */
export function setOwnerHeader(
  services: Services,
  res: ServerResponse,
  streamPrefix: string | null | undefined,
  consumerGroup: string | null | undefined,
): void {
  if (!streamPrefix || !consumerGroup || res.headersSent) return;
  const owner = groupOwnerOf(services, streamPrefix, consumerGroup);
  if (owner === null) {
    res.removeHeader(OWNER_HEADER);
    res.removeHeader(OWNER_URL_HEADER);
    return;
  }
  res.setHeader(OWNER_HEADER, owner);
  const url = ownerUrlOf(services, owner);
  if (url) res.setHeader(OWNER_URL_HEADER, url);
  else res.removeHeader(OWNER_URL_HEADER);
}

/**
 * Whether an answer of `status` about the group may name its owner and address: only to a
 * caller whose valid token reaches the group, never on a 401 or 403
 * (docs/operations.md#owner-direct-clients). `caller` is the principal when the request got
 * that far; otherwise the token is read here, for an answer given before it was (a body
 * refused for its bytes: 400, 413, 415).
 */
export function ownerShownTo(
  services: Services,
  req: IncomingMessage,
  caller: Principal | null,
  status: number,
  streamPrefix: string,
  consumerGroup: string,
): boolean {
  if (status === 401 || status === 403) return false;
  let principal = caller;
  if (principal === null) {
    try {
      principal = principalOfRequest(services.tokens, req);
    } catch {
      return false;
    }
  }
  return permitsGroup(principal, streamPrefix, consumerGroup);
}

/** The advertised URL of replica `owner` (`X-Coord-Owner-Url`); null when not known. */
export function ownerUrlOf(services: Services, owner: string): string | null {
  if (owner === services.replicaId) return services.advertisedUrl ?? null;
  return services.replicas?.urlOf(owner) ?? null;
}

/**
 * Where a request for the group goes (docs/architecture.md#replicas-leases-and-fences), the one
 * decision the express routes and the heartbeat fast path share: the id of the replica it is
 * forwarded to when another live replica owns the group and this one holds no entry for it (the
 * group's host would refuse it with `GROUP_MOVED` naming that replica); null when it is answered
 * here. Decided from the names alone, so before the body is parsed; `owner` is the owner as the
 * caller last looked it up (`groupOwnerOf`), when it remembers it.
 */
export function forwardTargetOf(
  services: Services,
  streamPrefix: string,
  consumerGroup: string,
  owner: string | null = groupOwnerOf(services, streamPrefix, consumerGroup),
): string | null {
  const replicas = services.replicas;
  // Served here, or nobody to send it to: the host answers (it may be moving: 503).
  if (!replicas || owner === null || owner === services.replicaId) return null;
  if (replicas.urlOf(owner) === null) return null;
  return services.coordinator.servedElsewhere({ streamPrefix, consumerGroup });
}

/** What a forward needs of the request besides its stream (see {@link forwardTo}). */
export interface ForwardRequest {
  readonly requestId: string;
  /** The body's bytes when they were read already (as received, or inflated), else null. */
  readonly body: Buffer | null;
  readonly beforeResponse?: BeforeResponse;
}

/**
 * Forwards a request whose group another replica owns to that replica (one hop: a request
 * that was forwarded already is refused by the forwarder with 503 `OWNER_MOVING`), counted in
 * `coord_forwarded_requests_total` by its outcome. False when it cannot be forwarded (no
 * replicas, the owner not known or not live): the caller answers the `GROUP_MOVED` error itself
 * (503 with `Retry-After`). Every error path asks it, so it also runs what was left to do once
 * the request is answered here ({@link whenAnsweredHere}), or drops it when forwarded.
 */
export async function forwardMoved(
  services: Services,
  req: IncomingMessage,
  res: ServerResponse,
  error: unknown,
  request: ForwardRequest,
): Promise<boolean> {
  const forwarded =
    error instanceof GroupMovedError &&
    error.owner !== null &&
    (await forwardTo(services, req, res, error.owner, request));
  const then = answeredHere.get(res);
  answeredHere.delete(res);
  if (!forwarded) then?.();
  return forwarded;
}

/**
 * What is left to do once a failed request is answered here rather than forwarded, by its
 * response (see {@link whenAnsweredHere}).
 */
const answeredHere = new WeakMap<ServerResponse, () => void>();

/**
 * Runs `then` when the error path's {@link forwardMoved}, which every failed request passes
 * through, answers the request of `res` here; drops it when the request is forwarded (its
 * answer is the owner's). A heartbeat's error is counted this way: a `GROUP_MOVED` from a group
 * that moved after the request was routed is counted by the replica that answers it, not also
 * by this one.
 */
export function whenAnsweredHere(res: ServerResponse, then: () => void): void {
  answeredHere.set(res, then);
}

/** Forwards the request to replica `owner` (see {@link forwardMoved}); false when it cannot. */
export async function forwardTo(
  services: Services,
  req: IncomingMessage,
  res: ServerResponse,
  owner: string,
  request: ForwardRequest,
): Promise<boolean> {
  const replicas = services.replicas;
  if (!replicas || res.headersSent || owner === services.replicaId) return false;
  const url = replicas.urlOf(owner);
  if (url === null) return false;
  // The owner answers under the same request id (and the signature covers it).
  req.headers['x-request-id'] = request.requestId;
  let body: Buffer | undefined;
  if (request.body !== null || req.readableEnded) {
    // Read already (and inflated, if it was encoded): sent as the bytes it is now.
    body = request.body ?? Buffer.alloc(0);
    delete req.headers['content-encoding'];
    delete req.headers['transfer-encoding'];
    req.headers['content-length'] = String(body.length);
  }
  const outcome = await replicas.forwarder.forward(
    req,
    res,
    { id: owner, url },
    body,
    request.beforeResponse,
    {
      // A held heartbeat or a long poll is answered up to its wait later: not a silent owner.
      waitMs: requestedWait(req, body),
      // A suspicion ends (its probes stop) once the owner is gone from the live set or moved.
      isLive: () => replicas.urlOf(owner) === url,
    },
  );
  logRefusal(services, req, request.requestId, outcome, owner);
  return true;
}

/** The longest wait a request may ask for (held heartbeat, routing long poll). */
const LONGEST_WAIT_MS = Math.max(MAX_HEARTBEAT_WAIT_MS, MAX_WAIT_MS);

/**
 * The wait a request asked for: `waitMs` of a routing long poll's query or of a held
 * heartbeat's body (read only when the bytes name it). Bounded as the routes bound it.
 */
function requestedWait(req: IncomingMessage, body: Buffer | undefined): number {
  let wait = 0;
  const url = req.url ?? '/';
  const query = url.indexOf('?');
  if (query !== -1) {
    const given = new URLSearchParams(url.slice(query + 1)).get('waitMs');
    if (given !== null) wait = Number(given);
  } else if (body !== undefined && body.includes('"waitMs"')) {
    try {
      const parsed = JSON.parse(body.toString('utf8')) as { waitMs?: unknown } | null;
      if (typeof parsed?.waitMs === 'number') wait = parsed.waitMs;
    } catch {
      // Not JSON: the owner answers 400 at once.
    }
  }
  return Number.isFinite(wait) ? Math.min(Math.max(0, wait), LONGEST_WAIT_MS) : 0;
}

/** What the forwarder answered itself, as the log says it (the owner's answers are its own). */
const REFUSALS: Partial<
  Record<ForwardOutcome, { code: 'OWNER_MOVING' | 'OWNER_UNAVAILABLE'; reason: string }>
> = {
  loop_refused: {
    code: 'OWNER_MOVING',
    reason: 'the request was forwarded already: the group moves',
  },
  owner_unavailable: { code: 'OWNER_UNAVAILABLE', reason: 'the owning replica cannot be reached' },
  owner_timeout: { code: 'OWNER_UNAVAILABLE', reason: 'the owning replica did not answer in time' },
  owner_suspect: { code: 'OWNER_UNAVAILABLE', reason: 'the owning replica is not answering' },
};

/** Logs a 503 the forwarder answered itself as any expected refusal (info, rate-limited). */
function logRefusal(
  services: Services,
  req: IncomingMessage,
  requestId: string,
  outcome: ForwardOutcome,
  owner: string,
): void {
  const refusal = REFUSALS[outcome];
  if (refusal === undefined) return;
  const path = (req.url ?? '/').split('?')[0] as string;
  const group = /\/streams\/([^/]+)\/groups\/([^/]+)/.exec(path);
  const decoded = (part: string | undefined) => {
    try {
      return part === undefined ? null : decodeURIComponent(part);
    } catch {
      return part ?? null;
    }
  };
  logRequestFailure(
    services,
    {
      method: req.method ?? '',
      path,
      requestId,
      streamPrefix: decoded(group?.[1]),
      consumerGroup: decoded(group?.[2]),
    },
    503,
    refusal.code,
    new CoordinatorError(refusal.code, `${refusal.reason} (owner ${owner})`),
  );
}
