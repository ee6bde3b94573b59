/**
 * The contract between TransitionPlan and rollout_apply (PL/pgSQL): the JSON
 * paths the SQL reads are taken from the migration's own text, and each one
 * must be a field the plan schema requires — so a field renamed on the
 * TypeScript side is refused by name instead of being read as null.
 */
import { describe, expect, it } from 'vitest';
import { migrations } from '../../shared/adapters/postgres/schema.js';
import type { GateReading } from '../../shared/rollout/gates.js';
import type { RolloutView, StageStatus } from '../../shared/rollout/model.js';
import { parseRolloutSpec } from '../../shared/rollout/spec.js';
import {
  checkPlan,
  freshStages,
  isWellFormedPlan,
  MalformedPlanError,
  planTransition,
  stageSetSchema,
  transitionPlanSchema,
  type Transition,
  type TransitionPlan,
} from '../../shared/rollout/transitions.js';

/** The newest migration that (re)defines rollout_apply: the SQL a store runs. */
function rolloutApplySql(): string {
  const defining = migrations.filter((m) => /FUNCTION rollout_apply\b/.test(m.sql));
  const sql = defining.at(-1)!.sql;
  return sql.slice(sql.search(/FUNCTION rollout_apply\b/)).replace(/\s+/g, ' ');
}

/** Each jsonb variable of rollout_apply, the plan path it holds, and the SQL that binds it (checked against the function). */
const BINDINGS: Record<string, { readonly path: string; readonly boundBy: string }> = {
  p: { path: '', boundBy: 'p jsonb)' },
  n: { path: 'next', boundBy: "n jsonb := p->'next';" },
  x: { path: 'expect', boundBy: "x jsonb := p->'expect';" },
  changes: { path: 'stageChanges', boundBy: "changes jsonb := p->'stageChanges';" },
  c: { path: 'stageChanges[]', boundBy: 'c := changes->i;' },
  s: { path: 'stageChanges[].set', boundBy: "s := c->'set';" },
  v: { path: 'newStages[]', boundBy: "FROM jsonb_array_elements(p->'newStages') AS v;" },
  events: { path: 'events', boundBy: "events jsonb := p->'events';" },
  ev: { path: 'events[]', boundBy: 'ev := events->i;' },
};

/** Every plan path rollout_apply reads; `optional`: it is only read after `s ? 'key'` says it is there. */
function sqlReads(): Map<string, { optional: boolean }> {
  const sql = rolloutApplySql();
  const reads = new Map<string, { optional: boolean }>();
  for (const [, variable, op, key] of sql.matchAll(/\b([a-z_]\w*)\s*(->>|->|\?)\s*'(\w+)'/g)) {
    const binding = BINDINGS[variable!];
    if (!binding) throw new Error(`rollout_apply reads '${key}' from ${variable}, a jsonb variable this test does not know: add it to BINDINGS`);
    const path = binding.path ? `${binding.path}.${key}` : key!;
    reads.set(path, { optional: (reads.get(path)?.optional ?? false) || op === '?' });
  }
  return reads;
}

const spec = parseRolloutSpec({ target: { service: 'checkout', version: 'v2' }, preset: 'canary', bakeSeconds: 0 });
const T = 1_700_000_000_000;
const token = { name: 'promotion_leader', holder: 'n1', epoch: 7 };
const ctx = { now: T, token, actor: 'promoter:n1' };
const view = (state: RolloutView['rollout']['state'], phases: StageStatus['phase'][]): RolloutView => ({
  rollout: {
    id: 'r',
    spec,
    state,
    attempt: 1,
    version: 5,
    createdAt: T,
    updatedAt: T,
    lastProgressAt: T,
    deadlineExceededAt: null,
    stateBy: null,
    stateReason: null,
  },
  stages: freshStages({ rollout: { spec } as RolloutView['rollout'] }).map((s, i) => ({ ...s, phase: phases[i]! })),
  metrics: new Map(),
  alarms: {},
  gates: new Map(),
});
// Between them every array the SQL walks has an element: stage changes and events, new stages.
const promote = planTransition(view('running', ['active', 'pending']), { kind: 'promote', stage: 0, then: 'activate_next' }, ctx);
const retry = planTransition(view('aborted', ['rolled_back', 'pending']), { kind: 'retry' }, ctx);

type Json = Record<string, unknown>;
const copy = (plan: TransitionPlan): Json => JSON.parse(JSON.stringify(plan)) as Json;

/** The object holding the path's last key (arrays: their first element), and that key; null when a sample has no such element. */
function parentOf(plan: Json, path: string): { holder: Json; key: string; field: string } | null {
  const steps = path.split('.');
  const key = steps.pop()!;
  let holder: unknown = plan;
  const field: (string | number)[] = [];
  for (const step of steps) {
    const name = step.replace('[]', '');
    holder = (holder as Json)[name];
    field.push(name);
    if (step.endsWith('[]')) {
      holder = (holder as unknown[])[0];
      field.push(0);
      if (holder === undefined) return null;
    }
  }
  return { holder: holder as Json, key, field: [...field, key].join('.') };
}

