import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { cohortOf, countsOnGrid, MAX_REPORT_SAMPLES, samplesSince, unknownVersion, type CohortReport } from '../../shared/rollout/cohort-signals.js';
import { InvalidEventError, parseInboundEvent } from '../../shared/rollout/inbound.js';
import { clampedToReceipt } from '../../shared/rollout/promoters.js';
import { parseRolloutSpec } from '../../shared/rollout/spec.js';

const T = Date.UTC(2026, 0, 1);
const base = { type: 'rollout.metrics_reported', rolloutId: 'r', stage: 'canary', requests: 10, errors: 1, observedAt: T };
const refusal = (input: unknown) => {
  try {
    parseInboundEvent(input);
  } catch (err) {
    if (err instanceof InvalidEventError) return err.issues;
    throw err;
  }
  throw new Error('accepted');
};

describe('a cohort’s report as it arrives', () => {
  it('takes a cohort or a version, a reporter and samples', () => {
    expect(parseInboundEvent({ ...base, cohort: 'canary', reporter: 'web-1', samples: [12.5, 30] })).toMatchObject({
      cohort: 'canary',
      reporter: 'web-1',
      samples: [12.5, 30],
    });
    expect(parseInboundEvent({ ...base, version: 'v2' })).toMatchObject({ version: 'v2' });
  });

  it('refuses what does not add up, naming the field', () => {
    expect(refusal({ ...base, cohort: 'canary', version: 'v2' })).toEqual(['version: name the cohort or the version that served it, not both']);
    expect(refusal({ ...base, cohort: 'control' })[0]).toMatch(/^cohort: /);
    expect(refusal({ ...base, reporter: 'web-1' })).toEqual(["reporter: reporter goes with a cohort's report: give cohort (canary, baseline) or version"]);
    expect(refusal({ ...base, samples: [1] })).toEqual(["samples: samples goes with a cohort's report: give cohort (canary, baseline) or version"]);
    expect(refusal({ ...base, cohort: 'canary', p99LatencyMs: 300 })).toEqual([
      "p99LatencyMs: a cohort's report carries its latencies as samples; p99LatencyMs goes with the stage's own reading",
    ]);
    expect(refusal({ ...base, cohort: 'canary', samples: Array.from({ length: MAX_REPORT_SAMPLES + 1 }, () => 1) })[0]).toMatch(/^samples: /);
    expect(refusal({ ...base, cohort: 'canary', samples: [-1] })[0]).toMatch(/^samples\.0: /);
    expect(refusal({ ...base, cohort: 'canary', errors: 11 })).toEqual(['errors: must not exceed requests']);
  });

  it('keeps its own time (its key), where a stage’s reading from ahead counts as received now', () => {
    const ahead = { ...base, observedAt: T + 10_000 };
    expect(clampedToReceipt(parseInboundEvent({ ...ahead, cohort: 'canary' }), T)).toMatchObject({ observedAt: T + 10_000 });
    expect(clampedToReceipt(parseInboundEvent(ahead), T)).toMatchObject({ observedAt: T });
  });
});

describe('cohorts by version', () => {
  const target = { service: 's', version: 'v2', stableVersion: 'v1', labels: {} };
  it('the canary runs the version, the baseline the stable version; any other is none', () => {
    expect(cohortOf({ target }, { version: 'v2' })).toBe('canary');
    expect(cohortOf({ target }, { version: 'v1' })).toBe('baseline');
    expect(cohortOf({ target }, 'baseline')).toBe('baseline');
    expect(cohortOf({ target }, { version: 'v3' })).toBeNull();
    expect(cohortOf({ target: { service: 's', version: 'v2', labels: {} } }, { version: 'v1' })).toBeNull();
    expect(unknownVersion({ target: { service: 's', version: 'v2', labels: {} } }, 'v1')).toBe(
      'version: "v1" is neither the rollout\'s version ("v2") nor its stableVersion (none given); name the cohort instead',
    );
  });
});

