import type { IncomingMessage, ServerResponse } from 'node:http';
import type { z } from 'zod';
import { OWNER_HEADER, OWNER_URL_HEADER, REPLICA_HEADER } from '../actors/ownership/forwarder.js';
import { replicaTurnBudget } from '../actors/turn-budget.js';
import type { SteadyTicket } from '../actors/types.js';
import { RecentMap } from '../collections/recent-map.js';
import type { HeartbeatReply } from '../machines/protocol.js';
import { principalOfRequest } from './auth/passport.js';
import { toErrorResponse } from './errors.js';
import {
  acceptForwarded,
  forwardMoved,
  forwardTargetOf,
  forwardTo,
  groupOwnerOf,
  lateForwardError,
  ownerShownTo,
  ownerUrlOf,
} from './forwarding.js';
import { PacedWrites } from './paced-writes.js';
import { errorResult, requestIdOf } from './pipeline.js';
import { assertJsonContentType, isEncoded, parseJsonText, readRawBody } from './request-body.js';
import { checkParams, checkRequest, checkRole, checkScope } from './request-checks.js';
import type { HandlerResult } from './route.js';
import {
  answerAgain,
  answerHeartbeat,
  HEARTBEAT_PATH,
  HEARTBEAT_RULES,
  type heartbeatBodySchema,
} from './routes/consumer.js';
import type { groupParamsSchema } from './schemas.js';
import type { Services } from './services.js';

export { RecentMap, REST_GENERATIONS } from '../collections/recent-map.js';

/**
 * Response header set on every response the fast path serves (`X-Coord-Path: fast`), errors
 * included; responses from express do not carry it. Documented in docs/BENCHMARKS.md.
 */
export const FAST_PATH_HEADER = 'X-Coord-Path';

/** A request listener placed in front of express on the same server (docs/architecture.md#the-heartbeat-fast-path). */
export interface HeartbeatFastPath {
  /** Serves the request and returns true when it is a heartbeat; false leaves it to express. */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
  /** Resolves once every answer decided so far is written (see {@link PacedWrites}). */
  flushed(): Promise<void>;
}

/** `/coord/v1/consumer/streams/:stream/groups/:group/heartbeat`, split on `/`. */
const TEMPLATE = HEARTBEAT_PATH.split('/');
/** The literal part before the first parameter: a cheap first test for every request. */
const PREFIX = HEARTBEAT_PATH.slice(0, HEARTBEAT_PATH.indexOf(':'));

/**
 * The path parameters of a heartbeat URL, or null. Express routes case-sensitively and
 * strictly (no trailing slash, docs/decisions.md#one-spelling-per-path), so this matches exactly what its heartbeat route
 * matches; a parameter that is not valid percent-encoding, and an absolute-form URL, are left
 * to express, which answers them (400, or the heartbeat itself).
 */
function matchHeartbeat(url: string): Record<string, string> | null {
  const query = url.indexOf('?');
  const parts = (query === -1 ? url : url.slice(0, query)).split('/');
  if (parts.length !== TEMPLATE.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < TEMPLATE.length; i++) {
    const want = TEMPLATE[i] ?? '';
    const got = parts[i] ?? '';
    if (want.startsWith(':')) {
      if (got.length === 0) return null;
      try {
        params[want.slice(1)] = decodeURIComponent(got);
      } catch {
        return null;
      }
    } else if (want !== got) {
      return null;
    }
  }
  return params;
}

function write(res: ServerResponse, result: HandlerResult): void {
  if (res.headersSent) return;
  for (const [name, value] of Object.entries(result.headers ?? {})) res.setHeader(name, value);
  res.statusCode = result.status;
  if (result.body === undefined) {
    res.end();
    return;
  }
  const json = JSON.stringify(result.body);
  res.setHeader('Content-Type', JSON_CONTENT_TYPE);
  res.setHeader('Content-Length', Buffer.byteLength(json));
  res.end(json);
}

const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/**
 * What a heartbeat URL means: its path, raw parameters and, when they are valid, the validated
 * ones; and the home of the two memos that belong to one group (its owner, its members' steady
 * answers).
 */
