/**
 * A gate's judge: how a provider gate that reads the canary and the baseline
 * cohorts turns their two series into one reading. `threshold` (no judge) is
 * the gate's comparison against a constant, as before; the judges here
 * compare the cohorts with each other, so a bad day for both is not a bad
 * canary.
 */
import { z } from 'zod';
import { effectSizeDefaults, judgeMannWhitney, MANN_WHITNEY_DEFAULTS } from './mann-whitney.js';

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

export const gateJudgeSchema = z.discriminatedUnion('kind', [mannWhitneyJudgeSchema, relativeJudgeSchema]);
export type GateJudge = z.output<typeof gateJudgeSchema>;

export interface SeriesJudgement {
  readonly outcome: 'pass' | 'fail' | 'inconclusive';
  /** The figure compared: the shift estimate (mann-whitney), or the ratio or difference (relative); null when none. */
  readonly value: number | null;
  /** Why it failed or was inconclusive; null on a pass. */
  readonly reason: string | null;
  /** The figures behind it, for people: each cohort's size and middle, and the judge's own numbers. */
  readonly detail: Readonly<Record<string, unknown>>;
}

const present = (xs: readonly (number | null)[]) => xs.filter((v): v is number => v !== null && Number.isFinite(v));
const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const round = (v: number) => Number(v.toPrecision(6));

/** One reading's judgement of the canary's series against the baseline's, over the same window. */
export function judgeSeries(judge: GateJudge, canaryIn: readonly (number | null)[], baselineIn: readonly (number | null)[]): SeriesJudgement {
  const canary = present(canaryIn);
  const baseline = present(baselineIn);
  const cohorts = { canary: { n: canary.length }, baseline: { n: baseline.length } };
  if (canary.length < judge.minSamples || baseline.length < judge.minSamples) {
    return {
      outcome: 'inconclusive',
      value: null,
      reason: `not enough data: ${canary.length} canary and ${baseline.length} baseline points, ${judge.minSamples} needed on each side`,
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
