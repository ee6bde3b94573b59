import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { METRICS, METRICS_NAMESPACE, type MetricName, type MetricSample } from '../shared/api/metrics.js';

/**
 * The metrics of the catalogue (shared/api/metrics.ts) as EMF, under the names a node's
 * /metrics gives them (rollout_percent, rollout_events_total…), beside the
 * CamelCase metrics each function counts under its `service` dimension.
 *
 * An EMF blob has one dimension set, so each set of dimension values is a
 * blob of its own (a rollout's gauges; each of its gates; each reading
 * outcome…); a metric's labels that are not dimensions are properties of its
 * blob. There is no `service` dimension: the dimensions are the Prometheus
 * labels, so a count from the streaming promoter and one from the batch
 * promoter add up in the one series, as on a node.
 *
 * Counters (`count`) are summed over the invocation and published at its end
 * (`flush`) as that invocation's increase: read them with the Sum statistic.
 * Gauges (`set`) are published as they are. Nothing is published when
 * nothing was counted or set: a custom metric is billed by the hour it has
 * data.
 */
const UNIT = { Count: MetricUnit.Count, Seconds: MetricUnit.Seconds, Percent: MetricUnit.Percent, None: MetricUnit.NoUnit } as const;

/**
 * Counts of the whole stack, with no dimension: one metric that every
 * function adds to, so one alarm metric watches them all (an alarm is billed
 * per metric it reads).
 */
export type StackCount = 'LeasesLost' | 'RolloutsNeedingAttention';

/**
 * Rollout events that need a person, whoever published them: counted once
 * more, together, as RolloutsNeedingAttention, so one alarm metric covers
 * both (the alarm says which from the rollout's history).
 */
const NEEDS_ATTENTION: ReadonlySet<string> = new Set(['ai.rollout.progress_deadline_exceeded', 'ai.rollout.actuation_drift']);

/** Rollout events published by an invocation, by type: rollout_events_total, and those that need a person. */
export function countEvents(emf: CatalogueMetrics, published: ReadonlyMap<string, number>): void {
  for (const [type, n] of published) {
    emf.count('rollout_events_total', { type }, n);
    if (NEEDS_ATTENTION.has(type)) emf.countStack('RolloutsNeedingAttention', n);
  }
}

/** The catalogue's metrics of one invocation: counted and set as it runs, published at its end (`flush`). */
export class CatalogueMetrics {
  private readonly pending = new Map<string, MetricSample>();
  private readonly stack = new Map<StackCount, number>();

  constructor(private readonly emf = new Metrics({ namespace: METRICS_NAMESPACE })) {
    // The dimensions are the metric's own, and nothing else.
    emf.clearDefaultDimensions();
  }

  /** Adds `n` to a counter of this invocation. */
  count(name: MetricName, labels: Readonly<Record<string, string>>, n: number): void {
    if (n <= 0) return;
    const key = keyOf(name, labels);
    this.pending.set(key, { name, labels, value: (this.pending.get(key)?.value ?? 0) + n });
  }

  /** Adds `n` to a count of the whole stack (no dimension), for this invocation. */
  countStack(name: StackCount, n: number): void {
    if (n > 0) this.stack.set(name, (this.stack.get(name) ?? 0) + n);
  }

  /** Gauges, as read now. */
  set(values: Iterable<MetricSample>): void {
    for (const f of values) this.pending.set(keyOf(f.name, f.labels), f);
  }

  /** Publishes what was counted and set, one blob per dimension set. */
  flush(): void {
    const blobs = new Map<string, { dimensions: Record<string, string>; values: MetricSample[] }>();
    for (const f of this.pending.values()) {
      // NaN and ±Infinity have no JSON form: CloudWatch would drop the whole blob.
      if (!Number.isFinite(f.value)) continue;
      const dimensions = Object.fromEntries(METRICS[f.name].dimensions.map((d) => [d, f.labels[d] ?? '']));
      const key = JSON.stringify(Object.entries(dimensions).sort());
      const blob = blobs.get(key) ?? { dimensions, values: [] };
      blob.values.push(f);
      blobs.set(key, blob);
    }
    this.pending.clear();
    if (this.stack.size) {
      this.emf.addDimensions({});
      for (const [name, n] of this.stack) this.emf.addMetric(name, MetricUnit.Count, n);
      this.stack.clear();
      this.emf.publishStoredMetrics();
    }
    for (const { dimensions, values } of blobs.values()) {
      this.emf.addDimensions(dimensions);
      for (const f of values) {
        for (const [k, v] of Object.entries(f.labels)) if (!Object.hasOwn(dimensions, k)) this.emf.addMetadata(k, v);
        this.emf.addMetric(f.name, UNIT[METRICS[f.name].unit], f.value);
      }
      this.emf.publishStoredMetrics();
    }
  }
}

function keyOf(name: MetricName, labels: Readonly<Record<string, string>>): string {
  return JSON.stringify([name, ...METRICS[name].labels.map((l) => labels[l] ?? '')]);
}
