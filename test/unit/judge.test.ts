/**
 * The judges against an independent implementation and by simulation.
 *
 * Rank-sum figures: test/fixtures/judge/rank-sum.json, made by
 * make-rank-sum.py beside it (scipy's Mann-Whitney p-value, numpy's median of
 * the listed pairwise differences, and R's interval statistic evaluated by
 * brute force with scipy's ranks). The sequential test: A/A traffic read at
 * every look keeps false failures at alpha, a doubled error rate fails, and a
 * naive fixed-horizon test read the same way does not hold its alpha.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cohortQuery, gridResultOf, rangeResultOf } from '../../shared/adapters/prometheus/provider.js';
import { CasesFileError, judgeCase, judgeCases } from '../../shared/judge/cases.js';
import {
  judgeCounts,
  judgeSeries,
  looksOf,
  mannWhitneyJudgeSchema,
  relativeJudgeSchema,
  sequentialRateJudgeSchema,
  type GateJudge,
} from '../../shared/judge/gate.js';
import { normalQuantile, normalSf } from '../../shared/judge/normal.js';
import { kthDifference, mannWhitneyPValue, shiftEstimate } from '../../shared/judge/rank-sum.js';
import { judgeSequentialRate, type Look } from '../../shared/judge/sequential-rate.js';
import { sampleRatioMismatch } from '../../shared/judge/srm.js';

interface Fixture {
  id: string;
  canary: number[];
  baseline: number[];
  confidence: number;
  pValue: number;
  estimate: number;
  ci: [number, number] | null;
}
const fixtures = (JSON.parse(readFileSync(new URL('../fixtures/judge/rank-sum.json', import.meta.url), 'utf8')) as { cases: Fixture[] }).cases;

const close = (actual: number, expected: number, relative: number) =>
  expect(Math.abs(actual - expected), `${actual} vs ${expected}`).toBeLessThanOrEqual(relative * Math.max(Math.abs(expected), Number.MIN_VALUE));

describe('the normal distribution', () => {
  it('matches known tail probabilities and quantiles to double precision', () => {
    // Φ̄(z) from tables computed in extended precision.
    close(normalSf(1.959963984540054), 0.025, 1e-14);
    close(normalSf(0), 0.5, 1e-15);
    close(normalSf(5), 2.866515718791939e-7, 1e-12);
    close(normalSf(10), 7.619853024160527e-24, 1e-12);
    close(normalSf(-3), 0.9986501019683699, 1e-15);
    close(normalQuantile(0.99), 2.3263478740408408, 1e-14);
    close(normalQuantile(0.025), -1.959963984540054, 1e-14);
    expect(() => normalQuantile(1)).toThrow('a normal quantile needs a probability in (0, 1), not 1');
  });
});

describe('the rank-sum statistics, against scipy and a brute-force evaluation of R', () => {
  it(`agree on every committed case (${fixtures.length})`, () => {
    expect(fixtures.length).toBeGreaterThan(25);
    for (const f of fixtures) {
      close(mannWhitneyPValue(f.canary, f.baseline), f.pValue, 1e-6);
      const { estimate, ci } = shiftEstimate(f.canary, f.baseline, f.confidence);
      expect(estimate, f.id).toBe(f.estimate);
      // All values tied: R has no interval; ours collapses onto the estimate.
      expect(ci, f.id).toEqual(f.ci ?? [f.estimate, f.estimate]);
    }
  });

  it('finds the k-th pairwise difference exactly, over samples too large to list', () => {
    const x = [1, 5, 9, 13].flatMap((v) => Array.from({ length: 2_500 }, (_, i) => v + i / 1_000));
    const y = Array.from({ length: 10_000 }, (_, i) => (i * 7919) % 10_007).map((v) => v / 997);
    const xs = [...x].sort((a, b) => a - b);
    const ys = [...y].sort((a, b) => a - b);
    // The smallest and largest are the ends; a middle one is bracketed by counts on both sides.
    expect(kthDifference(xs, ys, 1)).toBe(xs[0]! - ys.at(-1)!);
    expect(kthDifference(xs, ys, 1e8)).toBe(xs.at(-1)! - ys[0]!);
    const mid = kthDifference(xs, ys, 5e7);
    let below = 0;
    let atMost = 0;
    for (const a of xs)
      for (const b of ys) {
        if (a - b < mid) below++;
        if (a - b <= mid) atMost++;
      }
    expect(below).toBeLessThan(5e7);
    expect(atMost).toBeGreaterThanOrEqual(5e7);
  }, 60_000);
});

describe('rollout gates judge cases', () => {
  it('answers a mann-whitney case with the classification and its figures', () => {
    expect(judgeCase({ id: 'r', kind: 'mann-whitney', canary: [10, 20, 30, 40], baseline: [1, 2, 3, 4], confidence: 0.95 })).toEqual({
      id: 'r',
      classification: 'high',
      critical: false,
      pValue: expect.closeTo(0.030382821976577, 12) as number,
      ci: [6, 39],
      estimate: 22.5,
    });
    // Two constant samples need no noise: every difference is 9, so is the interval.
    expect(judgeCase({ id: 'c', kind: 'mann-whitney', canary: [10, 10, 10], baseline: [1, 1, 1, 1] })).toMatchObject({ classification: 'high', ci: [9, 9] });
    expect(judgeCase({ id: 'd', kind: 'mann-whitney', canary: [10, 10, 10], baseline: [1, 1, 1, 1], direction: 'decrease' })).toMatchObject({
      classification: 'pass',
    });
    expect(judgeCase({ id: 'e', kind: 'mann-whitney', canary: [null], baseline: [1] })).toEqual({
      id: 'e',
      classification: 'nodata',
      critical: false,
      pValue: null,
      ci: null,
      estimate: null,
    });
  });

  it('refuses bad input naming the field, one case at a time', () => {
    const answers = judgeCases(
      JSON.stringify({
        cases: [
          { id: 'a', kind: 'mann-whitney', canary: [1, 'NaN'], baseline: [1] },
          { id: 'b', kind: 'mann-whitney', canary: [1], baseline: [2], confidence: 1 },
          { id: 'c', kind: 'sequential-rate', alpha: 0.05, looks: [{ baseline: [10, 1], canary: [10, -1] }] },
          { id: 'd', kind: 'sequential-rate', alpha: 0.05, looks: [{ baseline: [10, 1], canary: [10, 1.5] }] },
          { id: 'e', kind: 'sequential-rate', alpha: 0.05, looks: [{ baseline: [10, 11], canary: [10, 1] }] },
          {
            id: 'f',
            kind: 'sequential-rate',
            alpha: 0.05,
            looks: [
              { baseline: [10, 1], canary: [10, 1] },
              { baseline: [10, 1], canary: [9, 1] },
            ],
          },
          { id: 'g', kind: 'sequential-rate', alpha: 0, looks: [] },
          { id: 'h', kind: 'bayes' },
          { id: 'i', kind: 'mann-whitney', canary: [1], baseline: [2], confidense: 0.9 },
          { kind: 'mann-whitney' },
          { id: 'j', kind: 'sequential-rate', alpha: 0.05, looks: [] },
        ],
      }),
    );
    expect(answers.map((a) => ('error' in a ? `${a.id}:${a.error.field}` : `${a.id}:ok`))).toEqual([
      'a:canary[1]',
      'b:confidence',
      'c:looks[0].canary[1]',
      'd:looks[0].canary[1]',
      'e:looks[0].baseline',
      'f:looks[1].canary',
      'g:alpha',
      'h:kind',
      'i:(case)',
      'null:id',
      'j:ok',
    ]);
    expect(answers[5]).toMatchObject({ error: { message: 'cumulative counts cannot decrease: [10, 1] then [9, 1]' } });
    expect(answers[8]).toMatchObject({ error: { message: expect.stringContaining('confidense') as string } });
  });

  it('refuses a file that is empty, not JSON, or not {"cases": [...]}, in one line', () => {
    expect(() => judgeCases('  \n')).toThrow(new CasesFileError('the cases file is empty'));
    expect(() => judgeCases('{cases')).toThrow(/^the cases file is not JSON: /);
    expect(() => judgeCases('[]')).toThrow('the cases file must be an object {"cases": [...]}');
  });
});

/** A seeded generator: the simulation gives the same figures on every run. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Binomial(n, p) by inversion: walks the probabilities from 0 (n·p is small here). */
function binomial(random: () => number, n: number, p: number): number {
  let u = random();
  let k = 0;
  let pk = Math.pow(1 - p, n);
  while (u > pk && k < n) {
    u -= pk;
    pk *= ((n - k) / (k + 1)) * (p / (1 - p));
    k++;
  }
  return k;
}

