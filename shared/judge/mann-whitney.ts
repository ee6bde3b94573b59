/**
 * The mann-whitney judge: one metric of the canary against the baseline,
 * classified as Kayenta's NetflixACAJudge classifies it (MannWhitneyClassifier),
 * on the exact statistics of rank-sum.ts. Deterministic: where Kayenta adds
 * Gaussian noise to two constant samples, the exact interval needs none.
 */
import { normalQuantile } from './normal.js';
import { mannWhitneyPValue, shiftedZ, shiftEstimate } from './rank-sum.js';

export type Direction = 'increase' | 'decrease' | 'either';
export type Classification = 'pass' | 'high' | 'low' | 'nodata' | 'nodataFail';

export interface MannWhitneyOptions {
  readonly direction: Direction;
  /** Confidence of the interval, in (0, 1). */
  readonly confidence: number;
  /** The interval must clear tolerance × |estimate| to count. */
  readonly tolerance: number;
  readonly effectSize: {
    readonly measure: 'meanRatio' | 'cles';
    readonly allowedIncrease: number;
    readonly allowedDecrease: number;
    readonly criticalIncrease: number;
    readonly criticalDecrease: number;
  };
  readonly critical: boolean;
  readonly mustHaveData: boolean;
  /** Missing points (null): dropped, or read as 0. */
  readonly nanStrategy: 'remove' | 'replace';
}

export interface MannWhitneyVerdict {
  readonly classification: Classification;
  readonly critical: boolean;
  readonly pValue: number | null;
  readonly ci: readonly [number, number] | null;
  readonly estimate: number | null;
  /** Why, in a sentence. */
  readonly reason: string;
}

export const MANN_WHITNEY_DEFAULTS = { direction: 'either', confidence: 0.98, tolerance: 0.25, nanStrategy: 'remove' } as const;

/** The effect-size defaults of a measure: a mean ratio of 1, or a CLES of one half, is no effect. */
export function effectSizeDefaults(measure: 'meanRatio' | 'cles'): MannWhitneyOptions['effectSize'] {
  const none = measure === 'cles' ? 0.5 : 1;
  return { measure, allowedIncrease: none, allowedDecrease: none, criticalIncrease: none, criticalDecrease: none };
}

const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** canary mean / baseline mean; NaN when either mean is 0 (then the effect size is not checked). */
function meanRatio(canary: readonly number[], baseline: readonly number[]): number {
  const b = mean(baseline);
  const c = mean(canary);
  return b === 0 || c === 0 ? NaN : c / b;
}

/** The share of (canary, baseline) pairs with the canary higher, ties counting one half. */
function cles(canary: readonly number[], baseline: readonly number[]): number {
  const c = [...canary].sort((a, b) => a - b);
  let u = 0;
  for (const v of baseline) {
    // Pairs where canary > v, plus half where equal: binary searches on the sorted canary.
    let lo = 0;
    let hi = c.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (c[mid]! <= v) lo = mid + 1;
      else hi = mid;
    }
    let eq = lo;
    while (eq > 0 && c[eq - 1] === v) eq--;
    u += c.length - lo + 0.5 * (lo - eq);
  }
  return u / (c.length * baseline.length);
}

function sameSorted(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  const x = [...a].sort((p, q) => p - q);
  const y = [...b].sort((p, q) => p - q);
  return x.every((v, i) => v === y[i]);
}

export function judgeMannWhitney(baselineIn: readonly (number | null)[], canaryIn: readonly (number | null)[], o: MannWhitneyOptions): MannWhitneyVerdict {
  const clean = (xs: readonly (number | null)[]) => (o.nanStrategy === 'remove' ? xs.filter((v): v is number => v !== null) : xs.map((v) => v ?? 0));
  const baseline = clean(baselineIn);
  const canary = clean(canaryIn);
  const none = { pValue: null, ci: null, estimate: null } as const;
  if (baseline.length === 0 || canary.length === 0) {
    const side = canary.length === 0 ? (baseline.length === 0 ? 'both cohorts' : 'the canary') : 'the baseline';
    if (o.nanStrategy === 'replace') return { classification: 'pass', critical: false, ...none, reason: `no data for ${side}; missing points count as 0` };
    if (o.mustHaveData && !o.critical)
      return { classification: 'nodataFail', critical: false, ...none, reason: `no data for ${side}, and the metric must have data` };
    return { classification: 'nodata', critical: o.critical, ...none, reason: `no data for ${side}` };
  }
  const pValue = mannWhitneyPValue(canary, baseline);
  const { estimate, ci } = shiftEstimate(canary, baseline, o.confidence);
  const figures = { pValue, ci, estimate };
  if (sameSorted(canary, baseline)) return { classification: 'pass', critical: false, ...figures, reason: 'the canary and baseline data are identical' };
  if (new Set([...canary, ...baseline]).size === 1) return { classification: 'pass', critical: false, ...figures, reason: 'every point has the same value' };

  const bound = o.tolerance * Math.abs(estimate);
  const zq = normalQuantile(1 - (1 - o.confidence) / 2);
  const xs = [...canary].sort((a, b) => a - b);
  const ys = [...baseline].sort((a, b) => a - b);
  // An end exactly on the bound: the rank statistic at that very shift (ties included) says which side it is on.
  const above = ci[0] > bound || (ci[0] === bound && shiftedZ(xs, ys, bound) > zq);
  const below = ci[1] < -bound || (ci[1] === -bound && shiftedZ(xs, ys, -bound) < -zq);
  const effect = o.effectSize.measure === 'cles' ? cles(canary, baseline) : meanRatio(canary, baseline);
  const unknown = Number.isNaN(effect);
  const high = o.direction !== 'decrease' && above && (unknown || effect >= o.effectSize.allowedIncrease);
  const low = !high && o.direction !== 'increase' && below && (unknown || effect <= o.effectSize.allowedDecrease);
  const interval = `[${ci[0]}, ${ci[1]}]`;
  if (high) {
    const critical = o.critical && (unknown || effect >= o.effectSize.criticalIncrease);
    return {
      classification: 'high',
      critical,
      ...figures,
      reason: `the canary is higher: shift ${estimate}, ${o.confidence} interval ${interval} above +${bound}`,
    };
  }
  if (low) {
    const critical = o.critical && (unknown || effect <= o.effectSize.criticalDecrease);
    return {
      classification: 'low',
      critical,
      ...figures,
      reason: `the canary is lower: shift ${estimate}, ${o.confidence} interval ${interval} below −${bound}`,
    };
  }
  return { classification: 'pass', critical: false, ...figures, reason: `no shift beyond ±${bound} at ${o.confidence}: interval ${interval}` };
}
