import type { IncomingMessage, ServerResponse } from 'node:http';
import { assertGroupPermitted } from './auth/group-scope.js';
import { principalOfRequest } from './auth/passport.js';
import { assertAnyRole } from './auth/roles.js';
import type { z } from 'zod';
import { OWNER_HEADER, OWNER_URL_HEADER } from '../actors/ownership/forwarder.js';
import type { HeartbeatReply } from '../machines/protocol.js';
import {
  acceptForwarded,
  forwardMoved,
  groupOwnerOf,
  lateForwardError,
  ownerUrlOf,
} from './forwarding.js';
import { assertJsonContentType, errorResult, parseJsonText, requestIdOf } from './pipeline.js';
import { validate, type HandlerResult } from './route.js';
import type { SteadyTicket } from '../actors/types.js';
import {
  answerAgain,
  answerHeartbeat,
  HEARTBEAT_PATH,
  HEARTBEAT_ROLES,
  heartbeatBodySchema,
} from './routes/consumer.js';
import { PacedWrites } from './paced-writes.js';
import { groupParamsSchema } from './schemas.js';
import { toErrorResponse } from './errors.js';
import type { Services } from './services.js';

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

/** An error of reading the body, shaped like body-parser's (see `toErrorResponse`). */
function bodyError(message: string, type: string, status: number): Error {
  return Object.assign(new Error(message), { type, status });
}

/**
 * Reads the whole body, bounded like `express.raw({ limit })`: past the limit (declared or
 * received) the rest is drained and `done` gets the error body-parser raises, so
 * `toErrorResponse` maps it to the same 413 PAYLOAD_TOO_LARGE. Called back once (no promise:
 * a steady heartbeat is answered in the same turn as its body's end).
 */
function readBody(
  req: IncomingMessage,
  maxBytes: number,
  done: (error: Error | null, bytes: Buffer) => void,
): void {
  let tooLarge = Number(req.headers['content-length']) > maxBytes;
  let size = 0;
  let chunks: Buffer[] = [];
  let finished = false;
  req.on('data', (chunk: Buffer) => {
    if (tooLarge) return;
    size += chunk.length;
    if (size > maxBytes) {
      tooLarge = true;
      chunks = [];
    } else {
      chunks.push(chunk);
    }
  });
  req.on('end', () => {
    finished = true;
    if (tooLarge) {
      done(bodyError('request entity too large', 'entity.too.large', 413), EMPTY);
    } else {
      done(null, chunks.length === 1 && chunks[0] ? chunks[0] : Buffer.concat(chunks, size));
    }
  });
  // A request stream fails or closes early only when the client went away (node reports it
  // as an `aborted` ECONNRESET error): as raw-body does, a 400-class abort, not a failure.
  const aborted = () => {
    if (finished) return;
    finished = true;
    done(bodyError('request aborted', 'request.aborted', 400), EMPTY);
  };
  req.on('error', aborted);
  req.on('close', aborted);
}

