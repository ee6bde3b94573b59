/**
 * What a running rollout's provider gates cost: the reads the BatchPromoter
 * makes of them (CloudWatch bills GetMetricData per metric requested,
 * DescribeAlarms per request; Amazon Managed Service for Prometheus bills the
 * samples its queries process) and the gauges it publishes for them (a custom
 * metric per dimension combination). A judged gate reads both cohorts: a
 * CloudWatch one is one GetMetricData asking 2 metrics (4 with
 * sequential-rate: each cohort's errors and requests) over the periods since
 * the stage began; a Prometheus one is 2 (or 4) range queries.
 */
import { relativeBound } from '../../shared/judge/gate.js';
import { GATE_OUTCOMES } from '../../shared/rollout/gates.js';
import { gateJudgeOf, judgedRange, MAX_JUDGED_POINTS, providerGateSchema, type ProviderGate } from '../../shared/rollout/gate-spec.js';
import { isJudged, stageProviders, type RolloutSpec } from '../../shared/rollout/spec.js';
import { BATCH_TICK_SECONDS } from '../../shared/topology.js';
import { METRICS, ROLLOUT_METRICS } from '../../shared/api/metrics.js';
import type { Assumptions } from './assumptions.js';
import { PRICES } from './prices.js';

/** What one reading of a gate asks of AWS. */
export interface GateRead {
  /** Metrics a GetMetricData asks for (billed per metric, whatever the points). */
  readonly metrics: number;
  readonly describeAlarms: number;
  /** PromQL queries, and the points they answer (each series' points; a range query's window / step). */
  readonly promQueries: number;
  readonly promPoints: number;
  /** The Prometheus is an Amazon Managed Service for Prometheus workspace (billed per sample a query processes). */
  readonly amp: boolean;
}

const AMP = /^https:\/\/aps-workspaces\.[a-z0-9-]+\.amazonaws\.com\//i;

/**
 * One reading of `g`. `stageSeconds` is how long the active stage has run
 * when read, on average: a sequential-rate Prometheus gate reads every step
 * since the stage began.
 */
export function gateRead(g: ProviderGate, stageSeconds: number): GateRead {
  const none = { metrics: 0, describeAlarms: 0, promQueries: 0, promPoints: 0, amp: false };
  const counts = gateJudgeOf(g)?.kind === 'sequential-rate';
  switch (g.type) {
    case 'cloudwatchMetric':
      // Judged: each cohort's metric (and requests); metric math: each metric it reads.
      if (isJudged(g)) return { ...none, metrics: counts ? 4 : 2 };
      return { ...none, metrics: g.metric ? 1 : Object.keys(g.metrics ?? {}).length };
    case 'cloudwatchAlarm':
      return { ...none, describeAlarms: 1 };
    case 'prometheus': {
      const amp = AMP.test(g.address);
      if (!isJudged(g)) return { ...none, promQueries: 1, promPoints: 1, amp };
      const { windowSeconds, stepSeconds } = judgedRange(g);
      const points = Math.min(MAX_JUDGED_POINTS, Math.floor((counts ? stageSeconds : windowSeconds) / stepSeconds) + 1);
      const queries = counts ? 4 : 2;
      return { ...none, promQueries: queries, promPoints: queries * points, amp };
    }
    case 'webhook':
      return none;
    case 'signals':
      // Reads the store, not a metrics service: the stage's reports, counted with the table's own reads.
      return none;
  }
}

/** Seconds between two readings of a gate on AWS: its interval, rounded up to the BatchPromoter's 10 s ticks. */
export function readEverySeconds(g: ProviderGate): number {
  return Math.max(1, Math.ceil(g.intervalSeconds / BATCH_TICK_SECONDS)) * BATCH_TICK_SECONDS;
}

/**
 * The gauges the BatchPromoter publishes for one running rollout (given its
 * active stage's gates, or a number of threshold gates) while it leads (functions/batch-promoter.ts; shared/api/metrics.ts), and the EMF
 * blobs they take: the rollout's own share a blob; each provider gate of the
 * active stage adds its value and threshold (one blob: the same dimensions)
 * and its readings by outcome (a blob each); a judged gate its verdicts
 * (a blob each), a mann-whitney one its interval's two ends (a blob each),
 * and it has a threshold only as a one-sided relative judge. Drift is never
 * among them (a drifted rollout is paused, and paused ones are not published).
 */
