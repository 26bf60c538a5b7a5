import { connect, type Socket } from 'node:net';

/**
 * Every command a test Redis runs, seen through MONITOR on a plain socket.
 *
 * ioredis's `monitor()` enters monitoring mode in a promise continuation after MONITOR's `OK`:
 * when the first monitored command arrives in the same TCP read as that `OK`, ioredis takes it
 * for the reply to a command it never sent and raises "Command queue state error". A raw socket
 * has no command queue to confuse: after `+OK`, every simple-string line is one command.
 */
export interface RedisMonitor {
  /** Each command seen so far, lower-cased name first, arguments unescaped. */
  readonly seen: readonly (readonly string[])[];
  /** Errors on the socket while it watched (a clean stop adds none). */
  readonly errors: readonly unknown[];
  stop(): Promise<void>;
}

/**
 * `onCommand` is called with each command the moment it is read, before anything else runs: a
 * test can stop the server (SIGSTOP) right at a command it waits for.
 */
export async function monitorRedis(
  port: number,
  onCommand: (command: readonly string[]) => void = () => undefined,
): Promise<RedisMonitor> {
  const seen: string[][] = [];
  const errors: unknown[] = [];
  let stopping = false;
  const socket: Socket = connect({ host: '127.0.0.1', port });
  socket.setEncoding('utf8');
  socket.on('error', (error) => {
    if (!stopping) errors.push(error);
  });
  await new Promise<void>((resolve, reject) => {
    let buffered = '';
    let started = false;
    socket.once('error', reject);
    // Closed before MONITOR answered: nothing will be seen (settles nothing once started).
    socket.once('close', () =>
      reject(new Error('Redis closed the connection before MONITOR answered')),
    );
    socket.on('data', (chunk: string) => {
      buffered += chunk;
      let end: number;
      while ((end = buffered.indexOf('\r\n')) >= 0) {
        const line = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        if (!started) {
          if (line !== '+OK') {
            socket.destroy();
            reject(new Error(`MONITOR answered ${line}`));
            return;
          }
          started = true;
          resolve();
          continue;
        }
        if (line.startsWith('+')) {
          const command = parseMonitorLine(line.slice(1));
          seen.push(command);
          onCommand(command);
        } else errors.push(new Error(`unexpected MONITOR line ${line}`));
      }
    });
    socket.write('MONITOR\r\n');
  });
  return {
    seen,
    errors,
    stop: () =>
      new Promise<void>((resolve) => {
        stopping = true;
        if (socket.closed) return resolve();
        socket.once('close', () => resolve());
        socket.destroy();
      }),
  };
}

const ESCAPES: Record<string, string> = {
  n: '\n',
  r: '\r',
  t: '\t',
  a: '\x07',
  b: '\b',
  '"': '"',
  '\\': '\\',
};

/**
 * `1795770912.146849 [0 127.0.0.1:54912] "eval" "a \"b\"\n" "1"` → `['eval', 'a "b"\n', '1']`:
 * Redis quotes each argument and escapes `\`, `"`, control characters and other bytes (`\xHH`).
 */
export function parseMonitorLine(line: string): string[] {
  const args: string[] = [];
  let i = line.indexOf('] ');
  if (i < 0) return args;
  i += 2;
  while (i < line.length) {
    if (line[i] !== '"') {
      i++;
      continue;
    }
    i++;
    // Bytes, not characters: a non-ASCII character arrives as one `\xHH` per UTF-8 byte.
    const bytes: number[] = [];
    while (i < line.length && line[i] !== '"') {
      if (line[i] === '\\') {
        const next = line[i + 1] ?? '';
        if (next === 'x') {
          bytes.push(Number.parseInt(line.slice(i + 2, i + 4), 16));
          i += 4;
        } else {
          bytes.push((ESCAPES[next] ?? next).charCodeAt(0));
          i += 2;
        }
      } else {
        bytes.push(line.charCodeAt(i));
        i++;
      }
    }
    i++;
    const arg = Buffer.from(bytes).toString('utf8');
    args.push(args.length === 0 ? arg.toLowerCase() : arg);
  }
  return args;
}
