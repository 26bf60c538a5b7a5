import { Option, type Command } from 'commander';

/** How a read command prints: an aligned table (default) or the API's JSON. */
export type OutputFormat = 'table' | 'json';

/** Adds `-o, --output table|json`. */
export function outputOption(command: Command): Command {
  return command.addOption(
    new Option('-o, --output <format>', 'table or json')
      .choices(['table', 'json'])
      .default('table'),
  );
}

type Cell = string | number | boolean | null | undefined | readonly unknown[];

/**
 * Control characters and bidirectional overrides, which a terminal would act on: a consumer
 * names itself (`clientId`), and its name must not rewrite the operator's screen.
 */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/**
 * A cell as text: `-` for nothing, lists comma-separated; control characters shown escaped
 * (`\u001b`), never sent to the terminal.
 */
export function cellText(value: Cell): string {
  if (value === null || value === undefined || value === '') return '-';
  const text = Array.isArray(value) ? (value.length ? value.join(',') : '-') : String(value);
  return text.replace(UNPRINTABLE, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** Left-aligned columns separated by two spaces, headers upper-case. */
export function renderTable(
  headers: readonly string[],
  rows: readonly (readonly Cell[])[],
): string {
  const text = rows.map((row) => headers.map((_, i) => cellText(row[i])));
  const widths = headers.map((h, i) =>
    Math.max(h.length, ...text.map((row) => row[i]?.length ?? 0)),
  );
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(headers.map((h) => h.toUpperCase())), ...text.map(line)].join('\n') + '\n';
}

/** `key: value` lines, keys aligned. */
export function renderFields(fields: ReadonlyArray<readonly [string, Cell]>): string {
  const width = Math.max(...fields.map(([k]) => k.length));
  return fields.map(([k, v]) => `${`${k}:`.padEnd(width + 1)}  ${cellText(v)}`).join('\n') + '\n';
}

/** Prints `json` as JSON, or the table text. */
export function print(format: OutputFormat, json: unknown, table: () => string): void {
  process.stdout.write(format === 'json' ? `${JSON.stringify(json, null, 2)}\n` : table());
}