export function rolloutGauges(gates: readonly ProviderGate[] | number): { readonly metrics: number; readonly blobs: number } {
  const rolloutOnly = ROLLOUT_METRICS.filter((n) => METRICS[n].dimensions.join() === 'rollout').length;
  const outcomes = GATE_OUTCOMES.length;
  let metrics = rolloutOnly;
  let blobs = 1;
  // A number: that many threshold gates.
  for (const g of typeof gates === 'number' ? Array.from({ length: gates }, () => null) : gates) {
    const judge = g ? (gateJudgeOf(g) ?? undefined) : undefined;
    // An alarm gate's reading has no value; neither it nor a webhook's has a threshold.
    const value = g?.type === 'cloudwatchAlarm' ? 0 : 1;
    const plain = g === null || g.type === 'prometheus' || g.type === 'cloudwatchMetric';
    const threshold = judge ? (judge.kind === 'relative' && relativeBound(judge) !== null ? 1 : 0) : plain ? 1 : 0;
    const verdicts = judge ? outcomes : 0;
    const interval = judge?.kind === 'mann-whitney' ? 2 : 0;
    metrics += value + threshold + outcomes + verdicts + interval;
    blobs += (value + threshold > 0 ? 1 : 0) + outcomes + verdicts + interval;
  }
  return { metrics, blobs };
}

/**
 * The gates a spec's costliest stage reads (its own and the rollout-wide
 * ones from their stage on), as if that stage were active all month: what
 * `npm run cost -- --spec FILE` prices for each running rollout.
 */
export function costliestStageGates(spec: RolloutSpec, price: (gates: readonly ProviderGate[]) => number): readonly ProviderGate[] {
  let best: readonly ProviderGate[] = [];
  let most = -1;
  spec.stages.forEach((_, i) => {
    const gates = stageProviders(spec, i);
    const usd = price(gates);
    if (usd > most) [best, most] = [gates, usd];
  });
  return best;
}

/** What gates cost a month for one rollout running all month: their reads, and their own gauges (the rollout's six aside). */
export interface GatesCost {
  readonly reads: number;
  /** GetMetricData metrics requested, DescribeAlarms requests, PromQL queries, and the samples an AMP workspace processes for them. */
  readonly metrics: number;
  readonly describeAlarms: number;
  readonly promQueries: number;
  readonly ampSamples: number;
  /** The gates' gauges: custom metrics with data all month, and the EMF blobs logged a busy BatchPromoter invocation. */
  readonly gaugeMetrics: number;
  readonly gaugeBlobs: number;
  readonly usd: { readonly reads: number; readonly gauges: number; readonly total: number };
}

export function gatesCost(
  gates: readonly ProviderGate[],
  a: Pick<Assumptions, 'daysPerMonth' | 'judgedStageSeconds' | 'promSamplesPerPoint' | 'figureBlobBytes' | 'logCompression'>,
): GatesCost {
  const monthSeconds = a.daysPerMonth * 86_400;
  let reads = 0;
  let metrics = 0;
  let describeAlarms = 0;
  let promQueries = 0;
  let ampSamples = 0;
  for (const g of gates) {
    const n = monthSeconds / readEverySeconds(g);
    const r = gateRead(g, a.judgedStageSeconds);
    reads += n;
    metrics += n * r.metrics;
    describeAlarms += n * r.describeAlarms;
    promQueries += n * r.promQueries;
    if (r.amp) ampSamples += n * r.promPoints * a.promSamplesPerPoint;
  }
  const own = rolloutGauges([]);
  const all = rolloutGauges(gates);
  const gaugeMetrics = all.metrics - own.metrics;
  const gaugeBlobs = all.blobs - own.blobs;
  // Published once a busy BatchPromoter invocation: once a minute.
  const blobGb = (gaugeBlobs * (a.figureBlobBytes + 26) * (monthSeconds / 60)) / 1e9;
  const readsUsd = metrics * PRICES.getMetricData.usd + describeAlarms * PRICES.cloudWatchApiRequest.usd + ampSamples * PRICES.ampQuerySample.usd;
  const gaugesUsd = gaugeMetrics * PRICES.customMetric.usd + blobGb * (PRICES.logsIngest.usd + a.logCompression * PRICES.logsStorage.usd);
  return {
    reads,
    metrics,
    describeAlarms,
    promQueries,
    ampSamples,
    gaugeMetrics,
    gaugeBlobs,
    usd: { reads: readsUsd, gauges: gaugesUsd, total: readsUsd + gaugesUsd },
  };
}