function refusal(plan: unknown): string {
  try {
    checkPlan(plan);
  } catch (err) {
    expect(err).toBeInstanceOf(MalformedPlanError);
    return (err as Error).message;
  }
  throw new Error('the plan was accepted');
}

describe('TransitionPlan and rollout_apply', () => {
  it('the SQL binds its jsonb variables as this test reads them', () => {
    const sql = rolloutApplySql();
    for (const [variable, { boundBy }] of Object.entries(BINDINGS)) expect(sql, `binding of ${variable}`).toContain(boundBy);
  });

  it('rollout_apply reads these JSON paths of a plan', () => {
    const reads = sqlReads();
    expect([...reads.keys()].sort()).toEqual(
      [
        'rolloutId',
        'next',
        'next.state',
        'next.attempt',
        'next.version',
        'next.updatedAt',
        'next.lastProgressAt',
        'next.deadlineExceededAt',
        'next.stateBy',
        'next.stateReason',
        'expect',
        'expect.version',
        'expect.state',
        'expect.attempt',
        'stageChanges',
        'stageChanges[].index',
        'stageChanges[].expect',
        'stageChanges[].set',
        ...['phase', 'activatedAt', 'promotedAt', 'promotedEpoch', 'promotedBy', 'rolledBackAt', 'reason'].map((k) => `stageChanges[].set.${k}`),
        'newStages',
        'newStages[].index',
        'newStages[].name',
        'events',
        'events[].id',
        'events[].detailType',
        'events[].time',
        'events[].detail',
      ].sort(),
    );
    expect([...reads].filter(([, r]) => r.optional).map(([p]) => p)).toEqual([...reads.keys()].filter((p) => p.startsWith('stageChanges[].set.')));
  });

  it('a plan without any path the SQL reads unconditionally is refused, naming the field', () => {
    const required = [...sqlReads()].filter(([, r]) => !r.optional).map(([p]) => p);
    for (const path of required) {
      const sample = [promote, retry]
        .map(copy)
        .map((plan) => ({ plan, at: parentOf(plan, path) }))
        .find(({ at }) => at);
      if (!sample) throw new Error(`no sample plan has an element holding ${path}: add one`);
      const { plan, at } = sample;
      expect(at!.key in at!.holder, `rollout_apply reads ${path}, which planTransition's plan does not carry`).toBe(true);
      delete at!.holder[at!.key];
      expect(refusal(plan), path).toContain(`${at!.field}: `);
    }
  });

  it('a stage change sets exactly the fields the SQL tests for, and a key it would skip is refused', () => {
    const tested = [...sqlReads()].filter(([, r]) => r.optional).map(([p]) => p.slice('stageChanges[].set.'.length));
    expect(Object.keys(stageSetSchema.unwrap().shape).sort()).toEqual(tested.sort());
    const plan = copy(promote);
    const set = parentOf(plan, 'stageChanges[].set.promotedEpoch')!.holder;
    set.promotionEpoch = set.promotedEpoch;
    delete set.promotedEpoch;
    expect(refusal(plan)).toContain('stageChanges.0.set: Unrecognized key: "promotionEpoch"');
  });

  it('a renamed rollout field is refused by its name', () => {
    const plan = copy(promote);
    const next = plan.next as Json;
    next.reason = next.stateReason;
    delete next.stateReason;
    expect(refusal(plan)).toMatch(/^malformed transition plan: next\.stateReason: /);
  });

  it('a plan whose rows name another rollout is refused', () => {
    const plan = copy(promote);
    (plan.next as Json).id = 'other';
    expect(refusal(plan)).toContain('next.id: must be the rolloutId r');
  });

  it('planTransition never hands out a malformed plan', () => {
    const v = view('running', ['pending', 'pending']);
    // A store that lost a column on the way back: the plan would carry the hole into the next write.
    const holed = { ...v, rollout: { ...v.rollout, deadlineExceededAt: undefined } } as unknown as RolloutView;
    expect(() => planTransition(holed, { kind: 'activate', stage: 0 }, ctx)).toThrow(MalformedPlanError);
    expect(() => planTransition(holed, { kind: 'activate', stage: 0 }, ctx)).toThrow(/next\.deadlineExceededAt: /);
    expect(checkPlan(promote)).toBe(promote);
  });
});

const reading = (outcome: GateReading['outcome'], value: number | null): GateReading => ({
  gate: 'g',
  type: 'prometheus',
  attempt: 1,
  stage: 0,
  at: T,
  outcome,
  value,
  query: 'up',
  answer: '{}',
  reason: outcome === 'pass' ? null : 'why',
  source: 'poll',
});

