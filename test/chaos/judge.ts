/**
 * The chaos checker's own judges: what a judged gate's reading should have
 * been, recomputed from the series the store kept with it. Written from the
 * judges' definitions (issue 47's contract, Kayenta's classifier, R's
 * `wilcox.test` interval, the sequential test's doc comment), importing
 * nothing from shared/judge or shared/rollout: two implementations that must
 * agree (judge.test.ts holds them to it on a grid of seeded series), so a bug
 * in one shows as a disagreement rather than as a verdict both believe.
 *
 * The ways differ on purpose: the product counts pairs on merged sorted
 * samples and bisects over doubles; here every pairwise difference is listed
 * and sorted, the rank statistic at an exact shift comes from midranks, and
 * the normal distribution from Marsaglia's series. That costs O(nm log nm):
 * fine for the short windows chaos schedules read, not for a product.
 */

export type JudgedOutcome = 'pass' | 'fail' | 'inconclusive';

export interface Recomputed {
  readonly outcome: JudgedOutcome;
  /** In words: the figures the outcome stands on. */
  readonly why: string;
}

/** A judged reading's input as the store keeps it (gate_readings.series). */
export type KeptSeries =
  | { readonly kind: 'values'; readonly canary: readonly (number | null)[]; readonly baseline: readonly (number | null)[] }
  | {
      readonly kind: 'counts';
      readonly canary: { readonly requests: readonly (number | null)[]; readonly errors: readonly (number | null)[] };
      readonly baseline: { readonly requests: readonly (number | null)[]; readonly errors: readonly (number | null)[] };
      readonly percent: number | null;
    };

type Json = Record<string, unknown>;
const num = (v: unknown, d: number) => (typeof v === 'number' && Number.isFinite(v) ? v : d);
const text = (v: unknown, d: string): string => (typeof v === 'string' ? v : d);

// ── the standard normal ─────────────────────────────────────────────────────

/** Φ(x) by Marsaglia's series (J. Stat. Softw. 11(4), 2004): 0.5 + φ(x)(x + x³/3 + x⁵/(3·5) + …); 1 or 0 past ±9. */
export function phi(x: number): number {
  if (Number.isNaN(x)) return NaN;
  if (x > 9) return 1;
  if (x < -9) return 0;
  let term = x;
  let sum = x;
  const x2 = x * x;
  for (let k = 3; k < 2_000; k += 2) {
    term *= x2 / k;
    const before = sum;
    sum += term;
    if (sum === before) break;
  }
  return 0.5 + sum * Math.exp(-0.5 * x2 - 0.9189385332046727);
}

