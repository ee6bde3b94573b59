import { CloudWatchClient, DescribeAlarmsCommand, GetMetricDataCommand, type MetricDataQuery, type MetricDataResult } from '@aws-sdk/client-cloudwatch';
import { errorMessage } from '../../log.js';
import type { CloudwatchAlarmGate, CloudwatchMetricGate, MetricStat } from '../../rollout/gate-spec.js';
import { deadline, type GateProvider } from '../../rollout/gate-reader.js';
import type { ProviderResult } from '../../rollout/gates.js';
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

/**
 * cloudwatchMetric gates: the newest datapoint of the gate's metric (or of
 * its metric math expression) among the last METRIC_LOOKBACK_PERIODS whole
 * periods. No datapoint in that window is an empty result.
 */
export class CloudWatchMetricProvider implements GateProvider<CloudwatchMetricGate> {
  constructor(private readonly clients: CloudWatchClients) {}

  async read(gates: readonly CloudwatchMetricGate[], o: { readonly now: number; readonly signal: AbortSignal }): Promise<ProviderResult[]> {
    const answers = new Map<CloudwatchMetricGate, ProviderResult>();
    const indexed = gates.map((gate, i) => ({ gate, id: `g${i}` }));
    const groups = groupBy(indexed, ({ gate }) => `${gate.region ?? ''}|${gate.periodSeconds}`);
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
    return gates.map((g) => answers.get(g)!);
  }
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

function metricStat(m: MetricStat, period: number): NonNullable<MetricDataQuery['MetricStat']> {
  return {
    Metric: { Namespace: m.namespace, MetricName: m.metricName, Dimensions: Object.entries(m.dimensions).map(([Name, Value]) => ({ Name, Value })) },
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
