import { trafficOf } from '../rollout/assignment.js';
import type { RolloutView } from '../rollout/model.js';
import type { WorkItem } from '../ledger/model.js';
import type { ActuationRecord } from '../rollout/actuation-record.js';
import { gatesJson } from './rollout-json.js';
import { GATE_OUTCOMES } from '../rollout/gates.js';
import { readingInterval } from '../judge/gate.js';
import type { RolloutStore } from '../rollout/store.js';
import { mapLimit } from '../concurrency.js';

/**
 * The metrics of rollouts and runs someone on call reads, under the names
 * every runtime exports: a node's /metrics (Prometheus) and the
 * Lambdas' EMF (CloudWatch, namespace METRICS_NAMESPACE). Computed here,
 * once, from what the store holds, so that names, labels and values cannot
 * drift apart between the two.
 *
 * Guarantees
 * - Each metric lists its labels (Prometheus) and which of them are
 *   CloudWatch dimensions. A dimension combination is a custom metric, billed
 *   for every hour it has data, so only the labels that tell series apart are
 *   dimensions (rollout, gate, reading outcome, event type, run, item state,
 *   drifted target); the others (versions, state, stage name, gate type,
 *   comparison) travel in the EMF blob as properties, searchable in Logs
 *   Insights.
 * - Bounded: at most MAX_ROLLOUTS rollouts and MAX_RUNS runs (the newest
 *   first) have series, a stage has at most MAX_PROVIDER_GATES gates, and
 *   label values are cut to LABEL_MAX characters.
 * - A rollout's series exist while it runs (or is paused); its series stop
 *   with the first read after it ends.
 *
 * Non-guarantees
 * - A sample is as fresh as the read it came from (a scrape, a tick).
 */
export const METRICS_NAMESPACE = 'Rollout';
export const MAX_ROLLOUTS = 100;
export const MAX_RUNS = 50;
export const LABEL_MAX = 128;

/** CloudWatch's unit of each metric (Prometheus has none). */
export type CloudWatchUnit = 'Count' | 'Seconds' | 'Percent' | 'None';

interface MetricDef {
  readonly help: string;
  readonly labels: readonly string[];
  /** The labels that are CloudWatch dimensions; the rest are properties of the EMF blob. */
  readonly dimensions: readonly string[];
  readonly unit: CloudWatchUnit;
}

export const METRICS = {
  rollout_info: {
    help: 'A rollout running or paused (1), with its service, versions and state',
    labels: ['rollout', 'service', 'new_version', 'stable_version', 'state'],
    dimensions: ['rollout'],
    unit: 'None',
  },
  rollout_percent: { help: 'The share of traffic on the new version in force, 0-100', labels: ['rollout'], dimensions: ['rollout'], unit: 'Percent' },
  rollout_stage_index: { help: 'The active stage, by index (its name as a label)', labels: ['rollout', 'stage'], dimensions: ['rollout'], unit: 'None' },
  rollout_stage_seconds: { help: 'How long the active stage has been active', labels: ['rollout'], dimensions: ['rollout'], unit: 'Seconds' },
  rollout_last_progress_timestamp_seconds: {
    help: "The rollout's last activation, promotion, resume or retry: what its progress deadline measures from",
    labels: ['rollout'],
    dimensions: ['rollout'],
    unit: 'Seconds',
  },
  rollout_progress_deadline_seconds: {
    help: "The rollout's progress deadline (progressDeadlineSeconds)",
    labels: ['rollout'],
    dimensions: ['rollout'],
    unit: 'Seconds',
  },
  rollout_gate_value: {
    help: 'The last value a provider gate of the active stage read',
    labels: ['rollout', 'gate', 'type'],
    dimensions: ['rollout', 'gate'],
    unit: 'None',
  },
  rollout_gate_threshold: {
    help: "The threshold a provider gate of the active stage compares its value with (a one-sided relative judge: its bound on the ratio or difference; a sample-ratio judge: the stage's percent)",
    labels: ['rollout', 'gate', 'type', 'comparison'],
    dimensions: ['rollout', 'gate'],
    unit: 'None',
  },
  rollout_gate_readings: {
    help: 'Readings of each provider gate of the active stage in its current period, by outcome',
    labels: ['rollout', 'gate', 'outcome'],
    dimensions: ['rollout', 'gate', 'outcome'],
    unit: 'Count',
  },
  rollout_gate_judgement: {
    help: "A judged gate of the active stage: its newest verdict on the canary against the baseline in the stage's current period (1, the others 0), by verdict",
    labels: ['rollout', 'gate', 'judge', 'verdict'],
    dimensions: ['rollout', 'gate', 'verdict'],
    unit: 'None',
  },
  rollout_gate_interval: {
    help: "A mann-whitney gate of the active stage: its newest interval for the canary's shift against the baseline (the estimate is rollout_gate_value), by bound",
    labels: ['rollout', 'gate', 'bound'],
    dimensions: ['rollout', 'gate', 'bound'],
    unit: 'None',
  },
  rollout_actuation_drift: {
    help: 'A target someone else changed (1): the rollout is paused and nothing is written to it until a person acts',
    labels: ['rollout', 'target'],
    dimensions: ['rollout', 'target'],
    unit: 'None',
  },
  rollout_actuation_state: {
    help: 'Each target of the rollout (1), by state: pending (a write under way or not verified), converged (read back carrying the committed state), drift, failed (the target refused)',
    labels: ['rollout', 'target', 'kind', 'state'],
    dimensions: ['rollout', 'target', 'state'],
    unit: 'None',
  },
  rollout_actuation_lag_seconds: {
    help: 'How long a target has not carried the committed state (pending or failed, since its record last changed); 0 once converged',
    labels: ['rollout', 'target'],
    dimensions: ['rollout', 'target'],
    unit: 'Seconds',
  },
  rollout_hook_answers: {
    help: "A post-rollout hook's answers counted against its limits so far, by outcome (failed, inconclusive)",
    labels: ['rollout', 'target', 'outcome'],
    dimensions: ['rollout', 'target', 'outcome'],
    unit: 'Count',
  },
  rollout_events_total: {
    help: 'Rollout events published, by type (ai.rollout.stage_promoted, …): each transition emits its own',
    labels: ['type'],
    dimensions: ['type'],
    unit: 'Count',
  },
  rollout_run_items: { help: 'Items of an open run, by state', labels: ['run', 'state'], dimensions: ['run', 'state'], unit: 'Count' },
  rollout_run_steals: { help: 'Items of an open run taken over from silent workers', labels: ['run'], dimensions: ['run'], unit: 'Count' },
  rollout_run_drains: { help: 'Workers of an open run that drained (a spot notice or a drain request)', labels: ['run'], dimensions: ['run'], unit: 'Count' },
  rollout_dead_letters_total: { help: 'Items failed because their message was given back maxReceiveCount times', labels: [], dimensions: [], unit: 'Count' },
  rollout_metrics_left_out: {
    help: `Rollouts and runs with no series of their own, past the caps (${MAX_ROLLOUTS} rollouts, ${MAX_RUNS} runs)`,
    labels: ['kind'],
    dimensions: ['kind'],
    unit: 'Count',
  },
} as const satisfies Record<string, MetricDef>;

