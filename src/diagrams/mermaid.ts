/**
 * Converts a machine definition to mermaid `stateDiagram-v2` text, rendered offline by the web
 * UI (no maintained offline XState visualiser exists).
 */
import type { StateNodeJson, TargetRef, TransitionJson } from '../machines/machine-definition.js';
import { eventlessTransitions } from '../machines/machine-definition.js';

interface IndexedState {
  readonly def: StateNodeJson;
  /** Ids from the root down to this state. */
  readonly path: readonly string[];
  readonly mermaidId: string;
}

/** Options of {@link toMermaid}. */
export interface MermaidOptions {
  /** Ids of the active leaf states, marked with the `current` class (see {@link activeStateIds}). */
  readonly current?: readonly string[];
  /**
   * Draw only this state's inside (e.g. `group.membership`, one region of a parallel chart):
   * its children at the top level, with the edges drawn among them.
   */
  readonly root?: string;
  /** Extra lines written inside states, by state id (e.g. what a state is called elsewhere). */
  readonly notes?: Readonly<Record<string, readonly string[]>>;
}

/** Label lines are wrapped at about this many characters, so that labels stay narrow. */
const LABEL_WIDTH = 24;

/**
 * Mermaid `stateDiagram-v2` for a definition in the shape of `machine.toJSON()` (or of
 * `machineDefinition(machine)`, which also names eventless transitions in JSON).
 *
 * Compound states become `state "key" as id{ … }` with `[*] -->` their initial state; the
 * regions of a parallel state are separated by `--`. Transitions are labelled with their event
 * (`[guard]` appended when guarded; eventless ones show just the guard), wrapped with `<br/>`
 * so a long list of events makes a narrow label; edges between the same two states on the same
 * events under different guards are one edge (`[a or b]`). Mermaid cannot draw an edge between
 * states nested in different composites, so each edge is drawn between the two states'
 * ancestors that are siblings. A transition that stays in an atomic state (targetless, or to
 * itself) is written inside the state (`↻ EVENT`) rather than as a self-loop, whose label
 * mermaid lays over its neighbours'; on a composite state it is omitted. `current` (ids of
 * active leaf states) marks the group's current states with the `current` class.
 */
export function toMermaid(definition: StateNodeJson, options: MermaidOptions = {}): string {
  const index = indexStates(definition);
  const { edges, stays } = collectEdges(index);
  for (const [id, notes] of Object.entries(options.notes ?? {})) {
    const state = index.get(id);
    if (state) stays.set(state.mermaidId, [...notes, ...(stays.get(state.mermaidId) ?? [])]);
  }
  const lines = ['stateDiagram-v2'];
  const root = index.get(options.root ?? definition.id);
  if (root && options.root !== undefined && options.root !== definition.id) {
    // One part of the chart: its inside at the top level, what leaves it not drawn.
    emitInside(root, index, edges, stays, 0, lines);
    lines.push(...markCurrent(index, options.current ?? [], root));
    return `${lines.join('\n')}\n`;
  }
  if (root) {
    lines.push(`  [*] --> ${root.mermaidId}`);
    emitState(root, index, edges, stays, 1, lines);
  }
  for (const edge of edges.get('') ?? []) lines.push(`  ${edge}`);
  lines.push(...markCurrent(index, options.current ?? []));
  return `${lines.join('\n')}\n`;
}

function indexStates(root: StateNodeJson): Map<string, IndexedState> {
  const index = new Map<string, IndexedState>();
  const used = new Set<string>();
  const visit = (def: StateNodeJson, parentPath: readonly string[]): void => {
    const base = def.id.replace(/[^A-Za-z0-9_]/g, '_') || 'state';
    let mermaidId = base;
    for (let n = 2; used.has(mermaidId); n++) mermaidId = `${base}_${n}`;
    used.add(mermaidId);
    const path = [...parentPath, def.id];
    index.set(def.id, { def, path, mermaidId });
    for (const child of Object.values(def.states)) visit(child, path);
  };
  visit(root, []);
  return index;
}

/**
 * Edge lines keyed by the id of the composite they are drawn in ('' = top level), and the
 * `↻` lines of atomic states that stay put, by mermaid id. Transitions between the same two
 * states under the same guard become one edge listing their events; such edges on the same
 * events under different guards become one. Refusals (transitions whose only job is the
 * `refuse` action) are not drawn: the state does not accept the event. Nor are transitions of
 * a composite into its own children (a resync).
 */
