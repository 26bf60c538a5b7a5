import winston from 'winston';

/** Field names whose values never reach a log line. */
const SECRET_KEYS = /pass(word)?|secret|token|authorization|cookie|hash/i;

/** Replaces secret-looking fields by "[redacted]", at any depth. */
export function redact(value: unknown, depth = 0): unknown {
  if (depth > 6 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
    out[key] = SECRET_KEYS.test(key) ? '[redacted]' : redact(v, depth + 1);
  }
  return out;
}

const redactFormat = winston.format((info) => {
  for (const key of Object.keys(info)) {
    if (SECRET_KEYS.test(key)) info[key] = '[redacted]';
    else info[key] = redact(info[key]);
  }
  return info;
});

export type Logger = winston.Logger;

export interface LoggerOptions {
  readonly level: string;
  readonly format: 'json' | 'text';
  /** Silences all output (tests). */
  readonly silent?: boolean;
  /** Writes here instead of the console (tests read the lines). */
  readonly stream?: NodeJS.WritableStream;
}

/** The fields that name a group on every log line about it: `streamPrefix` and `consumerGroup`. */
export function groupLogFields(ref: {
  readonly streamPrefix: string;
  readonly consumerGroup: string;
}): { streamPrefix: string; consumerGroup: string } {
  return { streamPrefix: ref.streamPrefix, consumerGroup: ref.consumerGroup };
}

/** The process logger: JSON for machines or one readable line per event for people. */
export function createLogger(options: LoggerOptions): Logger {
  const text = winston.format.printf(({ level, message, timestamp, ...rest }) => {
    const extra = Object.keys(rest).length ? ` ${JSON.stringify(rest)}` : '';
    return `${String(timestamp)} ${level} ${String(message)}${extra}`;
  });
  return winston.createLogger({
    level: options.level,
    silent: options.silent ?? false,
    format: winston.format.combine(
      redactFormat(),
      winston.format.timestamp(),
      options.format === 'json' ? winston.format.json() : text,
    ),
    transports: [
      options.stream
        ? new winston.transports.Stream({ stream: options.stream })
        : new winston.transports.Console(),
    ],
  });
}
