/**
 * A gate's judge: how a provider gate that reads the canary and the baseline
 * cohorts turns their two series into one reading. `threshold` (no judge) is
 * the gate's comparison against a constant, as before; the judges here
 * compare the cohorts with each other, so a bad day for both is not a bad
 * canary.
 */
import { z } from 'zod';
import { effectSizeDefaults, judgeMannWhitney, MANN_WHITNEY_DEFAULTS } from './mann-whitney.js';
import { judgeSequentialRate, type Look } from './sequential-rate.js';
import { sampleRatioMismatch, SRM_ALPHA } from './srm.js';
import { NOT_ENOUGH_DATA, type SeriesJudgement, type StepCounts } from './outcome.js';
import { judgeSampleRatio, sampleRatioJudgeSchema } from './sample-ratio.js';

export { NOT_ENOUGH_DATA };
const direction = z.enum(['increase', 'decrease', 'either']);
/** Fewer points than this on either side: the reading is inconclusive, not a verdict. */
const minSamples = z.number().int().min(1).max(10_000);

export const mannWhitneyJudgeSchema = z
  .object({
    kind: z.literal('mann-whitney'),
    /** Which way is bad: `increase` for latency and errors. */
    direction: direction.default('increase'),
    confidence: z.number().gt(0).lt(1).default(MANN_WHITNEY_DEFAULTS.confidence),
    tolerance: z.number().min(0).max(100).default(MANN_WHITNEY_DEFAULTS.tolerance),
    effectSize: z
      .object({
        measure: z.enum(['meanRatio', 'cles']).default('meanRatio'),
        allowedIncrease: z.number().positive().optional(),
        allowedDecrease: z.number().positive().optional(),
      })
      .strict()
      .optional(),
    minSamples: minSamples.default(10),
  })
  .strict();

export const relativeJudgeSchema = z
  .object({
    kind: z.literal('relative'),
    direction: direction.default('increase'),
    /** `ratio`: canary/baseline may exceed 1 by `tolerance` (0.2: 20 %); `difference`: canary − baseline may exceed `tolerance`. */
    measure: z.enum(['ratio', 'difference']),
    tolerance: z.number().min(0).refine(Number.isFinite, 'must be a finite number'),
    /** Each cohort's figure: the mean over the window, or its newest point. */
    statistic: z.enum(['mean', 'last']).default('mean'),
    minSamples: minSamples.default(1),
  })
  .strict();

/**
 * Is the canary's error rate higher than the baseline's, asked at every reading with the false-failure
 * chance held at `alpha` however many readings are taken (sequential-rate.ts). It reads counts, not a
 * series: each cohort's requests and errors per step since the stage's period began.
 */
export const sequentialRateJudgeSchema = z
  .object({
    kind: z.literal('sequential-rate'),
    alpha: z.number().gt(0).lt(1).default(0.05),
    /** Only a higher canary error rate fails it; a lower one is good news, not a reason to stop. */
    direction: z.literal('increase').default('increase'),
    /** Requests each cohort must have served since the period began before a reading passes (a fail needs them too). */
    minSamples: z.number().int().min(1).max(100_000_000).default(100),
    /**
     * The sample-ratio check of the cohorts' requests against the stage's percent: a split this unlikely
     * (p below `alpha`) makes the reading inconclusive, since no judgement on a skewed split holds.
     * `false` for a baseline that is not the rest of the traffic (a baseline fleet the canary's size).
     */
    srm: z.union([z.literal(false), z.object({ alpha: z.number().gt(0).lt(1).default(SRM_ALPHA) }).strict()]).default({ alpha: SRM_ALPHA }),
  })
  .strict();

export const gateJudgeSchema = z.discriminatedUnion('kind', [mannWhitneyJudgeSchema, relativeJudgeSchema, sequentialRateJudgeSchema, sampleRatioJudgeSchema]);
export type GateJudge = z.output<typeof gateJudgeSchema>;
export const JUDGE_KINDS = ['mann-whitney', 'relative', 'sequential-rate', 'sample-ratio'] as const satisfies readonly GateJudge['kind'][];
const _everyJudge: Exclude<GateJudge['kind'], (typeof JUDGE_KINDS)[number]> extends never ? true : never = true;
/** The judges that read counts per step since the period began (sample-ratio reads only `requests`, each cohort's count). */
export const COUNTS_JUDGE_KINDS = ['sequential-rate', 'sample-ratio'] as const satisfies readonly GateJudge['kind'][];
export type CountsJudge = Extract<GateJudge, { kind: (typeof COUNTS_JUDGE_KINDS)[number] }>;
/** The judges that compare two series of values. */
export type SeriesJudge = Exclude<GateJudge, CountsJudge>;
export const isCountsJudge = (j: GateJudge): j is CountsJudge => (COUNTS_JUDGE_KINDS as readonly string[]).includes(j.kind);

