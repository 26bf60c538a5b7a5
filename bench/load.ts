import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';

/*
 * A small HTTP/1.1 load generator, closed loop (or open loop at a rate): fixed keep-alive
 * connections, one request in flight on each, requests prebuilt as bytes (so the generator
 * spends its CPU on sockets, not on building requests), latency measured per request with
 * performance.now() and kept in microseconds.
 * Responses must carry Content-Length (node:http and express both set it for these bodies).
 */

export interface LoadOptions {
  readonly host: '127.0.0.1';
  readonly port: number;
  readonly connections: number;
  /** Connection i sends `requests[i % requests.length]` again and again. */
  readonly requests: readonly Buffer[];
  readonly durationMs: number;
  /**
   * Open loop at this many requests/s over all connections (the rate split evenly, each
   * connection's sends spaced `connections / rate` apart and staggered): a response that comes
   * late delays that connection's next send, and its latency is counted from when the request
   * was due, not from when it went out (no coordinated omission, as wrk2 measures). Unset: the
   * closed loop, each connection sending again as soon as it has its answer.
   */
  readonly ratePerSecond?: number;
}

export interface LoadResult {
  /** Responses completed within the measured window. */
  readonly completed: number;
  readonly durationMs: number;
  readonly requestsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** Status code → count, over the window. */
  readonly statuses: ReadonlyMap<number, number>;
  readonly socketErrors: number;
  /**
   * Open loop only: the p99 of how late the generator itself sent a request (its send time less
   * the later of when it was due and when the connection's previous answer came: its timers,
   * its own GC and event loop), and the p99 from the send to the answer (the server's time, the
   * network's and any delay of the generator in reading the answer). Latency (p50Ms, p99Ms)
   * counts from when a request was due, and so also holds the wait for a late previous answer:
   * these two tell whose the tail is.
   */
  readonly sendLateP99Ms?: number;
  readonly fromSendP99Ms?: number;
  /**
   * CPU time the generator itself used while sending (s), where it can tell (wrk with
   * {@link wrkRequestsScript}: its process time less the script's setup).
   */
  readonly generatorCpuSeconds?: number;
}

const HEADER_END = Buffer.from('\r\n\r\n');
const CONTENT_LENGTH = /\r\ncontent-length:[ \t]*(\d+)/i;
const CHUNKED = /\r\ntransfer-encoding:[ \t]*chunked/i;
const DRAIN_TIMEOUT_MS = 2_000;

const statusOf = (head: string) => Number(head.slice(9, 12));

/**
 * Splits what one connection receives into HTTP responses (framed by Content-Length) and hands
 * each to `onResponse`, with its head (latin1) and its body.
 */
function responseReader(onResponse: (head: string, body: Buffer) => void): (chunk: Buffer) => void {
  let pending: Buffer | null = null;
  return (chunk) => {
    let buffer: Buffer = pending ? Buffer.concat([pending, chunk]) : chunk;
    pending = null;
    for (;;) {
      const end = buffer.indexOf(HEADER_END);
      if (end === -1) {
        pending = buffer;
        return;
      }
      const head = buffer.toString('latin1', 0, end);
      if (CHUNKED.test(head)) throw new Error('chunked responses are not supported');
      const length = Number(CONTENT_LENGTH.exec(head)?.[1] ?? 0);
      const total = end + HEADER_END.length + length;
      if (buffer.length < total) {
        pending = buffer;
        return;
      }
      onResponse(head, buffer.subarray(end + HEADER_END.length, total));
      if (buffer.length === total) return;
      buffer = buffer.subarray(total);
    }
  };
}

/** Throws when a load run got a non-2xx answer or a socket error: the benchmark failed. */
export function assertAllOk(result: LoadResult, label: string): LoadResult {
  const bad = [...result.statuses].filter(([status]) => status < 200 || status > 299);
  if (bad.length > 0 || result.socketErrors > 0)
    throw new Error(
      `${label}: non-2xx ${JSON.stringify(bad)}, socket errors ${result.socketErrors}`,
    );
  return result;
}

