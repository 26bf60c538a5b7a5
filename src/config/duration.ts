const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * Parses a duration setting: `500ms`, `30s`, `5m`, `2h`, `7d`, or a bare number of
 * milliseconds. Returns null for anything else.
 */
export function parseDuration(value: unknown): number | null {
  if (typeof value === 'number') return Number.isFinite(value) && value >= 0 ? value : null;
  if (typeof value !== 'string') return null;
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(value);
  if (!match) return null;
  const unit = UNITS[match[2] ?? 'ms'] ?? 1;
  return Math.round(Number(match[1]) * unit);
}