export type { SeriesJudgement, StepCounts } from './outcome.js';

const present = (xs: readonly (number | null)[]) => xs.filter((v): v is number => v !== null && Number.isFinite(v));
const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const round = (v: number) => Number(v.toPrecision(6));

/** One reading's judgement of the canary's series against the baseline's, over the same window. */
export function judgeSeries(judge: SeriesJudge, canaryIn: readonly (number | null)[], baselineIn: readonly (number | null)[]): SeriesJudgement {
  const canary = present(canaryIn);
  const baseline = present(baselineIn);
  const cohorts = { canary: { n: canary.length }, baseline: { n: baseline.length } };
  if (canary.length < judge.minSamples || baseline.length < judge.minSamples) {
    return {
      outcome: 'inconclusive',
      value: null,
      reason: `${NOT_ENOUGH_DATA}: ${canary.length} canary and ${baseline.length} baseline points, ${judge.minSamples} needed on each side`,
      detail: cohorts,
    };
  }
  if (judge.kind === 'mann-whitney') {
    const measure = judge.effectSize?.measure ?? 'meanRatio';
    const v = judgeMannWhitney(baseline, canary, {
      direction: judge.direction,
      confidence: judge.confidence,
      tolerance: judge.tolerance,
      effectSize: { ...effectSizeDefaults(measure), ...judge.effectSize },
      critical: false,
      mustHaveData: false,
      nanStrategy: 'remove',
    });
    const detail = { ...cohorts, estimate: v.estimate, ci: v.ci, pValue: v.pValue, classification: v.classification };
    const failed = v.classification === 'high' || v.classification === 'low';
    return { outcome: failed ? 'fail' : 'pass', value: v.estimate, reason: failed ? v.reason : null, detail };
  }
  const figure = (xs: readonly number[]) => (judge.statistic === 'last' ? xs.at(-1)! : mean(xs));
  const c = figure(canary);
  const b = figure(baseline);
  const detail = { canary: { n: canary.length, [judge.statistic]: round(c) }, baseline: { n: baseline.length, [judge.statistic]: round(b) } };
  if (judge.measure === 'ratio' && b === 0) {
    return { outcome: 'inconclusive', value: null, reason: `the baseline's ${judge.statistic} is 0: no ratio to compare`, detail };
  }
  const value = judge.measure === 'ratio' ? c / b : c - b;
  const center = judge.measure === 'ratio' ? 1 : 0;
  const said = judge.measure === 'ratio' ? `canary/baseline ${round(value)}` : `canary − baseline ${round(value)}`;
  const high = judge.direction !== 'decrease' && value > center + judge.tolerance;
  const low = judge.direction !== 'increase' && value < center - judge.tolerance;
  if (high || low) {
    return { outcome: 'fail', value, reason: `${said} is ${high ? 'above' : 'below'} ${center} ${high ? '+' : '−'} ${judge.tolerance}`, detail };
  }
  return { outcome: 'pass', value, reason: null, detail };
}

/**
 * A one-sided relative judge as a threshold on the figure it compares (the
 * ratio or the difference): what the API, the CLI and the metrics show beside
 * the value. Null for `either` (two bounds): its reason names the one crossed.
 */
export function relativeBound(judge: Extract<GateJudge, { kind: 'relative' }>): { readonly comparison: '<=' | '>='; readonly threshold: number } | null {
  const center = judge.measure === 'ratio' ? 1 : 0;
  if (judge.direction === 'increase') return { comparison: '<=', threshold: center + judge.tolerance };
  if (judge.direction === 'decrease') return { comparison: '>=', threshold: center - judge.tolerance };
  return null;
}

/** The interval a mann-whitney reading kept in its answer (its judgement's `detail`), when it has two finite ends. */
export function readingInterval(answer: string | null | undefined): readonly [number, number] | null {
  if (!answer) return null;
  try {
    const ci = (JSON.parse(answer) as { ci?: unknown }).ci;
    return Array.isArray(ci) && ci.length === 2 && ci.every((x) => typeof x === 'number' && Number.isFinite(x)) ? [ci[0] as number, ci[1] as number] : null;
  } catch {
    return null; // a clipped or foreign answer: no interval to show
  }
}

/**
 * The whole steps a counts reading reads: on a grid that starts at the stage's period start (rounded up
 * to a multiple of `alignSeconds`, so a step's point is the same at every reading), ending at the last
 * step that closed `settleSeconds` before `now` (a step read while its data still arrive would be read
 * again changed). Times in ms; `anchor` in epoch seconds.
 */
