import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../../src/observability/logger.js';

/** One JSON log line as the coordinator writes it. */
export interface LogLine {
  readonly level: string;
  readonly message: string;
  readonly [field: string]: unknown;
}

/**
 * A real coordinator logger (JSON format, redaction included) whose lines are kept in memory
 * for the test to read, at `level` and above.
 */
export function captureLogs(level: 'error' | 'warn' | 'info' | 'debug' = 'debug'): {
  readonly logger: Logger;
  readonly lines: LogLine[];
  /** Every line as text, for "never mentions" assertions. */
  text(): string;
} {
  const lines: LogLine[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const text of chunk.toString('utf8').split('\n')) {
        if (text.trim()) lines.push(JSON.parse(text) as LogLine);
      }
      done();
    },
  });
  return {
    logger: createLogger({ level, format: 'json', stream }),
    lines,
    text: () => lines.map((line) => JSON.stringify(line)).join('\n'),
  };
}