interface HeartbeatRoute {
  readonly path: string;
  readonly raw: Readonly<Record<string, string>>;
  /** Null when the parameters are not valid: validated (and refused) on every request. */
  readonly params: GroupParams | null;
  /** The steady heartbeats remembered, by their body's text (see {@link SteadyMemo}). */
  readonly memos: Map<string, SteadyMemo>;
  /** Each member's last steady answer. */
  readonly members: Map<string, SteadyMemo>;
  /**
   * The members with a heartbeat waiting in the intake (how many each): their later heartbeats
   * wait behind it, remembered answer or not, so a member's heartbeats are decided in the order
   * they came.
   */
  readonly waiting: Map<string, number>;
  /**
   * Memo, one job: the group's owner (`X-Coord-Owner`) as of the owners' version
   * (`ReplicaServices.ownersVersion`), so a heartbeat costs no owner lookup while the live
   * replicas stay the same.
   */
  owner: string | null;
  /** That owner's advertised URL (`X-Coord-Owner-Url`), null when not known. */
  ownerUrl: string | null;
  ownersVersion: number;
}

/**
 * Memo, one job: a member's last steady answer (its JSON, reused while the member is told the
 * same thing) and
 * the heartbeat it answered (the capacity goal, docs/BENCHMARKS.md): the same body text from the same principal on
 * the same URL is the same validated request, which `GroupCoordinator.steadyAgain` answers again
 * in O(1) while its decision holds, without the body's parse and validation, the group's and
 * member's lookups, the decision and the reply's encoding. The ticket is held weakly: the
 * coordinator keeps it alive only while its group is served here on the context it was decided
 * on, so a memo never keeps a deleted, moved or changed group in memory (a memo whose ticket is
 * gone is decided anew). One per member, the latest; a route holds at most a few more than its
 * group has members.
 */
interface SteadyMemo {
  readonly json: string;
  readonly length: string;
  /** The heartbeat's body text. */
  readonly text: string;
  readonly principal: string;
  readonly memberId: string;
  readonly ticket: WeakRef<SteadyTicket>;
}

/**
 * Heartbeat URLs remembered, per generation, and characters of them: each route holds its
 * members' steady replies, so a replica must remember the route of every group it serves, or
 * it keeps rebuilding them. Sized for the capacity goal (10,000 groups on one replica,
 * docs/BENCHMARKS.md) with room to spare.
 */
export const REMEMBERED_ROUTES = { entries: 16_384, chars: 4 << 20 } as const;

/** Members a route remembers steady heartbeats of beyond its group's size; past it, it starts over. */
const REMEMBERED_MEMOS_SLACK = 64;

type GroupParams = z.infer<typeof groupParamsSchema>;
type HeartbeatBody = z.infer<typeof heartbeatBodySchema>;

/** Bodies longer than this are not remembered (steady heartbeats are a few hundred bytes). */
const REMEMBERED_BODY_MAX = 4_096;

/** The member a heartbeat's body names, when it is JSON naming one (else null; its checks say why). */
function memberIdIn(text: string | null): string | null {
  if (text === null) return null;
  try {
    const memberId = (JSON.parse(text) as { memberId?: unknown } | null)?.memberId;
    return typeof memberId === 'string' ? memberId : null;
  } catch {
    return null;
  }
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}

/**
 * The heartbeat lean path (docs/architecture.md#the-heartbeat-fast-path): serves only `POST` on
 * the canonical heartbeat URL, through the express pipeline's rules in their order, each the
 * same function express calls: request id, bounded raw body (413), JSON (415/400)
 * (`request-body.ts`), bearer token (401, `principalOfRequest`), role CONSUMER (403), the
 * route's zod schemas (400) and the token's group scope (403) (`request-checks.ts`), then the
 * heartbeat itself ({@link answerHeartbeat}). Bodies with a `Content-Encoding` (which express
 * inflates) are left to express. The one difference: no `ETag` header (express adds a weak one
 * to every body; it means nothing on a POST answer). It is fast by skipping express's routing
 * and middleware, and by what it remembers, each memo with one job:
 *
 * - `routes`: a URL's match and validated parameters (decided by the URL alone), and the home of
 *   the group's owner and steady answers ({@link HeartbeatRoute});
 * - the group's owner per route, as of the owners' version;
 * - a member's last steady answer ({@link SteadyMemo}), answered again while the coordinator
 *   says its decision holds: the steady heartbeat's road;
 * - `bodies`: a body text's validated heartbeat, for the heartbeats no steady answer covers
 *   (held ones, ones the group decides anew), remembered only once every check passed;
 * - and, shared with express, the verified-token cache of `TokenService`, by header text.
 *
 * None of them changes an answer. A steady heartbeat is answered in the turn its body ends, its
 * headers written in one `writeHead`.
 */
