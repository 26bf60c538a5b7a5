/** Exit codes of `coordctl` (documented in docs/cli.md). */
export const EXIT = {
  /** Done; for `plan`: nothing to change. */
  OK: 0,
  /** Something failed: the message says what and what to do. */
  FAILED: 1,
  /**
   * `plan`, `reset-positions` without `--execute`: changes are planned; `lag
   * --max-lag-seconds`: a group is further behind, or its lag cannot be read.
   */
  CHANGES_PLANNED: 2,
  /**
   * `scale --watch`: the migration did not converge within `--timeout`; `pause`, `resume`,
   * `reset-positions --execute`: not done within it.
   */
  TIMED_OUT: 3,
} as const;

/** Thrown by commands for a clean, non-zero exit with a message (no stack trace). */
export class CliError extends Error {
  override readonly name = 'CliError';
  constructor(
    message: string,
    readonly exitCode: number = EXIT.FAILED,
  ) {
    super(message);
  }
}