/** Cumulative looks of one simulated stage: each look adds `perLook` requests, a `share` of them on the canary. */
function stage(random: () => number, o: { looks: number; perLook: number; share: number; baselineRate: number; canaryRate: number }): Look[] {
  const out: Look[] = [];
  let nb = 0;
  let eb = 0;
  let nc = 0;
  let ec = 0;
  for (let k = 0; k < o.looks; k++) {
    const c = Math.round(o.perLook * o.share);
    const b = o.perLook - c;
    nc += c;
    nb += b;
    ec += binomial(random, c, o.canaryRate);
    eb += binomial(random, b, o.baselineRate);
    out.push({ baseline: [nb, eb], canary: [nc, ec] });
  }
  return out;
}

/** A one-sided two-proportion z-test at alpha, asked at every look: what a fixed-horizon test read early does. */
function naiveFailsAt(looks: readonly Look[], alpha: number, minSamples: number): boolean {
  const z = normalQuantile(1 - alpha);
  return looks.some(({ baseline: [nb, eb], canary: [nc, ec] }) => {
    if (nb < minSamples || nc < minSamples) return false;
    const pooled = (eb + ec) / (nb + nc);
    const se = Math.sqrt(pooled * (1 - pooled) * (1 / nb + 1 / nc));
    return se > 0 && (ec / nc - eb / nb) / se > z;
  });
}