export function createHeartbeatFastPath(services: Services): HeartbeatFastPath {
  const maxBytes = services.settings.limits['max-body-bytes'];
  const { replicaId } = services;
  /** Memo: heartbeat URLs (see above). */
  const routes = new RecentMap<HeartbeatRoute>(REMEMBERED_ROUTES.entries, REMEMBERED_ROUTES.chars);
  /**
   * Memo: validated heartbeats by body text (see above); resting when more distinct bodies cycle
   * through than it holds ({@link RecentMap}).
   */
  const bodies = new RecentMap<HeartbeatBody>(16_384, 4 << 20, { rest: true });
  /** The replica's one budget for work that may wait (docs/architecture.md#fairness-between-groups). */
  const budget = replicaTurnBudget;
  /** Answers decided after their request was read, written a little per turn of the loop. */
  const paced = new PacedWrites(budget);
  /**
   * The checks and decisions of heartbeats no steady answer covers, on the same budget: a flood
   * of joins read in one turn is worked through over several, and the steady heartbeats read
   * with it are answered first (docs/architecture.md#fairness-between-groups).
   */
  const intake = new PacedWrites(budget);
  /** Requests taken and not answered yet (decided later, or waiting in the intake): see `flushed`. */
  const unanswered = new Set<ServerResponse>();

  function routeOf(url: string): HeartbeatRoute | null {
    const known = routes.get(url);
    if (known !== undefined) return known;
    const raw = matchHeartbeat(url);
    if (!raw) return null;
    const query = url.indexOf('?');
    const parsed = HEARTBEAT_RULES.params.safeParse(raw);
    const route: HeartbeatRoute = {
      path: query === -1 ? url : url.slice(0, query),
      raw: deepFreeze(raw),
      params: parsed.success ? deepFreeze(parsed.data) : null,
      memos: new Map(),
      waiting: new Map(),
      members: new Map(),
      owner: null,
      ownerUrl: null,
      ownersVersion: -1,
    };
    routes.set(url, route);
    return route;
  }

  /**
   * The group's owner as this replica sees it (`X-Coord-Owner`), looked up again only when the
   * owners may have changed (`ReplicaServices.ownersVersion`).
   */
  function ownerOf(route: HeartbeatRoute): string | null {
    const { stream, group } = route.raw;
    if (!stream || !group) return null;
    const replicas = services.replicas;
    if (replicas === undefined) return groupOwnerOf(services, stream, group);
    const version = replicas.ownersVersion();
    if (route.ownersVersion !== version) {
      route.owner = groupOwnerOf(services, stream, group);
      route.ownerUrl = route.owner === null ? null : ownerUrlOf(services, route.owner);
      route.ownersVersion = version;
    }
    return route.owner;
  }

  /** The request in flight: what its answer needs besides the heartbeat. */
  interface Pending {
    readonly req: IncomingMessage;
    readonly res: ServerResponse;
    readonly route: HeartbeatRoute;
    readonly requestId: string;
    readonly owner: string | null;
    /** Forwarded by another replica (signed): answered sooner when the store is down. */
    readonly forwarded: boolean;
  }

  /**
   * Remembers the steady answer `ticket` to the heartbeat `text` (from `principal`) as its
   * member's last, in place of the one before (whose JSON text is reused when it reads the same).
   */
  function remember(
    route: HeartbeatRoute,
    text: string,
    principal: string,
    ticket: SteadyTicket,
  ): SteadyMemo {
    const { memos, members } = route;
    const { reply } = ticket;
    const json = JSON.stringify(reply);
    const previous = members.get(reply.memberId);
    const same = previous !== undefined && previous.json === json;
    const memo: SteadyMemo = {
      json: same ? previous.json : json,
      length: same ? previous.length : String(Buffer.byteLength(json)),
      text,
      principal,
      memberId: reply.memberId,
      ticket: new WeakRef(ticket),
    };
    if (previous !== undefined) memos.delete(previous.text);
    if (previous === undefined && members.size >= ticket.groupSize + REMEMBERED_MEMOS_SLACK) {
      memos.clear();
      members.clear();
    }
    members.set(reply.memberId, memo);
    memos.set(text, memo);
    return memo;
  }

  /** Forgets a memo whose decision no longer holds. */
  function forget(route: HeartbeatRoute, memo: SteadyMemo): void {
    route.memos.delete(memo.text);
    if (route.members.get(memo.memberId) === memo) route.members.delete(memo.memberId);
  }

  /**
   * The 200 answer, its headers (those the error path sets one by one) in one `writeHead`: the
   * JSON of `heartbeat`, or the remembered JSON of a steady one.
   */
  function reply(p: Pending, answer: HeartbeatReply | SteadyMemo): void {
    const { res } = p;
    if (res.headersSent) return;
    let json: string;
    let length: string;
    if ('ticket' in answer) {
      json = answer.json;
      length = answer.length;
    } else {
      json = JSON.stringify(answer);
      length = String(Buffer.byteLength(json));
    }
    const headers = [
      'X-Request-Id',
      p.requestId,
      FAST_PATH_HEADER,
      'fast',
      REPLICA_HEADER,
      replicaId,
    ];
    if (p.owner !== null) {
      headers.push(OWNER_HEADER, p.owner);
      if (p.route.ownerUrl !== null) headers.push(OWNER_URL_HEADER, p.route.ownerUrl);
    }
    headers.push('Content-Type', JSON_CONTENT_TYPE, 'Content-Length', length);
    res.writeHead(200, headers);
    res.end(json);
  }

  /** The headers of every answer but a 200: who owns the group only to a caller it admits. */
  function preface(p: Pending, admitted: boolean): void {
    const { res, route } = p;
    if (res.headersSent) return;
    res.setHeader('X-Request-Id', p.requestId);
    res.setHeader(FAST_PATH_HEADER, 'fast');
    res.setHeader(REPLICA_HEADER, replicaId);
    if (admitted && p.owner !== null) res.setHeader(OWNER_HEADER, p.owner);
    if (admitted && p.owner !== null && route.ownerUrl !== null)
      res.setHeader(OWNER_URL_HEADER, route.ownerUrl);
  }

  /** Every other answer: forwarded to the owner, or the error as express gives it. */
  async function refuse(p: Pending, error: unknown, bytes: Buffer | null): Promise<void> {
    const { req, res, route, requestId } = p;
    // Who owns the group is for callers it admits: not for a 401/403, nor for a body refused
    // before the token was read unless that token reaches the group.
    const { status } = toErrorResponse(error, requestId);
    preface(
      p,
      ownerShownTo(services, req, null, status, route.raw.stream ?? '', route.raw.group ?? ''),
    );
    // Another replica owns the group: forwarded there, its answer passed on.
    if (await forwardMoved(services, req, res, error, { requestId, body: bytes })) return;
    const group = { streamPrefix: route.raw.stream, consumerGroup: route.raw.group };
    write(
      res,
      errorResult(services, { method: 'POST', path: route.path, requestId, ...group }, error),
    );
  }

  /** Reached only if writing an answer threw (every error is answered): the connection goes. */
  function broken(p: Pending, failure: unknown): void {
    services.logger.error('heartbeat fast path failed', {
      requestId: p.requestId,
      error: String(failure),
    });
    if (!p.res.headersSent) p.res.destroy();
  }

  function answer(p: Pending, answer: HeartbeatReply | SteadyMemo): void {
    try {
      reply(p, answer);
    } catch (failure) {
      broken(p, failure);
    }
  }

  function fail(p: Pending, error: unknown, bytes: Buffer | null): void {
    refuse(p, error, bytes).catch((failure: unknown) => broken(p, failure));
  }

  /**
   * A heartbeat for a group another replica serves (`target`, decided from its URL before its
   * body was read): forwarded at once with its bytes as read, after the checks of its caller
   * that need no body, as express makes them before it forwards (token, role, path, group
   * scope); its body's are the owner's. Nothing is handed to the host here, and it is counted
   * once, as forwarded (`coord_forwarded_requests_total`). The bytes are read, not streamed
   * through: a held heartbeat's `waitMs` in them sets the forward's deadline, and a forward
   * whose body is in hand is sent again when the owner closed an idle connection under it.
   */
  function forwardElsewhere(p: Pending, bytes: Buffer, target: string): void {
    const { req, res, route, requestId } = p;
    try {
      const caller = principalOfRequest(services.tokens, req);
      checkRole(HEARTBEAT_RULES, caller);
      const params = checkParams(HEARTBEAT_RULES, route.raw, route.params ?? undefined);
      checkScope(caller, { params, body: undefined });
    } catch (error) {
      fail(p, error, bytes);
      return;
    }
    preface(p, true);
    forwardTo(services, req, res, target, { requestId, body: bytes }).then(
      // The owner left the live set while the body came in: decided here after all.
      (forwarded) => forwarded || serve(p, bytes),
      (failure: unknown) => broken(p, failure),
    );
  }

  /**
   * The checks after the body, in the express pipeline's order and through the same functions
   * (`request-body.ts`, `request-checks.ts`). A body text remembered with its steady answer
   * ({@link SteadyMemo}) was valid JSON and a valid heartbeat on this URL: those checks would
   * pass, and are skipped; the caller's are not.
   */
  function serve(p: Pending, bytes: Buffer, read: string | null = null): void {
    const { req, route } = p;
    let answered: SteadyTicket | Promise<HeartbeatReply>;
    let text: string | null = null;
    let principal: string;
    let waitMs: number;
    try {
      let body: unknown;
      let known: HeartbeatBody | undefined;
      let memo: SteadyMemo | undefined;
      if (bytes.length > 0) {
        assertJsonContentType(req.headers['content-type']);
        const decoded = read ?? bytes.toString('utf8');
        if (decoded.length <= REMEMBERED_BODY_MAX) {
          text = decoded;
          memo = route.memos.get(text);
          if (memo === undefined) known = bodies.get(text);
        }
        if (known === undefined && memo === undefined) body = parseJsonText(decoded);
      }
      const caller = principalOfRequest(services.tokens, req);
      principal = caller.name;
      if (memo !== undefined && route.params !== null) {
        checkRole(HEARTBEAT_RULES, caller);
        checkScope(caller, { params: route.params, body: undefined });
        if (memo.principal === principal) {
          const ticket = memo.ticket.deref();
          if (ticket !== undefined && answerAgain(services, ticket)) {
            answer(p, memo);
            return;
          }
          forget(route, memo);
        }
        body = parseJsonText(memo.text);
      }
      const { params, body: heartbeat } = checkRequest(
        HEARTBEAT_RULES,
        caller,
        { params: route.raw, body, query: undefined },
        { params: route.params ?? undefined, body: known },
      );
      // Remembered once it passed every check for an authenticated caller (and unless too long),
      // and only a member's: a join's or a leave's body is sent once, and 5,000 joins' bodies
      // kept for nothing were copied through young GCs during a flood.
      if (known === undefined && text !== null && heartbeat.memberEpoch > 0)
        bodies.set(text, deepFreeze(heartbeat));
      waitMs = heartbeat.waitMs ?? 0;
      answered = answerHeartbeat(services, caller, params, heartbeat, p.res);
    } catch (error) {
      fail(p, error, bytes);
      return;
    }
    if (answered instanceof Promise) {
      // Answered 503 STORE_UNAVAILABLE if it waits too long on a store that is down; done
      // before anything else answers it (or forwards it to the group's owner).
      const watch = services.outage?.watch((error) => fail(p, error, bytes), waitMs, p.forwarded);
      answered.then(
        (reply) => {
          watch?.done();
          paced.write(() => answer(p, reply));
        },
        (error: unknown) => {
          watch?.done();
          fail(p, error, bytes);
        },
      );
    } else if (text !== null) {
      answer(p, remember(route, text, principal, answered));
    } else {
      answer(p, answered.reply);
    }
  }

  /**
   * A heartbeat whose body is in: one with a remembered steady answer is served at once (unless
   * an earlier heartbeat of its member waits in the intake); any other (a join, a held
   * heartbeat, one the group decides anew) too while this turn's budget lasts, and otherwise
   * waits for a later turn of the event loop, in arrival order (`intake`, see above). One whose
   * client went away while it waited is not decided: a join would make a member nobody runs.
   */
  function take(p: Pending, bytes: Buffer): void {
    const text = bytes.length > 0 ? bytes.toString('utf8') : null;
    const { waiting } = p.route;
    // Only a body short enough to be remembered can have a remembered answer (see `serve`).
    const memo =
      text === null || text.length > REMEMBERED_BODY_MAX ? undefined : p.route.memos.get(text);
    if (memo !== undefined ? !waiting.has(memo.memberId) : !intake.wouldWait()) {
      // A heartbeat with a remembered steady answer, taken at once: work that may wait now
      // rests between its turns (docs/architecture.md#fairness-between-groups).
      if (memo !== undefined) budget.servedAtOnce();
      serve(p, bytes, text);
      if (!p.res.writableEnded) track(p.res);
      return;
    }
    const memberId = memo?.memberId ?? memberIdIn(text);
    if (memberId !== null) waiting.set(memberId, (waiting.get(memberId) ?? 0) + 1);
    track(p.res);
    services.metrics.deferredHeartbeats.inc();
    intake.write(() => {
      if (memberId !== null) {
        const left = waiting.get(memberId)! - 1;
        if (left === 0) waiting.delete(memberId);
        else waiting.set(memberId, left);
      }
      // Its connection is gone or closing (either side): nobody would read the answer.
      const { socket } = p.req;
      if (!p.res.closed && !socket.destroyed && socket.writable) serve(p, bytes, text);
    });
  }

  function track(res: ServerResponse): void {
    unanswered.add(res);
    res.once('close', () => unanswered.delete(res));
  }

  /** Resolves once every request taken here so far is answered (or its client gone). */
  function allAnswered(): Promise<void> {
    return Promise.all(
      [...unanswered].map(
        (res) =>
          new Promise<void>((resolve) => (res.closed ? resolve() : res.once('close', resolve))),
      ),
    ).then(() => undefined);
  }

  return {
    flushed: () =>
      intake
        .flushed()
        .then(allAnswered)
        .then(() => paced.flushed()),
    handle(req, res) {
      const url = req.url;
      if (req.method !== 'POST' || url === undefined || !url.startsWith(PREFIX)) return false;
      // An encoded body is express's to inflate.
      if (isEncoded(req)) return false;
      const route = routeOf(url);
      if (!route) return false;
      const requestId = requestIdOf(req.headers['x-request-id'] as string | undefined);
      const accepted = acceptForwarded(services, req);
      if (accepted === 'late') {
        // Its forwarder answered the caller already: drop it unread, run nothing.
        const { status, body } = toErrorResponse(lateForwardError(), requestId);
        res.writeHead(status, { 'Content-Type': JSON_CONTENT_TYPE, 'Retry-After': '1' });
        res.end(JSON.stringify(body));
        req.resume();
        return true;
      }
      const forwarded = accepted;
      const owner = ownerOf(route);
      // Decided from the URL before the body is parsed: another replica's group is forwarded.
      const target =
        owner === null || owner === services.replicaId || !route.raw.stream || !route.raw.group
          ? null
          : forwardTargetOf(services, route.raw.stream, route.raw.group, owner);
      const pending: Pending = { req, res, route, requestId, owner, forwarded };
      readRawBody(req, maxBytes, (error, bytes) => {
        if (error) fail(pending, error, null);
        else if (target !== null) forwardElsewhere(pending, bytes, target);
        else take(pending, bytes);
      });
      return true;
    },
  };
}