function collectEdges(index: ReadonlyMap<string, IndexedState>): {
  edges: Map<string, string[]>;
  stays: Map<string, string[]>;
} {
  const grouped = new Map<
    string,
    { container: string; from: string; to: string; guard: string; events: string[] }
  >();
  const add = (container: string, from: string, to: string, guard: string, event: string): void => {
    const key = `${container}|${from}|${to}|${guard}`;
    const edge = grouped.get(key) ?? { container, from, to, guard, events: [] };
    if (!edge.events.includes(event)) edge.events.push(event);
    grouped.set(key, edge);
  };
  for (const source of index.values()) {
    const transitions = [
      ...(source.def.transitions ?? []),
      ...eventlessTransitions(source.def).map((t) => ({ ...t, eventType: '' })),
    ];
    for (const transition of transitions) {
      if (isRefusal(transition)) continue;
      const guard = guardName(transition.guard) ?? '';
      const targets = (transition.target ?? [])
        .map((t) => index.get(targetId(t)))
        .filter((t): t is IndexedState => t !== undefined);
      if (targets.length === 0) {
        if (Object.keys(source.def.states).length > 0) continue;
        add(parentOf(source), source.mermaidId, source.mermaidId, guard, transition.eventType);
        continue;
      }
      for (const target of targets) {
        if (
          target.path.length > source.path.length &&
          target.path[source.path.length - 1] === source.def.id
        ) {
          continue;
        }
        const [from, to, container] = liftToSiblings(source, target, index);
        add(container, from.mermaidId, to.mermaidId, guard, transition.eventType);
      }
    }
  }
  // One edge per pair of states: the same events under different guards are one line of
  // its label (`[a or b]`), other events each a line of their own.
  const pairs = new Map<
    string,
    {
      container: string;
      from: string;
      to: string;
      lines: Map<string, { events: string[]; guards: string[] }>;
    }
  >();
  for (const edge of grouped.values()) {
    const key = `${edge.container}|${edge.from}|${edge.to}`;
    const pair = pairs.get(key) ?? {
      ...edge,
      lines: new Map<string, { events: string[]; guards: string[] }>(),
    };
    pairs.set(key, pair);
    const events = [...edge.events].sort().join(',');
    const line = pair.lines.get(events);
    if (line) line.guards.push(edge.guard);
    else pair.lines.set(events, { events: edge.events, guards: [edge.guard] });
  }
  const edges = new Map<string, string[]>();
  const stays = new Map<string, string[]>();
  for (const pair of pairs.values()) {
    const texts = [...pair.lines.values()].map(({ events, guards }) =>
      labelText(events, guards.includes('') ? '' : guards.join(' or ')),
    );
    const state = index.get(idOf(index, pair.from));
    if (pair.from === pair.to && state && Object.keys(state.def.states).length === 0) {
      stays.set(pair.from, [
        ...(stays.get(pair.from) ?? []),
        ...texts.flatMap((text) => wrap(`↻ ${text}`)),
      ]);
      continue;
    }
    const list = edges.get(pair.container) ?? [];
    list.push(`${pair.from} --> ${pair.to} : ${texts.flatMap(wrap).join('<br/>')}`);
    edges.set(pair.container, list);
  }
  return { edges, stays };
}

/** The state id of a mermaid id. */
function idOf(index: ReadonlyMap<string, IndexedState>, mermaidId: string): string {
  for (const [id, state] of index) if (state.mermaidId === mermaidId) return id;
  return '';
}

/** A transition that only answers a refusal: the state does not take the event. */
function isRefusal(transition: TransitionJson): boolean {
  const actions = (transition as { actions?: unknown }).actions;
  if (!Array.isArray(actions) || actions.length === 0) return false;
  const first: unknown = actions[0];
  const name =
    typeof first === 'object' && first !== null ? (first as { type?: unknown }).type : first;
  return name === 'refuse';
}

/**
 * Mermaid `class` lines marking the given states as current (`classDef current`): pass the ids
 * of the active leaf states (see {@link activeStateIds}).
 */
function markCurrent(
  index: ReadonlyMap<string, IndexedState>,
  active: readonly string[],
  within?: IndexedState,
): string[] {
  const ids = active
    .map((id) => index.get(id))
    .filter((state): state is IndexedState => state !== undefined)
    .filter((state) => !within || (state !== within && state.path.includes(within.def.id)))
    .map((state) => state.mermaidId);
  if (ids.length === 0) return [];
  return [
    '  classDef current fill:#ffd166,stroke:#b35c00,stroke-width:3px',
    ...ids.map((id) => `  class ${id} current`),
  ];
}

/**
 * Ids of the active leaf states of an XState state value, e.g.
 * `{lifecycle: 'active', membership: {rebalancing: 'revoking'}}` →
 * `['group.lifecycle.active', 'group.membership.rebalancing.revoking']`.
 */
export function activeStateIds(machineId: string, value: unknown): string[] {
  const ids: string[] = [];
  const walk = (node: unknown, path: string): void => {
    if (typeof node === 'string') ids.push(`${path}.${node}`);
    else if (typeof node === 'object' && node !== null) {
      for (const [key, child] of Object.entries(node)) walk(child, `${path}.${key}`);
    }
  };
  walk(value, machineId);
  return ids;
}