/** A gate in a few words: its provider, judge and cadence. */
export function describeGate(g: ProviderGate): string {
  const judge = gateJudgeOf(g)?.kind ?? (g.type === 'cloudwatchAlarm' || g.type === 'webhook' ? null : 'threshold');
  const where = g.type === 'prometheus' ? (AMP.test(g.address) ? 'prometheus (AMP)' : 'prometheus (yours)') : g.type;
  return `${where}${judge ? ` ${judge}` : ''}, every ${readEverySeconds(g)} s`;
}

/** A gate as an operator writes it, parsed with the spec's own schema (defaults filled in). */
export function parseGate(input: unknown): ProviderGate {
  return providerGateSchema.parse(input);
}

const lambdaMetric = (metricName: string, stat: string) => ({
  namespace: 'AWS/Lambda',
  metricName,
  stat,
  dimensions: { FunctionName: 'checkout', Resource: 'checkout:live', ExecutedVersion: '{{version}}' },
});
const AMP_URL = 'https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-example';
const promLatency = 'histogram_quantile(0.99, sum by (le) (rate(http_request_duration_seconds_bucket{version="{{version}}"}[5m])))';

/** The gates the table of docs/operating/capacity-and-cost.md#monthly-cost prices, one a row: each provider and judge at its default cadence (judged ones read every minute or 30 s). */
export const EXAMPLE_GATES: readonly { readonly label: string; readonly gate: ProviderGate }[] = [
  {
    label: 'cloudwatchMetric, threshold (Errors < 5)',
    gate: parseGate({
      type: 'cloudwatchMetric',
      name: 'g',
      metric: { ...lambdaMetric('Errors', 'Sum'), dimensions: { FunctionName: 'checkout' } },
      comparison: '<',
      threshold: 5,
    }),
  },
  {
    label: 'cloudwatchMetric, mann-whitney (Duration by ExecutedVersion)',
    gate: parseGate({ type: 'cloudwatchMetric', name: 'g', metric: lambdaMetric('Duration', 'Average'), judge: { kind: 'mann-whitney' } }),
  },
  {
    label: 'cloudwatchMetric, relative (one-sided)',
    gate: parseGate({
      type: 'cloudwatchMetric',
      name: 'g',
      metric: lambdaMetric('Duration', 'Average'),
      judge: { kind: 'relative', measure: 'ratio', tolerance: 0.2, direction: 'increase' },
    }),
  },
  {
    label: 'cloudwatchMetric, sequential-rate (Errors of Invocations)',
    gate: parseGate({
      type: 'cloudwatchMetric',
      name: 'g',
      metric: lambdaMetric('Errors', 'Sum'),
      requestsMetric: lambdaMetric('Invocations', 'Sum'),
      judge: { kind: 'sequential-rate' },
    }),
  },
  { label: 'cloudwatchAlarm', gate: parseGate({ type: 'cloudwatchAlarm', name: 'g', alarms: ['checkout-5xx'] }) },
  {
    label: 'prometheus on AMP, threshold',
    gate: parseGate({
      type: 'prometheus',
      name: 'g',
      address: AMP_URL,
      query: promLatency.replace('{version="{{version}}"}', ''),
      comparison: '<',
      threshold: 0.8,
    }),
  },
  {
    label: 'prometheus on AMP, mann-whitney (10 min at 30 s)',
    gate: parseGate({ type: 'prometheus', name: 'g', address: AMP_URL, query: promLatency, judge: { kind: 'mann-whitney' } }),
  },
  {
    label: 'prometheus on AMP, sequential-rate',
    gate: parseGate({
      type: 'prometheus',
      name: 'g',
      address: AMP_URL,
      query: 'sum(increase(http_requests_total{version="{{version}}",code=~"5.."}[{{step}}]))',
      requestsQuery: 'sum(increase(http_requests_total{version="{{version}}"}[{{step}}]))',
      judge: { kind: 'sequential-rate' },
    }),
  },
  {
    label: 'prometheus of your own, mann-whitney',
    gate: parseGate({ type: 'prometheus', name: 'g', address: 'http://prometheus:9090', query: promLatency, judge: { kind: 'mann-whitney' } }),
  },
];
