/**
 * The standard normal distribution, to double precision: p-values and
 * critical values of the judges. No library: the core carries no numeric
 * dependency, and these two functions are all it needs.
 */

const SQRT_PI = Math.sqrt(Math.PI);

/** erfc(x) for x ≥ 0: a power series where it converges without cancellation, a continued fraction beyond. */
function erfcPositive(x: number): number {
  if (x < 2) {
    // erf(x) = 2/√π Σ (-1)^n x^(2n+1) / (n! (2n+1)); erfc = 1 − erf loses at most ~3 digits below 2.
    let term = x;
    let sum = x;
    const x2 = x * x;
    for (let n = 1; n < 200; n++) {
      term *= -x2 / n;
      const add = term / (2 * n + 1);
      sum += add;
      if (Math.abs(add) < 1e-17 * Math.abs(sum)) break;
    }
    return 1 - (2 / SQRT_PI) * sum;
  }
  if (x > 27) return 0;
  // erfc(x) = e^(−x²)/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + …)))), by the modified Lentz method.
  const tiny = 1e-300;
  let f = x;
  let c = x;
  let d = 0;
  for (let k = 1; k < 5000; k++) {
    const a = k / 2;
    d = x + a * d;
    d = d === 0 ? tiny : d;
    c = x + a / c;
    c = c === 0 ? tiny : c;
    d = 1 / d;
    const delta = c * d;
    f *= delta;
    if (Math.abs(delta - 1) < 1e-16) break;
  }
  return Math.exp(-x * x) / SQRT_PI / f;
}

/** P(Z > z) for a standard normal Z. */
export function normalSf(z: number): number {
  if (Number.isNaN(z)) return NaN;
  if (z === Infinity) return 0;
  if (z === -Infinity) return 1;
  return z >= 0 ? 0.5 * erfcPositive(z / Math.SQRT2) : 1 - 0.5 * erfcPositive(-z / Math.SQRT2);
}

/** P(Z ≤ z). */
export function normalCdf(z: number): number {
  return 1 - normalSf(z);
}

/** The z with P(Z ≤ z) = p, for p in (0, 1): bisection to adjacent doubles on the tail that keeps its digits. */
export function normalQuantile(p: number): number {
  if (!(p > 0 && p < 1)) throw new RangeError(`a normal quantile needs a probability in (0, 1), not ${p}`);
  if (p > 0.5) return -normalQuantile(1 - p);
  // P(Z ≤ z) = P(Z > −z) = p: search z ≤ 0 on the survival function of −z.
  let lo = -40;
  let hi = 0;
  for (;;) {
    const mid = lo + (hi - lo) / 2;
    if (mid <= lo || mid >= hi) return hi;
    if (normalSf(-mid) < p) lo = mid;
    else hi = mid;
  }
}