describe('the sequential-rate judge under peeking', () => {
  const alpha = 0.05;
  const runs = 2_000;
  const shape = { looks: 60, perLook: 500, share: 0.2, baselineRate: 0.02 };
  const minSamples = 100;

  it('keeps false failures at alpha on A/A traffic read at every look, where the naive test inflates', () => {
    const random = mulberry32(47);
    let sequential = 0;
    let naive = 0;
    for (let r = 0; r < runs; r++) {
      const looks = stage(random, { ...shape, canaryRate: shape.baselineRate });
      if (judgeSequentialRate(looks, { alpha, direction: 'increase', minSamples }).verdict === 'fail') sequential++;
      if (naiveFailsAt(looks, alpha, minSamples)) naive++;
    }
    const simulationError = 3 * Math.sqrt((alpha * (1 - alpha)) / runs);
    expect(sequential / runs).toBeLessThanOrEqual(alpha + simulationError);
    // The same reading schedule breaks a fixed-horizon test: this is what the sequential test is for.
    expect(naive / runs).toBeGreaterThan(2 * alpha);
  }, 120_000);

  it('fails a canary with twice the error rate in most runs, and a fail is final and uses only the looks so far', () => {
    const random = mulberry32(48);
    let failed = 0;
    for (let r = 0; r < runs / 4; r++) {
      const looks = stage(random, { ...shape, canaryRate: 2 * shape.baselineRate });
      const v = judgeSequentialRate(looks, { alpha, direction: 'increase', minSamples });
      if (v.verdict !== 'fail') continue;
      failed++;
      // The verdict at the deciding look is the same with the later looks cut off.
      expect(judgeSequentialRate(looks.slice(0, v.decidedAt! + 1), { alpha, direction: 'increase', minSamples })).toMatchObject({
        verdict: 'fail',
        decidedAt: v.decidedAt,
      });
    }
    expect(failed / (runs / 4)).toBeGreaterThan(0.9);
  }, 120_000);

  it('does not fail a better canary, and decides nothing before minSamples', () => {
    const looks = stage(mulberry32(49), { ...shape, canaryRate: shape.baselineRate / 2 });
    expect(judgeSequentialRate(looks, { alpha, direction: 'increase', minSamples })).toMatchObject({ verdict: 'continue', decidedAt: null });
    const worse = stage(mulberry32(50), { ...shape, canaryRate: 0.5 });
    expect(judgeSequentialRate(worse, { alpha, direction: 'increase', minSamples: 0 }).decidedAt).toBe(0);
    expect(judgeSequentialRate(worse, { alpha, direction: 'increase', minSamples: 1_000 }).decidedAt).toBe(9);
  });
});

