/**
 * Judged cloudwatchMetric gates without a service: what the spec refuses
 * (each refusal names its field, as the Prometheus gate's do), what a
 * reading asks, how cohorts are named in a metric's dimensions, how the one
 * judge reads what the provider returns, and how the provider puts
 * GetMetricData's pages together and bounds them. The same gates against
 * moto are test/integration/cloudwatch-judged-gates.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { canaryContext, stubbed } from '../support/cloudwatch/stubbed-metrics.js';
import { GATE_AT, gateErrors, oneGateSpec } from '../support/one-gate-spec.js';
import { cohortMetric } from '../../shared/adapters/cloudwatch/providers.js';
import { gatesJson } from '../../shared/api/rollout-json.js';
import { providerGateSchema, queryOf, type CloudwatchMetricGate, type MetricStat } from '../../shared/rollout/gate-spec.js';
import { judge } from '../../shared/rollout/gates.js';
import type { RolloutView } from '../../shared/rollout/model.js';
import { namespaceIssue, parseRolloutSpec } from '../../shared/rollout/spec.js';
import { freshStages } from '../../shared/rollout/transitions.js';

const target = { service: 'api', version: '7', stableVersion: '6' };
const T = Date.parse('2025-03-01T12:00:00Z');

const byVersion = { FunctionName: 'api', Resource: 'api:live', ExecutedVersion: '{{version}}' };
const duration = { namespace: 'AWS/Lambda', metricName: 'Duration', stat: 'Average', dimensions: byVersion };
const errorsMetric = { namespace: 'AWS/Lambda', metricName: 'Errors', stat: 'Sum', dimensions: byVersion };
const invocations = { namespace: 'AWS/Lambda', metricName: 'Invocations', stat: 'Sum', dimensions: byVersion };
const latency = { type: 'cloudwatchMetric', name: 'latency', metric: duration, judge: { kind: 'mann-whitney' } };
const counted = { type: 'cloudwatchMetric', name: 'errors', metric: errorsMetric, requestsMetric: invocations, judge: { kind: 'sequential-rate' } };

const specOf = (gate: unknown, percent = 10) => oneGateSpec(target, gate, percent);
const errorsOf = (gate: unknown) => gateErrors(target, gate);
const at = GATE_AT;
const gateOf = (g: Record<string, unknown>) => providerGateSchema.parse({ timeoutSeconds: 5, ...g }) as CloudwatchMetricGate;

describe('a judged cloudwatchMetric gate in the spec', () => {
  it('takes a metric named by version, and a sequential-rate gate with its requests metric', () => {
    expect(errorsOf(latency)).toEqual([]);
    expect(errorsOf(counted)).toEqual([]);
    expect(errorsOf({ ...latency, metric: { ...duration, dimensions: { FunctionName: 'api', Cohort: '{{cohort}}' } }, windowSeconds: 1_200 })).toEqual([]);
    expect(errorsOf({ ...counted, settleSeconds: 300, periodSeconds: 300 })).toEqual([]);
    expect(specOf(latency).stages[0]!.gates.providers![0]).toMatchObject({ periodSeconds: 60, intervalSeconds: 60 });
  });

  it('refuses what the Prometheus gate refuses, naming the field', () => {
    expect(errorsOf({ ...latency, comparison: '<', threshold: 300 })).toEqual([
      `${at}.comparison: a judged gate compares the canary with the baseline, not with a comparison: drop comparison`,
      `${at}.threshold: a judged gate compares the canary with the baseline, not with a threshold: drop threshold`,
    ]);
    expect(errorsOf({ ...latency, metric: { ...duration, dimensions: { FunctionName: 'api', ExecutedVersion: '7' } } })).toEqual([
      `${at}.metric.dimensions: a judged metric names its cohort in a dimension's value with {{version}} or {{cohort}} (e.g. "ExecutedVersion": "{{version}}"), or gives a dimension a value for each ({"canary": …, "baseline": …}): otherwise both cohorts read the same series`,
    ]);
    expect(errorsOf({ ...counted, requestsMetric: { ...invocations, dimensions: { FunctionName: 'api' } } })).toEqual([
      `${at}.requestsMetric.dimensions: a judged metric names its cohort in a dimension's value with {{version}} or {{cohort}} (e.g. "ExecutedVersion": "{{version}}"), or gives a dimension a value for each ({"canary": …, "baseline": …}): otherwise both cohorts read the same series`,
    ]);
    // A value for each cohort names them too (an ALB's target groups); a threshold gate reads one series, so it may not.
    const groups = { LoadBalancer: 'app/web/1', TargetGroup: { canary: 'targetgroup/web-v2/2', baseline: 'targetgroup/web-v1/1' } };
    expect(errorsOf({ ...latency, metric: { ...duration, dimensions: groups } })).toEqual([]);
    expect(errorsOf({ ...latency, judge: undefined, comparison: '<', threshold: 300, metric: { ...duration, dimensions: groups } })).toEqual([
      `${at}.metric.dimensions.TargetGroup: a value for each cohort goes with a judge: a threshold gate reads one series`,
    ]);
    expect(errorsOf({ ...latency, metric: { ...duration, dimensions: { TargetGroup: { canary: 'a' } } } })[0]).toMatch(/metric\.dimensions\.TargetGroup/);
    expect(errorsOf({ ...counted, requestsMetric: undefined })).toEqual([
      `${at}.requestsMetric: a sequential-rate gate needs requestsMetric (each cohort's requests per period) beside metric (its errors)`,
    ]);
    expect(errorsOf({ ...latency, requestsMetric: invocations, settleSeconds: 60 })).toEqual([
      `${at}.requestsMetric: requestsMetric goes with judge sequential-rate; mann-whitney judges one series a cohort`,
      `${at}.settleSeconds: settleSeconds goes with judge sequential-rate or sample-ratio; mann-whitney judges one series a cohort`,
    ]);
    expect(errorsOf({ ...counted, windowSeconds: 600 })).toEqual([
      `${at}.windowSeconds: a sequential-rate gate reads every period since the stage began (its guarantee needs all of them): drop windowSeconds`,
    ]);
    expect(errorsOf({ ...latency, periodSeconds: 1, windowSeconds: 3_600 })).toEqual([
      `${at}.windowSeconds: 3600 s every 1 s is more than 1000 points a cohort`,
    ]);
    expect(errorsOf({ ...latency, windowSeconds: 30 })).toEqual([
      `${at}.windowSeconds: 30 s is shorter than one period (60 s): a reading would hold no whole period`,
    ]);
  });

  it('refuses what only a CloudWatch gate can get wrong, naming the field', () => {
    expect(errorsOf({ ...latency, metric: undefined, expression: 'd * 2', metrics: { d: duration } })).toEqual([
      `${at}.expression: a judged gate reads one metric a cohort: give metric, not metric math`,
    ]);
    expect(errorsOf({ ...counted, metric: undefined, expression: 'e', metrics: { e: errorsMetric } })).toEqual([
      `${at}.expression: a judged gate reads one metric a cohort: give metric (its errors) and requestsMetric, not metric math`,
    ]);
    expect(errorsOf({ ...counted, metric: { ...errorsMetric, stat: 'Average' } })).toEqual([
      `${at}.metric.stat: a sequential-rate gate counts each period: stat Sum (or SampleCount), not Average`,
    ]);
    expect(errorsOf({ ...latency, metric: { ...duration, metricName: 'Duration-{{version}}' } })).toEqual([
      `${at}.metric.metricName: {{cohort}} and {{version}} are filled in dimensions' values only, not in a metricName`,
    ]);
    expect(errorsOf({ ...latency, stepSeconds: 30 })).toEqual([
      `${at}.stepSeconds: a CloudWatch reading has one point a period: give periodSeconds, not stepSeconds`,
    ]);
    // A threshold gate keeps its comparison and threshold, and takes none of a judge's fields.
    expect(errorsOf({ type: 'cloudwatchMetric', name: 'm', metric: duration, windowSeconds: 600, requestsMetric: invocations })).toEqual([
      `${at}.comparison: a gate without a judge needs a comparison (<, <=, >, >=)`,
      `${at}.threshold: a gate without a judge needs a threshold`,
      `${at}.windowSeconds: windowSeconds goes with a judge: a threshold gate reads one value`,
      `${at}.requestsMetric: requestsMetric goes with a judge: a threshold gate reads one value`,
    ]);
  });

  it('refuses a judged gate on a stage at 100 %, and holds requestsMetric to the namespaces allowed', () => {
    const allAtOnce = { target, stages: [{ name: 'all', percent: 100, bakeSeconds: 60, gates: { providers: [latency] } }] };
    expect(() => parseRolloutSpec(allAtOnce)).toThrow(/stages\.0\.gates\.providers\.0\.judge: stage all sends 100 % to the new version/);
    const elsewhere = gateOf({ ...counted, requestsMetric: { ...invocations, namespace: 'AWS/Billing' } });
    expect(namespaceIssue(elsewhere, ['AWS/Lambda'])).toMatch(/^requestsMetric\.namespace: "AWS\/Billing" is not a namespace this deployment's gates may read/);
    expect(namespaceIssue(gateOf(counted), ['AWS/Lambda'])).toBeNull();
  });

  it('says what a reading asks', () => {
    expect(queryOf(gateOf(latency))).toBe(
      'mann-whitney of the canary against the baseline: Average(AWS/Lambda Duration {FunctionName=api, Resource=api:live, ExecutedVersion={{version}}}) over 60 s',
    );
    expect(queryOf(gateOf(counted))).toBe(
      'sequential-rate of the canary against the baseline: errors Sum(AWS/Lambda Errors {FunctionName=api, Resource=api:live, ExecutedVersion={{version}}}); requests Sum(AWS/Lambda Invocations {FunctionName=api, Resource=api:live, ExecutedVersion={{version}}}) over 60 s',
    );
  });

  it('names a cohort in dimension values only, taking a version as it is', () => {
    const m: MetricStat = { ...duration, dimensions: { ...byVersion, Cohort: '{{cohort}}-{{cohort}}' } };
    expect(cohortMetric(m, 'baseline', '6$&')).toEqual({ ...duration, dimensions: { ...byVersion, ExecutedVersion: '6$&', Cohort: 'baseline-baseline' } });
    expect(m.dimensions.ExecutedVersion).toBe('{{version}}');
  });
});

describe('judging what a judged cloudwatchMetric gate read', () => {
  const where = { attempt: 1, stage: 0, at: T, source: 'poll' as const };

  it('judges cohorts and counts as the Prometheus gate does; a threshold gate given them is inconclusive', () => {
    const slow = judge(
      gateOf(latency),
      { kind: 'cohorts', canary: [20, 21, 22, 23, 24, 25, 26, 27, 28, 29], baseline: [10, 11, 12, 13, 14, 15, 16, 17, 18, 19], answer: '' },
      where,
    );
    expect(slow).toMatchObject({ type: 'cloudwatchMetric', outcome: 'fail', value: 10 });
    expect(JSON.parse(slow.answer)).toMatchObject({ classification: 'high' });
    const steps = (n: number, e: number) => ({ requests: Array.from({ length: 10 }, () => n), errors: Array.from({ length: 10 }, () => e) });
    const worse = judge(gateOf(counted), { kind: 'counts', canary: steps(1_000, 40), baseline: steps(9_000, 90), percent: 10, answer: '' }, where);
    expect(worse.outcome).toBe('fail');
    expect(worse.reason).toMatch(/^the canary's error rate is higher/);
    const plain = gateOf({ type: 'cloudwatchMetric', name: 'm', metric: { ...duration, dimensions: {} }, comparison: '<', threshold: 1 });
    expect(judge(plain, { kind: 'cohorts', canary: [1], baseline: [1], answer: '' }, where)).toMatchObject({
      outcome: 'inconclusive',
      reason: "a cloudwatchMetric gate without a judge got two cohorts' series",
    });
    expect(judge(gateOf(latency), { kind: 'number', value: 1, answer: '' }, where)).toMatchObject({
      outcome: 'inconclusive',
      reason: 'a judged gate got one number, not a series per cohort',
    });
  });

  it('names the judge where people look (the API, and so the status page, the CLI and the metrics)', () => {
    const spec = specOf({ ...latency, judge: { kind: 'relative', measure: 'ratio', tolerance: 0.2 } });
    const stages = freshStages({ rollout: { spec } as RolloutView['rollout'] });
    const view = {
      rollout: { id: 'r', spec, state: 'running', attempt: 1, version: 1, createdAt: T, updatedAt: T, lastProgressAt: T },
      stages,
      metrics: new Map(),
      alarms: {},
      gates: new Map(),
    } as unknown as RolloutView;
    expect(gatesJson(view)[0]).toMatchObject({ type: 'cloudwatchMetric', judge: 'relative', comparison: '<=', threshold: 1.2 });
    const mw = { ...view, rollout: { ...view.rollout, spec: specOf(latency) } } as RolloutView;
    expect(gatesJson(mw)[0]).toMatchObject({ judge: 'mann-whitney', comparison: null, threshold: null });
  });
});

const context = canaryContext(T);
const signal = new AbortController().signal;
const minute = (m: number) => new Date(T + m * 60_000);

describe('the CloudWatch metric provider reading a judged gate', () => {
  it('puts pages together by query id, on a grid of whole periods from the stage start', async () => {
    const { calls, provider } = stubbed((input, call) =>
      call === 1
        ? {
            MetricDataResults: [
              { Id: 'q0', Timestamps: [minute(0), minute(1)], Values: [20, 21], StatusCode: 'PartialData' },
              { Id: 'q1', Timestamps: [minute(0)], Values: [10], StatusCode: 'PartialData' },
            ],
            NextToken: 'more',
          }
        : { MetricDataResults: [{ Id: 'q1', Timestamps: [minute(2)], Values: [12], StatusCode: 'Complete' }] },
    );
    // 3.5 minutes into the stage: three whole periods.
    const [result] = await provider.read([gateOf(latency)], { now: T + 210_000, signal, contexts: [context] });
    expect(result).toEqual({ kind: 'cohorts', canary: [20, 21, null], baseline: [10, null, 12], answer: '' });
    expect(calls).toHaveLength(2);
    expect(calls[1]!.NextToken).toBe('more');
    expect(calls[0]).toMatchObject({ StartTime: new Date(T), EndTime: minute(3), ScanBy: 'TimestampAscending', MaxDatapoints: 6 });
    expect(calls[0]!.MetricDataQueries!.map((q) => q.MetricStat!.Metric!.Dimensions)).toEqual([
      [
        { Name: 'ExecutedVersion', Value: '7' },
        { Name: 'FunctionName', Value: 'api' },
        { Name: 'Resource', Value: 'api:live' },
      ],
      [
        { Name: 'ExecutedVersion', Value: '6' },
        { Name: 'FunctionName', Value: 'api' },
        { Name: 'Resource', Value: 'api:live' },
      ],
    ]);
  });

  it('is bounded: endless pages, a failed query and a missing one are errors naming why', async () => {
    const endless = stubbed(() => ({ MetricDataResults: [], NextToken: 'again' }));
    const [paged] = await endless.provider.read([gateOf(latency)], { now: T + 600_000, signal, contexts: [context] });
    expect(paged).toMatchObject({ kind: 'error', message: 'cloudwatch GetMetricData: more than 10 pages for 20 points' });
    expect(endless.calls).toHaveLength(10);
    const forbidden = stubbed(() => ({
      MetricDataResults: [
        { Id: 'q0', StatusCode: 'Complete' },
        { Id: 'q1', StatusCode: 'Forbidden', Messages: [{ Code: 'Forbidden', Value: 'not allowed' }] },
      ],
    }));
    const [refused] = await forbidden.provider.read([gateOf(latency)], { now: T + 600_000, signal, contexts: [context] });
    expect(refused).toMatchObject({ kind: 'error', message: 'cloudwatch GetMetricData: baseline: Forbidden: not allowed' });
    const partial = stubbed(() => ({ MetricDataResults: [{ Id: 'q0', StatusCode: 'Complete' }] }));
    const [missing] = await partial.provider.read([gateOf(latency)], { now: T + 600_000, signal, contexts: [context] });
    expect(missing).toMatchObject({ kind: 'error', message: 'cloudwatch GetMetricData: no result for the baseline query' });
  });

  it('asks nothing before a whole period has passed (or settled, for counts), and nothing without a rollout', async () => {
    const { calls, provider } = stubbed(() => ({ MetricDataResults: [] }));
    const early = await provider.read([gateOf(latency), gateOf(counted)], { now: T + 59_000, signal, contexts: [context, context] });
    expect(early).toEqual([
      { kind: 'cohorts', canary: [], baseline: [], answer: '' },
      { kind: 'counts', canary: { requests: [], errors: [] }, baseline: { requests: [], errors: [] }, percent: 10, answer: '' },
    ]);
    // A period ended at 60 s settles at 240 s (DEFAULT_CLOUDWATCH_SETTLE_SECONDS 180).
    const unsettled = await provider.read([gateOf(counted)], { now: T + 239_000, signal, contexts: [context] });
    expect(unsettled[0]).toMatchObject({ kind: 'counts', canary: { requests: [] } });
    const [none] = await provider.read([gateOf(latency)], { now: T + 600_000, signal });
    expect(none).toMatchObject({ kind: 'error', message: 'a judged gate is read for a rollout: no rollout was given' });
    expect(calls).toHaveLength(0);
  });

  it('answers one gate read for two rollouts with each rollout’s own cohorts', async () => {
    const { provider } = stubbed((input) => ({
      MetricDataResults: input.MetricDataQueries!.map((q) => ({
        Id: q.Id,
        Timestamps: [minute(0)],
        Values: [Number(q.MetricStat!.Metric!.Dimensions!.find((d) => d.Name === 'ExecutedVersion')!.Value)],
        StatusCode: 'Complete' as const,
      })),
    }));
    const g = gateOf(latency);
    const results = await provider.read([g, g], { now: T + 60_000, signal, contexts: [context, { ...context, rolloutId: 'r2', newVersion: '8' }] });
    expect(results).toEqual([
      { kind: 'cohorts', canary: [7], baseline: [6], answer: '' },
      { kind: 'cohorts', canary: [8], baseline: [6], answer: '' },
    ]);
  });

  it('reads threshold gates batched as before beside judged ones, each answered by its own call', async () => {
    const { calls, provider } = stubbed((input) => ({
      MetricDataResults: input.MetricDataQueries!.map((q) => ({
        Id: q.Id,
        Timestamps: [minute(0)],
        Values: [q.Id === 'g0' ? 3 : 5],
        StatusCode: 'Complete' as const,
      })),
    }));
    const plain = gateOf({ type: 'cloudwatchMetric', name: 'm', metric: { ...duration, dimensions: {} }, comparison: '<', threshold: 4 });
    const results = await provider.read([plain, gateOf(latency), { ...plain, name: 'n' }], { now: T + 120_000, signal, contexts: [context, context, context] });
    expect(results[0]).toMatchObject({ kind: 'number', value: 3 });
    expect(results[1]).toEqual({ kind: 'cohorts', canary: [5, null], baseline: [5, null], answer: '' });
    expect(results[2]).toMatchObject({ kind: 'number', value: 5 });
    expect(calls.map((c) => c.MetricDataQueries!.map((q) => q.Id))).toEqual(
      expect.arrayContaining([
        ['g0', 'g2'],
        ['q0', 'q1'],
      ]),
    );
    expect(calls).toHaveLength(2);
  });
});
