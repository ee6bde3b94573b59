/**
 * What a judged reading keeps of what it was judged on: both cohorts' series, whole or not at all,
 * never in a tally, and an API answer that stays within its size by leaving out the oldest.
 */
import { describe, expect, it } from 'vitest';
import { MAX_JUDGED_POINTS } from '../../shared/rollout/gate-spec.js';
import { readingSeriesSchema, seriesOf, tallyWith, withoutSeries, type GateReading } from '../../shared/rollout/gates.js';
import { withinBudget } from '../../shared/api/handler.js';
import { SERIES_POINTS_BUDGET } from '../../shared/api/routes/rollouts.js';

const reading = (at: number, series?: GateReading['series']): GateReading => ({
  gate: 'latency',
  type: 'prometheus',
  attempt: 1,
  stage: 0,
  at,
  outcome: 'pass',
  value: 0.1,
  query: 'q',
  answer: '',
  reason: null,
  source: 'poll',
  ...(series ? { series } : {}),
});

describe('a reading’s series', () => {
  it('keeps both cohorts’ points as returned, a point that is not a finite number as missing, and counts with their percent', () => {
    expect(seriesOf({ kind: 'cohorts', canary: [1, Number.NaN, 3], baseline: [Infinity, 2], answer: '' })).toEqual({
      kind: 'values',
      canary: [1, null, 3],
      baseline: [null, 2],
    });
    const c = { requests: [10, null], errors: [1, 0] };
    expect(seriesOf({ kind: 'counts', canary: c, baseline: c, percent: 25, answer: '' })).toEqual({ kind: 'counts', canary: c, baseline: c, percent: 25 });
    expect(seriesOf({ kind: 'number', value: 1, answer: '' })).toBeNull();
    expect(seriesOf({ kind: 'error', message: 'down', answer: '' })).toBeNull();
    // What is kept parses back as what it was.
    const kept = seriesOf({ kind: 'cohorts', canary: [1, 2], baseline: [3], answer: '' })!;
    expect(readingSeriesSchema.parse(JSON.parse(JSON.stringify(kept)))).toEqual(kept);
  });

  it(`is kept whole or not at all: past ${MAX_JUDGED_POINTS} points a cohort, none of it`, () => {
    const full = Array.from({ length: MAX_JUDGED_POINTS }, (_, i) => i);
    expect(seriesOf({ kind: 'cohorts', canary: full, baseline: full, answer: '' })).not.toBeNull();
    expect(seriesOf({ kind: 'cohorts', canary: [...full, 1], baseline: full, answer: '' })).toBeNull();
    expect(readingSeriesSchema.safeParse({ kind: 'values', canary: [...full, 1], baseline: [] }).success).toBe(false);
  });

  it('never enters a tally: the tally names its newest reading without it', () => {
    const r = reading(1_000, { kind: 'values', canary: [1], baseline: [2] });
    const t = tallyWith(undefined, r, 0)!;
    expect(t.last).toEqual(withoutSeries(r));
    expect('series' in t.last).toBe(false);
    expect(withoutSeries(reading(5))).toEqual(reading(5));
  });

  it(`an answer keeps the newest readings' series within ${SERIES_POINTS_BUDGET} points and counts the older ones it leaves out`, () => {
    const half = Array.from({ length: SERIES_POINTS_BUDGET / 4 }, () => 1);
    const big = { kind: 'values' as const, canary: half, baseline: half };
    const rs = [reading(3_000, big), reading(2_000), reading(1_000, big), reading(500, { kind: 'values', canary: [1], baseline: [1] })];
    const { readings, seriesOmitted } = withinBudget(rs);
    expect(readings.map((r) => r.series !== undefined)).toEqual([true, false, true, false]);
    expect(seriesOmitted).toBe(1);
    expect(withinBudget(rs.slice(0, 2))).toEqual({ readings: rs.slice(0, 2) });
  });
});
