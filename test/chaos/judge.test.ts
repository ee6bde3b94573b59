import { describe, expect, it } from 'vitest';
import { gateJudgeSchema, judgeCounts, judgeSeries, type CountsJudge, type SeriesJudge } from '../../shared/judge/gate.js';
import { normals } from '../support/normals.js';
import { phi, quantile, recompute, type KeptSeries } from './judge.js';
import { Rng } from './rng.js';

/**
 * The checker's judges (judge.ts) against the product's (shared/judge), on a
 * grid of seeded series: they must agree on every reading's outcome, and the
 * mann-whitney figures (shift and interval) must be the same doubles. Two
 * implementations written apart are the point: the chaos checker trusts a
 * judgement only when its own says the same.
 */

type Points = (number | null)[];

/** n seeded points of mean `mean` and spread `sd`, rounded to `digits` (ties), a few missing. */
function draw(seed: number, n: number, mean: number, sd: number, digits: number, missing: boolean): Points {
  const z = normals(seed);
  const rng = new Rng(`missing-${seed}`);
  return Array.from({ length: n }, () => {
    const v = Number((mean + sd * z()).toFixed(digits));
    return missing && rng.int(10) === 0 ? null : v;
  });
}

const tally = (xs: string[]) => xs.reduce<Record<string, number>>((o, x) => ({ ...o, [x]: (o[x] ?? 0) + 1 }), {});

