import { CloudWatchClient, DescribeAlarmsCommand, GetMetricDataCommand, type MetricDataQuery, type MetricDataResult } from '@aws-sdk/client-cloudwatch';
import { mapLimit } from '../../concurrency.js';
import { errorMessage } from '../../log.js';
import {
  DEFAULT_CLOUDWATCH_SETTLE_SECONDS,
  dimensionStrings,
  judgedMetricRange,
  MAX_JUDGED_POINTS,
  type CloudwatchAlarmGate,
  type CloudwatchMetricGate,
  type DimensionValue,
  type MetricStat,
} from '../../rollout/gate-spec.js';
import { deadline, type GateContext, type GateProvider } from '../../rollout/gate-reader.js';
import type { ProviderResult } from '../../rollout/gates.js';
import { countGrid, isCountsJudge } from '../../judge/gate.js';
import type { AlarmState } from '../../rollout/model.js';

/**
 * CloudWatch gates. Both providers batch a tick's gates the way the API
 * allows: one DescribeAlarms per 100 alarm names, one GetMetricData per 500
 * queries, per region. Each call ends within its gates' shortest timeout.
 * The caller's IAM identity needs cloudwatch:DescribeAlarms and
 * cloudwatch:GetMetricData (the stack grants them to the BatchPromoter only).
 */

/** A client per region (undefined: the process's own region, from AWS_REGION). */
export type CloudWatchClients = (region: string | undefined) => CloudWatchClient;

export function cloudWatchClients(
  make: (region: string | undefined) => CloudWatchClient = (region) => new CloudWatchClient(region ? { region } : {}),
): CloudWatchClients {
  const clients = new Map<string, CloudWatchClient>();
  return (region) => {
    const key = region ?? '';
    let c = clients.get(key);
    if (!c) clients.set(key, (c = make(region)));
    return c;
  };
}

const DESCRIBE_BATCH = 100;
const METRIC_QUERIES_BATCH = 500;