const EMPTY = Buffer.alloc(0);

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
 * A map that keeps what was used recently, bounded: entries go into the current generation;
 * when it is full (entries, or characters of key), it becomes the previous one and the one
 * before is dropped. A hit in the previous generation moves the entry forward.
 *
 * With `rest`, a map that does not hold what is asked of it stops taking entries for a while:
 * when a generation fills with fewer than a quarter as many hits as entries (the first one after
 * it was made or rested excepted: first sightings fill it; more distinct keys cycle through
 * than it holds: 100,000 members' heartbeat bodies, docs/BENCHMARKS.md), the next
 * {@link REST_GENERATIONS} generations' worth of `set`s are skipped, then it tries again. Each
 * entry set and dropped before it is asked for again outlives a few young-generation GCs and
 * dies in the old generation, which a replica holding a large heap pays for in major GCs; an
 * entry not remembered costs only what remembering would have saved.
 */
export class RecentMap<V> {
  private current = new Map<string, V>();
  private previous = new Map<string, V>();
  private chars = 0;
  /** Hits since the current generation began. */
  private hits = 0;
  /** `set`s still to skip (resting after a generation that was mostly missed). */
  private resting = 0;
  /**
   * The generation filling now is the first since the map was made or rested: it was filled by
   * first sightings, not judged by its hits.
   */
  private first = true;

  constructor(
    private readonly maxEntries: number,
    private readonly maxChars: number,
    private readonly options: { readonly rest?: boolean } = {},
  ) {}

  get(key: string): V | undefined {
    const value = this.current.get(key);
    if (value !== undefined) {
      this.hits++;
      return value;
    }
    const old = this.previous.get(key);
    if (old !== undefined) {
      this.hits++;
      this.set(key, old);
    }
    return old;
  }

  set(key: string, value: V): void {
    if (this.resting > 0) {
      this.resting--;
      return;
    }
    if (this.current.size >= this.maxEntries || this.chars + key.length > this.maxChars) {
      const missed = !this.first && this.hits < this.current.size / 4;
      this.previous = this.current;
      this.current = new Map();
      this.chars = 0;
      this.hits = 0;
      this.first = false;
      if (missed && this.options.rest === true) {
        this.resting = REST_GENERATIONS * this.maxEntries;
        this.first = true;
        return;
      }
    }
    this.current.set(key, value);
    this.chars += key.length;
  }
}

/** How many generations' worth of `set`s a resting {@link RecentMap} skips. */
export const REST_GENERATIONS = 8;

/** What a heartbeat URL means: its path, raw parameters and, when they are valid, the validated ones. */
interface HeartbeatRoute {
  readonly path: string;
  readonly raw: Readonly<Record<string, string>>;
  /** Null when the parameters are not valid: validated (and refused) on every request. */
  readonly params: GroupParams | null;
  /** The steady heartbeats remembered, by their body's text (see {@link SteadyMemo}). */
  readonly memos: Map<string, SteadyMemo>;
  /** Each member's last steady answer. */
  readonly members: Map<string, SteadyMemo>;
  /** The group's owner (`X-Coord-Owner`) as last looked up, and the owners' version then. */
  owner: string | null;
  /** That owner's advertised URL (`X-Coord-Owner-Url`), null when not known. */
  ownerUrl: string | null;
  ownersVersion: number;
}

/**
 * A member's last steady answer (its JSON, reused while the member is told the same thing) and
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
 * it keeps rebuilding them. Sized for the capacity goal (10,000 groups on one replica, issue
 * 10) with room to spare.
 */
export const REMEMBERED_ROUTES = { entries: 16_384, chars: 4 << 20 } as const;

/** Members a route remembers steady heartbeats of beyond its group's size; past it, it starts over. */
const REMEMBERED_MEMOS_SLACK = 64;

type GroupParams = z.infer<typeof groupParamsSchema>;
type HeartbeatBody = z.infer<typeof heartbeatBodySchema>;

/** Bodies longer than this are not remembered (steady heartbeats are a few hundred bytes). */
const REMEMBERED_BODY_MAX = 4_096;

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}

/**
 * The heartbeat lean path (docs/architecture.md#the-heartbeat-fast-path): serves only `POST` on the canonical heartbeat URL,
 * with the steps and answers of the express pipeline in the same order — request id, bounded
 * raw body (413), JSON (415/400), bearer token through `TokenService` and its verified-token
 * cache (401), role CONSUMER (403), the route's zod schemas (400), the token's group scope (403), then the heartbeat itself
 * through the function the express route calls ({@link answerHeartbeat}). Bodies with a
 * `Content-Encoding` (which express inflates) are left to express. The one difference: no
 * `ETag` header (express adds a weak one to every body; it means nothing on a POST answer).
 *
 * What the steady heartbeat repeats is worked out once: a URL's match and validated
 * parameters, and a body text's validated heartbeat (both decided by the text alone, so
 * remembering them changes no answer; a body is remembered only once it was validated for an
 * authenticated caller), and a member's steady heartbeat with its answer ({@link SteadyMemo}:
 * answered again while the coordinator says its decision holds). A steady heartbeat is answered
 * in the turn its body ends, its headers written in one `writeHead`.
 */
