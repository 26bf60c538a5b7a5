/**
 * Stand-in owner replicas (test/support/stand-in-owner.ts) as real child processes, for the
 * tests of what a forwarding replica or a client does when an owner stops answering: SIGSTOP
 * makes one a paused replica (connections accepted, nothing answered), SIGCONT resumes it.
 */
import type { Child, ChildProcesses } from './replica-processes.js';
import { freePort, waitFor } from './redis-server.js';

/** One running stand-in owner. */
export interface StandInOwner {
  readonly url: string;
  readonly child: Child;
  /** SIGSTOP: a paused replica. */
  pause(): void;
  /** SIGCONT. */
  resume(): void;
  /** Requests it received so far, by path (asked once it runs). */
  counts(): Promise<Record<string, number>>;
}

/** Starts a stand-in owner on a free port and waits until it answers. */
export async function startStandInOwner(
  children: ChildProcesses,
  name: string,
  options: { readonly keepAliveMs?: number } = {},
): Promise<StandInOwner> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = children.start(name, 'test/support/stand-in-owner.ts', {
    STAND_IN_PORT: String(port),
    STAND_IN_KEEPALIVE_MS: String(options.keepAliveMs ?? 100),
  });
  await waitFor(
    async () => {
      if (child.exitCode !== undefined) throw new Error(`${name} exited: ${children.output(name)}`);
      try {
        return (await fetch(`${url}/coord/v1/monitoring/health`)).ok;
      } catch {
        return false;
      }
    },
    { timeoutMs: 30_000, intervalMs: 50, what: `${name} listening` },
  );
  return {
    url,
    child,
    pause: () => children.signal(child, 'SIGSTOP'),
    resume: () => children.signal(child, 'SIGCONT'),
    counts: async () =>
      ((await (await fetch(`${url}/stats`)).json()) as { counts: Record<string, number> }).counts,
  };
}