function groupBy<T>(items: readonly T[], key: (t: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const t of items) out.set(key(t), [...(out.get(key(t)) ?? []), t]);
  return out;
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** An SDK error in the words a reading keeps: `Throttling: Rate exceeded`. */
function why(operation: string, region: string | undefined, err: unknown): string {
  const name = (err as { name?: string }).name;
  const msg = errorMessage(err);
  return `cloudwatch ${operation}${region ? ` (${region})` : ''}: ${name && name !== 'Error' && !msg.startsWith(name) ? `${name}: ${msg}` : msg}`;
}

/** cloudwatchAlarm gates: the state of every named alarm (metric or composite) as DescribeAlarms reports it. */
export class CloudWatchAlarmProvider implements GateProvider<CloudwatchAlarmGate> {
  constructor(private readonly clients: CloudWatchClients) {}

  async read(gates: readonly CloudwatchAlarmGate[], o: { readonly signal: AbortSignal }): Promise<ProviderResult[]> {
    const answers = new Map<CloudwatchAlarmGate, ProviderResult>();
    await Promise.all(
      [...groupBy(gates, (g) => g.region ?? '')].map(async ([regionKey, inRegion]) => {
        const region = regionKey || undefined;
        const names = [...new Set(inRegion.flatMap((g) => g.alarms))];
        const states = new Map<string, { state: AlarmState; reason: string }>();
        const failures = new Map<string, string>();
        await Promise.all(
          chunks(names, DESCRIBE_BATCH).map(async (batch) => {
            const ms = Math.min(...inRegion.filter((g) => g.alarms.some((a) => batch.includes(a))).map((g) => g.timeoutSeconds)) * 1000;
            try {
              await deadline(ms, o.signal, async (signal) => {
                let token: string | undefined;
                do {
                  const page = await this.clients(region).send(
                    new DescribeAlarmsCommand({ AlarmNames: batch, AlarmTypes: ['MetricAlarm', 'CompositeAlarm'], MaxRecords: 100, NextToken: token }),
                    { abortSignal: signal },
                  );
                  for (const a of [...(page.MetricAlarms ?? []), ...(page.CompositeAlarms ?? [])]) {
                    if (a.AlarmName && a.StateValue) states.set(a.AlarmName, { state: a.StateValue, reason: a.StateReason ?? '' });
                  }
                  token = page.NextToken;
                } while (token);
              });
            } catch (err) {
              for (const n of batch) failures.set(n, why('DescribeAlarms', region, err));
            }
          }),
        );
        for (const g of inRegion) {
          const failed = g.alarms.map((a) => failures.get(a)).find((f) => f !== undefined);
          if (failed) {
            answers.set(g, { kind: 'error', message: failed, answer: '' });
            continue;
          }
          const seen = Object.fromEntries(g.alarms.map((a) => [a, states.get(a)?.state ?? ('missing' as const)]));
          const answer = JSON.stringify(Object.fromEntries(g.alarms.map((a) => [a, states.get(a) ?? 'not found'])));
          answers.set(g, { kind: 'alarms', states: seen, answer });
        }
      }),
    );
    return gates.map((g) => answers.get(g)!);
  }
}

/** How many periods back the newest datapoint may lie: CloudWatch data lands a minute or two late. */
export const METRIC_LOOKBACK_PERIODS = 5;

/** At most this many judged gates are read at once (each in a GetMetricData call of its own). */
const JUDGED_CONCURRENCY = 8;
/** At most this many pages of one judged reading: it asks for at most 4 × MAX_JUDGED_POINTS points, and a page holds up to 100,800. */
const MAX_JUDGED_PAGES = 10;

/**
 * cloudwatchMetric gates: the newest datapoint of the gate's metric (or of
 * its metric math expression) among the last METRIC_LOOKBACK_PERIODS whole
 * periods. No datapoint in that window is an empty result.
 *
 * A judged gate (one with a `judge`) is read as one GetMetricData call of
 * its own (paginated, within its timeout): a MetricStat query per cohort,
 * its metric's `{{cohort}}` or `{{version}}` dimension values filled in once
 * for the canary and once for the baseline, over the last `windowSeconds` of
 * whole periods (never before the stage's period began), one point a period,
 * oldest first, null where a period has no datapoint.
 *
 * A sequential-rate gate is read as four queries, requests and errors of each
 * cohort, on a grid of periods fixed at the first whole period of the stage's
 * period, each period read once it ended `settleSeconds` ago, so every
 * reading sees the periods the last one saw. A sample-ratio gate is read the
 * same way as two queries: each cohort's count (`metric`).
 */
export class CloudWatchMetricProvider implements GateProvider<CloudwatchMetricGate> {
  constructor(private readonly clients: CloudWatchClients) {}

  async read(
    gates: readonly CloudwatchMetricGate[],
    o: { readonly now: number; readonly signal: AbortSignal; readonly contexts?: readonly GateContext[] },
  ): Promise<ProviderResult[]> {
    const answers = new Map<CloudwatchMetricGate, ProviderResult>();
    const indexed = gates.flatMap((gate, i) => (gate.judge ? [] : [{ gate, id: `g${i}` }]));
    const judged = gates.flatMap((gate, i) => (gate.judge ? [{ i, gate, context: o.contexts?.[i] }] : []));
    const groups = groupBy(indexed, ({ gate }) => `${gate.region ?? ''}|${gate.periodSeconds}`);
    const [judgedAnswers] = await Promise.all([
      mapLimit(judged, JUDGED_CONCURRENCY, ({ gate, context }) => this.cohorts(gate, context, o.now, o.signal)),
      this.plain(groups, answers, o),
    ]);
    // By position: a judged reading is its rollout's (its context), whoever else reads the same gate.
    const byIndex = new Map(judged.map(({ i }, k) => [i, judgedAnswers[k]!]));
    return gates.map((g, i) => byIndex.get(i) ?? answers.get(g)!);
  }

  /** Plain gates, batched: every gate of a region and period in one GetMetricData (up to 500 queries). */
  private async plain(
    groups: Map<string, { gate: CloudwatchMetricGate; id: string }[]>,
    answers: Map<CloudwatchMetricGate, ProviderResult>,
    o: { readonly now: number; readonly signal: AbortSignal },
  ): Promise<void> {
    await Promise.all(
      [...groups.values()].map(async (group) => {
        const { region, periodSeconds: period } = group[0]!.gate;
        // Whole periods only: the one still filling would read low.
        const end = Math.floor(o.now / 1000 / period) * period;
        const start = end - METRIC_LOOKBACK_PERIODS * period;
        for (const batch of packQueries(group)) {
          const ms = Math.min(...batch.map((b) => b.gate.timeoutSeconds)) * 1000;
          try {
            const results = await deadline(ms, o.signal, async (signal) => {
              const byId = new Map<string, MetricDataResult>();
              let token: string | undefined;
              do {
                const page = await this.clients(region).send(
                  new GetMetricDataCommand({
                    MetricDataQueries: batch.flatMap((b) => queriesOf(b.gate, b.id)),
                    StartTime: new Date(start * 1000),
                    EndTime: new Date(end * 1000),
                    ScanBy: 'TimestampDescending',
                    NextToken: token,
                  }),
                  { abortSignal: signal },
                );
                for (const r of page.MetricDataResults ?? []) {
                  const prev = r.Id ? byId.get(r.Id) : undefined;
                  if (r.Id)
                    byId.set(
                      r.Id,
                      prev
                        ? { ...prev, Timestamps: [...(prev.Timestamps ?? []), ...(r.Timestamps ?? [])], Values: [...(prev.Values ?? []), ...(r.Values ?? [])] }
                        : r,
                    );
                }
                token = page.NextToken;
              } while (token);
              return byId;
            });
            for (const { gate, id } of batch) answers.set(gate, resultOfMetric(results.get(id), region));
          } catch (err) {
            for (const { gate } of batch) answers.set(gate, { kind: 'error', message: why('GetMetricData', region, err), answer: '' });
          }
        }
      }),
    );
  }

  /** A judged gate: each cohort's series over the same whole periods, or why not. */
  private async cohorts(gate: CloudwatchMetricGate, context: GateContext | undefined, now: number, signal: AbortSignal): Promise<ProviderResult> {
    if (!context) return { kind: 'error', message: 'a judged gate is read for a rollout: no rollout was given', answer: '' };
    const metric = gate.metric;
    if (!metric) return { kind: 'error', message: 'a judged gate reads one metric a cohort: it has no metric', answer: '' };
    const version = (cohort: Cohort) => (cohort === 'canary' ? context.newVersion : (context.stableVersion ?? ''));
    if (
      context.stableVersion === null &&
      [metric, gate.requestsMetric].some((m) => m && Object.values(m.dimensions).some((v) => dimensionStrings(v).some((x) => x.includes('{{version}}'))))
    ) {
      return { kind: 'error', message: 'the rollout names no stableVersion: a {{version}} dimension cannot find the baseline', answer: '' };
    }
    const period = gate.periodSeconds;
    if (gate.judge && isCountsJudge(gate.judge)) {
      // A sequential-rate gate counts requests (requestsMetric) and errors (metric); a sample-ratio gate one count (metric).
      const withErrors = gate.requestsMetric !== undefined;
      const requests = gate.requestsMetric ?? metric;
      // The grid starts at the first whole period of the stage's period (CloudWatch's periods are aligned).
      const { anchor, steps } = countGrid({
        periodStart: context.periodStart ?? now,
        now,
        stepSeconds: period,
        settleSeconds: gate.settleSeconds ?? DEFAULT_CLOUDWATCH_SETTLE_SECONDS,
        alignSeconds: period,
      });
      const none = { requests: [], errors: [] };
      if (steps === 0) return { kind: 'counts', canary: none, baseline: none, percent: context.stage.percent, answer: '' };
      if (steps > MAX_JUDGED_POINTS) {
        return {
          kind: 'error',
          message: `the stage has run ${steps} periods of ${period} s, more than the ${MAX_JUDGED_POINTS} a reading holds: give the gate a longer periodSeconds`,
          answer: '',
        };
      }
      const canaryRequests = { label: 'canary requests', metric: cohortMetric(requests, 'canary', version('canary')) };
      const baselineRequests = { label: 'baseline requests', metric: cohortMetric(requests, 'baseline', version('baseline')) };
      const got = await this.series(
        gate,
        withErrors
          ? [
              canaryRequests,
              { label: 'canary errors', metric: cohortMetric(metric, 'canary', version('canary')) },
              baselineRequests,
              { label: 'baseline errors', metric: cohortMetric(metric, 'baseline', version('baseline')) },
            ]
          : [canaryRequests, baselineRequests],
        anchor,
        steps,
        signal,
      );
      if (!Array.isArray(got)) return got;
      const [cn, ce, bn, be] = withErrors ? got : [got[0], [], got[1], []];
      return { kind: 'counts', canary: { requests: cn!, errors: ce }, baseline: { requests: bn!, errors: be }, percent: context.stage.percent, answer: '' };
    }
    const { windowSeconds } = judgedMetricRange(gate);
    // Whole periods only (the one still filling would read low), and never before the stage's period began: older points are another split's.
    const end = Math.floor(now / 1000 / period) * period;
    const from = Math.ceil((context.periodStart ?? 0) / 1000 / period) * period;
    const start = Math.min(end, Math.max(end - Math.floor(windowSeconds / period) * period, from));
    const count = (end - start) / period;
    if (count === 0) return { kind: 'cohorts', canary: [], baseline: [], answer: '' };
    const got = await this.series(
      gate,
      [
        { label: 'canary', metric: cohortMetric(metric, 'canary', version('canary')) },
        { label: 'baseline', metric: cohortMetric(metric, 'baseline', version('baseline')) },
      ],
      start,
      count,
      signal,
    );
    if (!Array.isArray(got)) return got;
    return { kind: 'cohorts', canary: got[0]!, baseline: got[1]!, answer: '' };
  }

  /**
   * One GetMetricData call (and its pages) for `metrics` over `count` periods from `start` (seconds):
   * each metric's point at each period, oldest first, null where it has none; or why not.
   */
  private async series(
    gate: CloudwatchMetricGate,
    metrics: readonly { readonly label: string; readonly metric: MetricStat }[],
    start: number,
    count: number,
    signal: AbortSignal,
  ): Promise<(number | null)[][] | ProviderResult> {
    const period = gate.periodSeconds;
    const region = gate.region;
    const failed = (message: string): ProviderResult => ({
      kind: 'error',
      message: `cloudwatch GetMetricData${region ? ` (${region})` : ''}: ${message}`,
      answer: '',
    });
    try {
      return await deadline(gate.timeoutSeconds * 1000, signal, async (s) => {
        const grids = metrics.map(() => Array.from({ length: count }, (): number | null => null));
        const seen = new Set<number>();
        let token: string | undefined;
        for (let page = 1; ; page++) {
          if (page > MAX_JUDGED_PAGES) return failed(`more than ${MAX_JUDGED_PAGES} pages for ${metrics.length * count} points`);
          const answer = await this.clients(region).send(
            new GetMetricDataCommand({
              MetricDataQueries: metrics.map((m, i) => ({ Id: `q${i}`, MetricStat: metricStat(m.metric, period), ReturnData: true })),
              StartTime: new Date(start * 1000),
              EndTime: new Date((start + count * period) * 1000),
              ScanBy: 'TimestampAscending',
              MaxDatapoints: metrics.length * count,
              NextToken: token,
            }),
            { abortSignal: s },
          );
          for (const r of answer.MetricDataResults ?? []) {
            const i = /^q(\d+)$/.exec(r.Id ?? '')?.[1];
            const grid = i === undefined ? undefined : grids[Number(i)];
            if (!grid) continue;
            seen.add(Number(i));
            if (r.StatusCode === 'InternalError' || r.StatusCode === 'Forbidden')
              return failed(`${metrics[Number(i)]!.label}: ${r.StatusCode}${r.Messages?.length ? `: ${r.Messages.map((m) => m.Value).join('; ')}` : ''}`);
            (r.Timestamps ?? []).forEach((t, k) => {
              const at = Math.round((t.getTime() / 1000 - start) / period);
              const v = r.Values?.[k];
              if (at >= 0 && at < count && v !== undefined && Number.isFinite(v)) grid[at] = v;
            });
          }
          token = answer.NextToken;
          if (!token) break;
        }
        const missing = metrics.findIndex((_, i) => !seen.has(i));
        return missing >= 0 ? failed(`no result for the ${metrics[missing]!.label} query`) : grids;
      });
    } catch (err) {
      return { kind: 'error', message: why('GetMetricData', region, err), answer: '' };
    }
  }
}

type Cohort = 'canary' | 'baseline';

/**
 * The metric with its cohort named: a dimension with a value for each cohort takes the cohort's, and in
 * each value `{{cohort}}` is canary or baseline, `{{version}}` the version it runs.
 */
export function cohortMetric(m: MetricStat, cohort: Cohort, version: string): MetricStat {
  const fill = (v: DimensionValue) => (typeof v === 'string' ? v : v[cohort]).replaceAll('{{cohort}}', () => cohort).replaceAll('{{version}}', () => version);
  return { ...m, dimensions: Object.fromEntries(Object.entries(m.dimensions).map(([name, value]) => [name, fill(value)])) };
}

/** The gates split so that no GetMetricData carries more than 500 queries. */
function packQueries<T extends { gate: CloudwatchMetricGate }>(group: readonly T[]): T[][] {
  const out: T[][] = [];
  let current: T[] = [];
  let size = 0;
  for (const item of group) {
    const n = item.gate.metric ? 1 : 1 + Object.keys(item.gate.metrics ?? {}).length;
    if (size + n > METRIC_QUERIES_BATCH && current.length) {
      out.push(current);
      current = [];
      size = 0;
    }
    current.push(item);
    size += n;
  }
  if (current.length) out.push(current);
  return out;
}

/**
 * A MetricStat query. Its dimensions go by name, in one order whatever order the store kept them in
 * (PostgreSQL's jsonb orders keys its own way): the same gate asks the same query everywhere, and an
 * emulator that matches dimensions in order (moto) finds what was put in that order.
 */
function metricStat(m: MetricStat, period: number): NonNullable<MetricDataQuery['MetricStat']> {
  // One value a dimension by now: a judged gate's metric comes through cohortMetric, and a threshold gate's may not split (gate-spec.ts).
  const dimensions = Object.entries(m.dimensions)
    .map(([name, v]) => [name, typeof v === 'string' ? v : v.canary] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return {
    Metric: { Namespace: m.namespace, MetricName: m.metricName, Dimensions: dimensions.map(([Name, Value]) => ({ Name, Value })) },
    Period: period,
    Stat: m.stat,
  };
}

/**
 * One gate's queries under batch-unique ids: `id` answers the gate; an
 * expression's metrics become `<id>_<name>`, and the expression is rewritten
 * to name them so (metric ids start lowercase, function names are upper case,
 * so only the gate's own ids are touched).
 */
export function queriesOf(g: CloudwatchMetricGate, id: string): MetricDataQuery[] {
  if (g.metric) return [{ Id: id, MetricStat: metricStat(g.metric, g.periodSeconds), ReturnData: true }];
  const metrics = g.metrics ?? {};
  const expression = (g.expression ?? '').replace(/\b[a-z][a-zA-Z0-9_]*\b/g, (word) => (Object.hasOwn(metrics, word) ? `${id}_${word}` : word));
  return [
    { Id: id, Expression: expression, Period: g.periodSeconds, ReturnData: true },
    ...Object.entries(metrics).map(([name, m]) => ({ Id: `${id}_${name}`, MetricStat: metricStat(m, g.periodSeconds), ReturnData: false })),
  ];
}

function resultOfMetric(r: MetricDataResult | undefined, region: string | undefined): ProviderResult {
  if (!r) return { kind: 'error', message: `cloudwatch GetMetricData${region ? ` (${region})` : ''}: no result for the gate's query`, answer: '' };
  const answer = JSON.stringify({
    label: r.Label,
    status: r.StatusCode,
    timestamps: (r.Timestamps ?? []).slice(0, 5),
    values: (r.Values ?? []).slice(0, 5),
    messages: r.Messages,
  });
  if (r.StatusCode === 'InternalError' || r.StatusCode === 'Forbidden')
    return {
      kind: 'error',
      message: `cloudwatch GetMetricData: ${r.StatusCode}${r.Messages?.length ? `: ${r.Messages.map((m) => m.Value).join('; ')}` : ''}`,
      answer,
    };
  const value = r.Values?.[0];
  return value === undefined ? { kind: 'empty', answer } : { kind: 'number', value, answer };
}