describe("the checker's judges agree with the product's", () => {
  it('the normal distribution: known values', () => {
    expect(phi(0)).toBe(0.5);
    expect(phi(1.959963984540054)).toBeCloseTo(0.975, 15);
    expect(phi(-1)).toBeCloseTo(0.15865525393145707, 15);
    // Φ near 1 keeps its absolute digits, not its tail's: z to about 1e-13, far finer than any gap between rank statistics.
    expect(quantile(0.99)).toBeCloseTo(2.3263478740408408, 12);
    expect(quantile(0.995)).toBeCloseTo(2.5758293035489004, 12);
  });

  it('mann-whitney: the same outcome, shift and interval on every series of the grid', () => {
    const outcomes: string[] = [];
    let seed = 1;
    const sizes = [
      [1, 1],
      [2, 3],
      [5, 5],
      [8, 12],
      [20, 20],
      [31, 17],
    ] as const;
    for (const [n, m] of sizes) {
      for (const shift of [0, 0.2, 1, 4]) {
        for (const digits of [0, 1, 6]) {
          for (const raw of [
            { kind: 'mann-whitney', minSamples: 1 },
            { kind: 'mann-whitney', direction: 'either', confidence: 0.9, tolerance: 0, minSamples: 1 },
            { kind: 'mann-whitney', direction: 'decrease', effectSize: { measure: 'cles', allowedDecrease: 0.4 }, minSamples: 3 },
            { kind: 'mann-whitney', effectSize: { allowedIncrease: 1.05 }, minSamples: 5 },
          ]) {
            seed++;
            const baseline = draw(seed, m, 10, 2, digits, seed % 3 === 0);
            const sign = raw.direction === 'decrease' ? -1 : 1;
            const canary = draw(seed + 10_000, n, 10 + sign * shift * 2, 2, digits, seed % 5 === 0);
            const judge = gateJudgeSchema.parse(raw) as SeriesJudge;
            const product = judgeSeries(judge, canary, baseline);
            const series: KeptSeries = { kind: 'values', canary, baseline };
            // Given the spec as written (the contract's defaults) and as the product parsed it.
            for (const given of [raw, judge]) {
              const mine = recompute(given, series);
              expect(mine.outcome, `${JSON.stringify({ raw, canary, baseline })}: ${mine.why} / ${product.reason}`).toBe(product.outcome);
            }
            if (product.outcome !== 'inconclusive') {
              const d = product.detail as { estimate: number; ci: [number, number] };
              const why = recompute(judge, series).why;
              expect(why).toContain(`shift ${d.estimate}, interval [${d.ci[0]}, ${d.ci[1]}]`);
            }
            outcomes.push(product.outcome);
          }
        }
      }
    }
    // The grid reaches every outcome, so agreement means something.
    expect(Object.keys(tally(outcomes)).sort()).toEqual(['fail', 'inconclusive', 'pass']);
  });

  it('relative: the same outcome on every series of the grid', () => {
    const outcomes: string[] = [];
    let seed = 50_000;
    for (const raw of [
      { kind: 'relative', measure: 'ratio', tolerance: 0.1 },
      { kind: 'relative', measure: 'difference', tolerance: 0.5, direction: 'either', statistic: 'last', minSamples: 3 },
      { kind: 'relative', measure: 'ratio', tolerance: 0.2, direction: 'decrease' },
    ]) {
      for (const [n, mean] of [
        [4, 10],
        [12, 10.5],
        [12, 12],
        [6, 0],
        [2, 9],
      ] as const) {
        seed++;
        const baseline = mean === 0 ? [0, 0, 0, 0] : draw(seed, 8, 10, 0.3, 2, seed % 2 === 0);
        const canary = draw(seed + 1, n, mean === 0 ? 1 : mean, 0.3, 2, false);
        const judge = gateJudgeSchema.parse(raw) as SeriesJudge;
        const product = judgeSeries(judge, canary, baseline);
        for (const given of [raw, judge]) {
          expect(recompute(given as Record<string, unknown>, { kind: 'values', canary, baseline }).outcome, JSON.stringify({ raw, canary, baseline })).toBe(
            product.outcome,
          );
        }
        outcomes.push(product.outcome);
      }
    }
    expect(Object.keys(tally(outcomes)).sort()).toEqual(['fail', 'inconclusive', 'pass']);
  });

  it('sequential-rate: the same outcome on every series of the grid', () => {
    const outcomes: string[] = [];
    let seed = 90_000;
    for (const raw of [
      { kind: 'sequential-rate' },
      { kind: 'sequential-rate', alpha: 0.01, minSamples: 500, srm: false },
      { kind: 'sequential-rate', alpha: 0.2, minSamples: 20, srm: { alpha: 0.01 } },
    ]) {
      for (const ratio of [1, 1.5, 3]) {
        for (const [steps, percent] of [
          [0, 10],
          [3, 10],
          [12, 25],
          [30, null],
          [20, 10],
        ] as const) {
          seed++;
          const rng = new Rng(`counts-${seed}`);
          // The canary gets about `percent` of the traffic; with seed % 4 === 0 it gets twice that (a skewed split).
          const share = (percent ?? 10) / 100 / (seed % 4 === 0 ? 0.5 : 1);
          const side = (mine: boolean) => {
            const requests: Points = [];
            const errors: Points = [];
            for (let i = 0; i < steps; i++) {
              const total = 200 + rng.int(400);
              const n = Math.round(total * (mine ? share : 1 - share)) + (mine ? 0.4 : 0); // fractional: increase() extrapolates
              const rate = 0.02 * (mine ? ratio : 1);
              let e = 0;
              for (let k = 0; k < n; k++) if (rng.next() < rate) e++;
              const gap = rng.int(15) === 0;
              requests.push(gap ? null : n);
              errors.push(gap ? null : rng.int(40) === 0 ? n + 3 : e); // now and then more errors than requests
            }
            return { requests, errors };
          };
          const canary = side(true);
          const baseline = side(false);
          const judge = gateJudgeSchema.parse(raw) as CountsJudge;
          const product = judgeCounts(judge, canary, baseline, percent);
          for (const given of [raw, judge]) {
            const mine = recompute(given, { kind: 'counts', canary, baseline, percent });
            expect(mine.outcome, `${JSON.stringify({ raw, canary, baseline, percent })}: ${mine.why} / ${product.reason}`).toBe(product.outcome);
          }
          outcomes.push(product.outcome);
        }
      }
    }
    expect(Object.keys(tally(outcomes)).sort()).toEqual(['fail', 'inconclusive', 'pass']);
  });

  it('a series of the wrong kind for its judge is inconclusive, as the product reads it', () => {
    expect(recompute({ kind: 'sequential-rate' }, { kind: 'values', canary: [1], baseline: [1] }).outcome).toBe('inconclusive');
    const none = { requests: [], errors: [] };
    expect(recompute({ kind: 'mann-whitney' }, { kind: 'counts', canary: none, baseline: none, percent: 10 }).outcome).toBe('inconclusive');
  });
});
