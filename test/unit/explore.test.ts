import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../shared/canonical-json.js';
import { canonicalText, explore, type Invariant, type Model } from '../explore/explorer.js';
import { leaseModel } from '../explore/models/lease.js';
import { ledgerModel } from '../explore/models/ledger.js';
import { promotionModel, type PromotionState } from '../explore/models/promotion.js';
import { aliasModel } from '../explore/models/alias.js';
import { MODELS, SCOPES, VARIANT_RUNS, runCorrect, runVariant, type RunResult, type VariantRun } from '../explore/suite.js';

/** Each variant's run once: the tests below that read a counterexample's trace share the run that caught it. */
const variantRuns = new Map<VariantRun, RunResult>();
function variantRun(run: VariantRun): RunResult {
  let r = variantRuns.get(run);
  if (r === undefined) variantRuns.set(run, (r = runVariant('default', run)));
  return r;
}
const counterexampleOf = (variant: VariantRun['variant'], invariant: string) =>
  variantRun(VARIANT_RUNS.find((r) => r.variant === variant)!).violations.find((v) => v.invariant === invariant)!;

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
      promotionModel(SCOPES.default.judged) as Model<unknown>,
      promotionModel(SCOPES.default.stretch) as Model<unknown>,
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
    const r = variantRun(run);
    const caught = r.violations.filter((v) => run.breaks.includes(v.invariant));
    expect(caught.map((v) => v.invariant).sort()).toEqual([...run.breaks].sort());
    for (const v of caught) expect(v.trace.length).toBeGreaterThan(0);
  });
});

describe('the held-view write', () => {
  // The checks rollout_apply_with_reading makes beyond rollout_apply's, each shown to be needed: without it a
  // reading's decision on a held view applies where the evaluator, on the store as it is, decides otherwise.
  const counterexample = (variant: 'held-no-alarm-check' | 'held-no-metrics-check') => counterexampleOf(variant, 'held-decision-current');

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

describe('the judged gates', () => {
  // What promotion-needs-passing-verdict stands on: the promote carries a passing reading of the stage's period
  // current at the decision, and that period's newest readings are consecutiveSuccesses passes, by when they were taken.
  it('a verdict that counts a tally of the period before a resume promotes on it', () => {
    const v = counterexampleOf('gates-any-period', 'promotion-needs-passing-verdict');
    const resumed = v.trace.findIndex((l) => /^ops's resume .* arrives: applied/.test(l));
    const passes = v.trace.filter((l) => /^the gate reader reads latency on stage 0 .*: pass; counted/.test(l));
    expect(passes).toHaveLength(2);
    expect(v.trace.findIndex((l) => l === passes[1])).toBeLessThan(resumed);
    expect(v.trace.at(-1)).toMatch(/promote \(stage 0 active→promoted.*arrives: applied/);
    expect(v.message).toMatch(/in period 1000, not in the stage's current period/);
  });

  it('a store that adds a late pass to the streak promotes past a failure taken after it', () => {
    const v = counterexampleOf('tally-late-pass', 'promotion-needs-passing-verdict');
    expect(v.trace.some((l) => /^the pass reading of latency .* reaches the store late; counted: .* 2 passes in a row$/.test(l))).toBe(true);
    expect(v.message).toMatch(/newest readings in period 1000 are \[pass at \d+, fail at \d+\], not 2 passes in a row/);
  });

  it('the correct model promotes on the gate: two passes in a row, after a resume too', () => {
    // Not vacuous: within the default scope promotes commit, some on readings of a period a resume began.
    const m = promotionModel(SCOPES.default.judged);
    const probe = (name: string, passedIn: (origin: number) => boolean): Invariant<PromotionState> => ({
      name,
      check: (s) =>
        s.store.stages[1]![0]!.phase === 'promoted' && s.delivered!.some((d) => d.stage === 0 && d.outcome === 'pass' && passedIn(d.origin)) ? 'reached' : null,
    });
    const probes = [probe('first period', (o) => o === 1_000), probe('after a resume', (o) => o > 1_000)];
    const r = explore({ ...m, invariants: [...m.invariants, ...probes] }, { maxDepth: SCOPES.default.judged.maxDepth, stopWhen: probes.map((p) => p.name) });
    expect(r.violations.map((v) => v.invariant).sort()).toEqual(['after a resume', 'first period']);
    const [first, resumed] = ['first period', 'after a resume'].map((n) => r.violations.find((v) => v.invariant === n)!.trace);
    for (const t of [first!, resumed!]) expect(t.at(-1)).toMatch(/promote \(stage 0 active→promoted.*arrives: applied/);
    expect(first!.filter((l) => /: pass; counted: .* 2 passes in a row$/.test(l))).toHaveLength(1);
    expect(resumed!.some((l) => /^ops's resume .* arrives: applied/.test(l))).toBe(true);
  });
});

describe('the alias write', () => {
  // UpdateAlias conditioned on the RevisionId read is what stops a deposed leader's write, decided before the
  // takeover, from landing after its successor converged the alias: the fence stopped nothing (it was passed in time).
  it('without the RevisionId: a zombie writes 50 % over the rollback its successor converged', () => {
    const v = counterexampleOf('actuate-without-revision', 'alias-never-ahead');
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

describe('a stage that passes on too little data (onInsufficientData pass)', () => {
  it('a verdict that passes before the stretch is over is caught', () => {
    const v = counterexampleOf('insufficient-pass-early', 'promotion-needs-passing-verdict');
    expect(v.trace.some((l) => /^the gate reader reads latency on stage 0 .*: short; counted/.test(l))).toBe(true);
    expect(v.trace.some((l) => l.startsWith('the rollout clock passes a stretch'))).toBe(false);
    expect(v.message).toMatch(/passed gate latency's reading short of data at \d+, before the stretch of period 1000 was over/);
  });

  it('the correct model passes on a reading short of data once the stretch is over, after a resume too', () => {
    // Not vacuous: within the default scope such promotes commit, the invariant having judged each.
    const m = promotionModel(SCOPES.default.stretch);
    const probe = (name: string, passedIn: (origin: number) => boolean): Invariant<PromotionState> => ({
      name,
      check: (s) => {
        if (s.store.stages[1]![0]!.phase !== 'promoted') return null;
        const newest = s.delivered!.filter((d) => d.stage === 0 && passedIn(d.origin)).sort((a, b) => b.at - a.at)[0];
        return newest?.outcome === 'short' ? 'reached' : null;
      },
    });
    const probes = [probe('first period', (o) => o === 1_000), probe('after a resume', (o) => o > 1_000)];
    const r = explore({ ...m, invariants: [...m.invariants, ...probes] }, { maxDepth: SCOPES.default.stretch.maxDepth, stopWhen: probes.map((p) => p.name) });
    expect(r.violations.map((v) => v.invariant).sort()).toEqual(['after a resume', 'first period']);
    for (const n of ['first period', 'after a resume']) {
      const t = r.violations.find((v) => v.invariant === n)!.trace;
      expect(t.some((l) => l.startsWith('the rollout clock passes a stretch'))).toBe(true);
      expect(t.at(-1)).toMatch(/promote \(stage 0 active→promoted.*arrives: applied/);
    }
  });
});
