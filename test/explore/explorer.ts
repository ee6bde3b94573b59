import * as crypto from 'node:crypto';
import { canonicalJson } from '../../shared/canonical-json.js';

/**
 * A breadth-first explicit-state explorer.
 *
 * A model is an initial state, a successor function (every step any process,
 * the store or the environment can take from a state, each with a readable
 * label) and a list of invariants. The explorer visits every state reachable
 * within `maxDepth` steps, each once: states are deduplicated by the sha-1 of
 * their canonical JSON (keys sorted at every level), so two interleavings
 * that reach the same state are expanded once. Breadth-first order makes the
 * first counterexample found for an invariant a shortest one; its trace is
 * rebuilt by replaying, from the initial state, the step recorded with each
 * parent link.
 *
 * Guarantees: within the depth bound every reachable state is checked against
 * every invariant. A state that breaks one is not expanded (its successors
 * would only repeat the news) — unless the run hunts for given invariants
 * (`stopWhen`): then a state that breaks another one still leads on, so one
 * broken condition cannot hide a counterexample of the next.
 *
 * Non-guarantees: nothing beyond the bound; a model's `project` must be
 * sound (see Model); a sha-1 collision would merge two states (about 2^-100
 * at these sizes).
 */

export interface Step<S> {
  /** What happened, for a person reading a trace: who did what, and what came of it. */
  readonly label: string;
  readonly next: S;
}

export interface Invariant<S> {
  readonly name: string;
  /** null when the invariant holds; otherwise what is wrong, in one line. */
  readonly check: (s: S) => string | null;
}

export interface Model<S> {
  readonly name: string;
  readonly initial: S;
  /** Deterministic: the same state gives the same steps in the same order (traces are replayed). */
  readonly steps: (s: S) => readonly Step<S>[];
  readonly invariants: readonly Invariant<S>[];
  /**
   * What of a state its future depends on, when that is less than the whole
   * state: two states with the same projection must have the same successors
   * (up to the same projection) and break the same invariants, so one of
   * them is enough. E.g. a row version nobody holds a copy of matters only
   * as "equal to or older than the copies in flight". Default: the state.
   */
  readonly project?: (s: S) => unknown;
}

export interface ExploreOptions {
  readonly maxDepth: number;
  /** Stop as soon as each of these invariants has a counterexample (the variants' runs). Default: explore the whole bounded space. */
  readonly stopWhen?: readonly string[];
}

export interface Violation {
  readonly invariant: string;
  readonly message: string;
  /** Step labels from the initial state to the violating one. */
  readonly trace: readonly string[];
}

export interface ExploreResult {
  readonly model: string;
  /** States whose successors were generated (the last level's are seen and checked, not expanded). */
  readonly explored: number;
  /** Distinct states seen (the deduplicated set). */
  readonly states: number;
  /** Successors generated, duplicates included. */
  readonly transitions: number;
  /** Deepest level reached. */
  readonly depth: number;
  /** The frontier ran dry before the bound: the model's whole state space was explored. */
  readonly exhaustive: boolean;
  /** Stopped early because every invariant of `stopWhen` had a counterexample. */
  readonly stopped: boolean;
  /** At most one per invariant: the first (a shortest) counterexample. */
  readonly violations: readonly Violation[];
  readonly ms: number;
}

/**
 * The project's canonical JSON (canonical-json.ts), written for speed: the
 * explorer spends most of its time here. Same text for every value a model
 * state holds (plain objects, arrays, strings, finite numbers, booleans,
 * null); the unit test holds the two to that. Objects of one shape (the same
 * keys in the same order) are many and shapes are few, so each shape's
 * sorted key order, with its keys quoted, is worked out once.
 */
interface Shape {
  readonly keys: readonly string[];
  readonly order: readonly string[];
  /** `"key":` for each key of `order`. */
  readonly quoted: readonly string[];
}
const shapes = new Map<string, Shape[]>();

function shapeOf(keys: readonly string[]): Shape {
  const id = `${keys.length}:${keys[0] ?? ''}`;
  let known = shapes.get(id);
  if (known === undefined) shapes.set(id, (known = []));
  search: for (const shape of known) {
    for (let i = 0; i < keys.length; i++) if (shape.keys[i] !== keys[i]) continue search;
    return shape;
  }
  const order = [...keys].sort();
  const shape: Shape = { keys, order, quoted: order.map((k) => `${JSON.stringify(k)}:`) };
  known.push(shape);
  return shape;
}