export function createHeartbeatFastPath(services: Services): HeartbeatFastPath {
  const maxBytes = services.settings.limits['max-body-bytes'];
  const routes = new RecentMap<HeartbeatRoute>(REMEMBERED_ROUTES.entries, REMEMBERED_ROUTES.chars);
  const bodies = new RecentMap<HeartbeatBody>(16_384, 4 << 20, { rest: true });
  /** The last Content-Type found to be JSON (it is the same on nearly every request). */
  let jsonType: string | undefined;
  /** Answers decided after their request was read, written a little per turn of the loop. */
  const paced = new PacedWrites();

  function routeOf(url: string): HeartbeatRoute | null {
    const known = routes.get(url);
    if (known !== undefined) return known;
    const raw = matchHeartbeat(url);
    if (!raw) return null;
    const query = url.indexOf('?');
    const parsed = groupParamsSchema.safeParse(raw);
    const route: HeartbeatRoute = {
      path: query === -1 ? url : url.slice(0, query),
      raw: deepFreeze(raw),
      params: parsed.success ? deepFreeze(parsed.data) : null,
      memos: new Map(),
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
    const headers =
      p.owner === null
        ? ['X-Request-Id', p.requestId, FAST_PATH_HEADER, 'fast']
        : ['X-Request-Id', p.requestId, FAST_PATH_HEADER, 'fast', OWNER_HEADER, p.owner];
    if (p.owner !== null && p.route.ownerUrl !== null) {
      headers.push(OWNER_URL_HEADER, p.route.ownerUrl);
    }
    headers.push('Content-Type', JSON_CONTENT_TYPE, 'Content-Length', length);
    res.writeHead(200, headers);
    res.end(json);
  }

  /** Every other answer: forwarded to the owner, or the error as express gives it. */
  async function refuse(p: Pending, error: unknown, bytes: Buffer | null): Promise<void> {
    const { req, res, route, requestId } = p;
    if (!res.headersSent) {
      res.setHeader('X-Request-Id', requestId);
      res.setHeader(FAST_PATH_HEADER, 'fast');
      // Who owns the group is for callers it admits, not for a 401/403.
      const { status } = toErrorResponse(error, requestId);
      const admitted = status !== 401 && status !== 403;
      if (admitted && p.owner !== null) res.setHeader(OWNER_HEADER, p.owner);
      if (admitted && p.owner !== null && route.ownerUrl !== null)
        res.setHeader(OWNER_URL_HEADER, route.ownerUrl);
    }
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

  /** The body's validated heartbeat, remembered by its text (unless too long to). */
  function validated(text: string | null, body: unknown): HeartbeatBody {
    const heartbeat = validate(heartbeatBodySchema, body ?? {}, 'body');
    if (text !== null) bodies.set(text, deepFreeze(heartbeat));
    return heartbeat;
  }

  /**
   * The steps after the body, in the express pipeline's order. A body remembered with its
   * steady answer ({@link SteadyMemo}) was valid JSON and a valid heartbeat: those two steps
   * would pass, and are skipped.
   */
  function serve(p: Pending, bytes: Buffer): void {
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
        const contentType = req.headers['content-type'];
        if (contentType !== jsonType || contentType === undefined) {
          assertJsonContentType(contentType);
          jsonType = contentType;
        }
        const decoded = bytes.toString('utf8');
        if (decoded.length <= REMEMBERED_BODY_MAX) {
          text = decoded;
          memo = route.memos.get(text);
          if (memo === undefined) known = bodies.get(text);
        }
        if (known === undefined && memo === undefined) body = parseJsonText(decoded);
      }
      const caller = principalOfRequest(services.tokens, req);
      principal = caller.name;
      assertAnyRole(caller, HEARTBEAT_ROLES);
      const params = route.params ?? validate(groupParamsSchema, route.raw, 'path');
      let heartbeat: HeartbeatBody;
      if (memo === undefined) {
        heartbeat = known ?? validated(text, body);
        assertGroupPermitted(caller, params.stream, params.group);
      } else {
        // A memo's text is a valid heartbeat: its validation, which would pass, comes after.
        assertGroupPermitted(caller, params.stream, params.group);
        if (memo.principal === principal) {
          const ticket = memo.ticket.deref();
          if (ticket !== undefined && answerAgain(services, ticket)) {
            answer(p, memo);
            return;
          }
          forget(route, memo);
        }
        heartbeat = validated(memo.text, parseJsonText(memo.text));
      }
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

  return {
    flushed: () => paced.flushed(),
    handle(req, res) {
      const url = req.url;
      if (req.method !== 'POST' || url === undefined || !url.startsWith(PREFIX)) return false;
      const encoding = req.headers['content-encoding'];
      if (encoding !== undefined && encoding.toLowerCase() !== 'identity') return false;
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
      const pending: Pending = { req, res, route, requestId, owner, forwarded };
      readBody(req, maxBytes, (error, bytes) => {
        if (error) fail(pending, error, null);
        else serve(pending, bytes);
      });
      return true;
    },
  };
}
