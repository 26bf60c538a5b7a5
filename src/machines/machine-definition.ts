/**
 * The JSON shape of a machine definition as `machine.toJSON()` gives it, and a JSON-safe copy
 * that also carries eventless (`always`) transitions, which `toJSON()` leaves out. The group
 * chart's states are derived through eventless transitions, so without them a diagram of it
 * would show hardly any arrows.
 */
import type { AnyStateMachine, AnyStateNode } from 'xstate';

/** A transition target: `'#id'` in JSON, a state node (with its `id`) in memory. */
export type TargetRef = string | { readonly id: string };

export interface TransitionJson {
  readonly target?: readonly TargetRef[] | undefined;
  readonly eventType: string;
  /** A guard name, `{ type }` object, or (in memory) a function. */
  readonly guard?: unknown;
}

/** One state node of a definition; the root is the machine. */
export interface StateNodeJson {
  readonly id: string;
  readonly key: string;
  readonly type: string;
  readonly initial?:
    | {
        readonly target: readonly TargetRef[];
        /** In memory the state node itself, which is how `always` is found without the machine. */
        readonly source?: unknown;
      }
    | undefined;
  readonly states: Readonly<Record<string, StateNodeJson>>;
  readonly transitions?: readonly TransitionJson[];
  /** Eventless transitions; present in {@link machineDefinition}'s output. */
  readonly always?: readonly TransitionJson[];
}

/**
 * `machine.toJSON()` as plain JSON, with each state's eventless transitions added as `always`
 * (targets as `'#id'`, guards by name). This is what the statechart endpoint serves.
 */
export function machineDefinition(machine: AnyStateMachine): StateNodeJson {
  const json = JSON.parse(JSON.stringify(machine.toJSON())) as StateNodeJson;
  return withAlways(json, machine.root);
}

function withAlways(json: StateNodeJson, node: AnyStateNode): StateNodeJson {
  const states: Record<string, StateNodeJson> = {};
  for (const [key, child] of Object.entries(json.states)) {
    const childNode = node.states[key];
    states[key] = childNode ? withAlways(child, childNode) : child;
  }
  const always = (node.always ?? []).map(
    (t) => JSON.parse(JSON.stringify(t.toJSON())) as TransitionJson,
  );
  return { ...json, states, always };
}

/**
 * Eventless transitions of a state definition: its `always` list, or, for the in-memory
 * `toJSON()` output, those of the state node its initial transition names as source.
 */
export function eventlessTransitions(state: StateNodeJson): readonly TransitionJson[] {
  if (state.always) return state.always;
  const source = state.initial?.source;
  if (typeof source !== 'object' || source === null || !('always' in source)) return [];
  const always = (source as { always?: unknown }).always;
  return Array.isArray(always) ? (always as TransitionJson[]) : [];
}
