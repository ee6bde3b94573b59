import { describe, expect, it } from 'vitest';
import { backoffMs, stealBackoffMs } from '../../shared/ledger/worker/index.js';

describe('worker backoffs', () => {
  it('an idle worker asks for work 20 s doubling to 5 min apart, each drawn from [½, 1] of that', () => {
    expect([1, 2, 3, 4, 5, 6, 40].map((n) => stealBackoffMs(n, () => 1))).toEqual([20_000, 40_000, 80_000, 160_000, 300_000, 300_000, 300_000]);
    expect([1, 5].map((n) => stealBackoffMs(n, () => 0))).toEqual([10_000, 150_000]);
  });

  it('a failed step is retried 250 ms doubling to 30 s apart, jittered the same way', () => {
    expect([1, 2, 8, 9, 50].map((n) => backoffMs(n, () => 1))).toEqual([250, 500, 30_000, 30_000, 30_000]);
    expect(backoffMs(1, () => 0)).toBe(125);
  });
});
