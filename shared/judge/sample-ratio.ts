/**
 * The sample-ratio judge: a gate that reads one count per cohort (requests, exposures, sessions) and
 * asks whether the split they show is the split the stage meant (srm.ts's chi-square). It judges the
 * traffic, not the canary: a mismatch says the other judgements cannot be trusted (the canary may be
 * getting other users, an actuator may not do what it says, a cohort's clients may be failing before
 * they are counted), so the gate holds the stage by default (its `onFail`, `onFailOf` in gate-spec.ts).
 */
import { z } from 'zod';
import { NOT_ENOUGH_DATA, type SeriesJudgement, type StepCounts } from './outcome.js';
import { sampleRatioMismatch, SRM_ALPHA } from './srm.js';

/** The chi-square's approximation wants this many expected in each cohort before its p-value means anything. */
export const MIN_EXPECTED = 5;

export const sampleRatioJudgeSchema = z
  .object({
    kind: z.literal('sample-ratio'),
    /** A split less likely than this under the stage's percent is a mismatch. */
    alpha: z.number().gt(0).lt(1).default(SRM_ALPHA),
    /** Counts of both cohorts together before a reading says anything; fewer is "not enough data". */
    minSamples: z.number().int().min(1).max(100_000_000).default(1_000),
  })
  .strict();
export type SampleRatioJudge = z.output<typeof sampleRatioJudgeSchema>;

const whole = (v: number | null | undefined) => (v === null || v === undefined || !Number.isFinite(v) ? 0 : Math.max(0, Math.round(v)));
const sum = (xs: readonly (number | null)[]) => xs.reduce<number>((a, v) => a + whole(v), 0);
const round = (v: number) => Number(v.toPrecision(6));
const pText = (p: number) => (p === 0 ? '< 1e-300' : `= ${p.toPrecision(3)}`);

/**
 * One reading: each cohort's counts (their `requests`, per step since the stage's period began, taken
 * whole) against the stage's `percent`. The value is the canary's observed percent of the counts.
 */
export function judgeSampleRatio(judge: SampleRatioJudge, canarySteps: StepCounts, baselineSteps: StepCounts, percent: number | null): SeriesJudgement {
  return judgeSplit(
    judge,
    sum(canarySteps.requests),
    sum(baselineSteps.requests),
    percent,
    Math.max(canarySteps.requests.length, baselineSteps.requests.length),
  );
}

/** The judgement of two totals; `steps` is only reported. */
export function judgeSplit(judge: SampleRatioJudge, canary: number, baseline: number, percent: number | null, steps?: number): SeriesJudgement {
  const total = canary + baseline;
  const observed = total ? round((100 * canary) / total) : null;
  const base = { canary: { count: canary }, baseline: { count: baseline }, percent, observed, ...(steps === undefined ? {} : { steps }) };
  if (percent === null)
    return { outcome: 'inconclusive', value: observed, reason: 'the intended split is not known: no percent to check the counts against', detail: base };
  // At 0 % or 100 % there is one cohort: no split to check, nothing to hold (a rollout-wide gate reads the last stage too).
  if (!(percent > 0 && percent < 100)) return { outcome: 'pass', value: observed, reason: null, detail: base };
  const fewest = Math.min(percent, 100 - percent) / 100;
  if (total < judge.minSamples || total * fewest < MIN_EXPECTED) {
    const needed = Math.max(judge.minSamples, Math.ceil(MIN_EXPECTED / fewest));
    return {
      outcome: 'inconclusive',
      value: null,
      reason: `${NOT_ENOUGH_DATA}: ${total} counted (${canary} canary, ${baseline} baseline), ${needed} needed to check a ${percent} % split`,
      detail: base,
    };
  }
  const srm = sampleRatioMismatch(canary, baseline, percent, judge.alpha)!;
  const detail = { ...base, chiSquare: round(srm.chiSquare), pValue: Number(srm.pValue.toPrecision(3)) };
  if (srm.mismatch) {
    return {
      outcome: 'fail',
      value: observed,
      reason: `sample-ratio mismatch: the canary has ${Math.round(10 * observed!) / 10} % of the counts where ${percent} % is meant (${canary} of ${total}; p ${pText(srm.pValue)}, under alpha ${judge.alpha}); no judgement on this split can be trusted`,
      detail,
    };
  }
  return { outcome: 'pass', value: observed, reason: null, detail };
}

/**
 * A stored sample-ratio reading judged again with another judge's alpha and minSamples, from the counts its
 * answer kept (backtesting); null when the answer holds no counts (clipped, or not a sample-ratio reading's).
 */
export function rejudgeSampleRatio(judge: SampleRatioJudge, answer: string): SeriesJudgement['outcome'] | null {
  try {
    const a = JSON.parse(answer) as { canary?: { count?: unknown }; baseline?: { count?: unknown }; percent?: unknown };
    const count = (v: unknown) => (Number.isSafeInteger(v) && (v as number) >= 0 ? (v as number) : null);
    const c = count(a.canary?.count);
    const b = count(a.baseline?.count);
    const percent = typeof a.percent === 'number' && a.percent >= 0 && a.percent <= 100 ? a.percent : null;
    if (c === null || b === null || percent === null) return null;
    return judgeSplit(judge, c, b, percent).outcome;
  } catch {
    return null;
  }
}
