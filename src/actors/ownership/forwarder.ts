import http from 'node:http';
import type {
  IncomingHttpHeaders,
  IncomingMessage,
  OutgoingHttpHeaders,
  ServerResponse,
} from 'node:http';
import https from 'node:https';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { CoordinatorError } from '../../errors.js';
import type { Metrics } from '../../observability/metrics.js';

/** Set on a forwarded request to the id of the replica that forwarded it: the loop guard. */
export const FORWARDED_BY_HEADER = 'x-coord-forwarded-by';
/**
 * HMAC-SHA256 (key: the deployment's shared JWT secret) over the forwarding replica's id, the
 * method, the URL and the request id: the owner honours {@link FORWARDED_BY_HEADER} (and so does
 * not audit the request again) only when this signature is valid.
 */
export const FORWARD_SIGNATURE_HEADER = 'x-coord-forward-signature';
/** Set on every group response: the replica id of the group's owner (DESIGN.md §8). */
export const OWNER_HEADER = 'x-coord-owner';

/** Values of `coord_forwarded_requests_total{outcome}`. */
export type ForwardOutcome =
  | 'forwarded'
  | 'owner_unavailable'
  | 'loop_refused'
  /** The client left before the response ended (an SSE stream closed, say). */
  | 'client_closed'
  /** The owner broke off in the middle of the response. */
  | 'aborted';

/** The replica a request goes to: its id and `coordinator.http.advertised-url`. */
export interface ForwardTarget {
  readonly id: string;
  readonly url: string;
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
  /** Time to open a connection to the owner. Not a response timeout: long polls and SSE stay open. @default 1000 */
  readonly connectTimeoutMs?: number;
  /** `Retry-After` of a 503 this forwarder answers. @default 1 */
  readonly retryAfterSeconds?: number;
  readonly metrics?: Pick<Metrics, 'forwardedRequests'>;
  /** Key of {@link FORWARD_SIGNATURE_HEADER} (the shared JWT secret); unset: not signed. */
  readonly secret?: string;
}

/** Called with the owner's status before its response is passed on; may replace it with an error. */
export type BeforeResponse = (status: number) => Promise<CoordinatorError | null>;

function signatureOf(
  secret: string,
  forwardedBy: string,
  method: string,
  url: string,
  requestId: string,
): string {
  return createHmac('sha256', secret)
    .update(`${forwardedBy}\n${method}\n${url}\n${requestId}`)
    .digest('base64url');
}

/**
 * Whether `req` was forwarded by a replica of this deployment: its forwarded-by header is
 * signed with the shared secret. A header a client made up is not trusted.
 */
