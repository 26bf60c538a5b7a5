/**
 * A small TCP proxy for fault tests: put between clients and a server (the clients get
 * {@link TcpProxy.url} as their base URL), it forwards bytes both ways in one of four modes:
 *
 * - `pass`: as they come;
 * - `latency`: each chunk held `latencyMs` before it is forwarded (order kept per direction);
 * - `stall`: nothing forwarded, every socket kept open (new connections are accepted too); what
 *   arrived meanwhile is forwarded, in order, once the mode changes;
 * - `stall-replies`: as `stall`, but only from the server to the clients: requests reach the
 *   server, its answers are held (a change made whose answer never came);
 * - {@link TcpProxy.reset}: every socket of every connection destroyed at once.
 *
 * It counts what it did, for the tests to print.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export type ProxyMode = 'pass' | 'latency' | 'stall' | 'stall-replies';

/** What the proxy did so far. */
export interface ProxyCounts {
  readonly connections: number;
  /** Chunks forwarded late by the `latency` mode. */
  readonly delayedChunks: number;
  /** Chunks held while stalled. */
  readonly stalledChunks: number;
  /** Connections that had a chunk held while stalled. */
  readonly stalledConnections: number;
  /** Connections destroyed by {@link TcpProxy.reset}. */
  readonly resetConnections: number;
}

interface Connection {
  readonly id: number;
  readonly client: Socket;
  readonly upstream: Socket;
  stalled: boolean;
}

export class TcpProxy {
  private mode: ProxyMode = 'pass';
  private latencyMs = 0;
  /** Resolves when a stall ends. */
  private unstalled: Promise<void> = Promise.resolve();
  private endStall: () => void = () => undefined;
  private readonly open = new Set<Connection>();
  private nextId = 0;
  private counts = {
    connections: 0,
    delayedChunks: 0,
    stalledChunks: 0,
    stalledConnections: 0,
    resetConnections: 0,
  };

  private readonly server: Server;
  private port = 0;

  private constructor(
    private targetHost: string,
    private targetPort: number,
  ) {
    this.server = createServer((client) => this.accept(client, this.targetHost, this.targetPort));
  }

  /**
   * Forwards connections opened from now on to `target` (`http://host:port`): a proxy started
   * before what it stands in front of, whose address that needs (an advertised URL), is pointed
   * at it once it listens, with no port chosen in between for another process to take.
   */
  retarget(target: string): void {
    const { hostname, port } = new URL(target);
    this.targetHost = hostname;
    this.targetPort = Number(port);
  }

  /**
   * Listens on a free port of 127.0.0.1 (or on `listenPort`, e.g. to come back where a closed one
   * was), forwarding to `target` (`http://host:port`).
   */
  static async start(target: string, listenPort = 0): Promise<TcpProxy> {
    const { hostname, port } = new URL(target);
    const proxy = new TcpProxy(hostname, Number(port));
    await new Promise<void>((resolve, reject) => {
      proxy.server.once('error', reject);
      proxy.server.listen(listenPort, '127.0.0.1', () => resolve());
    });
    const address = proxy.server.address();
    if (address === null || typeof address !== 'object') throw new Error('no port assigned');
    proxy.port = address.port;
    return proxy;
  }

  /** `http://127.0.0.1:<port>`: the base URL the clients get. */
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The mode from now on (`latencyMs` for `latency`). Leaving `stall` flushes what was held. */
  setMode(mode: ProxyMode, latencyMs = 0): void {
    const stalls = (m: ProxyMode) => m === 'stall' || m === 'stall-replies';
    if (stalls(mode) && !stalls(this.mode)) {
      this.unstalled = new Promise((resolve) => (this.endStall = resolve));
    }
    if (!stalls(mode) && stalls(this.mode)) this.endStall();
    this.mode = mode;
    this.latencyMs = latencyMs;
  }

  /** Destroys every socket of every open connection; returns how many connections that was. */
  reset(): number {
    const n = this.open.size;
    for (const c of this.open) {
      c.client.destroy();
      c.upstream.destroy();
    }
    this.open.clear();
    this.counts.resetConnections += n;
    return n;
  }

  /** Connections open right now. */
  get connections(): number {
    return this.open.size;
  }

  stats(): ProxyCounts {
    return { ...this.counts };
  }

  async close(): Promise<void> {
    this.setMode('pass');
    for (const c of this.open) {
      c.client.destroy();
      c.upstream.destroy();
    }
    this.open.clear();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket, host: string, port: number): void {
    const upstream = connect(port, host);
    const c: Connection = { id: this.nextId++, client, upstream, stalled: false };
    this.open.add(c);
    this.counts.connections++;
    const drop = () => {
      this.open.delete(c);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop);
    upstream.on('error', drop);
    client.on('close', drop);
    upstream.on('close', drop);
    this.pipe(c, client, upstream, false);
    this.pipe(c, upstream, client, true);
  }

  /** Forwards `from` to `to` chunk by chunk, in order, as the mode of each moment says. */
  private pipe(c: Connection, from: Socket, to: Socket, replies: boolean): void {
    let chain = Promise.resolve();
    const stalled = () => this.mode === 'stall' || (replies && this.mode === 'stall-replies');
    from.on('data', (chunk: Buffer) => {
      chain = chain.then(async () => {
        if (stalled()) {
          this.counts.stalledChunks++;
          if (!c.stalled) {
            c.stalled = true;
            this.counts.stalledConnections++;
          }
          while (stalled()) await this.unstalled;
        }
        if (this.mode === 'latency' && this.latencyMs > 0) {
          this.counts.delayedChunks++;
          await new Promise((resolve) => setTimeout(resolve, this.latencyMs));
        }
        if (!to.destroyed) to.write(chunk);
      });
    });
    from.on('end', () => {
      chain = chain.then(() => {
        if (!to.destroyed) to.end();
      });
    });
  }
}
