import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LoadResult } from './load.js';

/*
 * wrk (https://github.com/wg/wrk, /usr/bin/wrk) as a second load generator, in its own process:
 * one thread, N connections, a Lua script that sends each member's steady-state heartbeat in
 * turn. Its figures are parsed from `--latency` output into the same LoadResult as bench/load.ts.
 */

const WRK = '/usr/bin/wrk';

/** The scripts' directories, removed when the benchmarks exit. */
const scriptDirs: string[] = [];
process.once('exit', () => {
  for (const dir of scriptDirs) rmSync(dir, { recursive: true, force: true });
});

/** Writes a wrk Lua script that cycles through `bodies` as POSTs to `path` with the token. */
export function wrkScript(path: string, token: string, bodies: readonly string[]): string {
  return wrkRequestsScript(
    token,
    bodies.map((body) => ({ path, body })),
  );
}

/**
 * Writes a wrk Lua script that cycles through `requests` (each its own path and body, and its
 * own `X-Request-Id` when it has one, as the SDK sends) as POSTs with the token, starting at the
 * index given as the script's first argument. The requests go in a data file of their own, one
 * `path<TAB>body[<TAB>request id]` a line, read once by `init`: a Lua table constructor of
 * 100,000 strings would pass LuaJIT's limit on constants per function.
 */
export function wrkRequestsScript(
  token: string,
  requests: ReadonlyArray<{
    readonly path: string;
    readonly body: string;
    readonly requestId?: string;
  }>,
): string {
  const dir = mkdtempSync(join(tmpdir(), 'coord-bench-wrk-'));
  scriptDirs.push(dir);
  const data = join(dir, 'requests.tsv');
  const file = join(dir, 'requests.lua');
  writeFileSync(
    data,
    requests
      .map((r) => `${r.path}\t${r.body}${r.requestId === undefined ? '' : `\t${r.requestId}`}\n`)
      .join(''),
  );
  const lua = [
    'local requests = {}',
    'local i = 0',
    'local threads = {}',
    // What wrk itself spends sending (its process CPU, os.clock, less the loading below).
    'setup = function(thread) threads[#threads + 1] = thread end',
    'wrk.method = "POST"',
    'wrk.headers["Content-Type"] = "application/json"',
    `wrk.headers["Authorization"] = ${JSON.stringify(`Bearer ${token}`)}`,
    'init = function(args)',
    `  for line in io.lines(${JSON.stringify(data)}) do`,
    '    local tab = line:find("\t", 1, true)',
    '    local path = line:sub(1, tab - 1)',
    '    local rest = line:sub(tab + 1)',
    '    local id = rest:find("\t", 1, true)',
    '    local headers = nil',
    '    if id then',
    // wrk.format takes the headers it is given in place of wrk.headers (Host aside).
    '      headers = { ["X-Request-Id"] = rest:sub(id + 1) }',
    '      for name, value in pairs(wrk.headers) do headers[name] = value end',
    '      rest = rest:sub(1, id - 1)',
    '    end',
    '    requests[#requests + 1] = wrk.format("POST", path, headers, rest)',
    '  end',
    '  i = (tonumber(args[1]) or 0) % #requests',
    '  loaded_cpu = os.clock()',
    'end',
    'request = function()',
    '  i = i % #requests + 1',
    '  return requests[i]',
    'end',
    'done = function()',
    '  io.write(string.format("WRK_CPU %.6f %.6f\\n", os.clock(), threads[1]:get("loaded_cpu")))',
    'end',
    '',
  ].join('\n');
  writeFileSync(file, lua);
  return file;
}

function toMs(value: string, unit: string): number {
  const n = Number(value);
  return unit === 'us' ? n / 1_000 : unit === 's' ? n * 1_000 : unit === 'm' ? n * 60_000 : n;
}

/** Runs wrk once against 127.0.0.1:port and parses requests/s, p50, p99 and errors. */
export function runWrk(options: {
  port: number;
  script: string;
  connections: number;
  durationMs: number;
  /** Arguments handed to the script's `init`. */
  args?: readonly string[];
}): Promise<LoadResult> {
  const args = [
    '-t1',
    `-c${options.connections}`,
    `-d${Math.round(options.durationMs / 1_000)}s`,
    '--latency',
    '-s',
    options.script,
    `http://127.0.0.1:${options.port}/`,
    ...(options.args ? ['--', ...options.args] : []),
  ];
  return new Promise((resolve, reject) => {
    const child = spawn(WRK, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`wrk exited ${code}: ${out}`));
      const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]);
      const total = Number(/(\d+) requests in/.exec(out)?.[1]);
      const latency = (p: string) => {
        const m = new RegExp(`^\\s+${p}%\\s+([\\d.]+)(us|ms|s|m)\\s*$`, 'm').exec(out);
        return m ? toMs(m[1] as string, m[2] as string) : Number.NaN;
      };
      const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0);
      const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(
        out,
      );
      const socketErrors = socket ? socket.slice(1).reduce((n, v) => n + Number(v), 0) : 0;
      const cpu = /^WRK_CPU ([\d.]+) ([\d.]+)$/m.exec(out);
      if (!Number.isFinite(rps)) return reject(new Error(`wrk output not understood: ${out}`));
      resolve({
        completed: total,
        durationMs: options.durationMs,
        requestsPerSecond: rps,
        p50Ms: latency('50'),
        p99Ms: latency('99'),
        statuses: new Map(non2xx > 0 ? [[0, non2xx]] : []),
        socketErrors,
        ...(cpu ? { generatorCpuSeconds: Number(cpu[1]) - Number(cpu[2]) } : {}),
      });
    });
  });
}