export function isTrustedForward(req: IncomingMessage, secret: string): boolean {
  const by = req.headers[FORWARDED_BY_HEADER];
  const given = req.headers[FORWARD_SIGNATURE_HEADER];
  if (typeof by !== 'string' || typeof given !== 'string') return false;
  const requestId = req.headers['x-request-id'];
  const expected = signatureOf(
    secret,
    by,
    req.method ?? '',
    req.url ?? '',
    typeof requestId === 'string' ? requestId : '',
  );
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
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

/**
 * Forwards a request that reached a replica not owning its group to the owner (DESIGN.md §8):
 * one hop (a request that was already forwarded is refused with 503 `OWNER_MOVING`, never sent
 * on), over keep-alive connections between replicas, the body streamed as received and the
 * response streamed back as it comes (SSE and long polls pass through chunk by chunk). An owner
 * that cannot be reached gives 503 `OWNER_UNAVAILABLE` with `Retry-After`, never a wrong answer.
 */
export class Forwarder {
  private readonly httpAgent = new http.Agent({ keepAlive: true, scheduling: 'lifo' });
  private readonly httpsAgent = new https.Agent({ keepAlive: true, scheduling: 'lifo' });
  private readonly connectTimeoutMs: number;
  private readonly retryAfterSeconds: number;

  constructor(private readonly options: ForwarderOptions) {
    this.connectTimeoutMs = options.connectTimeoutMs ?? 1_000;
    this.retryAfterSeconds = options.retryAfterSeconds ?? 1;
  }

  /** Whether `req` already came through another replica (it must not be forwarded again). */
  static wasForwarded(req: IncomingMessage): boolean {
    return req.headers[FORWARDED_BY_HEADER] !== undefined;
  }

  /**
   * Sends `req` to `owner` and streams the answer into `res`. `body` is for a request whose
   * stream was already read (the raw bytes as received); otherwise the stream is piped.
   * Resolves with the outcome once the response is finished or abandoned; never rejects.
   */
  forward(
    req: IncomingMessage,
    res: ServerResponse,
    owner: ForwardTarget,
    body?: Buffer,
    beforeResponse?: BeforeResponse,
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
    return new Promise((resolve) => {
      let settled = false;
      const done = (outcome: ForwardOutcome) => {
        if (settled) return;
        settled = true;
        resolve(this.count(outcome));
      };
      const target = new URL(req.url ?? '/', owner.url);
      const secure = target.protocol === 'https:';
      const headers = endToEnd(req.headers);
      headers[FORWARDED_BY_HEADER] = this.options.replicaId;
      if (this.options.secret !== undefined) {
        const requestId = req.headers['x-request-id'];
        headers[FORWARD_SIGNATURE_HEADER] = signatureOf(
          this.options.secret,
          this.options.replicaId,
          req.method ?? '',
          req.url ?? '/',
          typeof requestId === 'string' ? requestId : '',
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
          connectTimer = setTimeout(
            () => current.destroy(new Error('connect timeout')),
            this.connectTimeoutMs,
          );
          socket.once('connect', () => clearTimeout(connectTimer));
        });

        current.on('error', (error: NodeJS.ErrnoException) => {
          clearTimeout(connectTimer);
          // The owner closed an idle kept-alive connection just as this request went out on
          // it: nothing reached the owner's handler, so the request goes again, once.
          if (
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
          if (!res.headersSent) {
            this.refuse(
              res,
              owner,
              new CoordinatorError('OWNER_UNAVAILABLE', 'the owning replica cannot be reached', {
                cause: error,
                details: { owner: owner.id },
              }),
            );
            done('owner_unavailable');
          } else {
            // Cut mid-response: the client must see a broken response, not a short one.
            res.destroy(error);
            done('aborted');
          }
        });

        current.on('response', (answer) => {
          clearTimeout(connectTimer);
          if (!beforeResponse) return passOn(answer);
          beforeResponse(answer.statusCode ?? 502).then(
            (replaced) => {
              if (!replaced) return passOn(answer);
              answer.resume();
              if (!res.headersSent) this.options.writeError(res, replaced);
              done('forwarded');
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
        res.writeHead(answer.statusCode ?? 502, answer.statusMessage, responseHeaders);
        // Headers now, not with the first body chunk: an SSE client sees the stream open.
        res.flushHeaders();
        answer.pipe(res);
        answer.on('end', () => done('forwarded'));
        // The owner went away mid-response (without a listener this error would crash us).
        answer.on('error', () => undefined);
        answer.on('close', () => {
          if (answer.complete) return;
          res.destroy();
          done('aborted');
        });
      };

      // The client went away (an SSE tab closed): stop the owner's side too.
      res.on('close', () => {
        if (res.writableFinished) return;
        done('client_closed');
        upstream.destroy();
      });

      send(false);
    });
  }

  /** Closes the kept-alive connections (shutdown). */
  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }

  private refuse(res: ServerResponse, owner: ForwardTarget, error: CoordinatorError): void {
    res.setHeader('Retry-After', String(this.retryAfterSeconds));
    res.setHeader(OWNER_HEADER, owner.id);
    this.options.writeError(res, error);
  }

  private count(outcome: ForwardOutcome): ForwardOutcome {
    this.options.metrics?.forwardedRequests.inc({ outcome });
    return outcome;
  }
}