function emitState(
  state: IndexedState,
  index: ReadonlyMap<string, IndexedState>,
  edges: ReadonlyMap<string, readonly string[]>,
  stays: ReadonlyMap<string, readonly string[]>,
  depth: number,
  lines: string[],
): void {
  const indent = '  '.repeat(depth);
  const label = state.def.key.replace(/"/g, "'");
  if (Object.keys(state.def.states).length === 0) {
    lines.push(`${indent}state "${label}" as ${state.mermaidId}`);
    // Description lines, drawn inside the state's box under its name.
    for (const line of stays.get(state.mermaidId) ?? [])
      lines.push(`${indent}${state.mermaidId} : ${line}`);
    return;
  }
  // No space before `{`: mermaid would take it into the state id.
  lines.push(`${indent}state "${label}" as ${state.mermaidId}{`);
  emitInside(state, index, edges, stays, depth, lines);
  lines.push(`${indent}}`);
}

/** What is inside a composite state: its children (or regions), initial state and edges. */
function emitInside(
  state: IndexedState,
  index: ReadonlyMap<string, IndexedState>,
  edges: ReadonlyMap<string, readonly string[]>,
  stays: ReadonlyMap<string, readonly string[]>,
  depth: number,
  lines: string[],
): void {
  const indent = '  '.repeat(depth);
  const children = Object.values(state.def.states)
    .map((child) => index.get(child.id))
    .filter((child): child is IndexedState => child !== undefined);
  if (state.def.type === 'parallel') {
    children.forEach((child, i) => {
      if (i > 0) lines.push(`${indent}  --`);
      emitState(child, index, edges, stays, depth + 1, lines);
    });
  } else {
    for (const ref of state.def.initial?.target ?? []) {
      const initial = index.get(targetId(ref));
      const child = initial && childOnPath(state, initial, index);
      if (child) lines.push(`${indent}  [*] --> ${child.mermaidId}`);
    }
    for (const child of children) emitState(child, index, edges, stays, depth + 1, lines);
  }
  for (const edge of edges.get(state.def.id) ?? []) lines.push(`${indent}  ${edge}`);
}

/**
 * The ancestors-or-selves of `source` and `target` that are children of their closest common
 * ancestor, and that ancestor's id (where the edge is drawn).
 */
function liftToSiblings(
  source: IndexedState,
  target: IndexedState,
  index: ReadonlyMap<string, IndexedState>,
): [IndexedState, IndexedState, string] {
  let common = 0;
  while (
    common < source.path.length &&
    common < target.path.length &&
    source.path[common] === target.path[common]
  ) {
    common++;
  }
  if (common === source.path.length || common === target.path.length) {
    // One contains the other: draw a self-loop on the outer one.
    const outer = common === source.path.length ? source : target;
    return [outer, outer, parentOf(outer)];
  }
  const from = index.get(source.path[common] ?? '') ?? source;
  const to = index.get(target.path[common] ?? '') ?? target;
  return [from, to, source.path[common - 1] ?? ''];
}

function childOnPath(
  parent: IndexedState,
  descendant: IndexedState,
  index: ReadonlyMap<string, IndexedState>,
): IndexedState | undefined {
  return index.get(descendant.path[parent.path.length] ?? '');
}

function parentOf(state: IndexedState): string {
  return state.path[state.path.length - 2] ?? '';
}

function targetId(ref: TargetRef): string {
  return typeof ref === 'string' ? ref.replace(/^#/, '') : ref.id;
}

/** Events, then the guard: one line of an edge's label before it is wrapped. */
function labelText(events: readonly string[], guard: string): string {
  const parts = [events.filter(Boolean).join(', '), guard === '' ? '' : `[${guard}]`].filter(
    Boolean,
  );
  // `:` and `;` end a mermaid label; `<` and `>` would be taken for markup.
  return (parts.join(' ') || 'always').replace(/[:;\n<>]/g, ' ');
}

/**
 * Lines of about {@link LABEL_WIDTH} characters: broken after a comma, before a guard or an
 * `or`, never inside a name.
 */
function wrap(text: string): string[] {
  const words = text.split(/(?<=,) | (?=\[)| (?=or )/);
  const lines: string[] = [];
  let line = '';
  for (const word of words) {
    if (line !== '' && line.length + 1 + word.length > LABEL_WIDTH) {
      lines.push(line);
      line = word;
    } else {
      line = line === '' ? word : `${line} ${word}`;
    }
  }
  if (line !== '') lines.push(line);
  return lines;
}

function guardName(guard: unknown): string | null {
  if (guard === undefined || guard === null) return null;
  if (typeof guard === 'string') return guard;
  if (typeof guard === 'function') return guard.name || 'guard';
  if (typeof guard === 'object' && 'type' in guard && typeof guard.type === 'string') {
    return guard.type;
  }
  return 'guard';
}
