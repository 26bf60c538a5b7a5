import http from 'node:http';
import type {
  IncomingHttpHeaders,
  IncomingMessage,
  OutgoingHttpHeaders,
  ServerResponse,
} from 'node:http';
import https from 'node:https';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { CoordinatorError } from '../../errors.js';
import type { Logger } from '../../observability/logger.js';
import type { Metrics } from '../../observability/metrics.js';
import { urlOn } from '../../client/url-on.js';

/** Set on a forwarded request to the id of the replica that forwarded it: the loop guard. */
export const FORWARDED_BY_HEADER = 'x-coord-forwarded-by';
/**
 * HMAC-SHA256 (key: the deployment's shared JWT secret) over the forwarding replica's id, the
 * method, the URL and the request id: the owner honours {@link FORWARDED_BY_HEADER} (and so does
 * not audit the request again) only when this signature is valid.
 */
export const FORWARD_SIGNATURE_HEADER = 'x-coord-forward-signature';
/**
 * Until when (epoch ms) the owner may start on a forwarded request: the forwarder answers 503
 * `OWNER_UNAVAILABLE` at its answer timeout, so a request a paused owner finds in its socket
 * after it resumed must not run any more (the caller was told it failed). Signed with the rest.
 */
export const FORWARD_DEADLINE_HEADER = 'x-coord-forward-deadline';
/**
 * How far the replicas' clocks may disagree before a forwarded request counts as late: keep
 * them within this (NTP keeps them within milliseconds), docs/operations.md#a-paused-owner.
 */
export const FORWARD_CLOCK_SKEW_MS = 1_000;
/** Set on every group response: the replica id of the group's owner. */
export const OWNER_HEADER = 'x-coord-owner';
/**
 * The owner's advertised URL, next to its id on every group response: clients may send the
 * group's next requests straight there (docs/operations.md#owner-direct-clients).
 */
export const OWNER_URL_HEADER = 'x-coord-owner-url';
/**
 * Set on every answer a replica gives: its own id. On a forwarded answer it names the replica
 * that relayed it, and `X-Coord-Owner` the one that decided: clients and operators behind a
 * load balancer see which replica they reached (docs/operations.md#owner-direct-clients).
 */
export const REPLICA_HEADER = 'x-coord-replica';

/**
 * What became of a forward: the values of `coord_forwarded_requests_total{outcome}`, and
 * `invalid_target`, which is not counted there (nothing was forwarded).
 */
export type ForwardOutcome =
  | 'forwarded'
  /** The owner could not be reached (connection refused, reset, not accepted in time): 503. */
  | 'owner_unavailable'
  /** No answer (response headers) from the owner within the answer deadline: 503, owner suspect. */
  | 'owner_timeout'
  /** The owner is suspect (it left a request unanswered lately): 503 at once, nothing sent. */
  | 'owner_suspect'
  | 'loop_refused'
  /** The client left before the response ended (an SSE stream closed, say). */
  | 'client_closed'
  /** The owner broke off in the middle of the response. */
  | 'aborted'
  /**
   * Not forwarded, not counted: the request target is not a path (absolute form), answered
   * 400 here. A client's mistake, not a disagreement between replicas (`loop_refused`).
   */
  | 'invalid_target';

/** The replica a request goes to: its id and `coordinator.http.advertised-url`. */
export interface ForwardTarget {
  readonly id: string;
  readonly url: string;
}

/**
 * Why a forward was answered 503 `OWNER_UNAVAILABLE` (`details.reason` of the answer, beside
 * `details.owner` and `details.ownerUrl`, the owner's id and advertised URL):
 * `unreachable` (no connection: nothing reached the owner), `no-answer` (sent, but no answer in
 * time: the owner may have done it), `suspect` (not sent: the owner left another request
 * unanswered lately).
 */
export type UnavailableReason = 'unreachable' | 'no-answer' | 'suspect';

