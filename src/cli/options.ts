import { InvalidArgumentError, Option } from 'commander';
import { parseDuration } from '../config/duration.js';

/** A group as the CLI names it: `<streamPrefix>:<consumerGroup>`. */
export interface GroupName {
  readonly streamPrefix: string;
  readonly consumerGroup: string;
}

/** Parses a duration option (`500ms`, `30s`, `5m`) to milliseconds. */
export function duration(value: string): number {
  const ms = parseDuration(value);
  if (ms === null) throw new InvalidArgumentError('not a duration (e.g. 500ms, 30s, 5m)');
  return ms;
}

/** A duration option whose help shows the default as written (`30s`), not in milliseconds. */
export function durationOption(flags: string, description: string, defaultText: string): Option {
  return new Option(flags, description)
    .argParser(duration)
    .default(duration(defaultText), defaultText);
}

/** Parses a positive integer argument. */
export function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a positive integer');
  return n;
}

/** Parses `<streamPrefix>:<consumerGroup>`; the stream prefix may itself contain `:`. */
export function parseGroup(value: string): GroupName {
  const at = value.lastIndexOf(':');
  if (at <= 0 || at === value.length - 1)
    throw new InvalidArgumentError('expected <streamPrefix>:<consumerGroup>');
  return { streamPrefix: value.slice(0, at), consumerGroup: value.slice(at + 1) };
}

/** `<streamPrefix>:<consumerGroup>`, the way the CLI prints a group. */
export function groupLabel(group: GroupName): string {
  return `${group.streamPrefix}:${group.consumerGroup}`;
}

/** For a repeatable option: collects every value. */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/** Progress and notes go to stderr, results to stdout. */
export const progress = (message: string): void => {
  process.stderr.write(`${message}\n`);
};
