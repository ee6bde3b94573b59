/**
 * The AWS chaos plan is a function of (seed, schedule) alone: the same pair
 * replays the same faults and workload, and a few schedules with a small
 * fault count still cover every kind.
 */
import { describe, expect, it } from 'vitest';
import { AWS_FAULTS, DEFAULT_SHAPE, describePlan, makePlan } from '../chaos/aws/plan.js';

describe('the AWS chaos plan', () => {
  it('is the same for the same seed and schedule, and differs for another schedule', () => {
    const a = makePlan('42', 3, DEFAULT_SHAPE, 5_000);
    const b = makePlan('42', 3, DEFAULT_SHAPE, 5_000);
    expect(b).toEqual(a);
    expect(describePlan(b)).toBe(describePlan(a));
    expect(makePlan('42', 4, DEFAULT_SHAPE, 5_000).faults).not.toEqual(a.faults);
  });

  it('injects every kind at least once in a default schedule, each inside the faults phase', () => {
    const plan = makePlan('7', 0, DEFAULT_SHAPE, 5_000);
    expect(new Set(plan.faults.map((f) => f.kind))).toEqual(new Set(AWS_FAULTS));
    expect(plan.faults.every((f) => f.at >= 0 && f.at < DEFAULT_SHAPE.faultsMs)).toBe(true);
  });

  it('with a fault count, goes round-robin over one seeded order of the kinds across schedules', () => {
    const shape = { ...DEFAULT_SHAPE, faultCount: 4 };
    const kinds = [0, 1, 2].flatMap((s) => makePlan('9', s, shape, 5_000).faults.map((f) => f.kind));
    expect(kinds).toHaveLength(12);
    expect(new Set(kinds)).toEqual(new Set(AWS_FAULTS));
  });
});
