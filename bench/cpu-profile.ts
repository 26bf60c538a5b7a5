/** What bench/profile-summary.ts and bench/long-turns.ts read of a V8 CPU profile (`.cpuprofile`). */

export interface ProfileNode {
  readonly id: number;
  readonly callFrame: { functionName: string; url: string; lineNumber: number };
  readonly children?: number[];
}

export interface Profile {
  readonly nodes: ProfileNode[];
  /** On the monotonic clock, µs (as `process.hrtime`). */
  readonly startTime: number;
  readonly endTime: number;
  readonly samples: number[];
  /** µs from the previous sample (the first: from `startTime`). */
  readonly timeDeltas: number[];
}

/** `name path:line` of a frame, the path from `node_modules/`, `dist/` or `src/` on. */
export function frameKey({ functionName, url, lineNumber }: ProfileNode['callFrame']): string {
  const where = url
    ? `${url.replace(/^.*?\/(node_modules|dist|src)\//, '$1/')}:${lineNumber + 1}`
    : '';
  return `${functionName || '(anonymous)'} ${where}`.trim();
}
