import type { RolloutSpec } from './spec.js';

/**
 * Pushed signals by cohort: a reporter (an application instance, a load
 * balancer's log shipper) says what one cohort served since its previous
 * report: `requests`, `errors`, and optionally latency `samples`. A
 * `signals` gate judges the canary's against the baseline's, read from the
 * store at the gate's interval like any provider gate.
 *
 * Each report is a fact of its own, kept under (cohort, reporter,
 * observedAt): a report delivered twice is stored once, and reporters that
 * name themselves never overwrite each other. Counts add up across reports
 * and reporters; nothing is "newest wins" here, unlike a stage's uncohorted
 * reading.
 */

export const COHORTS = ['canary', 'baseline'] as const;
export type Cohort = (typeof COHORTS)[number];

/** Latency samples one report may carry (a reporter with more sends a sample of them, or reports more often). */
export const MAX_REPORT_SAMPLES = 1_000;
/** Reports of one stage a `signals` gate reads at most (both cohorts, all reporters); past it the reading says so and is inconclusive. */
export const MAX_STAGE_REPORTS = 5_000;

/** One stored report: what `cohort` served in the reporter's interval ending at `observedAt` (ms). */
export interface CohortReport {
  readonly cohort: Cohort;
  /** Who reported (empty: a single reporter). Two reports of one cohort and time from different reporters are both kept. */
  readonly reporter: string;
  readonly requests: number;
  readonly errors: number;
  /** Latencies in ms, as the reporter sampled them; null when it sent none. */
  readonly samples: readonly number[] | null;
  readonly observedAt: number;
}

/** A report as it arrives: its cohort named, or the version that served it. */
export type CohortReportInput = Omit<CohortReport, 'cohort'> & { readonly cohort: Cohort | { readonly version: string } };

/**
 * The cohort a report's version names on this rollout: the canary runs `target.version`, the baseline
 * `target.stableVersion`. Null for any other version: the store refuses the report naming the field
 * (`unknownVersion`), since counting it in either cohort would judge one version as another.
 */
export function cohortOf(spec: Pick<RolloutSpec, 'target'>, named: CohortReportInput['cohort']): Cohort | null {
  if (typeof named === 'string') return named;
  if (named.version === spec.target.version) return 'canary';
  if (spec.target.stableVersion !== undefined && named.version === spec.target.stableVersion) return 'baseline';
  return null;
}

/** Why a report's version was refused, in the words an InvalidEventError carries. */
export function unknownVersion(spec: Pick<RolloutSpec, 'target'>, version: string): string {
  const stable = spec.target.stableVersion === undefined ? 'none given' : JSON.stringify(spec.target.stableVersion);
  return `version: ${JSON.stringify(version)} is neither the rollout's version (${JSON.stringify(spec.target.version)}) nor its stableVersion (${stable}); name the cohort instead`;
}

/**
 * Each cohort's requests and errors per step of a grid (`anchor` in epoch seconds, `steps` of
 * `stepSeconds`): a report counts in the step its `observedAt` falls in, [start, end). Reports outside
 * the grid count nowhere.
 */
export function countsOnGrid(
  reports: readonly CohortReport[],
  grid: { readonly anchor: number; readonly steps: number; readonly stepSeconds: number },
): Record<Cohort, { requests: number[]; errors: number[] }> {
  const zeros = () => Array.from({ length: grid.steps }, () => 0);
  const out = { canary: { requests: zeros(), errors: zeros() }, baseline: { requests: zeros(), errors: zeros() } };
  for (const r of reports) {
    const step = Math.floor((r.observedAt / 1000 - grid.anchor) / grid.stepSeconds);
    if (step < 0 || step >= grid.steps) continue;
    out[r.cohort].requests[step]! += r.requests;
    out[r.cohort].errors[step]! += r.errors;
  }
  return out;
}

/** Each cohort's latency samples from `since` (ms) on, oldest report first, at most `max` a cohort (the newest kept). */
export function samplesSince(reports: readonly CohortReport[], since: number, max: number): Record<Cohort, number[]> {
  const out: Record<Cohort, number[]> = { canary: [], baseline: [] };
  for (const r of reports) if (r.observedAt >= since && r.samples) out[r.cohort].push(...r.samples);
  return { canary: out.canary.slice(-max), baseline: out.baseline.slice(-max) };
}
