import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../support/redis-server.js';

/**
 * Starts the compiled coordinator (`dist/main.js`, kept current by the test setup) as a real
 * child process, as `npm start` does.
 */
function startMain(env: Record<string, string>) {
  const child = spawn(process.execPath, ['dist/main.js'], {
    cwd: process.cwd(),
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, exited, output: () => output };
}

describe('starting the coordinator process', () => {
  it('embedded default: prints the bootstrap admin password once, serves, and stops on SIGTERM', async () => {
    const main = startMain({ COORDINATOR_HTTP_PORT: '0', COORDINATOR_HTTP_HOST: '127.0.0.1' });
    try {
      await waitFor(() => /listening on (http:\/\/\S+)/.test(main.output()), {
        timeoutMs: 20_000,
        what: 'the coordinator to listen',
      });
      const url = /listening on (http:\/\/\S+)/.exec(main.output())?.[1] ?? '';
      const password = /password: (\S+)/.exec(main.output())?.[1] ?? '';
      expect(password.length).toBeGreaterThanOrEqual(16);
      expect(main.output().match(/password: /g)).toHaveLength(1);
      const login = await fetch(`${url}/coord/v1/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username: 'admin', password }),
      });
      expect(login.status).toBe(200);
      const health = await (await fetch(`${url}/coord/v1/monitoring/health`)).json();
      expect(health).toMatchObject({ status: 'UP', store: 'NOT_CONFIGURED' });
    } finally {
      main.child.kill('SIGTERM');
    }
    expect(await main.exited).toBe(0);
  });

  it('npm start hands SIGTERM to the coordinator, which shuts down (not left running)', async () => {
    // The start script's own command line, as npm runs it (`sh -c`); dist/ is built already.
    const { scripts } = JSON.parse(readFileSync('package.json', 'utf8')) as {
      scripts: Record<string, string>;
    };
    const command = (scripts.start ?? '').replace('npm run -s build', 'true');
    const child = spawn('sh', ['-c', command], {
      env: { PATH: process.env.PATH ?? '', COORDINATOR_HTTP_PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group: whatever it leaves running is stopped below.
      detached: true,
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((resolve) =>
      child.on('exit', (code) => resolve(code)),
    );
    try {
      await waitFor(() => output.includes('listening on'), {
        timeoutMs: 20_000,
        what: 'the coordinator to listen',
      });
      // What a supervisor (or npm passing on its own SIGTERM) sends to the process it started.
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      await waitFor(() => output.includes('SIGTERM: shutting down'), {
        timeoutMs: 5_000,
        what: 'the coordinator to shut down',
      });
    } finally {
      try {
        process.kill(-(child.pid ?? 0), 'SIGKILL');
      } catch {
        // Nothing of it is left.
      }
    }
  });

  it('outside embedded mode, a missing JWT secret stops startup with a clear message', async () => {
    const main = startMain({ COORDINATOR_STORE_TYPE: 'redis', COORDINATOR_HTTP_PORT: '0' });
    expect(await main.exited).toBe(2);
    expect(main.output()).toMatch(/coordinator\.security\.jwt-secret is required/);
    expect(main.output()).not.toMatch(/\n\s+at /);
  });

  it('a bad setting stops startup naming the setting', async () => {
    const main = startMain({ COORDINATOR_HTTP_PORT: 'eighty' });
    expect(await main.exited).toBe(2);
    expect(main.output()).toMatch(/coordinator\.http\.port/);
  });

  // Secrets never appear in logs (docs/operations.md#logs), startup's included: a YAML error
  // says where it is, not what the line holds.
  const secret = 'jwt-secret-that-must-never-be-printed-0123456789';
  const hash = 'scrypt$16384$8$1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo';
  it.each([
    [
      'config file',
      'config.yaml',
      `coordinator:\n  security:\n    jwt-secret: ${secret}\n   token-ttl: 1d\n`,
      (file: string) => ({ COORDINATOR_CONFIG: file }),
      2,
    ],
    [
      'users file',
      'users.yaml',
      `users:\n  - username: ops\n    passwordHash: "${hash}"\n   roles: [READ]\n`,
      (file: string) => ({ COORDINATOR_SECURITY_USERS_FILE: file }),
      1,
    ],
  ])(
    'a malformed %s stops startup naming the file and line, not the secret on it',
    async (_what, name, text, env, code) => {
      const file = join(mkdtempSync(join(tmpdir(), 'coord-startup-')), name);
      writeFileSync(file, text);
      const main = startMain({ COORDINATOR_HTTP_PORT: '0', ...env(file) });
      expect(await main.exited).toBe(code);
      expect(main.output()).toContain(
        `cannot read ${name === 'users.yaml' ? 'users' : 'config'} file ${file}`,
      );
      expect(main.output()).toMatch(/line \d+, column \d+/);
      expect(main.output()).not.toContain(secret);
      expect(main.output()).not.toContain('aGFzaGhhc2hoYXNo');
    },
  );
});