/** `count` keep-alive TCP connections to 127.0.0.1:`port`, Nagle off. */
function openConnections(port: number, count: number): Promise<Socket[]> {
  return Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<Socket>((resolve, reject) => {
          const socket = connect({ host: '127.0.0.1', port, noDelay: true });
          socket.once('connect', () => resolve(socket));
          socket.once('error', reject);
        }),
    ),
  );
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1);
  return sorted[Math.max(0, index)] ?? Number.NaN;
}

/** How often the open loop's pacer looks for requests that have come due (ms). */
const PACER_MS = 1;

/**
 * Opens the connections, runs the closed loop (or, with a rate, the open loop) for
 * `durationMs`, closes them. Times are `performance.now()` (ms, sub-µs resolution), which
 * allocates nothing, unlike `process.hrtime.bigint()`: the generator shares the two cores with
 * the server it measures, so what it costs per request is taken from that server.
 */
export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const latenciesUs: number[] = [];
  /** Open loop: how late each request went out (µs), and its answer's time from then. */
  const lateUs: number[] = [];
  const fromSendUs: number[] = [];
  const statuses = new Map<number, number>();
  let socketErrors = 0;
  let running = false;
  let deadline = 0;
  let inFlight = 0;
  let onIdle: (() => void) | null = null;
  let started = 0;
  const onIdleIfDone = () => {
    if (inFlight === 0) onIdle?.();
  };

  const sockets = await openConnections(options.port, options.connections);

  const rate = options.ratePerSecond;
  /** With a rate: ms between two sends of one connection. */
  const periodMs = rate ? (options.connections / rate) * 1_000 : 0;
  /**
   * With a rate: the connections whose next request is not yet due, sent by one pacer that
   * looks every {@link PACER_MS} (one timer for all of them, not one per request).
   */
  const waiting = new Set<(now: number) => boolean>();
  let pacer: NodeJS.Timeout | null = null;
  const loops = sockets.map((socket, i) => {
    const request = options.requests[i % options.requests.length];
    if (!request) throw new Error('no request to send');
    /** When the request in flight was sent (closed loop) or due (open loop). */
    let sentAt = 0;
    /** With a rate: when this connection's next request is due, and when it went out. */
    let dueAt = 0;
    let wroteAt = 0;
    /** With a rate: when the connection's last answer came. */
    let answeredAt = 0;
    const write = (now: number) => {
      inFlight++;
      wroteAt = now;
      socket.write(request);
    };
    const whenDue = (now: number) => {
      if (dueAt > now) return false;
      waiting.delete(whenDue);
      // Its own time: a pacer's tick writes many, one system call each.
      write(performance.now());
      return true;
    };
    const send = (now: number) => {
      if (!rate) {
        sentAt = now;
        write(now);
        return;
      }
      dueAt = dueAt === 0 ? started + (periodMs * i) / options.connections : dueAt + periodMs;
      sentAt = dueAt; // latency counts from when it was due
      if (dueAt > deadline) return onIdleIfDone();
      if (!whenDue(now)) waiting.add(whenDue);
    };
    socket.removeAllListeners('error');
    socket.on('error', () => {
      socketErrors++;
    });
    socket.on(
      'data',
      responseReader((head) => {
        const now = performance.now();
        inFlight--;
        const previousAnswer = answeredAt;
        answeredAt = now;
        if (now <= deadline) {
          latenciesUs.push((now - sentAt) * 1_000);
          if (rate) {
            // This request could go out once it was due and the one before it was answered.
            lateUs.push((wroteAt - Math.max(previousAnswer, sentAt)) * 1_000);
            fromSendUs.push((now - wroteAt) * 1_000);
          }
          const status = statusOf(head);
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
        }
        if (running && now < deadline) send(now);
        else onIdleIfDone();
      }),
    );
    return send;
  });

  started = performance.now();
  deadline = started + options.durationMs;
  running = true;
  if (rate)
    pacer = setInterval(() => {
      const now = performance.now();
      if (!running || now >= deadline) {
        waiting.clear();
        onIdleIfDone();
        return;
      }
      for (const due of waiting) due(now);
    }, PACER_MS);
  for (const send of loops) send(performance.now());
  await new Promise<void>((resolve) => setTimeout(resolve, options.durationMs));
  running = false;
  waiting.clear();
  if (inFlight > 0) {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, DRAIN_TIMEOUT_MS);
      onIdle = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
  if (pacer) clearInterval(pacer);
  for (const socket of sockets) socket.destroy();

  const sorted = Float64Array.from(latenciesUs).sort();
  const p99Of = (us: number[]) => percentile(Float64Array.from(us).sort(), 0.99) / 1_000;
  return {
    ...(rate ? { sendLateP99Ms: p99Of(lateUs), fromSendP99Ms: p99Of(fromSendUs) } : {}),
    completed: sorted.length,
    durationMs: options.durationMs,
    requestsPerSecond: sorted.length / (options.durationMs / 1_000),
    p50Ms: percentile(sorted, 0.5) / 1_000,
    p99Ms: percentile(sorted, 0.99) / 1_000,
    statuses,
    socketErrors,
  };
}