describe('a gate judge on two series', () => {
  const relative = (o: Partial<GateJudge & { kind: 'relative' }> = {}) =>
    relativeJudgeSchema.parse({ kind: 'relative', measure: 'ratio', tolerance: 0.2, ...o });

  it('relative: fails past the tolerance in the bad direction only, and says by how much', () => {
    expect(judgeSeries(relative(), [1.3, 1.3], [1, 1])).toMatchObject({ outcome: 'fail', value: 1.3, reason: 'canary/baseline 1.3 is above 1 + 0.2' });
    expect(judgeSeries(relative(), [1.1, 1.2], [1, 1])).toMatchObject({ outcome: 'pass', value: 1.15, reason: null });
    expect(judgeSeries(relative(), [0.5], [1])).toMatchObject({ outcome: 'pass' });
    expect(judgeSeries(relative({ direction: 'either' }), [0.5], [1])).toMatchObject({ outcome: 'fail', reason: 'canary/baseline 0.5 is below 1 − 0.2' });
    expect(judgeSeries(relative({ measure: 'difference', tolerance: 0.005, statistic: 'last' }), [0.1, 0.011], [0.01, 0.01])).toMatchObject({
      outcome: 'pass',
    });
    expect(judgeSeries(relative({ measure: 'difference', tolerance: 0.005 }), [0.02, null, 0.02], [0.01])).toMatchObject({ outcome: 'fail', value: 0.01 });
    expect(judgeSeries(relative(), [1], [0])).toMatchObject({ outcome: 'inconclusive', reason: "the baseline's mean is 0: no ratio to compare" });
  });

  it('is inconclusive below its minimum sample, counting only present points', () => {
    const mw = mannWhitneyJudgeSchema.parse({ kind: 'mann-whitney', minSamples: 3 });
    expect(judgeSeries(mw, [1, 2, null, NaN], [1, 2, 3])).toEqual({
      outcome: 'inconclusive',
      value: null,
      reason: 'not enough data: 2 canary and 3 baseline points, 3 needed on each side',
      detail: { canary: { n: 2 }, baseline: { n: 3 } },
    });
    expect(judgeSeries(mw, [10, 11, 12, 13], [1, 2, 3, 4])).toMatchObject({ outcome: 'fail', value: 9 });
    expect(judgeSeries({ ...mw, direction: 'decrease' }, [10, 11, 12, 13], [1, 2, 3, 4])).toMatchObject({ outcome: 'pass' });
  });

  it('reads a range answer as one series (missing points null), and names a cohort in a query safely', () => {
    const answer = (result: unknown) => JSON.stringify({ status: 'success', data: { resultType: 'matrix', result } });
    expect(
      rangeResultOf(
        answer([
          {
            metric: {},
            values: [
              [1, '0.5'],
              [2, 'NaN'],
              [3, '+Inf'],
              [4, '2'],
            ],
          },
        ]),
      ),
    ).toEqual([0.5, null, null, 2]);
    expect(rangeResultOf(answer([]))).toEqual([]);
    expect(rangeResultOf(answer([{ values: [] }, { values: [] }]))).toMatchObject({ kind: 'several', count: 2 });
    expect(rangeResultOf('{"status":"error","error":"bad"}')).toMatchObject({ kind: 'error', message: 'not a query answer: bad' });
    expect(cohortQuery('x{v="{{version}}",c="{{cohort}}"}', 'baseline', 'a"b\\c')).toBe('x{v="a\\"b\\\\c",c="baseline"}');
  });
});