describe('checkPlan without a full parse', () => {
  /** A plan of every kind, from the states each applies to. */
  const everyKind: TransitionPlan[] = (
    [
      [view('running', ['pending', 'pending']), { kind: 'activate', stage: 0 }],
      [view('running', ['active', 'pending']), { kind: 'promote', stage: 0, then: 'activate_next' }],
      [view('running', ['promoted', 'active']), { kind: 'promote', stage: 1, then: 'complete' }],
      [view('running', ['active', 'pending']), { kind: 'rollback', stage: 0, reason: 'error rate' }],
      [view('running', ['active', 'pending']), { kind: 'deadline', abort: true }],
      [view('running', ['active', 'pending']), { kind: 'deadline', abort: false }],
      [view('paused', ['active', 'pending']), { kind: 'promote_full' }],
      [view('running', ['active', 'pending']), { kind: 'pause', reason: 'looking' }],
      [view('running', ['active', 'pending']), { kind: 'pause' }],
      [view('paused', ['active', 'pending']), { kind: 'resume' }],
      [view('running', ['active', 'pending']), { kind: 'abort', reason: 'no' }],
      [view('aborted', ['rolled_back', 'pending']), { kind: 'retry' }],
      // Decided by a provider gate: the reading rides in the event.
      [view('running', ['active', 'pending']), { kind: 'rollback', stage: 0, reason: 'gate g', readings: [reading('fail', 0.3)] }],
      [view('running', ['active', 'pending']), { kind: 'pause', reason: 'gate g', readings: [reading('inconclusive', null)] }],
      [view('running', ['active', 'pending']), { kind: 'promote', stage: 0, then: 'activate_next', readings: [reading('pass', 0.01)] }],
      // Decided on pushed metrics: the reading judged rides in the event.
      [
        view('running', ['active', 'pending']),
        { kind: 'promote', stage: 0, then: 'activate_next', metrics: { requests: 100, errors: 1, p99LatencyMs: null, observedAt: 5 } },
      ],
      [
        view('running', ['active', 'pending']),
        { kind: 'rollback', stage: 0, reason: 'error rate', metrics: { requests: 100, errors: 90, p99LatencyMs: 812.5, observedAt: 5 } },
      ],
    ] as [RolloutView, Transition][]
  ).map(([v, t]) => planTransition(v, t, ctx));

  const ODD: unknown[] = [undefined, null, '', 'x', -1, 0, 1.5, 2 ** 53, Number.NaN, Infinity, 101, true, [], {}];
  /** Every way of spoiling one field or one object of the plan: a missing key, an odd value, an unknown key. */
  function* spoiled(plan: Json): Generator<{ what: string; plan: Json }> {
    function* walk(node: unknown, path: (string | number)[]): Generator<(string | number)[]> {
      if (node === null || typeof node !== 'object') return;
      for (const [k, v] of Object.entries(node)) {
        const at = [...path, Array.isArray(node) ? Number(k) : k];
        yield at;
        yield* walk(v, at);
      }
    }
    const holder = (p: Json, at: (string | number)[]) =>
      at.slice(0, -1).reduce<Record<string | number, unknown>>((o, k) => o[k] as Record<string | number, unknown>, p);
    for (const at of [[], ...walk(plan, [])]) {
      const key = at.at(-1);
      if (key !== undefined) {
        const p = JSON.parse(JSON.stringify(plan)) as Json;
        delete holder(p, at)[key];
        yield { what: `${at.join('.')} deleted`, plan: p };
        for (const odd of ODD) {
          const q = JSON.parse(JSON.stringify(plan)) as Json;
          holder(q, at)[key] = odd;
          yield { what: `${at.join('.')} = ${String(JSON.stringify(odd))}`, plan: q };
        }
      }
      const p = JSON.parse(JSON.stringify(plan)) as Json;
      const target = key === undefined ? p : holder(p, at)[key];
      if (target !== null && typeof target === 'object' && !Array.isArray(target)) {
        (target as Json).unknownKey = 1;
        yield { what: `${at.join('.') || '(root)'} with an unknown key`, plan: p };
      }
    }
  }

  it('takes every plan planTransition makes without the full parse', () => {
    for (const plan of everyKind) expect(isWellFormedPlan(plan), plan.transition).toBe(true);
  });

  it('takes no plan the schema refuses: every field of every kind of plan, spoiled', () => {
    let refused = 0;
    for (const plan of everyKind) {
      for (const { what, plan: p } of spoiled(copy(plan))) {
        if (transitionPlanSchema.safeParse(p).success) continue;
        refused++;
        expect(isWellFormedPlan(p), `${plan.transition}: ${what}`).toBe(false);
        expect(() => checkPlan(p), `${plan.transition}: ${what}`).toThrow(MalformedPlanError);
      }
    }
    expect(refused).toBeGreaterThan(1000);
  });
});