describe('reports laid out for a judge', () => {
  const r = (cohort: 'canary' | 'baseline', observedAt: number, requests: number, errors: number, samples: number[] | null = null): CohortReport => ({
    cohort,
    reporter: '',
    requests,
    errors,
    samples,
    observedAt,
  });
  it('counts each report in the step its time falls in, [start, end), across reporters; outside the grid in none', () => {
    const anchor = T / 1000;
    const got = countsOnGrid(
      [
        r('canary', T - 1, 100, 100), // before the grid
        r('canary', T, 10, 1),
        r('canary', T + 9_999, 5, 0),
        r('baseline', T + 10_000, 90, 3),
        r('baseline', T + 10_000, 10, 0),
        r('canary', T + 20_000, 7, 7), // the grid's end: outside
      ],
      { anchor, steps: 2, stepSeconds: 10 },
    );
    expect(got).toEqual({ canary: { requests: [15, 0], errors: [1, 0] }, baseline: { requests: [0, 100], errors: [0, 3] } });
  });

  it('keeps each cohort’s newest samples from a time on', () => {
    const got = samplesSince([r('canary', T - 1, 1, 0, [999]), r('canary', T, 1, 0, [1, 2]), r('baseline', T, 1, 0, [5]), r('canary', T + 1, 1, 0, [3])], T, 2);
    expect(got).toEqual({ canary: [2, 3], baseline: [5] });
  });
});

describe('a signals gate in a spec', () => {
  const withGate = (gate: Record<string, unknown>) => ({
    target: { service: 's', version: 'v2', stableVersion: 'v1' },
    stages: [
      { name: 'canary', percent: 10, bakeSeconds: 60, gates: { providers: [{ type: 'signals', name: 'g', ...gate }] } },
      { name: 'all', percent: 100, bakeSeconds: 0 },
    ],
  });
  const issues = (gate: Record<string, unknown>) => {
    try {
      parseRolloutSpec(withGate(gate));
      return [];
    } catch (err) {
      return String((err as Error).message);
    }
  };
  it('is always judged, and takes what its judge reads', () => {
    expect(parseRolloutSpec(withGate({ metric: 'errors', judge: { kind: 'sequential-rate' } })).stages[0]!.gates.providers![0]).toMatchObject({
      type: 'signals',
      intervalSeconds: 30,
    });
    expect(issues({ metric: 'latency', judge: { kind: 'mann-whitney' }, windowSeconds: 300 })).toEqual([]);
    expect(issues({ metric: 'errors' })).toMatch(/judge/);
  });
  it('refuses what its judge does not read, naming the field', () => {
    expect(issues({ metric: 'latency', judge: { kind: 'sequential-rate' } })).toMatch(/metric: sequential-rate counts requests and errors: metric errors/);
    expect(issues({ metric: 'errors', judge: { kind: 'sample-ratio' }, windowSeconds: 60 })).toMatch(
      /windowSeconds: a sample-ratio gate counts every step since the stage began/,
    );
    expect(issues({ metric: 'latency', judge: { kind: 'mann-whitney' }, settleSeconds: 10 })).toMatch(
      /settleSeconds: settleSeconds goes with judge sequential-rate or sample-ratio/,
    );
    expect(issues({ metric: 'errors', judge: { kind: 'relative', measure: 'ratio', tolerance: 0.5 }, windowSeconds: 3_600, stepSeconds: 1 })).toMatch(
      /stepSeconds: 3600 s every 1 s is more than 1000 points a cohort/,
    );
    expect(issues({ metric: 'errors', judge: { kind: 'sequential-rate' }, query: 'x' })).toMatch(/query/);
  });
});

describe('the docs', () => {
  it('show reports the schema takes', () => {
    const page = readFileSync(new URL('../../docs/concepts/gates.md', import.meta.url), 'utf8');
    const reports = [...page.matchAll(/```json\n([\s\S]*?)```/g)].map((m) => m[1]!).filter((b) => b.includes('"rollout.metrics_reported"'));
    expect(reports.length).toBeGreaterThan(0);
    for (const r of reports) expect(parseInboundEvent(JSON.parse(r))).toMatchObject({ type: 'rollout.metrics_reported' });
  });
});