/** What one {@link Forwarder.forward} call adds to the forwarder's own options. */
export interface ForwardCall {
  /**
   * The wait the request asked for (a held heartbeat's or a routing long poll's `waitMs`): the
   * owner's answer may come that much later, so it is added to the answer deadline.
   */
  readonly waitMs?: number;
  /**
   * Whether the owner is still a live replica (in the registry): a suspicion of a replica that
   * left ends, its probes stop. @default always
   */
  readonly isLive?: () => boolean;
}

/** Options of {@link Forwarder}. */
export interface ForwarderOptions {
  /** This replica's id: what the loop-guard header carries. */
  readonly replicaId: string;
  /**
   * Writes an error response in the API's error shape (the http layer's one mapping of codes to
   * statuses and bodies); called before any byte of the response was sent.
   */
  readonly writeError: (res: ServerResponse, error: CoordinatorError) => void;
  /** Time to open a connection to the owner. @default 1000 */
  readonly connectTimeoutMs?: number;
  /**
   * How long the owner has to start its answer (its response headers), from when the forward
   * began; a request that asked to be held gets its wait on top ({@link ForwardCall.waitMs}).
   * Then the request is answered 503 `OWNER_UNAVAILABLE` and the owner is suspect
   * (`coordinator.forwarding.answer-timeout`, docs/operations.md#a-paused-owner). @default 2000
   */
  readonly answerTimeoutMs?: number;
  /**
   * How long an event stream may go without a byte from the owner, which writes a keep-alive
   * comment every 15 s: past it the stream is closed and the owner suspect. Any other response
   * that stops half-way gets {@link answerTimeoutMs}. @default 15000 + answerTimeoutMs
   */
  readonly streamIdleMs?: number;
  /** Time between two probes of a suspect owner (each given answerTimeoutMs). @default 500 */
  readonly probeIntervalMs?: number;
  /**
   * What a probe asks a suspect owner for; any HTTP answer ends the suspicion.
   * @default '/coord/v1/monitoring/health/live' (answers while the process serves, store or not)
   */
  readonly probePath?: string;
  /** Where a suspicion's start (warn) and end (info) are logged: once per episode and owner. */
  readonly logger?: Pick<Logger, 'warn' | 'info'>;
  /** `Retry-After` of a 503 this forwarder answers. @default 1 */
  readonly retryAfterSeconds?: number;
  readonly metrics?: Pick<Metrics, 'forwardedRequests'>;
  /** Key of {@link FORWARD_SIGNATURE_HEADER} (the shared JWT secret); unset: not signed. */
  readonly secret?: string;
}

/**
 * Called with the status before a response is written (the owner's, or the forwarder's own 503);
 * may replace it with an error.
 */
export type BeforeResponse = (status: number) => Promise<CoordinatorError | null>;

/** The signature a forwarder puts on a request ({@link FORWARD_SIGNATURE_HEADER}). */
export function signatureOf(
  secret: string,
  forwardedBy: string,
  method: string,
  url: string,
  requestId: string,
  deadline: string,
): string {
  return createHmac('sha256', secret)
    .update(`${forwardedBy}\n${method}\n${url}\n${requestId}\n${deadline}`)
    .digest('base64url');
}

/**
 * Whether `req` was forwarded by a replica of this deployment: its forwarded-by header is
 * signed with the shared secret. A header a client made up is not trusted.
 */
