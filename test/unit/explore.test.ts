import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../shared/canonical-json.js';
import { canonicalText, explore, type Model } from '../explore/explorer.js';
import { leaseModel } from '../explore/models/lease.js';
import { ledgerModel } from '../explore/models/ledger.js';
import { promotionModel } from '../explore/models/promotion.js';
import { aliasModel } from '../explore/models/alias.js';
import { MODELS, SCOPES, VARIANT_RUNS, runCorrect, runVariant } from '../explore/suite.js';

/** A number line: +1 or +2 per step, up to 10. */
const line = (bad: number): Model<{ x: number }> => ({
  name: 'line',
  initial: { x: 0 },
  steps: (s) =>
    s.x >= 10 ? [] : [{ label: `+1 → ${s.x + 1}`, next: { x: s.x + 1 } }, ...(s.x <= 8 ? [{ label: `+2 → ${s.x + 2}`, next: { x: s.x + 2 } }] : [])],
  invariants: [{ name: 'not-bad', check: (s) => (s.x === bad ? `x is ${bad}` : null) }],
});

describe('the explorer', () => {
  it('reports a shortest counterexample, replayed from the initial state', () => {
    const r = explore(line(5), { maxDepth: 20 });
    expect(r.violations).toEqual([{ invariant: 'not-bad', message: 'x is 5', trace: ['+1 → 1', '+2 → 3', '+2 → 5'] }]);
  });

  it('visits each state once and knows when it has seen the whole space', () => {
    const r = explore(line(-1), { maxDepth: 20 });
    expect(r).toMatchObject({ states: 11, explored: 11, transitions: 19, exhaustive: true, violations: [] });
  });

  it('stops at the depth bound, and does not go past a violation unless hunting for another', () => {
    expect(explore(line(-1), { maxDepth: 2 })).toMatchObject({ depth: 2, states: 5, exhaustive: false });
    expect(explore(line(1), { maxDepth: 20 }).states).toBe(11);
    const hunt = explore(line(1), { maxDepth: 20, stopWhen: ['not-bad'] });
    expect(hunt).toMatchObject({ stopped: true, depth: 1 });
  });

  it('deduplicates by canonical JSON: key order does not make two states', () => {
    const m: Model<Record<string, number>> = {
      name: 'order',
      initial: {},
      steps: (s) =>
        Object.keys(s).length
          ? []
          : [
              { label: 'ab', next: { a: 1, b: 2 } },
              { label: 'ba', next: { b: 2, a: 1 } },
            ],
      invariants: [],
    };
    expect(explore(m, { maxDepth: 3 }).states).toBe(2);
  });

  it("keys states by the project's canonical JSON", () => {
    const models: Model<unknown>[] = [
      leaseModel(SCOPES.default.lease) as Model<unknown>,
      ledgerModel(SCOPES.default.ledger) as Model<unknown>,
      promotionModel(SCOPES.default.promotion) as Model<unknown>,
      promotionModel(SCOPES.default.held) as Model<unknown>,
      aliasModel(SCOPES.default.alias) as Model<unknown>,
    ];
    let compared = 0;
    for (const m of models) {
      // A walk that takes every step of a few levels: every kind of state a model holds.
      let level: unknown[] = [m.initial];
      for (let d = 0; d < 4; d++) {
        level = level.flatMap((s) => m.steps(s).map((x) => x.next)).slice(0, 200);
        for (const s of level) {
          expect(canonicalText(s)).toBe(canonicalJson(s));
          if (m.project) expect(canonicalText(m.project(s))).toBe(canonicalJson(m.project(s)));
          compared++;
        }
      }
    }
    expect(compared).toBeGreaterThan(1_000);
  });
});

describe.each(MODELS)('the %s model in the default scope', (name) => {
  // A guard against a run that never ends, not a bound on speed: the lease model takes ~15 s here alone, several times that under load.
  it('breaks no invariant in any reachable state', { timeout: 600_000 }, () => {
    const r = runCorrect('default', name);
    expect(r.violations).toEqual([]);
    expect(r.exhaustive || r.depth === SCOPES.default[name].maxDepth).toBe(true);
  });
});

describe('each broken variant is caught', () => {
  it.each(VARIANT_RUNS.map((run) => [`${run.variant} in the ${run.model} model breaks ${run.breaks.join(', ')}`, run] as const))('%s', (_, run) => {
    const r = runVariant('default', run);
    const caught = r.violations.filter((v) => run.breaks.includes(v.invariant));
    expect(caught.map((v) => v.invariant).sort()).toEqual([...run.breaks].sort());
    for (const v of caught) expect(v.trace.length).toBeGreaterThan(0);
  });
});

describe('the held-view write', () => {
  // The checks rollout_apply_with_reading makes beyond rollout_apply's, each shown to be needed: without it a
  // reading's decision on a held view applies where the evaluator, on the store as it is, decides otherwise.
  const counterexample = (variant: 'held-no-alarm-check' | 'held-no-metrics-check') => {
    const run = VARIANT_RUNS.find((r) => r.variant === variant)!;
    return runVariant('default', run).violations.find((v) => v.invariant === 'held-decision-current')!;
  };

  it('without the alarm check: a promotion decided before the alarm went to ALARM applies', () => {
    const v = counterexample('held-no-alarm-check');
    expect(v.trace.some((l) => l.includes('turns ALARM'))).toBe(true);
    expect(v.message).toMatch(/applied promote .* the evaluator decides rollback/);
  });

  it("without the active stage's reading check: a next stage's reading promotes past a breach another node stored", () => {
    const v = counterexample('held-no-metrics-check');
    expect(v.trace.some((l) => /a bad reading of stage 0 .* reaches n1\/0; recorded: stored/.test(l))).toBe(true);
    expect(v.trace.some((l) => /a good reading of stage 1 .* on its held view it sends promote/.test(l))).toBe(true);
    expect(v.message).toMatch(/applied promote .* the evaluator decides rollback/);
  });
});

describe('the alias write', () => {
  // UpdateAlias conditioned on the RevisionId read is what stops a deposed leader's write, decided before the
  // takeover, from landing after its successor converged the alias: the fence stopped nothing (it was passed in time).
  it('without the RevisionId: a zombie writes 50 % over the rollback its successor converged', () => {
    const run = VARIANT_RUNS.find((r) => r.variant === 'actuate-without-revision')!;
    const v = runVariant('default', run).violations.find((x) => x.invariant === 'alias-never-ahead')!;
    const zombie = v.trace.findIndex((l) => /^n0@1 converges half .*: write; pending record saved$/.test(l));
    const converged = v.trace.findIndex((l) => /^n1@2 reads back 0 % under epoch 2.*: verified; converged record saved$/.test(l));
    expect(zombie).toBeGreaterThanOrEqual(0);
    expect(converged).toBeGreaterThan(zombie);
    expect(v.trace.at(-1)).toMatch(/^n0@1's UpdateAlias 50 % under epoch 1: written/);
    expect(v.message).toMatch(/carries 50 % .* after the rollback/);
  });

  // From an alias never written: the end of a rollout is written to it even so (decide), which moves the revision
  // and refuses a deposed leader's first write still in flight; releasing it let that write land after a settled rollback.
  it('from an alias never written: no violation in any reachable state, with a zombie among three leaders', () => {
    const r = explore(aliasModel({ ...SCOPES.default.alias, aliasAtRest: true }, 'correct') as Model<unknown>, { maxDepth: SCOPES.default.alias.maxDepth });
    expect(r.violations).toEqual([]);
    expect(r.exhaustive).toBe(true);
    expect(r.states).toBeGreaterThan(100);
  });
});
