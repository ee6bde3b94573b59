/**
 * The sample-ratio judge: one count per cohort (requests, exposures) against
 * the stage's percent, by the chi-square of srm.ts, checked against
 * scipy.stats.chisquare (test/fixtures/judge/srm.json, made by make-srm.py
 * beside it). What the spec refuses, naming the field; how a reading is
 * judged and shown; its default onFail (hold); the CLI's cases; backtesting
 * from the counts a reading kept; the CloudWatch provider's two queries.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { canaryContext, stubbed } from '../support/cloudwatch/stubbed-metrics.js';
import { GATE_AT, gateErrors, oneGateSpec } from '../support/one-gate-spec.js';
import { gatesJson } from '../../shared/api/rollout-json.js';
import { rolloutSamples } from '../../shared/api/metrics.js';
import { judgeCase } from '../../shared/judge/cases.js';
import { gateJudgeSchema, judgeCounts, NOT_ENOUGH_DATA } from '../../shared/judge/gate.js';
import { judgeSplit, rejudgeSampleRatio, sampleRatioJudgeSchema } from '../../shared/judge/sample-ratio.js';
import { rejudge } from '../../shared/rollout/backtest.js';
import { onFailOf, providerGateSchema, queryOf } from '../../shared/rollout/gate-spec.js';
import { judge, providerVerdict, tallyWith, type GateTally } from '../../shared/rollout/gates.js';
import type { RolloutView } from '../../shared/rollout/model.js';
import { freshStages } from '../../shared/rollout/transitions.js';

interface SrmFixture {
  canary: number;
  baseline: number;
  percent: number;
  chiSquare: number;
  pValue: number;
}
const fixtures = (JSON.parse(readFileSync(new URL('../fixtures/judge/srm.json', import.meta.url), 'utf8')) as { cases: SrmFixture[] }).cases;
const close = (actual: number, expected: number, relative: number) =>
  expect(Math.abs(actual - expected), `${actual} vs ${expected}`).toBeLessThanOrEqual(relative * Math.max(Math.abs(expected), Number.MIN_VALUE));

const T = Date.parse('2025-03-01T12:00:00Z');
const target = { service: 'checkout', version: 'v2', stableVersion: 'v1' };
const exposures = 'sum(increase(rollout_exposures_total{rollout="r1",cohort="{{cohort}}"}[{{step}}]))';
const promGate = { type: 'prometheus', name: 'split', address: 'http://prometheus:9090', query: exposures, judge: { kind: 'sample-ratio' } };
const byVersion = { FunctionName: 'api', Resource: 'api:live', ExecutedVersion: '{{version}}' };
const invocations = { namespace: 'AWS/Lambda', metricName: 'Invocations', stat: 'Sum', dimensions: byVersion };
const cwGate = { type: 'cloudwatchMetric', name: 'split', metric: invocations, judge: { kind: 'sample-ratio' } };
const at = GATE_AT;

const specOf = (gate: unknown, percent = 10) => oneGateSpec(target, gate, percent);
const errorsOf = (gate: unknown) => gateErrors(target, gate);
const gateOf = (g: Record<string, unknown>) => providerGateSchema.parse(g);
const srm = sampleRatioJudgeSchema.parse({ kind: 'sample-ratio', minSamples: 1 });
const steps = (...xs: (number | null)[]) => ({ requests: xs, errors: [] });

describe('the sample-ratio judge, against scipy.stats.chisquare', () => {
  it(`calls a mismatch exactly where scipy's p-value is under alpha, on every committed case (${fixtures.length})`, () => {
    expect(fixtures.length).toBeGreaterThanOrEqual(20);
    for (const c of fixtures) {
      if (!(c.percent > 0 && c.percent < 100)) continue;
      const j = judgeSplit(srm, c.canary, c.baseline, c.percent);
      const total = c.canary + c.baseline;
      const where = `${c.canary}/${c.baseline} at ${c.percent} %`;
      if (total * Math.min(c.percent, 100 - c.percent) < 500) {
        // Fewer than 5 expected in a cohort: the chi-square is no guide, so it says nothing.
        expect(j.outcome, where).toBe('inconclusive');
        continue;
      }
      expect(j.outcome, where).toBe(c.pValue < 0.001 ? 'fail' : 'pass');
      expect(j.value, where).toBeCloseTo((100 * c.canary) / total, 4);
      close((j.detail as { chiSquare: number }).chiSquare, c.chiSquare, 1e-5);
      if (c.pValue > 1e-300) close((j.detail as { pValue: number }).pValue, c.pValue, 5e-3);
    }
  });

  it('names the split it saw, the split meant and p in its reason; the same alpha either side of 0.001', () => {
    expect(judgeSplit(srm, 300, 700, 10)).toEqual({
      outcome: 'fail',
      value: 30,
      reason:
        'sample-ratio mismatch: the canary has 30 % of the counts where 10 % is meant (300 of 1000; p = 1.17e-98, under alpha 0.001); no judgement on this split can be trusted',
      detail: { canary: { count: 300 }, baseline: { count: 700 }, percent: 10, observed: 30, chiSquare: 444.444, pValue: 1.17e-98 },
    });
    // scipy: 1099/8901 p 0.000967, 1098/8902 p 0.00109.
    expect(judgeSplit(srm, 1099, 8901, 10).outcome).toBe('fail');
    expect(judgeSplit(srm, 1098, 8902, 10)).toMatchObject({ outcome: 'pass', value: 10.98, reason: null });
    expect(judgeSplit({ ...srm, alpha: 0.01 }, 1098, 8902, 10).outcome).toBe('fail');
    expect(judgeSplit(srm, 1000, 0, 10).reason).toMatch(/\(1000 of 1000; p < 1e-300, under alpha 0\.001\)/);
  });

  it('is not enough data below minSamples or 5 expected in the smaller cohort, passes at 0 % and 100 %, and cannot judge without a percent', () => {
    const j = sampleRatioJudgeSchema.parse({ kind: 'sample-ratio' });
    expect(j).toEqual({ kind: 'sample-ratio', alpha: 0.001, minSamples: 1_000 });
    expect(judgeSplit(j, 300, 600, 10)).toMatchObject({
      outcome: 'inconclusive',
      value: null,
      reason: `${NOT_ENOUGH_DATA}: 900 counted (300 canary, 600 baseline), 1000 needed to check a 10 % split`,
    });
    expect(judgeSplit(srm, 0, 399, 1).reason).toBe(`${NOT_ENOUGH_DATA}: 399 counted (0 canary, 399 baseline), 500 needed to check a 1 % split`);
    expect(judgeSplit(srm, 0, 500, 1).outcome).toBe('pass');
    expect(judgeSplit(srm, 0, 2_000, 1).outcome).toBe('fail');
    expect(judgeSplit(srm, 0, 0, 10).outcome).toBe('inconclusive');
    expect(judgeSplit(srm, 5, 900, 100)).toMatchObject({ outcome: 'pass', reason: null });
    expect(judgeSplit(srm, 0, 900, 0)).toMatchObject({ outcome: 'pass', value: 0 });
    expect(judgeSplit(srm, 100, 900, null)).toMatchObject({
      outcome: 'inconclusive',
      reason: 'the intended split is not known: no percent to check the counts against',
    });
  });

  it('sums each cohort over the steps, whole: a missing step adds nothing, a fraction is rounded, a negative is nothing', () => {
    const j = judgeCounts(srm, steps(100.4, null, 199.6, -5), steps(900, 899.5, null, NaN), 10);
    expect(j.detail).toMatchObject({ canary: { count: 300 }, baseline: { count: 1_800 }, steps: 4 });
    expect(j.outcome).toBe('fail');
    expect(judgeCounts(srm, steps(100, 100), steps(900, 900), 10)).toMatchObject({ outcome: 'pass', value: 10 });
  });

  it('takes alpha in (0, 1) and a whole minSamples, nothing else', () => {
    for (const bad of [{ alpha: 0 }, { alpha: 1 }, { minSamples: 0 }, { minSamples: 1.5 }, { percent: 10 }]) {
      expect(gateJudgeSchema.safeParse({ kind: 'sample-ratio', ...bad }).success, JSON.stringify(bad)).toBe(false);
    }
  });
});

describe('a sample-ratio gate in the spec', () => {
  it('takes one count query per cohort on Prometheus, and one counted metric per cohort on CloudWatch', () => {
    expect(errorsOf(promGate)).toEqual([]);
    expect(errorsOf({ ...promGate, settleSeconds: 30, stepSeconds: 60, judge: { kind: 'sample-ratio', alpha: 0.0001, minSamples: 5_000 } })).toEqual([]);
    expect(errorsOf(cwGate)).toEqual([]);
    expect(errorsOf({ ...cwGate, settleSeconds: 300, periodSeconds: 300 })).toEqual([]);
    expect(queryOf(gateOf(promGate))).toBe(`sample-ratio of the canary against the baseline: ${exposures}`);
    expect(queryOf(gateOf(cwGate))).toBe(
      'sample-ratio of the canary against the baseline: Sum(AWS/Lambda Invocations {FunctionName=api, Resource=api:live, ExecutedVersion={{version}}}) over 60 s',
    );
  });

  it('refuses what does not count each cohort per step, naming the field', () => {
    expect(errorsOf({ ...promGate, requestsQuery: exposures })).toEqual([
      `${at}.requestsQuery: a sample-ratio gate counts with query alone (each cohort's requests or exposures per step): drop requestsQuery`,
    ]);
    expect(errorsOf({ ...promGate, query: 'sum(rate(rollout_exposures_total{cohort="{{cohort}}"}[1m]))' })).toEqual([
      `${at}.query: a sample-ratio query counts each step: write its range as {{step}}, e.g. sum(increase(x{version="{{version}}"}[{{step}}]))`,
    ]);
    expect(errorsOf({ ...promGate, query: 'sum(increase(rollout_exposures_total[{{step}}]))' })).toEqual([
      `${at}.query: a judged query names its cohort with {{cohort}} or {{version}}: otherwise both cohorts read the same series`,
    ]);
    expect(errorsOf({ ...promGate, windowSeconds: 600 })).toEqual([
      `${at}.windowSeconds: a sample-ratio gate reads every step since the stage began (the split of the stage's whole period): drop windowSeconds`,
    ]);
    expect(errorsOf({ ...promGate, comparison: '<', threshold: 0.001 })).toEqual([
      `${at}.comparison: a judged gate compares the canary with the baseline, not with a comparison: drop comparison`,
      `${at}.threshold: a judged gate compares the canary with the baseline, not with a threshold: drop threshold`,
    ]);
    expect(errorsOf({ ...promGate, judge: { kind: 'sample-ratio', alpha: 2 } })[0]).toMatch(/^stages\.0\.gates\.providers\.0\.judge\.alpha: /);
    expect(errorsOf({ ...cwGate, requestsMetric: invocations })).toEqual([
      `${at}.requestsMetric: a sample-ratio gate counts with metric alone (each cohort's requests or exposures per period): drop requestsMetric`,
    ]);
    expect(errorsOf({ ...cwGate, metric: { ...invocations, stat: 'Average' } })).toEqual([
      `${at}.metric.stat: a sample-ratio gate counts each period: stat Sum (or SampleCount), not Average`,
    ]);
    expect(errorsOf({ ...cwGate, windowSeconds: 600 })).toEqual([
      `${at}.windowSeconds: a sample-ratio gate reads every period since the stage began (the split of the stage's whole period): drop windowSeconds`,
    ]);
    expect(errorsOf({ ...cwGate, metric: undefined, expression: 'i', metrics: { i: invocations } })).toEqual([
      `${at}.expression: a judged gate reads one metric a cohort: give metric, not metric math`,
    ]);
  });
});

describe('a sample-ratio reading, and what its failure does', () => {
  const where = { attempt: 1, stage: 0, at: T, source: 'poll' as const };
  const gate = gateOf(promGate);

  it('is judged from counts, keeps the counts in its answer, and takes no series', () => {
    const r = judge(gate, { kind: 'counts', canary: steps(150, 150), baseline: steps(350, 350), percent: 10, answer: '' }, where);
    expect(r).toMatchObject({ outcome: 'fail', value: 30, query: `sample-ratio of the canary against the baseline: ${exposures}` });
    expect(r.reason).toMatch(
      /^sample-ratio mismatch: the canary has 30 % of the counts where 10 % is meant \(300 of 1000; p = 1\.17e-98, under alpha 0\.001\)/,
    );
    expect(JSON.parse(r.answer)).toEqual({
      canary: { count: 300 },
      baseline: { count: 700 },
      percent: 10,
      observed: 30,
      steps: 2,
      chiSquare: 444.444,
      pValue: 1.17e-98,
    });
    expect(judge(gate, { kind: 'cohorts', canary: [1], baseline: [1], answer: '' }, where)).toMatchObject({
      outcome: 'inconclusive',
      reason: 'a sample-ratio gate got series, not counts',
    });
  });

  it('holds by default: a mismatch keeps the stage waiting with the reason, never rolls back; onFail says otherwise when given', () => {
    expect(onFailOf(gate)).toBe('hold');
    expect(onFailOf(gateOf({ ...promGate, onFail: 'pause' }))).toBe('pause');
    expect(onFailOf(gateOf({ ...promGate, judge: { kind: 'sequential-rate' }, requestsQuery: exposures }))).toBe('rollback');
    const failed = judge(gate, { kind: 'counts', canary: steps(300), baseline: steps(700), percent: 10, answer: '' }, where);
    let t: GateTally | undefined;
    for (let i = 0; i < 5; i++) t = tallyWith(t, { ...failed, at: T + i * 1000 }, T) ?? t;
    const tallies = new Map([[0, new Map([['split', t!]])]]);
    expect(providerVerdict([gate], tallies, 0, T)).toEqual({
      kind: 'wait',
      reason: 'gate split (prometheus): last reading fail (onFail hold: the stage waits while it fails)',
    });
    expect(providerVerdict([gateOf({ ...promGate, onFail: 'pause' })], tallies, 0, T)).toMatchObject({ kind: 'pause' });
    expect(providerVerdict([gateOf({ ...promGate, onFail: 'rollback' })], tallies, 0, T)).toMatchObject({ kind: 'rollback' });
    // The split right again: the newest reading passes and the stage goes on.
    const right = judge(gate, { kind: 'counts', canary: steps(100), baseline: steps(900), percent: 10, answer: '' }, { ...where, at: T + 10_000 });
    const after = new Map([[0, new Map([['split', tallyWith(t, right, T)!]])]]);
    expect(providerVerdict([gate], after, 0, T)).toMatchObject({ kind: 'pass' });
  });

  it("shows the stage's percent as the gate's threshold, and exports its verdict by judge", () => {
    const spec = specOf(promGate);
    const failed = judge(gate, { kind: 'counts', canary: steps(300), baseline: steps(700), percent: 10, answer: '' }, where);
    const view = {
      rollout: { id: 'r', spec, state: 'running', attempt: 1, version: 1, createdAt: T, updatedAt: T, lastProgressAt: T },
      stages: freshStages({ rollout: { spec } as RolloutView['rollout'] }).map((s, i) => (i === 0 ? { ...s, phase: 'active', activatedAt: T } : s)),
      metrics: new Map(),
      alarms: {},
      gates: new Map([[0, new Map([['split', tallyWith(undefined, failed, T)!]])]]),
    } as unknown as RolloutView;
    expect(gatesJson(view)[0]).toMatchObject({ judge: 'sample-ratio', comparison: null, threshold: 10, status: 'fail' });
    const samples = rolloutSamples(view, [], T);
    expect(samples.filter((s) => s.name === 'rollout_gate_judgement' && s.value === 1)).toEqual([
      { name: 'rollout_gate_judgement', labels: { rollout: 'r', gate: 'split', judge: 'sample-ratio', verdict: 'fail' }, value: 1 },
    ]);
    expect(samples.find((s) => s.name === 'rollout_gate_value')).toMatchObject({ value: 30 });
    expect(samples.find((s) => s.name === 'rollout_gate_threshold')).toMatchObject({ value: 10 });
  });

  it('is backtested from the counts it kept: a proposed alpha or minSamples judges them again', () => {
    const kept = judge(gate, { kind: 'counts', canary: steps(1_099), baseline: steps(8_901), percent: 10, answer: '' }, where);
    expect(kept.outcome).toBe('fail');
    const proposed = (j: Record<string, unknown>) => gateOf({ ...promGate, judge: { kind: 'sample-ratio', ...j } });
    expect(rejudge(proposed({ alpha: 0.0001 }), kept)).toBe('pass');
    expect(rejudge(proposed({ alpha: 0.001, minSamples: 20_000 }), kept)).toBe('inconclusive');
    expect(rejudge(proposed({ alpha: 0.01 }), kept)).toBe('fail');
    // An answer that kept no counts: the stored outcome stands.
    expect(rejudge(proposed({ alpha: 0.0001 }), { ...kept, answer: '{"canary":{' })).toBe('fail');
    expect(rejudgeSampleRatio(srm, '{"canary":{"count":1.5},"baseline":{"count":2},"percent":10}')).toBeNull();
    expect(rejudge(gateOf({ ...promGate, judge: { kind: 'sequential-rate' }, requestsQuery: exposures }), kept)).toEqual({
      cannot: 'the readings were judged sample-ratio, the proposed gate sequential-rate',
    });
  });
});

describe('rollout gates judge: sample-ratio cases', () => {
  it('answers every committed case as scipy does', () => {
    for (const [i, c] of fixtures.entries()) {
      if (!(c.percent > 0 && c.percent < 100)) continue;
      const a = judgeCase({ id: `c${i}`, kind: 'sample-ratio', canary: c.canary, baseline: c.baseline, percent: c.percent }) as {
        mismatch: boolean;
        chiSquare: number;
        pValue: number;
        observed: number;
      };
      expect(a.mismatch, `case ${i}`).toBe(c.pValue < 0.001);
      close(a.chiSquare, c.chiSquare, 1e-9);
      close(a.pValue, c.pValue, 1e-6);
      expect(a.observed).toBe(c.canary / (c.canary + c.baseline));
    }
    expect(judgeCase({ id: 'a', kind: 'sample-ratio', canary: 1_099, baseline: 8_901, percent: 10, alpha: 0.0001 })).toMatchObject({ mismatch: false });
    expect(judgeCase({ id: 'z', kind: 'sample-ratio', canary: 0, baseline: 0, percent: 10 })).toEqual({
      id: 'z',
      mismatch: false,
      observed: null,
      chiSquare: null,
      pValue: null,
    });
  });

  it('refuses bad input naming the field', () => {
    const field = (c: Record<string, unknown>) => {
      const a = judgeCase({ id: 'x', kind: 'sample-ratio', canary: 1, baseline: 9, percent: 10, ...c });
      return 'error' in a ? `${a.error.field}: ${a.error.message}` : 'ok';
    };
    expect(field({ percent: 100 })).toBe('percent: percent must be in (0, 100), exclusive: at 0 or 100 % there is no split to check');
    expect(field({ percent: 'ten' })).toBe('percent: percent must be a number in (0, 100)');
    expect(field({ canary: -1 })).toBe('canary: a count cannot be negative');
    expect(field({ baseline: 1.5 })).toBe('baseline: a count must be a whole number');
    expect(field({ alpha: 1 })).toBe('alpha: alpha must be in (0, 1), exclusive');
    expect(field({ looks: [] })).toMatch(/^\(case\): /);
  });
});

describe('the CloudWatch metric provider reading a sample-ratio gate', () => {
  const context = canaryContext(T);
  const minute = (m: number) => new Date(T + m * 60_000);

  it("asks two queries, each cohort's count per period on the settled grid, and judges the split", async () => {
    const { calls, provider } = stubbed(() => ({
      MetricDataResults: [
        { Id: 'q0', Timestamps: [minute(0), minute(1)], Values: [150, 150], StatusCode: 'Complete' },
        { Id: 'q1', Timestamps: [minute(0), minute(1)], Values: [350, 350], StatusCode: 'Complete' },
      ],
    }));
    const gate = gateOf({ ...cwGate, settleSeconds: 0 });
    // 2.5 minutes in: two whole, settled periods.
    const [result] = await provider.read([gate as never], { now: T + 150_000, signal: new AbortController().signal, contexts: [context] });
    expect(result).toEqual({
      kind: 'counts',
      canary: { requests: [150, 150], errors: [] },
      baseline: { requests: [350, 350], errors: [] },
      percent: 10,
      answer: '',
    });
    expect(calls).toHaveLength(1);
    expect(
      calls[0]!.MetricDataQueries!.map((q) => [
        q.MetricStat!.Metric!.MetricName,
        q.MetricStat!.Metric!.Dimensions!.find((d) => d.Name === 'ExecutedVersion')!.Value,
      ]),
    ).toEqual([
      ['Invocations', '7'],
      ['Invocations', '6'],
    ]);
    expect(judge(gate, result!, { attempt: 1, stage: 0, at: T, source: 'poll' })).toMatchObject({ outcome: 'fail', value: 30 });
  });
});