export type MetricName = keyof typeof METRICS;

/** The per-rollout metrics, in the order rolloutSamples gives them. */
export const ROLLOUT_METRICS = [
  'rollout_info',
  'rollout_percent',
  'rollout_stage_index',
  'rollout_stage_seconds',
  'rollout_last_progress_timestamp_seconds',
  'rollout_progress_deadline_seconds',
  'rollout_gate_value',
  'rollout_gate_threshold',
  'rollout_gate_readings',
  'rollout_gate_judgement',
  'rollout_gate_interval',
  'rollout_actuation_drift',
  'rollout_actuation_state',
  'rollout_actuation_lag_seconds',
  'rollout_hook_answers',
] as const satisfies readonly MetricName[];

/** The per-rollout metrics read from its targets' actuation records: none for a rollout that moves no target. */
export const ACTUATION_METRICS = [
  'rollout_actuation_drift',
  'rollout_actuation_state',
  'rollout_actuation_lag_seconds',
  'rollout_hook_answers',
] as const satisfies readonly MetricName[];

/** The per-rollout metrics of judged gates only (shared/judge/gate.ts): none for a rollout whose gates compare with a threshold. */
export const JUDGED_GATE_METRICS = ['rollout_gate_judgement', 'rollout_gate_interval'] as const satisfies readonly MetricName[];

/** The per-run metrics runSamples gives. */
export const RUN_METRICS = ['rollout_run_items', 'rollout_run_steals', 'rollout_run_drains'] as const satisfies readonly MetricName[];