export interface SendEachOptions {
  readonly port: number;
  readonly connections: number;
  /** Each is sent once, in order: a connection sends the next unsent one when it has its answer. */
  readonly requests: readonly Buffer[];
  /** Asked before each send: false stops sending (what is in flight is still answered). */
  readonly keepGoing: () => boolean;
  /**
   * Open loop: request k is sent no earlier than k / rate seconds after the start (a connection
   * that is free waits for it). Unset: each as soon as a connection is free.
   */
  readonly ratePerSecond?: number;
  /** After this long every connection is closed: what is in flight then fails (status 0). */
  readonly abortAfterMs?: number;
  /** Each answer as it comes (status 0: the connection failed before answering). */
  readonly onResponse: (index: number, status: number, body: Buffer) => void;
}

/**
 * Sends each request once over fixed keep-alive connections, one in flight on each (a closed
 * loop over a list, where {@link runLoad} repeats the same requests for a time): the generator
 * for a burst of distinct requests, such as joins, at the cost of a socket write and a framing
 * per request. Resolves when every connection has nothing left to send or wait for.
 */
export async function sendEach(options: SendEachOptions): Promise<void> {
  const sockets = await openConnections(options.port, options.connections);
  const rate = options.ratePerSecond;
  const started = performance.now();
  let next = 0;
  const abort =
    options.abortAfterMs === undefined
      ? null
      : setTimeout(() => sockets.forEach((socket) => socket.destroy()), options.abortAfterMs);
  await Promise.all(
    sockets.map(
      (socket) =>
        new Promise<void>((resolve) => {
          let current = -1;
          const send = () => {
            if (next >= options.requests.length || !options.keepGoing()) {
              current = -1;
              socket.destroy();
              return resolve();
            }
            current = next++;
            const request = options.requests[current]!;
            const waitMs = rate ? started + (current * 1000) / rate - performance.now() : 0;
            if (waitMs > 0) setTimeout(() => socket.write(request), waitMs);
            else socket.write(request);
          };
          const fail = () => {
            if (current >= 0) options.onResponse(current, 0, Buffer.alloc(0));
            current = -1;
            resolve();
          };
          socket.removeAllListeners('error');
          socket.on('error', fail);
          socket.on('close', fail);
          socket.on(
            'data',
            responseReader((head, body) => {
              options.onResponse(current, statusOf(head), body);
              send();
            }),
          );
          send();
        }),
    ),
  );
  if (abort !== null) clearTimeout(abort);
}
