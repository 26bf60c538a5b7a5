/**
 * Converts a machine definition to mermaid `stateDiagram-v2` text, rendered offline by the web
 * UI (DESIGN.md §13: no maintained offline XState visualiser exists).
 */
import type { StateNodeJson, TargetRef, TransitionJson } from './machine-definition.js';
import { eventlessTransitions } from './machine-definition.js';

interface IndexedState {
  readonly def: StateNodeJson;
  /** Ids from the root down to this state. */
  readonly path: readonly string[];
  readonly mermaidId: string;
}

/**
 * Mermaid `stateDiagram-v2` for a definition in the shape of `machine.toJSON()` (or of
 * `machineDefinition(machine)`, which also names eventless transitions in JSON).
 *
 * Compound states become `state "key" as id{ … }` with `[*] -->` their initial state; the
 * regions of a parallel state are separated by `--`. Transitions are labelled with their event
 * (`[guard]` appended when guarded; eventless ones show just the guard). Mermaid cannot draw an
 * edge between states nested in different composites, so each edge is drawn between the two
 * states' ancestors that are siblings; targetless transitions are self-loops on atomic states
 * and omitted on composite ones. `current` (ids of active leaf states) marks the group's
 * current states with the `current` class.
 */
export function toMermaid(
  definition: StateNodeJson,
  options: { readonly current?: readonly string[] } = {},
): string {
  const index = indexStates(definition);
  const edges = collectEdges(index);
  const lines = ['stateDiagram-v2'];
  const root = index.get(definition.id);
  if (root) {
    lines.push(`  [*] --> ${root.mermaidId}`);
    emitState(root, index, edges, 1, lines);
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
 * Edge lines keyed by the id of the composite they are drawn in ('' = top level). Transitions
 * between the same two states under the same guard become one edge listing their events.
 * Refusals (transitions whose only job is the `refuse` action) are not drawn: the state does not
 * accept the event. Nor are transitions of a composite into its own children (a resync).
 */
function collectEdges(index: ReadonlyMap<string, IndexedState>): Map<string, string[]> {
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
  const edges = new Map<string, string[]>();
  for (const edge of grouped.values()) {
    const list = edges.get(edge.container) ?? [];
    list.push(`${edge.from} --> ${edge.to} : ${labelOf(edge.events, edge.guard)}`);
    edges.set(edge.container, list);
  }
  return edges;
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
): string[] {
  const ids = active.map((id) => index.get(id)?.mermaidId).filter((id): id is string => !!id);
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
  depth: number,
  lines: string[],
): void {
  const indent = '  '.repeat(depth);
  const label = state.def.key.replace(/"/g, "'");
  const children = Object.values(state.def.states)
    .map((child) => index.get(child.id))
    .filter((child): child is IndexedState => child !== undefined);
  if (children.length === 0) {
    lines.push(`${indent}state "${label}" as ${state.mermaidId}`);
    return;
  }
  // No space before `{`: mermaid would take it into the state id.
  lines.push(`${indent}state "${label}" as ${state.mermaidId}{`);
  if (state.def.type === 'parallel') {
    children.forEach((child, i) => {
      if (i > 0) lines.push(`${indent}  --`);
      emitState(child, index, edges, depth + 1, lines);
    });
  } else {
    for (const ref of state.def.initial?.target ?? []) {
      const initial = index.get(targetId(ref));
      const child = initial && childOnPath(state, initial, index);
      if (child) lines.push(`${indent}  [*] --> ${child.mermaidId}`);
    }
    for (const child of children) emitState(child, index, edges, depth + 1, lines);
  }
  for (const edge of edges.get(state.def.id) ?? []) lines.push(`${indent}  ${edge}`);
  lines.push(`${indent}}`);
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

function labelOf(events: readonly string[], guard: string): string {
  const parts = [events.filter(Boolean).join(', '), guard === '' ? '' : `[${guard}]`].filter(
    Boolean,
  );
  // `:` and `;` end a mermaid label.
  return (parts.join(' ') || 'always').replace(/[:;\n]/g, ' ');
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
