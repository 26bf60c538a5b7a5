import { execFile } from 'node:child_process';

export interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs the real `coordctl` (compiled: dist/ is brought up to date by the test setup,
 * test/support/build-once.ts) as a child process. `input` is written to
 * its stdin; the environment is PATH plus `env`, so settings of the test process do not leak in.
 */
export function coordctl(
  args: readonly string[],
  options: { input?: string; env?: Record<string, string> } = {},
): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      ['bin/coordctl.js', ...args],
      { cwd: process.cwd(), env: { PATH: process.env.PATH ?? '', ...options.env } },
      (error, stdout, stderr) =>
        resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
    child.stdin?.end(options.input ?? '');
  });
}
