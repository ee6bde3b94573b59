/**
 * gateNamespaceIssues: the CloudWatch namespaces a spec's cloudwatchMetric
 * gates read, held to the operator's list when a spec is accepted.
 */
import { describe, expect, it } from 'vitest';
import { gateNamespaceIssues, parseRolloutSpec } from '../../shared/rollout/spec.js';

const metric = (namespace: string) => ({ namespace, metricName: 'Errors', stat: 'Sum' });
const gate = (name: string, g: Record<string, unknown>) => ({ type: 'cloudwatchMetric', name, comparison: '<=', threshold: 1, ...g });
const spec = (...stages: { name: string; providers: unknown[] }[]) =>
  parseRolloutSpec({
    target: { service: 'checkout', version: 'v2' },
    stages: stages.map((s, i) => ({ name: s.name, percent: Math.round(((i + 1) * 100) / stages.length), bakeSeconds: 0, gates: { providers: s.providers } })),
  });

describe('gateNamespaceIssues', () => {
  it('names the stage, the gate and the namespace of every gate reading outside the list', () => {
    const s = spec(
      { name: 'canary', providers: [gate('shop', { metric: metric('Shop') }), gate('db', { metric: metric('AWS/RDS') })] },
      { name: 'all', providers: [gate('ratio', { expression: 'a / b', metrics: { a: metric('Shop'), b: metric('AWS/ELB') } })] },
    );
    expect(gateNamespaceIssues(s, ['Shop'])).toEqual([
      'stages.0.gates.providers.1.metric.namespace: "AWS/RDS" is not a namespace this deployment\'s gates may read (Shop) (stage "canary", gate "db")',
      'stages.1.gates.providers.0.metrics.b.namespace: "AWS/ELB" is not a namespace this deployment\'s gates may read (Shop) (stage "all", gate "ratio")',
    ]);
    expect(gateNamespaceIssues(s, ['Shop', 'AWS/RDS', 'AWS/ELB'])).toEqual([]);
  });

  it('an empty list refuses every cloudwatchMetric gate and says where the list is set; null is no limit', () => {
    const s = spec({ name: 'only', providers: [gate('shop', { metric: metric('Shop') })] });
    expect(gateNamespaceIssues(s, [])).toEqual([
      'stages.0.gates.providers.0.metric.namespace: "Shop" is not a namespace this deployment\'s gates may read (none: the gateNamespaces setting names them) (stage "only", gate "shop")',
    ]);
    expect(gateNamespaceIssues(s, null)).toEqual([]);
  });

  it("refuses expressions that read beyond the gate's own metrics, whatever namespaces those name", () => {
    for (const [expression, word] of [
      ["SEARCH('{AWS/RDS} CPUUtilization', 'Average')", 'SEARCH'],
      ['SELECT AVG(CPUUtilization) FROM "AWS/EC2"', 'SELECT'],
      ["INSIGHT_RULE_METRIC('rule', 'Sum')", 'INSIGHT_RULE_METRIC'],
      ['select max(x) from y', 'select'],
    ] as const) {
      const s = spec({ name: 'only', providers: [gate('q', { expression, metrics: { a: metric('Shop') } })] });
      expect(gateNamespaceIssues(s, ['Shop'])).toEqual([
        `stages.0.gates.providers.0.expression: ${word} reads beyond the gate's own metrics; only metric math over them is allowed (stage "only", gate "q")`,
      ]);
    }
  });

  it('other gate types are not its business', () => {
    const s = spec({ name: 'only', providers: [{ type: 'cloudwatchAlarm', name: 'a', alarms: ['x'] }] });
    expect(gateNamespaceIssues(s, [])).toEqual([]);
  });
});