export function canonicalText(value: unknown): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError(`state has a non-finite number: ${value}`);
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object': {
      if (Array.isArray(value)) {
        let out = '[';
        for (let i = 0; i < value.length; i++) {
          if (i) out += ',';
          out += canonicalText(value[i]);
        }
        return `${out}]`;
      }
      const o = value as Record<string, unknown>;
      const shape = shapeOf(Object.keys(o));
      let out = '{';
      let first = true;
      for (let i = 0; i < shape.order.length; i++) {
        const v = o[shape.order[i]!];
        if (v === undefined) continue;
        if (!first) out += ',';
        out += shape.quoted[i]! + canonicalText(v);
        first = false;
      }
      return `${out}}`;
    }
    default:
      throw new TypeError(`state holds a ${typeof value}`);
  }
}

// One-shot hashing where the runtime has it (Node 20.12+): no hash object per state.
const sha1: (text: string) => string =
  typeof crypto.hash === 'function' ? (text) => crypto.hash('sha1', text, 'base64') : (text) => crypto.createHash('sha1').update(text).digest('base64');

export function stateKey(s: unknown): string {
  return sha1(canonicalText(s));
}

/** For the unit test: the fast text is the project's canonical JSON. */
export const projectCanonicalJson = canonicalJson;

export function explore<S>(model: Model<S>, options: ExploreOptions): ExploreResult {
  const started = performance.now();
  const seen = new Map<string, number>();
  // Parent links by state number: enough to rebuild any trace without keeping old states.
  // Parent links and the step taken (its place among the parent's successors), by state number:
  // a trace is rebuilt by replaying those steps from the initial state, so no old state and no
  // label is kept.
  const parent: number[] = [];
  const via: number[] = [];
  const violations = new Map<string, Violation>();
  const wanted = options.stopWhen ? new Set(options.stopWhen) : null;
  let explored = 0;
  let transitions = 0;
  let depth = 0;

  const traceOf = (n: number): string[] => {
    const moves: number[] = [];
    for (let i = n; i > 0; i = parent[i]!) moves.push(via[i]!);
    const out: string[] = [];
    let s = model.initial;
    for (const k of moves.reverse()) {
      const step = model.steps(s)[k]!;
      out.push(step.label);
      s = step.next;
    }
    return out;
  };
  const add = (s: S, from: number, move: number): number | null => {
    const key = stateKey(model.project ? model.project(s) : s);
    if (seen.has(key)) return null;
    const n = parent.length;
    seen.set(key, n);
    parent.push(from);
    via.push(move);
    return n;
  };
  /** Records the state's violations; true when it breaks at least one invariant. */
  const broken = (s: S, n: number): boolean => {
    let bad = false;
    for (const inv of model.invariants) {
      const message = inv.check(s);
      if (message === null) continue;
      bad = true;
      if (!violations.has(inv.name)) violations.set(inv.name, { invariant: inv.name, message, trace: traceOf(n) });
    }
    return bad;
  };
  const done = () => wanted !== null && [...wanted].every((w) => violations.has(w));

  add(model.initial, -1, -1);
  let frontier: { s: S; n: number }[] = [];
  const leadsOn = (s: S, n: number) => !broken(s, n) || wanted !== null;
  if (leadsOn(model.initial, 0)) frontier.push({ s: model.initial, n: 0 });

  while (frontier.length && depth < options.maxDepth && !done()) {
    const next: { s: S; n: number }[] = [];
    depth++;
    for (const { s, n } of frontier) {
      explored++;
      const steps = model.steps(s);
      for (let k = 0; k < steps.length; k++) {
        const step = steps[k]!;
        transitions++;
        const m = add(step.next, n, k);
        if (m === null) continue;
        if (leadsOn(step.next, m)) next.push({ s: step.next, n: m });
      }
      if (done()) break;
    }
    frontier = next;
  }
  return {
    model: model.name,
    explored,
    states: seen.size,
    transitions,
    depth,
    exhaustive: frontier.length === 0,
    stopped: done(),
    violations: [...violations.values()],
    ms: Math.round(performance.now() - started),
  };
}