/** The z with Φ(z) = p, by bisection on Φ to the last double. */
export function quantile(p: number): number {
  let lo = -9;
  let hi = 9;
  for (let i = 0; i < 200; i++) {
    const mid = (lo + hi) / 2;
    if (mid === lo || mid === hi) break;
    if (phi(mid) < p) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

// ── mann-whitney ────────────────────────────────────────────────────────────

const finite = (xs: readonly (number | null)[]) => xs.filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
const meanOf = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/**
 * The tie- and continuity-corrected rank statistic of (x − d) against y,
 * from midranks of the combined sample: W = (rank sum of x − d) − n(n+1)/2,
 * z = (W − nm/2 − sign·½) / σ, σ² = nm/12 · (N + 1 − Σ(t³ − t)/(N(N − 1))).
 */
export function rankZ(x: readonly number[], y: readonly number[], d: number): number {
  const all = [...x.map((v) => ({ v: v - d, mine: true })), ...y.map((v) => ({ v, mine: false }))].sort((a, b) => a.v - b.v);
  const n = x.length;
  const m = y.length;
  const total = n + m;
  let rankSum = 0;
  let ties = 0;
  for (let i = 0; i < total;) {
    let j = i;
    while (j < total && all[j]!.v === all[i]!.v) j++;
    const midrank = (i + 1 + j) / 2;
    for (let k = i; k < j; k++) if (all[k]!.mine) rankSum += midrank;
    const t = j - i;
    ties += t * t * t - t;
    i = j;
  }
  const w = rankSum - (n * (n + 1)) / 2;
  const dz = w - (n * m) / 2;
  const sigma = Math.sqrt(((n * m) / 12) * (total + 1 - ties / (total * (total - 1))));
  return sigma === 0 ? NaN : (dz - Math.sign(dz) * 0.5) / sigma;
}

export interface MannWhitneyFigures {
  readonly estimate: number;
  readonly ci: readonly [number, number];
  readonly classification: 'pass' | 'high' | 'low';
}

/**
 * Kayenta's classifier on two non-empty samples: the Hodges-Lehmann shift
 * (the median of every canary − baseline difference), the interval whose ends
 * are the differences where the rank statistic of canary − d, just past them,
 * first drops below +z and below −z, and the classification by the interval
 * against tolerance × |shift| and the effect size.
 */
export function mannWhitney(
  canary: readonly number[],
  baseline: readonly number[],
  o: {
    direction: string;
    confidence: number;
    tolerance: number;
    measure: 'meanRatio' | 'cles';
    allowedIncrease: number;
    allowedDecrease: number;
  },
): MannWhitneyFigures {
  const n = canary.length;
  const m = baseline.length;
  const diffs: number[] = [];
  for (const c of canary) for (const b of baseline) diffs.push(c - b);
  diffs.sort((a, b) => a - b);
  const total = diffs.length;
  const estimate = total % 2 === 1 ? diffs[(total - 1) / 2]! : (diffs[total / 2 - 1]! + diffs[total / 2]!) / 2;
  // Between differences only ties within each sample count: Σ(t³ − t) over each sample's groups.
  const groupTies = (xs: readonly number[]) => {
    const counts = new Map<number, number>();
    for (const v of xs) counts.set(v, (counts.get(v) ?? 0) + 1);
    let s = 0;
    for (const t of counts.values()) s += t * t * t - t;
    return s;
  };
  const size = n + m;
  const sigma0 = Math.sqrt(((n * m) / 12) * (size + 1 - (groupTies(canary) + groupTies(baseline)) / (size * (size - 1))));
  const z = quantile(1 - (1 - o.confidence) / 2);
  // Just past a distinct difference v (all K differences ≤ v counted), W = total − K.
  const past: { v: number; stat: number }[] = [];
  for (let i = 0; i < total;) {
    let j = i;
    while (j < total && diffs[j] === diffs[i]) j++;
    const dz = total / 2 - j;
    past.push({ v: diffs[i]!, stat: (dz - Math.sign(dz) * 0.5) / sigma0 });
    i = j;
  }
  const lower = past.find((p) => p.stat < z)?.v ?? diffs[total - 1]!;
  const upper = past.find((p) => p.stat < -z)?.v ?? diffs[total - 1]!;
  const ci = [lower, upper] as const;
  const sorted = (xs: readonly number[]) => [...xs].sort((a, b) => a - b);
  const sc = sorted(canary);
  const sb = sorted(baseline);
  if ((n === m && sc.every((v, i) => v === sb[i])) || new Set([...canary, ...baseline]).size === 1) return { estimate, ci, classification: 'pass' };
  const bound = o.tolerance * Math.abs(estimate);
  const above = lower > bound || (lower === bound && rankZ(canary, baseline, bound) > z);
  const below = upper < -bound || (upper === -bound && rankZ(canary, baseline, -bound) < -z);
  let effect: number;
  if (o.measure === 'cles') {
    effect = (diffs.filter((x) => x > 0).length + 0.5 * diffs.filter((x) => x === 0).length) / total;
  } else {
    const mc = meanOf(canary);
    const mb = meanOf(baseline);
    effect = mc === 0 || mb === 0 ? NaN : mc / mb;
  }
  const unknown = Number.isNaN(effect);
  const high = o.direction !== 'decrease' && above && (unknown || effect >= o.allowedIncrease);
  const low = !high && o.direction !== 'increase' && below && (unknown || effect <= o.allowedDecrease);
  return { estimate, ci, classification: high ? 'high' : low ? 'low' : 'pass' };
}

// ── sequential-rate ─────────────────────────────────────────────────────────

/** The rate ratios the test's mixture weighs equally (its definition). */
export const MIXTURE_RATIOS = [1.1, 1.25, 1.5, 2, 3, 5, 10] as const;

export interface SequentialFigures {
  readonly verdict: 'fail' | 'continue';
  readonly decidedAt: number | null;
  /** Each side's requests and errors over every step read. */
  readonly canary: readonly [number, number];
  readonly baseline: readonly [number, number];
  readonly logEvidence: number;
}

/**
 * The mixture sequential probability ratio test on per-step counts: given E
 * errors between two looks, the canary's share under a rate ratio θ is
 * θq/(θq + 1 − q) (q, its share of the requests), so a step multiplies the
 * θ-ratio by θ^ec / (θq + 1 − q)^E; the mixture over the grid fails at the
 * first look where both sides have served minSamples and it reaches 1/alpha.
 * A missing point counts nothing; counts are whole and errors at most requests.
 */
export function sequentialRate(
  canary: { requests: readonly (number | null)[]; errors: readonly (number | null)[] },
  baseline: { requests: readonly (number | null)[]; errors: readonly (number | null)[] },
  o: { alpha: number; minSamples: number },
): SequentialFigures {
  const whole = (v: number | null | undefined) => (typeof v === 'number' && Number.isFinite(v) ? Math.max(0, Math.round(v)) : 0);
  const steps = Math.max(canary.requests.length, canary.errors.length, baseline.requests.length, baseline.errors.length);
  const logs = MIXTURE_RATIOS.map(() => 0);
  const c: [number, number] = [0, 0];
  const b: [number, number] = [0, 0];
  let logEvidence = 0;
  for (let i = 0; i < steps; i++) {
    const nc = whole(canary.requests[i]);
    const nb = whole(baseline.requests[i]);
    const ec = Math.min(nc, whole(canary.errors[i]));
    const eb = Math.min(nb, whole(baseline.errors[i]));
    c[0] += nc;
    c[1] += ec;
    b[0] += nb;
    b[1] += eb;
    if (ec + eb > 0 && nc > 0 && nb > 0) {
      const q = nc / (nc + nb);
      MIXTURE_RATIOS.forEach((theta, t) => (logs[t]! += ec * Math.log(theta) - (ec + eb) * Math.log(theta * q + 1 - q)));
    }
    const top = Math.max(...logs);
    logEvidence = top + Math.log(logs.reduce((s, l) => s + Math.exp(l - top), 0)) - Math.log(MIXTURE_RATIOS.length);
    if (c[0] >= o.minSamples && b[0] >= o.minSamples && logEvidence >= -Math.log(o.alpha)) {
      return { verdict: 'fail', decidedAt: i, canary: c, baseline: b, logEvidence };
    }
  }
  return { verdict: 'continue', decidedAt: null, canary: c, baseline: b, logEvidence };
}

/** The chi-square (one degree of freedom) test of the observed split against the intended percent; null when it cannot be asked. */
export function splitPValue(canary: number, baseline: number, percent: number): number | null {
  const total = canary + baseline;
  if (total === 0 || !(percent > 0 && percent < 100)) return null;
  const ec = (total * percent) / 100;
  const eb = total - ec;
  const chi = (canary - ec) ** 2 / ec + (baseline - eb) ** 2 / eb;
  return 2 * (1 - phi(Math.sqrt(chi)));
}

// ── one reading ─────────────────────────────────────────────────────────────

/**
 * What a reading judged by `judge` (the gate's `judge` object as the spec
 * holds it; absent fields take the contract's defaults) on `series` should
 * have been.
 */
export function recompute(judge: Json, series: KeptSeries): Recomputed {
  const kind = judge.kind;
  if (kind === 'sequential-rate') {
    if (series.kind !== 'counts') return { outcome: 'inconclusive', why: 'a sequential-rate gate got series, not counts' };
    const alpha = num(judge.alpha, 0.05);
    const minSamples = num(judge.minSamples, 100);
    const s = sequentialRate(series.canary, series.baseline, { alpha, minSamples });
    const said = `canary ${s.canary[1]}/${s.canary[0]}, baseline ${s.baseline[1]}/${s.baseline[0]}, log evidence ${s.logEvidence.toFixed(3)} against ${(-Math.log(alpha)).toFixed(3)}`;
    if (s.verdict === 'fail') return { outcome: 'fail', why: `higher canary error rate at step ${s.decidedAt}: ${said}` };
    if (s.canary[0] < minSamples || s.baseline[0] < minSamples) return { outcome: 'inconclusive', why: `not enough data (${minSamples} a side): ${said}` };
    const srm = judge.srm === false ? null : ((judge.srm ?? {}) as Json);
    if (srm && series.percent !== null) {
      const p = splitPValue(s.canary[0], s.baseline[0], series.percent);
      if (p !== null && p < num(srm.alpha, 0.001))
        return { outcome: 'inconclusive', why: `split mismatch (p ${p.toPrecision(3)} for ${series.percent} %): ${said}` };
    }
    return { outcome: 'pass', why: said };
  }
  if (series.kind !== 'values') return { outcome: 'inconclusive', why: `a ${String(kind)} gate got counts` };
  const canary = finite(series.canary);
  const baseline = finite(series.baseline);
  const minSamples = num(judge.minSamples, kind === 'relative' ? 1 : 10);
  if (canary.length < minSamples || baseline.length < minSamples)
    return { outcome: 'inconclusive', why: `not enough data: ${canary.length} canary and ${baseline.length} baseline points, ${minSamples} a side` };
  const direction = text(judge.direction, 'increase');
  if (kind === 'mann-whitney') {
    const effect = (judge.effectSize ?? {}) as Json;
    const measure = text(effect.measure, 'meanRatio') === 'cles' ? 'cles' : 'meanRatio';
    const none = measure === 'cles' ? 0.5 : 1;
    const f = mannWhitney(canary, baseline, {
      direction,
      confidence: num(judge.confidence, 0.98),
      tolerance: num(judge.tolerance, 0.25),
      measure,
      allowedIncrease: num(effect.allowedIncrease, none),
      allowedDecrease: num(effect.allowedDecrease, none),
    });
    return {
      outcome: f.classification === 'pass' ? 'pass' : 'fail',
      why: `${f.classification}: shift ${f.estimate}, interval [${f.ci[0]}, ${f.ci[1]}] (${canary.length} canary, ${baseline.length} baseline points)`,
    };
  }
  if (kind === 'relative') {
    const statistic = text(judge.statistic, 'mean');
    const figure = (xs: readonly number[]) => (statistic === 'last' ? xs[xs.length - 1]! : meanOf(xs));
    const c = figure(canary);
    const b = figure(baseline);
    const ratio = text(judge.measure, 'ratio') === 'ratio';
    if (ratio && b === 0) return { outcome: 'inconclusive', why: `the baseline's ${statistic} is 0` };
    const value = ratio ? c / b : c - b;
    const center = ratio ? 1 : 0;
    const tolerance = num(judge.tolerance, 0);
    const high = direction !== 'decrease' && value > center + tolerance;
    const low = direction !== 'increase' && value < center - tolerance;
    return { outcome: high || low ? 'fail' : 'pass', why: `${ratio ? 'canary/baseline' : 'canary − baseline'} ${value} against ${center} ± ${tolerance}` };
  }
  return { outcome: 'inconclusive', why: `unknown judge ${String(kind)}` };
}
