import { readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { App, Stack } from 'aws-cdk-lib';
import { HttpApi, type HttpStage } from 'aws-cdk-lib/aws-apigatewayv2';
import type { CfnAlarm } from 'aws-cdk-lib/aws-cloudwatch';
import { Queue } from 'aws-cdk-lib/aws-sqs';
import yaml from 'js-yaml';
import type { Registry } from 'prom-client';
import { controlPlaneAlarms } from '../../../infra/alarms.js';
import { LABEL_MAX, MAX_ROLLOUTS, MAX_RUNS, METRICS, METRICS_NAMESPACE, type MetricName } from '../../../shared/api/metrics.js';
import type { ControlPlaneNode } from '../../../shared/runtimes/node/node.js';
import { nodeMetrics } from '../../../shared/runtimes/node/metrics.js';
import { WorkerMetrics } from '../../../shared/runtimes/worker/metrics.js';
import { cell, code, GENERATED, page, table, text } from './markdown.js';
import { root } from './source.js';

/**
 * The metrics and alerts reference: the series a node's and a worker's
 * /metrics export (their prom-client registries, built and listed, never
 * scraped), the catalogue the Lambdas publish as EMF too (shared/api/metrics.ts),
 * the functions' own EMF counters, the Prometheus alert rules
 * (infra/observability/rollout-alerts.yml) and the stack's CloudWatch alarms
 * (infra/alarms.ts, built in a throwaway stack and read back).
 */
export function metricsReference(): string {
  return page([
    '# Metrics and alerts reference',
    GENERATED(
      'shared/runtimes/node/metrics.ts, shared/runtimes/worker/metrics.ts, shared/api/metrics.ts, functions/, infra/observability/rollout-alerts.yml and infra/alarms.ts',
    ),
    '## Node metrics (Prometheus)',
    `A node's ${code('GET /metrics')}, every series labelled ${code('node_id')}. Per-rollout and per-run series come from the leader only, for at most ${MAX_ROLLOUTS} rollouts and ${MAX_RUNS} runs (the newest), label values cut to ${LABEL_MAX} characters. Besides these, prom-client's process metrics under ${code('rollout_process_')}.`,
    registryTable(nodeMetrics(stubNode()), 'rollout_process_'),
    '## Worker metrics (Prometheus)',
    `A worker process's ${code('/metrics')} (${code('rollout worker --metrics-port')}, or ${code('createWorker({ metricsPort })')}), every series labelled ${code('worker_id')}. Besides these, the process metrics under ${code('rollout_worker_process_')}.`,
    registryTable(new WorkerMetrics('reference').registry, 'rollout_worker_process_'),
    '## Rollout and run metrics in CloudWatch (EMF)',
    `The catalogue every runtime exports under the same names: a node's /metrics above, and the Lambda functions' embedded metric format in the CloudWatch namespace ${code(METRICS_NAMESPACE)}. Only the dimensions tell series apart in CloudWatch; the other labels travel in the EMF record as properties.`,
    table(
      ['Metric', 'Unit', 'Labels', 'Dimensions', 'Help'],
      (Object.keys(METRICS) as MetricName[]).map((name) => {
        const m = METRICS[name];
        return [code(name), m.unit, m.labels.map(code).join(', '), m.dimensions.map(code).join(', '), cell(m.help)];
      }),
    ),
    '## Function counters (EMF)',
    `Counters the Lambda functions add per invocation, in the namespace ${code(METRICS_NAMESPACE)} with the dimension ${code('service')} (the function), as named (by a literal) in ${code('functions/')}; counters named at run time (lease conflicts, a handler's known errors) are not listed.`,
    functionCounters(),
    '## Prometheus alert rules',
    `${code('infra/observability/rollout-alerts.yml')}: load it into Prometheus beside the nodes' scrape. Each alert's description says what to do.`,
    ...prometheusAlerts(),
    '## CloudWatch alarms',
    `What the CDK construct creates, one per concern; each notifies the stack's alarm topic (or ${code('alarmActions')}). The description is what to do.`,
    ...cloudWatchAlarms(),
  ]);
}

/** Enough of a node for its registry to be built: the collectors read the rest only when scraped. */
function stubNode(): ControlPlaneNode {
  return { nodeId: 'reference', bus: { subscribe: () => () => undefined } } as unknown as ControlPlaneNode;
}

interface Described {
  readonly name: string;
  readonly help: string;
  readonly type: string;
  readonly labelNames?: readonly string[];
}

function registryTable(registry: Registry, processPrefix: string): string {
  const metrics = (registry.getMetricsAsArray() as unknown as Described[]).filter((m) => !m.name.startsWith(processPrefix));
  return table(
    ['Metric', 'Type', 'Labels', 'Help'],
    metrics.map((m) => [code(m.name), m.type, (m.labelNames ?? []).map(code).join(', '), cell(m.help)]),
  );
}

/** `metrics.addMetric('Name', MetricUnit.Count, …)` in functions/*.ts: the name, its unit and the files. */
function functionCounters(): string {
  const dir = resolve(root, 'functions');
  const found = new Map<string, { unit: string; files: Set<string> }>();
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith('.ts'))
    .sort()) {
    for (const m of readFileSync(resolve(dir, file), 'utf8').matchAll(/addMetric\('([A-Za-z0-9]+)', MetricUnit\.(\w+)/g)) {
      const entry = found.get(m[1]!) ?? { unit: m[2]!, files: new Set<string>() };
      entry.files.add(file);
      found.set(m[1]!, entry);
    }
  }
  return table(
    ['Metric', 'Unit', 'Added in'],
    [...found.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([name, e]) => [code(name), e.unit, [...e.files].map((f) => code(`functions/${f}`)).join(', ')]),
  );
}

