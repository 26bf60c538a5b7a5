import { renderTable } from './output.js';

/** What `GET …/statechart` answers, as far as the CLI reads it. */
export interface Statechart {
  readonly machineId?: string;
  readonly value: unknown;
  readonly mermaid: string;
  /** Per-member states, when the coordinator reports them (a list or a map by member id). */
  readonly members?:
    | ReadonlyArray<{
        readonly memberId: string;
        readonly value?: unknown;
        readonly state?: unknown;
      }>
    | Readonly<Record<string, unknown>>;
}

/** A state value as text: `rebalancing.revoking`, parallel parts joined with `, `. */
export function stateText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === null || typeof value !== 'object') return String(value);
  return Object.entries(value as Record<string, unknown>)
    .map(([key, inner]) => `${key}.${stateText(inner)}`)
    .join(', ');
}

/** Rows of `[region, state]` for a parallel state value, or one `[group, state]` row. */
export function regionRows(value: unknown): Array<[string, string]> {
  if (value === null || typeof value !== 'object') return [['group', stateText(value)]];
  return Object.entries(value as Record<string, unknown>).map(([region, inner]) => [
    region,
    stateText(inner),
  ]);
}

function memberRows(members: Statechart['members']): Array<[string, string]> {
  if (!members) return [];
  if (Array.isArray(members)) {
    return (members as ReadonlyArray<{ memberId: string; value?: unknown; state?: unknown }>).map(
      (m) => [m.memberId, stateText(m.value ?? m.state)],
    );
  }
  return Object.entries(members).map(([id, v]) => [id, stateText(v)]);
}

/** Regions, then members, as tables. */
export function statechartTable(body: Statechart): string {
  const regions = renderTable(['region', 'state'], regionRows(body.value));
  const members = memberRows(body.members);
  return members.length ? `${regions}\n${renderTable(['member', 'state'], members)}` : regions;
}