export function countGrid(o: { periodStart: number; now: number; stepSeconds: number; settleSeconds: number; alignSeconds?: number }): {
  readonly anchor: number;
  readonly steps: number;
} {
  const align = o.alignSeconds ?? 1;
  const anchor = Math.ceil(o.periodStart / 1000 / align) * align;
  const settled = Math.floor(o.now / 1000) - o.settleSeconds;
  return { anchor, steps: Math.max(0, Math.floor((settled - anchor) / o.stepSeconds)) };
}

/**
 * The cumulative looks behind a counts reading: step i of each cohort is a look. A missing point adds
 * nothing; counts are whole (Prometheus's `increase()` extrapolates to fractions), never negative, and a
 * step's errors never exceed its requests, so what reaches the test is always a valid look.
 */
export function looksOf(canary: StepCounts, baseline: StepCounts): Look[] {
  const steps = Math.max(canary.requests.length, canary.errors.length, baseline.requests.length, baseline.errors.length);
  const whole = (v: number | null | undefined) => (v === null || v === undefined || !Number.isFinite(v) ? 0 : Math.max(0, Math.round(v)));
  const looks: Look[] = [];
  let c: [number, number] = [0, 0];
  let b: [number, number] = [0, 0];
  for (let i = 0; i < steps; i++) {
    const cn = whole(canary.requests[i]);
    const bn = whole(baseline.requests[i]);
    c = [c[0] + cn, c[1] + Math.min(cn, whole(canary.errors[i]))];
    b = [b[0] + bn, b[1] + Math.min(bn, whole(baseline.errors[i]))];
    looks.push({ canary: c, baseline: b });
  }
  return looks;
}

/**
 * One reading of a sequential-rate gate: the test run over every step since the period began. The steps
 * sit on a grid fixed at the period's start, so each reading sees the looks the last one saw and more:
 * one test, read often, and its alpha holds across all of its readings.
 */
export function judgeCounts(judge: CountsJudge, canary: StepCounts, baseline: StepCounts, percent: number | null): SeriesJudgement {
  if (judge.kind === 'sample-ratio') return judgeSampleRatio(judge, canary, baseline, percent);
  const looks = looksOf(canary, baseline);
  const last = looks.at(-1) ?? { canary: [0, 0], baseline: [0, 0] };
  const side = ([n, e]: readonly [number, number]) => ({ requests: n, errors: e, errorRate: n ? round(e / n) : null });
  const v = judgeSequentialRate(looks, { alpha: judge.alpha, direction: judge.direction, minSamples: judge.minSamples });
  const srm = judge.srm && percent !== null ? sampleRatioMismatch(last.canary[0], last.baseline[0], percent, judge.srm.alpha) : null;
  const detail = {
    canary: side(last.canary),
    baseline: side(last.baseline),
    steps: looks.length,
    evidence: round(v.evidence),
    threshold: round(1 / judge.alpha),
    decidedAt: v.decidedAt,
    ...(srm ? { srm: { percent, observed: Math.round(1000 * srm.observed) / 10, pValue: Number(srm.pValue.toPrecision(3)) } } : {}),
  };
  const ratio = (l: Look) => (l.baseline[1] === 0 || l.canary[0] === 0 ? null : round(l.canary[1] / l.canary[0] / (l.baseline[1] / l.baseline[0])));
  if (v.verdict === 'fail') {
    const at = looks[v.decidedAt!]!;
    const c = side(at.canary);
    const b = side(at.baseline);
    return {
      outcome: 'fail',
      value: ratio(at),
      reason: `the canary's error rate is higher: ${c.errors}/${c.requests} against the baseline's ${b.errors}/${b.requests} (evidence ${round(v.evidence)} ≥ 1/alpha = ${round(1 / judge.alpha)})`,
      detail,
    };
  }
  if (last.canary[0] < judge.minSamples || last.baseline[0] < judge.minSamples) {
    return {
      outcome: 'inconclusive',
      value: null,
      reason: `${NOT_ENOUGH_DATA}: ${last.canary[0]} canary and ${last.baseline[0]} baseline requests, ${judge.minSamples} needed on each side`,
      detail,
    };
  }
  // A skewed split keeps a pass from counting (the canary may be getting other users, or the actuator may not
  // do what it says); it never masks a fail, since rolling back is the safe way to be wrong.
  if (srm?.mismatch) {
    return {
      outcome: 'inconclusive',
      value: null,
      reason: `sample-ratio mismatch: the canary served ${Math.round(1000 * srm.observed) / 10} % of the requests where ${percent} % was meant (p ${srm.pValue === 0 ? '< 1e-300' : `= ${srm.pValue.toPrecision(3)}`} < ${judge.srm ? judge.srm.alpha : SRM_ALPHA}); no pass on this split can be trusted`,
      detail,
    };
  }
  return { outcome: 'pass', value: ratio(last), reason: null, detail };
}