/** One sample: a metric, its labels (every label the metric declares), its value. */
export interface MetricSample {
  readonly name: MetricName;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** A label value as exported: at most LABEL_MAX characters, never null. */
export const labelValue = (v: string | null | undefined): string => (v ?? '').slice(0, LABEL_MAX);

/** The rollouts that get series (the newest MAX_ROLLOUTS) and how many were left out. */
export function capRollouts<T extends RolloutView>(views: readonly T[]): { shown: T[]; leftOut: number } {
  const sorted = [...views].sort((a, b) => b.rollout.createdAt - a.rollout.createdAt);
  return { shown: sorted.slice(0, MAX_ROLLOUTS), leftOut: Math.max(0, sorted.length - MAX_ROLLOUTS) };
}

/**
 * One rollout's samples at `nowMs`: the gauges of the table in docs/operating/observability.md#operating.
 * `actuations`: what was applied to each of its targets (none: no target
 * samples).
 */
export function rolloutSamples(view: RolloutView, actuations: readonly ActuationRecord[], nowMs: number): MetricSample[] {
  const { rollout } = view;
  const id = labelValue(rollout.id);
  const out: MetricSample[] = [];
  const add = (name: MetricName, labels: Record<string, string>, value: number) => out.push({ name, labels, value });
  const target = rollout.spec.target;
  add(
    'rollout_info',
    {
      rollout: id,
      service: labelValue(target.service),
      new_version: labelValue(target.version),
      stable_version: labelValue(target.stableVersion),
      state: rollout.state,
    },
    1,
  );
  add('rollout_percent', { rollout: id }, trafficOf(view).percent);
  const active = view.stages.find((s) => s.phase === 'active');
  if (active) add('rollout_stage_index', { rollout: id, stage: labelValue(active.name) }, active.index);
  if (active?.activatedAt != null) add('rollout_stage_seconds', { rollout: id }, Math.max(0, (nowMs - active.activatedAt) / 1000));
  add('rollout_last_progress_timestamp_seconds', { rollout: id }, rollout.lastProgressAt / 1000);
  add('rollout_progress_deadline_seconds', { rollout: id }, rollout.spec.progressDeadlineSeconds);
  const gates = active ? gatesJson(view).filter((g) => g.stage === active.index) : [];
  for (const g of gates) {
    if (g.last?.value != null) add('rollout_gate_value', { rollout: id, gate: labelValue(g.name), type: g.type }, g.last.value);
  }
  for (const g of gates) {
    if (g.threshold !== null)
      add('rollout_gate_threshold', { rollout: id, gate: labelValue(g.name), type: g.type, comparison: g.comparison ?? '' }, g.threshold);
  }
  for (const g of gates) {
    const base = { rollout: id, gate: labelValue(g.name) };
    add('rollout_gate_readings', { ...base, outcome: 'pass' }, g.counts.readings - g.counts.failures - g.counts.inconclusive);
    add('rollout_gate_readings', { ...base, outcome: 'fail' }, g.counts.failures);
    add('rollout_gate_readings', { ...base, outcome: 'inconclusive' }, g.counts.inconclusive);
  }
  for (const g of gates) {
    if (!g.judge || !g.last) continue;
    const base = { rollout: id, gate: labelValue(g.name) };
    for (const verdict of GATE_OUTCOMES) add('rollout_gate_judgement', { ...base, judge: g.judge, verdict }, g.last.outcome === verdict ? 1 : 0);
  }
  for (const g of gates) {
    const ci = g.judge === 'mann-whitney' ? readingInterval(g.last?.answer) : null;
    if (!ci) continue;
    add('rollout_gate_interval', { rollout: id, gate: labelValue(g.name), bound: 'low' }, ci[0]);
    add('rollout_gate_interval', { rollout: id, gate: labelValue(g.name), bound: 'high' }, ci[1]);
  }
  for (const a of actuations) {
    const base = { rollout: id, target: labelValue(a.target) };
    if (a.state === 'drift') add('rollout_actuation_drift', base, 1);
    add('rollout_actuation_state', { ...base, kind: a.kind, state: a.state }, 1);
    add('rollout_actuation_lag_seconds', base, a.state === 'pending' || a.state === 'failed' ? Math.max(0, (nowMs - a.updatedAt) / 1000) : 0);
    if (a.tries) {
      add('rollout_hook_answers', { ...base, outcome: 'failed' }, a.tries.failed);
      add('rollout_hook_answers', { ...base, outcome: 'inconclusive' }, a.tries.inconclusive);
    }
  }
  return out;
}

export interface RunCounts {
  readonly id: string;
  readonly counts: Readonly<Record<WorkItem['state'], number>>;
  readonly steals: number;
  readonly drains: number;
}

/** One open run's samples. */
export function runSamples(run: RunCounts): MetricSample[] {
  const id = labelValue(run.id);
  return [
    ...(Object.entries(run.counts) as [WorkItem['state'], number][]).map(([state, n]): MetricSample => ({
      name: 'rollout_run_items',
      labels: { run: id, state },
      value: n,
    })),
    { name: 'rollout_run_steals', labels: { run: id }, value: run.steals },
    { name: 'rollout_run_drains', labels: { run: id }, value: run.drains },
  ];
}

/** Rollouts and runs past the caps. */
export function leftOutSamples(leftOut: { readonly rollouts: number; readonly runs: number }): MetricSample[] {
  return [
    { name: 'rollout_metrics_left_out', labels: { kind: 'rollouts' }, value: leftOut.rollouts },
    { name: 'rollout_metrics_left_out', labels: { kind: 'runs' }, value: leftOut.runs },
  ];
}

/**
 * The newest `limit` rollouts in `state`, loaded, and whether more were left
 * out: by the list (one past the cap says so), never a read of all of them,
 * so the metrics cost the same at 100 running rollouts as at 10,000.
 */
export async function newestRollouts(
  store: Pick<RolloutStore, 'list' | 'load'>,
  state: 'running' | 'paused',
  limit: number,
): Promise<{ readonly views: RolloutView[]; readonly more: boolean }> {
  if (limit <= 0) return { views: [], more: (await store.list({ state, limit: 1 })).rollouts.length > 0 };
  const listed = (await store.list({ state, limit: limit + 1 })).rollouts;
  const views = await mapLimit(listed.slice(0, limit), 16, (r) => store.load(r.id));
  return { views: views.filter((v): v is RolloutView => v?.rollout.state === state), more: listed.length > limit };
}