describe('a gate judge on counts per step (sequential-rate)', () => {
  const judge = sequentialRateJudgeSchema.parse({ kind: 'sequential-rate', minSamples: 1_000 });

  it('turns steps into cumulative looks: whole counts, a missing point adds nothing, errors never above requests', () => {
    expect(looksOf({ requests: [10.4, null, 5], errors: [1.6, 3, 9] }, { requests: [20, 20], errors: [0, -1] })).toEqual([
      { canary: [10, 2], baseline: [20, 0] },
      { canary: [10, 2], baseline: [40, 0] },
      { canary: [15, 7], baseline: [40, 0] },
    ]);
  });

  it('decides as the sequential test does on the same looks, and keeps what it stood on', () => {
    // 500 requests a step on each side; the canary errs 3 % against the baseline's 1 %.
    const steps = 20;
    const canary = { requests: Array.from({ length: steps }, () => 500), errors: Array.from({ length: steps }, () => 15) };
    const baseline = { requests: Array.from({ length: steps }, () => 500), errors: Array.from({ length: steps }, () => 5) };
    const looks = looksOf(canary, baseline);
    const direct = judgeSequentialRate(looks, { alpha: 0.05, direction: 'increase', minSamples: 1_000 });
    const j = judgeCounts(judge, canary, baseline, 50);
    expect(direct.verdict).toBe('fail');
    expect(j.outcome).toBe('fail');
    const at = looks[direct.decidedAt!]!;
    expect(j.value).toBe(3);
    expect(j.reason).toBe(
      `the canary's error rate is higher: ${at.canary[1]}/${at.canary[0]} against the baseline's ${at.baseline[1]}/${at.baseline[0]} (evidence ${Number(direct.evidence.toPrecision(6))} ≥ 1/alpha = 20)`,
    );
    expect(j.detail).toMatchObject({
      canary: { requests: 10_000, errors: 300 },
      baseline: { requests: 10_000, errors: 100 },
      steps,
      decidedAt: direct.decidedAt,
    });
  });

  it('passes equal rates once both cohorts have minSamples, and is inconclusive before', () => {
    const even = (n: number) => ({ requests: Array.from({ length: n }, () => 100), errors: Array.from({ length: n }, () => 1) });
    expect(judgeCounts(judge, even(5), even(5), 50)).toMatchObject({
      outcome: 'inconclusive',
      reason: 'not enough data: 500 canary and 500 baseline requests, 1000 needed on each side',
    });
    expect(judgeCounts(judge, even(10), even(10), 50)).toMatchObject({ outcome: 'pass', value: 1, reason: null });
    expect(judgeCounts(judge, { requests: [], errors: [] }, { requests: [], errors: [] }, 50)).toMatchObject({ outcome: 'inconclusive' });
    // A better canary is never a failure.
    expect(
      judgeCounts(judge, { ...even(30), errors: Array.from({ length: 30 }, () => 0) }, { ...even(30), errors: Array.from({ length: 30 }, () => 5) }, 50),
    ).toMatchObject({
      outcome: 'pass',
    });
  });

  it('keeps a pass on a split that is not the stage percent (sample-ratio mismatch) from counting, and never masks a fail', () => {
    const steps = (n: number, requests: number, errors: number) => ({
      requests: Array.from({ length: n }, () => requests),
      errors: Array.from({ length: n }, () => errors),
    });
    // 12 % of 10,000 requests where 10 % was meant (χ² 44.4, p 2.62e-11 by scipy.stats.chisquare), at equal error rates.
    const skewed = judgeCounts(judge, steps(10, 120, 1), steps(10, 880, 8), 10);
    expect(skewed).toMatchObject({ outcome: 'inconclusive', value: null });
    expect(skewed.reason).toBe(
      'sample-ratio mismatch: the canary served 12 % of the requests where 10 % was meant (p = 2.62e-11 < 0.001); no pass on this split can be trusted',
    );
    expect(skewed.detail).toMatchObject({ srm: { percent: 10, observed: 12, pValue: 2.62e-11 } });
    // A split too unlikely for a double to hold its p-value says so.
    expect(judgeCounts(judge, steps(10, 300, 3), steps(10, 700, 7), 10).reason).toMatch(
      /^sample-ratio mismatch: the canary served 30 % .* \(p < 1e-300 < 0\.001\)/,
    );
    // A canary erring three times as often fails on any split: rolling back is the safe way to be wrong.
    expect(judgeCounts(judge, steps(10, 120, 4), steps(10, 880, 9), 10).outcome).toBe('fail');
    // The same split with 12 % meant, or with the check off, is no mismatch.
    expect(judgeCounts(judge, steps(10, 120, 1), steps(10, 880, 8), 12).outcome).toBe('pass');
    const unchecked = sequentialRateJudgeSchema.parse({ kind: 'sequential-rate', minSamples: 1_000, srm: false });
    expect(judgeCounts(unchecked, steps(10, 120, 1), steps(10, 880, 8), 10).outcome).toBe('pass');
    expect(judgeCounts(judge, steps(10, 120, 1), steps(10, 880, 8), null).outcome).toBe('pass');
    // Within chance of the split meant (10.4 % of 10,000 at 10 %: p 0.18) it passes.
    expect(judgeCounts(judge, steps(10, 104, 1), steps(10, 896, 9), 10)).toMatchObject({ outcome: 'pass' });
    // Before minSamples it says not enough data, not mismatch.
    expect(judgeCounts(judge, steps(2, 300, 0), steps(2, 100, 0), 10).reason).toMatch(/^not enough data/);
  });

  it('lays a range answer on the grid of steps, by timestamp (a point past the grid is not counted)', () => {
    const answer = (result: unknown) => JSON.stringify({ status: 'success', data: { resultType: 'matrix', result } });
    const series = [
      {
        values: [
          [110, '4'],
          [150, '6'],
          [190, '9'],
        ],
      },
    ];
    expect(gridResultOf(answer(series), 110, 20, 3)).toEqual([4, null, 6]);
    expect(gridResultOf(answer([]), 110, 20, 2)).toEqual([null, null]);
    expect(gridResultOf(answer([{ values: [] }, { values: [] }]), 110, 20, 2)).toMatchObject({ kind: 'several', count: 2 });
  });
});

describe('sample-ratio mismatch, against scipy.stats.chisquare', () => {
  const srm = (
    JSON.parse(readFileSync(new URL('../fixtures/judge/srm.json', import.meta.url), 'utf8')) as {
      cases: { canary: number; baseline: number; percent: number; chiSquare: number; pValue: number }[];
    }
  ).cases;

  it(`agrees on every committed case (${srm.length}), and calls a mismatch below 0.001`, () => {
    for (const c of srm) {
      const r = sampleRatioMismatch(c.canary, c.baseline, c.percent)!;
      close(r.chiSquare, c.chiSquare, 1e-9);
      close(r.pValue, c.pValue, 1e-6);
      expect(r.mismatch, `${c.canary}/${c.baseline} at ${c.percent} %`).toBe(c.pValue < 0.001);
    }
    // The actuator sent 30 % where 10 % was meant: held.
    expect(sampleRatioMismatch(300, 700, 10)).toMatchObject({ mismatch: true, observed: 0.3 });
    expect(sampleRatioMismatch(0, 0, 10)).toBeNull();
    expect(sampleRatioMismatch(10, 0, 100)).toBeNull();
  });
});
