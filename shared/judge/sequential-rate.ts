/**
 * The sequential-rate judge: is the canary's error rate higher than the
 * baseline's, asked at every look, with the chance of a false failure held at
 * alpha however many looks are taken.
 *
 * Between two looks each arm served Δn requests and made some errors. Given
 * the errors both made together (E), the canary's share of them is, with
 * equal error rates, hypergeometric with mean E·q (q = Δn_canary / Δn_both).
 * For a rate ratio θ > 1 the canary's share would follow q_θ = θq/(θq + 1 − q).
 * The product over looks of Binomial(E, q_θ)/Binomial(E, q) likelihood
 * ratios, mixed over a fixed grid of θ, is a nonnegative supermartingale when
 * the rates are equal or the canary is better (a hypergeometric share is less
 * spread than a binomial one, and the ratio is convex and increasing in the
 * share), so by Ville's inequality it ever reaches 1/alpha with probability at
 * most alpha: a mixture sequential probability ratio test that holds under
 * continuous peeking, exactly, with no normal approximation and no plug-in
 * variance.
 */

/** Rate ratios the mixture spreads its weight over, equally: small effects take longer to show, large ones show at once. */
export const RATE_RATIOS: readonly number[] = [1.1, 1.25, 1.5, 2, 3, 5, 10];

export interface Look {
  readonly baseline: readonly [requests: number, errors: number];
  readonly canary: readonly [requests: number, errors: number];
}

export interface SequentialOptions {
  /** The false-failure bound, in (0, 1). */
  readonly alpha: number;
  readonly direction: 'increase';
  /** A look decides only once both arms' cumulative requests reach it. */
  readonly minSamples: number;
}

export interface SequentialVerdict {
  readonly verdict: 'fail' | 'continue';
  /** The index of the deciding look, or null. */
  readonly decidedAt: number | null;
  /** The mixture likelihood ratio after the last look read (fail at ≥ 1/alpha). */
  readonly evidence: number;
}

/** log of Σ w·e^(l) over the grid, w = 1/|grid|, without overflow. */
function logMixture(logs: readonly number[]): number {
  const top = Math.max(...logs);
  if (top === -Infinity) return -Infinity;
  return top + Math.log(logs.reduce((s, l) => s + Math.exp(l - top), 0) / logs.length);
}

/**
 * The verdict after each look in turn; a fail is final. Looks are cumulative
 * counts (validated by the caller: integers, errors ≤ requests, never decreasing).
 */
export function judgeSequentialRate(looks: readonly Look[], o: SequentialOptions): SequentialVerdict {
  const logRatio = RATE_RATIOS.map(() => 0);
  const threshold = Math.log(1 / o.alpha);
  let prev: Look = { baseline: [0, 0], canary: [0, 0] };
  for (let k = 0; k < looks.length; k++) {
    const look = looks[k]!;
    const nc = look.canary[0] - prev.canary[0];
    const nb = look.baseline[0] - prev.baseline[0];
    const ec = look.canary[1] - prev.canary[1];
    const eb = look.baseline[1] - prev.baseline[1];
    prev = look;
    const errors = ec + eb;
    // With no errors, or one arm idle, the share carries no information: the ratio is 1.
    if (errors > 0 && nc > 0 && nb > 0) {
      const q = nc / (nc + nb);
      for (let t = 0; t < RATE_RATIOS.length; t++) {
        const theta = RATE_RATIOS[t]!;
        const qt = (theta * q) / (theta * q + 1 - q);
        logRatio[t]! += ec * Math.log(qt / q) + eb * Math.log((1 - qt) / (1 - q));
      }
    }
    const evidence = logMixture(logRatio);
    if (look.canary[0] >= o.minSamples && look.baseline[0] >= o.minSamples && evidence >= threshold) {
      return { verdict: 'fail', decidedAt: k, evidence: Math.exp(evidence) };
    }
  }
  return { verdict: 'continue', decidedAt: null, evidence: Math.exp(logMixture(logRatio)) };
}
