import type { Clock } from '../machines/clock.js';
import type { Logger } from './logger.js';

/** Options of {@link RateLimitedLog}. */
export interface RateLimitedLogOptions {
  /** Lines written per key and window; the rest are counted. @default 5 */
  readonly linesPerWindow?: number;
  /** @default 60000 */
  readonly windowMs?: number;
  /** Keys remembered at most; past it, windows that ended are forgotten. @default 1024 */
  readonly maxKeys?: number;
}

interface Window {
  startedAt: number;
  written: number;
  suppressed: number;
}

/** The levels a {@link RateLimitedLog} writes at. */
export type RateLimitedLevel = 'warn' | 'info' | 'debug';

/**
 * Lines about expected refusals (a moving group, an owner that does not answer, failed closed,
 * fenced, throttled, store down), which a client or an outage can cause at will: per key (e.g.
 * code and group) at most `linesPerWindow` lines per window, never a stack. The first line of the
 * next window says how many were left out (`suppressed`), so an operator still sees the volume
 * (docs/operations.md#logs).
 */
export class RateLimitedLog {
  private readonly windows = new Map<string, Window>();
  private readonly linesPerWindow: number;
  private readonly windowMs: number;
  private readonly maxKeys: number;

  constructor(
    private readonly logger: Logger,
    private readonly clock: Clock,
    options: RateLimitedLogOptions = {},
  ) {
    this.linesPerWindow = options.linesPerWindow ?? 5;
    this.windowMs = options.windowMs ?? 60_000;
    this.maxKeys = options.maxKeys ?? 1024;
  }

  /** Writes `message` at warn level unless `key` used up its lines in the current window. */
  warn(key: string, message: string, fields: Readonly<Record<string, unknown>>): void {
    this.write('warn', key, message, fields);
  }

  /** Writes `message` at info level unless `key` used up its lines in the current window. */
  info(key: string, message: string, fields: Readonly<Record<string, unknown>>): void {
    this.write('info', key, message, fields);
  }

  /**
   * Writes `message` at `level` unless `key` used up its lines in the current window. A level
   * the logger does not write costs nothing and counts nothing.
   */
  write(
    level: RateLimitedLevel,
    key: string,
    message: string,
    fields: Readonly<Record<string, unknown>>,
  ): void {
    if (!this.logger.isLevelEnabled(level)) return;
    const now = this.clock.now();
    let window = this.windows.get(key);
    let suppressed = 0;
    if (window && now - window.startedAt >= this.windowMs) {
      suppressed = window.suppressed;
      window = undefined;
    }
    if (!window) {
      this.makeRoom(now);
      window = { startedAt: now, written: 0, suppressed: 0 };
      this.windows.set(key, window);
    }
    if (window.written >= this.linesPerWindow) {
      window.suppressed++;
      return;
    }
    window.written++;
    this.logger.log(level, message, suppressed > 0 ? { ...fields, suppressed } : fields);
  }

  /** Forgets ended windows when the map is full; if none ended, the oldest key goes. */
  private makeRoom(now: number): void {
    if (this.windows.size < this.maxKeys) return;
    for (const [key, window] of this.windows) {
      if (now - window.startedAt >= this.windowMs) this.windows.delete(key);
    }
    if (this.windows.size >= this.maxKeys) {
      const oldest = this.windows.keys().next();
      if (!oldest.done) this.windows.delete(oldest.value);
    }
  }
}