interface Rule {
  readonly alert: string;
  readonly expr: string;
  readonly for?: string;
  readonly labels?: Record<string, string>;
  readonly annotations?: Record<string, string>;
}

function prometheusAlerts(): string[] {
  const doc = yaml.load(readFileSync(resolve(root, 'infra/observability/rollout-alerts.yml'), 'utf8')) as { groups: { name: string; rules: Rule[] }[] };
  return doc.groups.flatMap((g) =>
    g.rules.map((r) =>
      page([
        `### ${r.alert}`,
        [
          `- Severity: ${r.labels?.severity ? code(r.labels.severity) : 'none'}`,
          `- For: ${code(r.for ?? '0m')}`,
          `- Group: ${code(g.name)}`,
          ...(r.annotations?.summary ? [`- Summary: ${code(r.annotations.summary)}`] : []),
        ].join('\n'),
        `\`\`\`promql\n${r.expr.trim()}\n\`\`\``,
        r.annotations?.description ? `What to do: ${text(r.annotations.description)}` : '',
      ]).trimEnd(),
    ),
  );
}

const COMPARISON: Record<string, string> = {
  GreaterThanThreshold: '>',
  GreaterThanOrEqualToThreshold: '≥',
  LessThanThreshold: '<',
  LessThanOrEqualToThreshold: '≤',
};

function cloudWatchAlarms(): string[] {
  const stack = new Stack(new App(), 'Reference');
  const queues = { eventsDlq: new Queue(stack, 'EventsDlq'), workQueue: new Queue(stack, 'WorkQueue'), workDlq: new Queue(stack, 'WorkDlq') };
  const api = new HttpApi(stack, 'Api');
  const names = new Map<string, string>([
    [stack.getLogicalId(queues.eventsDlq.node.defaultChild as never), 'the events DLQ'],
    [stack.getLogicalId(queues.workQueue.node.defaultChild as never), 'the work queue'],
    [stack.getLogicalId(queues.workDlq.node.defaultChild as never), 'the work DLQ'],
  ]);
  const alarms = controlPlaneAlarms(stack, { apiStage: api.defaultStage as HttpStage, ...queues, functions: {} }, false);
  const value = (v: unknown): string => {
    const resolved = stack.resolve(v) as unknown;
    if (typeof resolved === 'string') return code(resolved);
    const ref = JSON.stringify(resolved);
    for (const [id, label] of names) if (ref.includes(id)) return label;
    return ref.includes(stack.getLogicalId(api.node.defaultChild as never)) ? 'the HTTP API' : 'a resource of the stack';
  };
  return alarms.map((alarm) => {
    const cfn = alarm.node.defaultChild as CfnAlarm;
    const dims = (stack.resolve(cfn.dimensions) as { name: string; value: unknown }[] | undefined) ?? [];
    return page([
      `### ${alarm.node.id}`,
      [
        `- Metric: ${code(`${cfn.namespace}/${cfn.metricName}`)}${dims.length ? ` (${dims.map((d) => `${d.name}: ${value(d.value)}`).join(', ')})` : ''}`,
        `- Condition: ${cfn.statistic} over ${cfn.period} s ${COMPARISON[cfn.comparisonOperator ?? ''] ?? cfn.comparisonOperator} ${cfn.threshold} for ${cfn.evaluationPeriods} period${cfn.evaluationPeriods === 1 ? '' : 's'}; missing data ${code(cfn.treatMissingData ?? 'missing')}`,
      ].join('\n'),
      `What to do: ${text(cfn.alarmDescription ?? '')}`,
    ]).trimEnd();
  });
}
