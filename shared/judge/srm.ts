/**
 * Sample-ratio mismatch: is the split the cohorts saw the split that was
 * meant? A chi-square goodness-of-fit test (one degree of freedom) of the
 * canary and baseline counts against the intended percent. A judgement on a
 * skewed split cannot be trusted (the canary may be getting other users, or
 * an actuator may not be doing what it says), so a mismatch holds.
 */
import { normalSf } from './normal.js';

/** The default bar: a split this unlikely under the intended one is a mismatch. */
export const SRM_ALPHA = 0.001;

export interface SrmResult {
  readonly chiSquare: number;
  readonly pValue: number;
  /** The canary's observed share, 0..1. */
  readonly observed: number;
  readonly mismatch: boolean;
}

/** `canary` and `baseline` counts (requests, exposures) against the canary's intended percent (0 < percent < 100). */
export function sampleRatioMismatch(canary: number, baseline: number, percent: number, alpha = SRM_ALPHA): SrmResult | null {
  const total = canary + baseline;
  // 0 % and 100 % have no second cohort to compare; nothing counted, nothing to say.
  if (total === 0 || !(percent > 0 && percent < 100)) return null;
  // Multiplied before dividing, as scipy's reference does: 30,000,000 × 10 / 100 is exactly 3,000,000; × 0.1 is not.
  const expectedCanary = (total * percent) / 100;
  const expectedBaseline = (total * (100 - percent)) / 100;
  const chiSquare = (canary - expectedCanary) ** 2 / expectedCanary + (baseline - expectedBaseline) ** 2 / expectedBaseline;
  // χ²(1) is Z²: its tail is both tails of a standard normal.
  const pValue = Math.min(1, 2 * normalSf(Math.sqrt(chiSquare)));
  return { chiSquare, pValue, observed: canary / total, mismatch: pValue < alpha };
}