export function isTrustedForward(req: IncomingMessage, secret: string): boolean {
  const by = req.headers[FORWARDED_BY_HEADER];
  const given = req.headers[FORWARD_SIGNATURE_HEADER];
  const deadline = req.headers[FORWARD_DEADLINE_HEADER];
  if (typeof by !== 'string' || typeof given !== 'string' || typeof deadline !== 'string') {
    return false;
  }
  const requestId = req.headers['x-request-id'];
  const expected = signatureOf(
    secret,
    by,
    req.method ?? '',
    req.url ?? '',
    typeof requestId === 'string' ? requestId : '',
    deadline,
  );
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * Whether a trusted forwarded request came too late to run: its forwarder has answered the
 * caller 503 already (the owner was paused, or its socket stalled), so running it now would
 * do what the caller was told failed, possibly over a newer change.
 */
export function isLateForward(req: IncomingMessage, now = Date.now()): boolean {
  const deadline = Number(req.headers[FORWARD_DEADLINE_HEADER]);
  return !Number.isFinite(deadline) || now > deadline + FORWARD_CLOCK_SKEW_MS;
}

/**
 * The path and query of a request target, or null for anything else: an absolute-form target
 * (`http://host/...`) must never choose where a request is forwarded.
 */
function originFormOf(url: string | undefined): string | null {
  if (url === undefined || !url.startsWith('/') || url.startsWith('//')) return null;
  return url;
}

/** Hop-by-hop headers (RFC 9110 §7.6.1) and `host`: never passed on. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
]);

function endToEnd(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const named = new Set(
    String(headers.connection ?? '')
      .split(',')
      .map((name) => name.trim().toLowerCase()),
  );
  const result: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name) && !named.has(name)) result[name] = value;
  }
  return result;
}

/** Whether a request carries a body (one that is streamed, so cannot be sent twice). */
function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** One suspect owner: it left a request unanswered; probed until it answers or leaves. */
interface Suspicion {
  readonly url: string;
  /** Monotonic ms when it began. */
  readonly since: number;
  isLive: () => boolean;
  timer: NodeJS.Timeout | null;
  probe: http.ClientRequest | null;
}

const ALWAYS = () => true;

/** Messages of the 503 `OWNER_UNAVAILABLE` answers, by reason. */
function unavailableMessage(reason: UnavailableReason, deadlineMs: number): string {
  switch (reason) {
    case 'unreachable':
      return 'the owning replica cannot be reached';
    case 'no-answer':
      return (
        `the owning replica did not answer within ${deadlineMs} ms ` +
        '(the request may have reached it)'
      );
    case 'suspect':
      return 'the owning replica is not answering; try again shortly';
  }
}

/**
 * Forwards a request that reached a replica not owning its group to the owner (README.md,
 * "Running several replicas"): one hop (a request that was already forwarded is refused with
 * 503 `OWNER_MOVING`, never sent on), over keep-alive connections between replicas, the body
 * streamed as received and the response streamed back as it comes (SSE and long polls pass
 * through chunk by chunk). An owner that cannot be reached gives 503 `OWNER_UNAVAILABLE` with
 * `Retry-After`, never a wrong answer.
 *
 * No request waits on an owner that does not answer (docs/operations.md#a-paused-owner): a
 * paused process still accepts connections, so the owner's answer (its response headers) must
 * come within {@link ForwarderOptions.answerTimeoutMs} (plus the wait a held heartbeat or long
 * poll asked for), and a response, once begun, must not stall (an event stream gets its
 * keep-alive period). Otherwise the request is answered 503 `OWNER_UNAVAILABLE` and the owner
 * becomes *suspect*: the requests in flight to it that have no answer yet are answered so too,
 * and new ones are answered at once without being sent, until a probe (every
 * {@link ForwarderOptions.probeIntervalMs}) gets an answer from it or it leaves the live set.
 */
export class Forwarder {
  private readonly httpAgent = new http.Agent({ keepAlive: true, scheduling: 'lifo' });
  private readonly httpsAgent = new https.Agent({ keepAlive: true, scheduling: 'lifo' });
  private readonly connectTimeoutMs: number;
  private readonly retryAfterSeconds: number;
  private readonly answerTimeoutMs: number;
  private readonly streamIdleMs: number;
  private readonly probeIntervalMs: number;
  private readonly probePath: string;
  /** Suspect owners by replica id. */
  private readonly suspects = new Map<string, Suspicion>();
  /** Per owner id, how to cut each forward to it that has no answer yet. */
  private readonly unanswered = new Map<string, Set<() => void>>();

  constructor(private readonly options: ForwarderOptions) {
    this.connectTimeoutMs = options.connectTimeoutMs ?? 1_000;
    this.retryAfterSeconds = options.retryAfterSeconds ?? 1;
    this.answerTimeoutMs = options.answerTimeoutMs ?? 2_000;
    this.streamIdleMs = options.streamIdleMs ?? 15_000 + this.answerTimeoutMs;
    this.probeIntervalMs = options.probeIntervalMs ?? 500;
    this.probePath = options.probePath ?? '/coord/v1/monitoring/health/live';
    if (!(this.answerTimeoutMs > 0)) throw new RangeError('the answer timeout must be above 0');
  }

  /** Whether `req` already came through another replica (it must not be forwarded again). */
  static wasForwarded(req: IncomingMessage): boolean {
    return req.headers[FORWARDED_BY_HEADER] !== undefined;
  }

  /** Whether replica `id` is suspect: requests for its groups are answered 503 at once. */
  isSuspect(id: string): boolean {
    return this.suspects.has(id);
  }

  /**
   * Sends `req` to `owner` and streams the answer into `res`. `body` is for a request whose
   * stream was already read (the raw bytes as received); otherwise the stream is piped.
   * `beforeResponse` is called with the status before any answer is written, the forwarder's
   * own 503s included (an admin request is audited once whatever happens). Resolves with the
   * outcome once the response is finished or abandoned; never rejects.
   */
  forward(
    req: IncomingMessage,
    res: ServerResponse,
    owner: ForwardTarget,
    body?: Buffer,
    beforeResponse?: BeforeResponse,
    call: ForwardCall = {},
  ): Promise<ForwardOutcome> {
    if (Forwarder.wasForwarded(req)) {
      this.refuse(
        res,
        owner,
        new CoordinatorError(
          'OWNER_MOVING',
          'the group is moving between replicas: retry shortly',
          { details: { forwardedBy: String(req.headers[FORWARDED_BY_HEADER]) } },
        ),
      );
      return Promise.resolve(this.count('loop_refused'));
    }
    if (originFormOf(req.url) === null) {
      // An absolute-form target (`http://host/…`) never decides where a request goes.
      this.options.writeError(
        res,
        new CoordinatorError(
          'VALIDATION_FAILED',
          'the request target must be a path (origin form)',
        ),
      );
      return Promise.resolve('invalid_target');
    }
    const suspicion = this.suspicionOf(owner);
    if (suspicion) {
      if (call.isLive) suspicion.isLive = call.isLive;
      return this.refuseUnavailable(res, owner, 'suspect', 0, beforeResponse).then(() =>
        this.count('owner_suspect'),
      );
    }
    return new Promise((resolve) => {
      let settled = false;
      const settle = (outcome: ForwardOutcome) => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        clearTimeout(idle);
        stopWaiting();
        resolve(this.count(outcome));
      };
      const path = originFormOf(req.url)!;
      const target = urlOn(owner.url, path);
      const secure = target.protocol === 'https:';
      const headers = endToEnd(req.headers);
      headers[FORWARDED_BY_HEADER] = this.options.replicaId;
      const startBy = String(Date.now() + this.answerTimeoutMs);
      headers[FORWARD_DEADLINE_HEADER] = startBy;
      if (this.options.secret !== undefined) {
        const requestId = req.headers['x-request-id'];
        headers[FORWARD_SIGNATURE_HEADER] = signatureOf(
          this.options.secret,
          this.options.replicaId,
          req.method ?? '',
          path,
          typeof requestId === 'string' ? requestId : '',
          startBy,
        );
      }
      const from = req.socket.remoteAddress;
      if (from) {
        const before = req.headers['x-forwarded-for'];
        headers['x-forwarded-for'] = before ? `${String(before)}, ${from}` : from;
      }
      // A request with no body, or whose body was already read, can be sent again.
      const replayable = body !== undefined || !hasBody(req);
      let upstream!: http.ClientRequest;
      /** The owner's response headers came: from here on only a stalled body is cut. */
      let answered = false;
      /** Why the forwarder itself broke the upstream request off, if it did. */
      let cutFor: 'no-answer' | 'unreachable' | null = null;

      // The answer deadline covers the whole forward (a retry included): a paused owner accepts
      // connections and reads nothing, so only a clock ends the wait.
      const deadlineMs = Math.max(0, call.waitMs ?? 0) + this.answerTimeoutMs;
      const cut = () => {
        if (answered || settled || cutFor !== null) return;
        cutFor = 'no-answer';
        upstream.destroy(new Error(`no answer within ${deadlineMs} ms`));
      };
      const deadline = setTimeout(cut, deadlineMs);
      deadline.unref();
      const waiting = this.unansweredOf(owner.id);
      waiting.add(cut);
      const stopWaiting = () => {
        waiting.delete(cut);
        if (waiting.size === 0 && this.unanswered.get(owner.id) === waiting) {
          this.unanswered.delete(owner.id);
        }
      };
      let idle: NodeJS.Timeout | undefined;

      const send = (retried: boolean) => {
        upstream = (secure ? https : http).request(target, {
          method: req.method,
          headers,
          // The retry goes over a connection of its own, not another possibly stale one.
          agent: retried ? false : secure ? this.httpsAgent : this.httpAgent,
        });
        const current = upstream;

        let connectTimer: NodeJS.Timeout | undefined;
        current.on('socket', (socket) => {
          if (!socket.connecting) return; // a kept-alive connection
          connectTimer = setTimeout(() => {
            if (cutFor !== null) return;
            cutFor = 'unreachable';
            current.destroy(new Error('connect timeout'));
          }, this.connectTimeoutMs);
          socket.once('connect', () => clearTimeout(connectTimer));
        });

        current.on('error', (error: NodeJS.ErrnoException) => {
          clearTimeout(connectTimer);
          if (settled) return; // the client left first: nothing to answer
          // The owner closed an idle kept-alive connection just as this request went out on
          // it: nothing reached the owner's handler, so the request goes again, once.
          if (
            cutFor === null &&
            !retried &&
            replayable &&
            current.reusedSocket &&
            !res.headersSent &&
            !res.destroyed &&
            (error.code === 'ECONNRESET' || error.code === 'EPIPE')
          ) {
            this.options.metrics?.forwardedRequests.inc({ outcome: 'retried' });
            send(true);
            return;
          }
          if (res.headersSent) {
            // Cut mid-response: the client must see a broken response, not a short one.
            res.destroy(error);
            settle('aborted');
            return;
          }
          // Not answered in time, or no connection accepted in time: others wait no longer.
          if (cutFor !== null) this.suspect(owner, call.isLive);
          const reason: UnavailableReason = cutFor === 'no-answer' ? 'no-answer' : 'unreachable';
          stopWaiting();
          void this.refuseUnavailable(res, owner, reason, deadlineMs, beforeResponse, error).then(
            () => settle(reason === 'no-answer' ? 'owner_timeout' : 'owner_unavailable'),
          );
        });

        current.on('response', (answer) => {
          clearTimeout(connectTimer);
          clearTimeout(deadline);
          answered = true;
          stopWaiting();
          this.answeredBy(owner);
          if (!beforeResponse) return passOn(answer);
          beforeResponse(answer.statusCode ?? 502).then(
            (replaced) => {
              if (!replaced) return passOn(answer);
              answer.resume();
              if (!res.headersSent) this.options.writeError(res, replaced);
              settle('forwarded');
            },
            () => passOn(answer),
          );
        });

        if (body !== undefined) current.end(body);
        else if (retried || !hasBody(req)) current.end();
        else req.pipe(current);
      };

      const passOn = (answer: IncomingMessage) => {
        if (res.destroyed) {
          answer.resume();
          return;
        }
        const responseHeaders = endToEnd(answer.headers);
        responseHeaders[OWNER_HEADER] ??= owner.id;
        responseHeaders[OWNER_URL_HEADER] ??= owner.url;
        responseHeaders[REPLICA_HEADER] = this.options.replicaId;
        res.writeHead(answer.statusCode ?? 502, answer.statusMessage, responseHeaders);
        // Headers now, not with the first body chunk: an SSE client sees the stream open.
        res.flushHeaders();
        // A response that stops half-way is cut: an event stream once its keep-alive comments
        // stop coming, any other at the answer timeout (docs/operations.md#a-paused-owner).
        const eventStream = String(answer.headers['content-type'] ?? '').startsWith(
          'text/event-stream',
        );
        const idleMs = eventStream ? this.streamIdleMs : this.answerTimeoutMs;
        let lastByteAt = performance.now();
        const watch = (delayMs: number) => {
          idle = setTimeout(() => {
            if (settled) return;
            // Held back by a client that reads slowly: not the owner's silence.
            if (answer.isPaused() || res.writableNeedDrain) lastByteAt = performance.now();
            const quietMs = performance.now() - lastByteAt;
            if (quietMs < idleMs) return watch(idleMs - quietMs);
            this.suspect(owner, call.isLive);
            answer.destroy();
            res.destroy();
            settle('aborted');
          }, delayMs);
          idle.unref();
        };
        watch(idleMs);
        answer.on('data', () => {
          lastByteAt = performance.now();
        });
        answer.pipe(res);
        answer.on('end', () => settle('forwarded'));
        // The owner went away mid-response (without a listener this error would crash us).
        answer.on('error', () => undefined);
        answer.on('close', () => {
          if (answer.complete) return;
          res.destroy();
          settle('aborted');
        });
      };

      // The client went away (an SSE tab closed): stop the owner's side too.
      res.on('close', () => {
        if (res.writableFinished) return;
        settle('client_closed');
        upstream.destroy();
      });

      send(false);
    });
  }

  /** Closes the kept-alive connections and stops probing (shutdown). */
  close(): void {
    for (const [id, suspicion] of [...this.suspects]) this.endSuspicion(id, suspicion, null);
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }

  private refuse(res: ServerResponse, owner: ForwardTarget, error: CoordinatorError): void {
    res.setHeader('Retry-After', String(this.retryAfterSeconds));
    res.setHeader(OWNER_HEADER, owner.id);
    res.setHeader(OWNER_URL_HEADER, owner.url);
    this.options.writeError(res, error);
  }

  /**
   * Answers 503 `OWNER_UNAVAILABLE` (`details: {owner, reason}`), after `beforeResponse` was
   * told (its error, if it returns one, is answered instead: the audit could not be written).
   */
  private async refuseUnavailable(
    res: ServerResponse,
    owner: ForwardTarget,
    reason: UnavailableReason,
    deadlineMs: number,
    beforeResponse?: BeforeResponse,
    cause?: unknown,
  ): Promise<void> {
    const error = new CoordinatorError(
      'OWNER_UNAVAILABLE',
      unavailableMessage(reason, deadlineMs),
      {
        ...(cause === undefined ? {} : { cause }),
        // The owner's URL, so that a client with several base URLs does not turn to the owner
        // itself next (docs/operations.md#a-paused-owner).
        details: { owner: owner.id, ownerUrl: owner.url, reason },
      },
    );
    let replaced: CoordinatorError | null = null;
    if (beforeResponse) replaced = await beforeResponse(503).catch(() => null);
    if (res.headersSent || res.destroyed) return;
    this.refuse(res, owner, replaced ?? error);
  }

  private suspicionOf(owner: ForwardTarget): Suspicion | null {
    const known = this.suspects.get(owner.id);
    if (known === undefined) return null;
    if (known.url === owner.url) return known;
    // The replica is registered at another URL now: that one has not failed yet.
    this.endSuspicion(owner.id, known, null);
    return null;
  }

  private unansweredOf(id: string): Set<() => void> {
    let waiting = this.unanswered.get(id);
    if (waiting === undefined) {
      waiting = new Set();
      this.unanswered.set(id, waiting);
    }
    return waiting;
  }

  /**
   * Marks `owner` suspect (once per episode): the forwards to it still waiting for an answer are
   * answered 503 now, new ones at once, and a probe asks it every probe interval.
   */
  private suspect(owner: ForwardTarget, isLive: (() => boolean) | undefined): void {
    const known = this.suspicionOf(owner);
    if (known) return;
    const suspicion: Suspicion = {
      url: owner.url,
      since: performance.now(),
      isLive: isLive ?? ALWAYS,
      timer: null,
      probe: null,
    };
    this.suspects.set(owner.id, suspicion);
    this.options.logger?.warn(
      'owner replica does not answer: its groups are answered 503 OWNER_UNAVAILABLE until it does',
      { owner: owner.id, url: owner.url, answerTimeoutMs: this.answerTimeoutMs },
    );
    for (const cut of [...(this.unanswered.get(owner.id) ?? [])]) cut();
    this.probeLater(owner.id, suspicion);
  }

  /** An answer came from `owner`: a suspicion of it ends. */
  private answeredBy(owner: ForwardTarget): void {
    const known = this.suspects.get(owner.id);
    if (known !== undefined && known.url === owner.url)
      this.endSuspicion(owner.id, known, 'answered');
  }

  private probeLater(id: string, suspicion: Suspicion): void {
    suspicion.timer = setTimeout(() => this.probe(id, suspicion), this.probeIntervalMs);
    suspicion.timer.unref();
  }

  /** One probe of a suspect owner: any HTTP answer in time ends the suspicion. */
  private probe(id: string, suspicion: Suspicion): void {
    suspicion.timer = null;
    if (this.suspects.get(id) !== suspicion) return;
    if (!suspicion.isLive()) {
      this.endSuspicion(id, suspicion, 'left');
      return;
    }
    const target = new URL(this.probePath, suspicion.url);
    // A connection of its own: a paused owner's kernel accepts it and nobody reads it.
    const probe = (target.protocol === 'https:' ? https : http).request(target, {
      method: 'GET',
      agent: false,
    });
    suspicion.probe = probe;
    const timer = setTimeout(
      () => probe.destroy(new Error('no answer to the probe')),
      this.answerTimeoutMs,
    );
    timer.unref();
    probe.on('response', (answer) => {
      clearTimeout(timer);
      // Read to its end on its own connection (closed after it), whatever happens meanwhile.
      if (suspicion.probe === probe) suspicion.probe = null;
      answer.on('error', () => undefined);
      answer.resume();
      if (this.suspects.get(id) === suspicion) this.endSuspicion(id, suspicion, 'answered');
    });
    probe.on('error', () => {
      clearTimeout(timer);
      if (suspicion.probe === probe) suspicion.probe = null;
      if (this.suspects.get(id) === suspicion) this.probeLater(id, suspicion);
    });
    probe.end();
  }

  private endSuspicion(id: string, suspicion: Suspicion, why: 'answered' | 'left' | null): void {
    if (this.suspects.get(id) === suspicion) this.suspects.delete(id);
    if (suspicion.timer !== null) clearTimeout(suspicion.timer);
    suspicion.timer = null;
    const probe = suspicion.probe;
    suspicion.probe = null;
    if (probe && !probe.destroyed) probe.destroy();
    if (why === null) return;
    this.options.logger?.info(
      why === 'answered'
        ? 'owner replica answers again: requests for its groups are forwarded to it'
        : 'suspect owner replica left the live set',
      {
        owner: id,
        url: suspicion.url,
        suspectForMs: Math.round(performance.now() - suspicion.since),
      },
    );
  }

  private count(outcome: ForwardOutcome): ForwardOutcome {
    this.options.metrics?.forwardedRequests.inc({ outcome });
    return outcome;
  }
}
