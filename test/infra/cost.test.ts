import type { Template } from 'aws-cdk-lib/assertions';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_ASSUMPTIONS, ENDPOINT_SERVICES, FLAG_READ_UNITS } from '../../tools/cost/assumptions.js';
import { assumptionsFor, parseArgs } from '../../tools/cost/cli.js';
import { estimateCost } from '../../tools/cost/estimate.js';
import { EXAMPLE_GATES, gateRead, gatesCost, parseGate, readEverySeconds, rolloutGauges } from '../../tools/cost/gates.js';
import { METRICS_BY_SERVICE, STACK_METRICS } from '../../tools/cost/metrics.js';
import { PRICES } from '../../tools/cost/prices.js';
import { gateCostTable, jsonLine, markdownTable } from '../../tools/cost/report.js';
import { rateMinutes, type CfnTemplate } from '../../tools/cost/template.js';
import { RAISE_GRACE_MS, SWEEP_EVERY_MS } from '../../functions/activity.js';
import type { ControlPlaneProps } from '../../infra/stack.js';
import { synthStack, SYNTH_HOOK_TIMEOUT, VARIANT_TEST_TIMEOUT } from './synth.js';

const root = join(import.meta.dirname, '../..');
/** Where the monthly cost tables live (docs/operating/capacity-and-cost.md#monthly-cost). */
const COST_PAGE = 'docs/operating/capacity-and-cost.md';

/** The stack as it deploys, bundling skipped (the template is the same; only the asset hashes differ); once per shape. */
function synth(props: ControlPlaneProps = {}): { template: Template; json: CfnTemplate } {
  const { template, json } = synthStack('CostTest', props);
  return { template, json };
}

const ids = (t: Template, type: string) => Object.keys(t.findResources(type)).sort();

describe('estimateCost on the default stack (DynamoDB store)', () => {
  let template: Template;
  let json: CfnTemplate;
  let estimate: ReturnType<typeof estimateCost>;
  beforeAll(() => {
    ({ template, json } = synth());
    estimate = estimateCost(json);
  }, SYNTH_HOOK_TIMEOUT);

  it('counts every function, alarm, schedule rule and event source mapping the template holds', () => {
    for (const type of [
      'AWS::Lambda::Function',
      'AWS::CloudWatch::Alarm',
      'AWS::Lambda::EventSourceMapping',
      'AWS::Events::Rule',
      'AWS::DynamoDB::Table',
      'AWS::Events::Archive',
    ]) {
      expect([...(estimate.counted[type] ?? [])].sort(), type).toEqual(ids(template, type));
    }
    const scheduleRules = Object.entries(template.findResources('AWS::Events::Rule')).filter(
      ([, r]) => (r as { Properties: { ScheduleExpression?: string } }).Properties.ScheduleExpression,
    );
    expect(estimate.schedules.map((s) => s.rule).sort()).toEqual(scheduleRules.map(([id]) => id).sort());
    expect(estimate.schedules.length).toBeGreaterThan(0);
    // Every function has its invocations and a line of its own, and every resource type is either priced or known to be free.
    expect(Object.keys(estimate.invocations).sort()).toEqual(ids(template, 'AWS::Lambda::Function'));
    for (const name of ['streaming-promoter', 'batch-promoter', 'coordinator', 'api', 'spot-drain'])
      expect(
        estimate.lines.filter((l) => l.what.startsWith(`${name},`)),
        name,
      ).toHaveLength(1);
    expect(estimate.unpriced).toEqual([]);
    const alarms = estimate.lines.find((l) => l.what.startsWith('CloudWatch alarms'))!;
    // Billed per metric an alarm reads (a metric-math alarm for each of its metrics): one each here.
    const alarmMetrics = Object.values(template.findResources('AWS::CloudWatch::Alarm')).reduce((n, a) => {
      const metrics = (a as { Properties: { Metrics?: { MetricStat?: unknown }[] } }).Properties.Metrics;
      return n + (metrics ? metrics.filter((m) => m.MetricStat).length : 1);
    }, 0);
    expect(alarmMetrics).toBe(ids(template, 'AWS::CloudWatch::Alarm').length);
    expect(alarms.idle).toBeCloseTo(alarmMetrics * PRICES.alarmStandard.usd, 10);
    // The work DLQ: no event source mapping polling it, one short poll a scheduled scan instead.
    expect(ids(template, 'AWS::Lambda::EventSourceMapping')).toEqual([]);
    expect(estimate.lines.some((l) => l.what.includes('event source mapping'))).toBe(false);
    const drain = estimate.lines.find((l) => l.what.startsWith('SQS: coordinator polling the work DLQ'))!;
    expect(drain.idle).toBeCloseTo(43_200 * PRICES.sqsRequest.usd, 10);
  });

  // Synthesises the Aurora shape too.
  it(
    "the docs' cost tables are the ones the two stores imply: their totals are estimateCost's, so the tables cannot drift from the stack",
    { timeout: VARIANT_TEST_TIMEOUT },
    () => {
      const readme = readFileSync(join(root, COST_PAGE), 'utf8');
      const section = readme.slice(readme.indexOf('\n## Monthly cost'), readme.indexOf('\n## Capacity and cost at scale'));
      const totals = [...section.matchAll(/\| \*\*total\*\* \| \*\*US\$ ([\d.]+)\*\* \| \*\*US\$ ([\d.]+)\*\* \|/g)].map((m) => [Number(m[1]), Number(m[2])]);
      expect(totals, 'the Monthly cost section has a total row per store, DynamoDB first').toHaveLength(2);
      const aurora = estimateCost(synth({ store: 'aurora' }).json);
      const rounded = (e: typeof estimate) => [Math.round(e.idle * 100) / 100, Math.round(e.busy * 100) / 100];
      expect(totals, `run npm run cost and copy its figures into ${COST_PAGE}`).toEqual([rounded(estimate), rounded(aurora)]);
      expect(section).toContain(`CloudWatch: ${ids(template, 'AWS::CloudWatch::Alarm').length} alarms`);
    },
  );

  it('idle, the stack costs at most US$ 1 a month at list prices', () => {
    expect(estimate.store).toBe('dynamodb');
    expect(estimate.idle).toBeGreaterThan(0);
    expect(estimate.idle).toBeLessThanOrEqual(1);
  });

  it("the scheduled functions' idle lines come from their schedule rate: rate(1 minute) is 43,200 invocations a month", () => {
    expect(rateMinutes('rate(1 minute)')).toBe(1);
    expect(rateMinutes('rate(5 minutes)')).toBe(5);
    expect(rateMinutes('rate(2 hours)')).toBe(120);
    expect(rateMinutes('cron(0 12 * * ? *)')).toBeNull();
    for (const s of estimate.schedules) {
      expect(s.expression).toBe('rate(1 minute)');
      expect(s.perMonth).toBe(43_200);
      for (const target of s.targets) expect(estimate.invocations[target]!.idle).toBe(43_200);
    }
    const batch = estimate.lines.find((l) => l.what.startsWith('batch-promoter'))!;
    expect(batch.basis).toContain('43,200');

    // The same template with the batch promoter's schedule at rate(5 minutes): a fifth of the invocations, a fifth of its idle line.
    const slower = structuredClone(json) as { Resources: Record<string, { Type: string; Properties?: Record<string, unknown> }> };
    const rule = estimate.schedules.find((s) => s.targets.some((t) => t.startsWith('BatchPromoter')))!;
    slower.Resources[rule.rule]!.Properties!.ScheduleExpression = 'rate(5 minutes)';
    const after = estimateCost(slower);
    expect(after.invocations[rule.targets[0]!]!.idle).toBe(8_640);
    const batchAfter = after.lines.find((l) => l.what.startsWith('batch-promoter'))!;
    // Cold starts (per hour, not per invocation) are the part that does not scale with the rate.
    const coldStarts = DEFAULT_ASSUMPTIONS.coldStartsPerFunctionHour * 720 * (DEFAULT_ASSUMPTIONS.initMs / 1000) * 0.25 * PRICES.lambdaArmGbSecond.usd;
    expect(batchAfter.idle - coldStarts).toBeCloseTo((batch.idle - coldStarts) / 5, 8);
    expect(after.idle).toBeLessThan(estimate.idle);
  });

  it('an idle stack publishes no custom metric, records no trace and writes nothing to the table', () => {
    const line = (prefix: string) => estimate.lines.find((l) => l.what.startsWith(prefix))!;
    expect(line('CloudWatch custom metrics').idle).toBe(0);
    expect(line('X-Ray').idle).toBe(0);
    expect(line('CloudWatch dashboard')).toBeUndefined();
    // Two read units a minute: the batch promoter's two Limit 1 queries (1 + 0.5 RRU) and the coordinator's index query (0.5).
    expect(line('DynamoDB on-demand requests').idle).toBeCloseTo(43_200 * 2 * PRICES.dynamoRead.usd, 10);
  });

  it('busy costs at least idle, line by line and in total', () => {
    for (const l of estimate.lines) expect(l.busy, l.what).toBeGreaterThanOrEqual(l.idle);
    expect(estimate.busy).toBeGreaterThan(estimate.idle);
    expect(estimate.busy).toBeCloseTo(
      estimate.lines.reduce((n, l) => n + l.busy, 0),
      10,
    );
    // The busy column follows --events.
    const more = estimateCost(json, { ...DEFAULT_ASSUMPTIONS, eventsPerMonth: 2 * DEFAULT_ASSUMPTIONS.eventsPerMonth });
    expect(more.busy).toBeGreaterThan(estimate.busy);
    expect(more.idle).toBeCloseTo(estimate.idle, 10);
  });

  it('prints a markdown table and a JSON line with both totals', () => {
    const md = markdownTable(estimate);
    expect(md.split('\n')).toHaveLength(estimate.lines.length + 3);
    expect(md).toContain('**total**');
    const parsed = JSON.parse(jsonLine(estimate)) as { store: string; idle_usd_month: number; busy_usd_month: number; lines: unknown[] };
    expect(parsed).toMatchObject({
      store: 'dynamodb',
      idle_usd_month: Math.round(estimate.idle * 100) / 100,
      busy_usd_month: Math.round(estimate.busy * 100) / 100,
    });
    expect(parsed.lines).toHaveLength(estimate.lines.length);
  });
});

describe('estimateCost with the dashboard (-c dashboard=true)', () => {
  // Synthesises the default and dashboard shapes.
  it("adds the dashboard's price, idle and busy, and nothing else", { timeout: VARIANT_TEST_TIMEOUT }, () => {
    const without = estimateCost(synth().json);
    const { template, json } = synth({ dashboard: true });
    const withDashboard = estimateCost(json);
    expect(withDashboard.counted['AWS::CloudWatch::Dashboard']).toEqual(ids(template, 'AWS::CloudWatch::Dashboard'));
    expect(ids(template, 'AWS::CloudWatch::Dashboard')).toHaveLength(1);
    expect(withDashboard.idle - without.idle).toBeCloseTo(PRICES.dashboard.usd, 10);
    expect(withDashboard.busy - without.busy).toBeCloseTo(PRICES.dashboard.usd, 10);
  });
});

describe('estimateCost with the Aurora store', () => {
  let template: Template;
  let json: CfnTemplate;
  let estimate: ReturnType<typeof estimateCost>;
  beforeAll(() => {
    ({ template, json } = synth({ store: 'aurora' }));
    estimate = estimateCost(json);
  }, SYNTH_HOOK_TIMEOUT);

  it('prices what the template holds: the serverless instances, the NAT gateway, its address, the secret, the activity flags', () => {
    expect(estimate.store).toBe('aurora');
    expect(estimate.unpriced).toEqual([]);
    for (const type of [
      'AWS::RDS::DBInstance',
      'AWS::EC2::NatGateway',
      'AWS::EC2::EIP',
      'AWS::SecretsManager::Secret',
      'AWS::Lambda::Function',
      'AWS::DynamoDB::Table',
      'AWS::EC2::VPCEndpoint',
    ]) {
      expect([...(estimate.counted[type] ?? [])].sort(), type).toEqual(ids(template, type));
    }
    const nat = estimate.lines.find((l) => l.what.startsWith('NAT gateway'))!;
    expect(nat.idle).toBeCloseTo(720 * PRICES.natGatewayHour.usd, 8);
    // The VPC's cost stated with what a VPC without NAT would need instead.
    expect(nat.basis).toContain(`US$ ${(ENDPOINT_SERVICES.length * 2 * 720 * PRICES.interfaceEndpointHour.usd).toFixed(2)}`);
    // The only DynamoDB reads: the two probes' flags, one read each a minute; the flags table is priced as the few bytes it holds.
    const flags = estimate.lines.find((l) => l.what.startsWith('DynamoDB on-demand requests'))!;
    expect(flags.idle).toBeCloseTo(2 * 43_200 * FLAG_READ_UNITS * PRICES.dynamoRead.usd, 10);
    expect(estimate.lines.some((l) => l.what.startsWith('KMS'))).toBe(false);
    for (const l of estimate.lines) expect(l.busy, l.what).toBeGreaterThanOrEqual(l.idle);
  });

  // Synthesises a second Aurora shape (auroraMinCapacity).
  it(
    'paused when idle: the cluster costs only its wakes (the daily sweep, the rotation), unless a schedule reads it every minute or its minimum is above 0',
    { timeout: VARIANT_TEST_TIMEOUT },
    () => {
      expect(DEFAULT_ASSUMPTIONS.auroraSweepsPerMonth).toBe((30 * 86_400_000) / SWEEP_EVERY_MS);
      expect(DEFAULT_ASSUMPTIONS.flagRaisesPerMonth).toBe(2 * ((30 * 86_400_000) / (RAISE_GRACE_MS / 2)));
      const acus = (e: typeof estimate) => e.lines.find((l) => l.what.startsWith('Aurora Serverless v2'))!;
      const instances = ids(template, 'AWS::RDS::DBInstance').length;
      const wakeHours = ((DEFAULT_ASSUMPTIONS.auroraSweepsPerMonth + 1) * (DEFAULT_ASSUMPTIONS.auroraWakeWorkMinutes + 5)) / 60;
      expect(acus(estimate).idle).toBeCloseTo(instances * DEFAULT_ASSUMPTIONS.auroraAwakeMinAcu * wakeHours * PRICES.auroraAcuHour.usd, 8);
      expect(acus(estimate).busy).toBeCloseTo(instances * DEFAULT_ASSUMPTIONS.auroraBusyAcu * 720 * PRICES.auroraAcuHour.usd, 8);
      // A scheduled function on the database without its flag keeps the cluster awake all month.
      const unflagged = structuredClone(json) as { Resources: Record<string, { Type: string; Properties?: Record<string, unknown> }> };
      for (const r of Object.values(unflagged.Resources))
        delete (r.Properties?.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables?.ROLLOUT_ACTIVITY_TABLE;
      expect(acus(estimateCost(unflagged)).idle).toBeCloseTo(instances * 0.5 * 720 * PRICES.auroraAcuHour.usd, 8);
      // A minimum above 0 runs all month.
      const awake = estimateCost(synth({ store: 'aurora', auroraMinCapacity: 1 }).json);
      expect(acus(awake).idle).toBeCloseTo(instances * 1 * 720 * PRICES.auroraAcuHour.usd, 8);
    },
  );

  it('idle, the Aurora stack costs at most US$ 45 a month at list prices', () => {
    expect(estimate.idle).toBeGreaterThan(0);
    expect(estimate.idle).toBeLessThanOrEqual(45);
  });
});

describe('the metric catalog', () => {
  it('names every metric the functions can publish, and no other', () => {
    const found = new Set<string>();
    // Metric names are capitalized; a lower-case literal in a call (`outcome === 'failed' ? …`) is not one.
    const quoted = (s: string) => [...s.matchAll(/'([A-Z][A-Za-z0-9]+)'/g)].map((m) => m[1]!);
    for (const file of readdirSync(join(root, 'functions')).filter((f) => f.endsWith('.ts'))) {
      const src = readFileSync(join(root, 'functions', file), 'utf8');
      for (const m of src.matchAll(/addMetric\(([^;]*?)MetricUnit/gs)) quoted(m[1]!).forEach((n) => found.add(n));
      for (const m of src.matchAll(/metric: '([A-Za-z0-9]+)'/g)) found.add(m[1]!);
      for (const m of src.matchAll(/const METRIC\b[^{]*\{([^}]*)\}/g)) [...m[1]!.matchAll(/: '([A-Za-z0-9]+)'/g)].forEach((n) => found.add(n[1]!));
    }
    const conflicts = readFileSync(join(root, 'shared/adapters/dynamodb/conflicts.ts'), 'utf8');
    // conflictMetrics names its counters as [name, delta.x] pairs.
    for (const m of conflicts.matchAll(/\['([A-Za-z]+)', delta\./g)) found.add(m[1]!);
    const catalog = new Set(Object.values(METRICS_BY_SERVICE).flatMap((s) => [...s.busy, ...s.onEvent]));
    expect([...catalog].sort()).toEqual([...found].sort());
    // The stack-wide counts (no service dimension) are the StackCount type's members.
    const stackCount = /export type StackCount = ([^;]+);/.exec(readFileSync(join(root, 'functions/metrics.ts'), 'utf8'))![1]!;
    expect([...STACK_METRICS].sort()).toEqual([...stackCount.matchAll(/'([A-Za-z]+)'/g)].map((m) => m[1]!).sort());
  });

  // Synthesises the default shape.
  it(
    "prices each running rollout's gauges: the rollout's own, and per provider gate its value, threshold and three reading outcomes",
    { timeout: VARIANT_TEST_TIMEOUT },
    () => {
      expect(rolloutGauges(0)).toEqual({ metrics: 6, blobs: 1 });
      expect(rolloutGauges(2)).toEqual({ metrics: 16, blobs: 9 });
      const { json } = synth();
      const one = estimateCost(json);
      const two = estimateCost(json, { ...DEFAULT_ASSUMPTIONS, rolloutsRunning: 2 });
      const metricsLine = (e: typeof one) => e.lines.find((l) => l.what.startsWith('CloudWatch custom metrics'))!;
      expect(metricsLine(two).busy - metricsLine(one).busy).toBeCloseTo(rolloutGauges(DEFAULT_ASSUMPTIONS.gates).metrics * PRICES.customMetric.usd, 10);
      expect(metricsLine(two).idle).toBe(0);
    },
  );
});

describe('judged gates in the cost model', () => {
  const lambda = (metricName: string, stat: string) => ({
    namespace: 'AWS/Lambda',
    metricName,
    stat,
    dimensions: { FunctionName: 'checkout', Resource: 'checkout:live', ExecutedVersion: '{{version}}' },
  });
  const cw = (o: object) => parseGate({ type: 'cloudwatchMetric', name: 'g', metric: lambda('Duration', 'Average'), ...o });
  const threshold = cw({ comparison: '<', threshold: 800 });
  const mannWhitney = cw({ judge: { kind: 'mann-whitney' } });
  const sequential = cw({ metric: lambda('Errors', 'Sum'), requestsMetric: lambda('Invocations', 'Sum'), judge: { kind: 'sequential-rate' } });
  const amp = (o: object) =>
    parseGate({ type: 'prometheus', name: 'p', address: 'https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1', query: 'x{v="{{version}}"}', ...o });
  let json: CfnTemplate;
  beforeAll(() => ({ json } = synth()), SYNTH_HOOK_TIMEOUT);
  const with_ = (gates: ReturnType<typeof parseGate>[]) => estimateCost(json, { ...DEFAULT_ASSUMPTIONS, gates });
  const lineOf = (e: ReturnType<typeof estimateCost>, prefix: string) => e.lines.find((l) => l.what.startsWith(prefix));

  it('a judged CloudWatch reading asks for both cohorts: 2 metrics, 4 with sequential-rate; GetMetricData is billed per metric', () => {
    expect([threshold, mannWhitney, sequential].map((g) => gateRead(g, 1_800).metrics)).toEqual([1, 2, 4]);
    const reads = (g: ReturnType<typeof parseGate>) => lineOf(with_([g]), 'CloudWatch GetMetricData')!.busy;
    // Read every 60 s all month: 43,200 readings.
    expect(reads(threshold)).toBeCloseTo(43_200 * PRICES.getMetricData.usd, 10);
    expect(reads(mannWhitney)).toBeCloseTo(2 * reads(threshold), 10);
    expect(reads(sequential)).toBeCloseTo(4 * reads(threshold), 10);
    // The same gate read twice as often costs twice; two rollouts running, twice again.
    expect(reads(cw({ judge: { kind: 'mann-whitney' }, intervalSeconds: 30 }))).toBeCloseTo(2 * reads(mannWhitney), 10);
    expect(lineOf(estimateCost(json, { ...DEFAULT_ASSUMPTIONS, gates: [sequential], rolloutsRunning: 2 }), 'CloudWatch GetMetricData')!.busy).toBeCloseTo(
      2 * reads(sequential),
      10,
    );
    // Read on the BatchPromoter's ticks: an interval is rounded up to 10 s.
    expect(readEverySeconds(cw({ judge: { kind: 'mann-whitney' }, intervalSeconds: 15 }))).toBe(20);
  });

  it("a judged gate's gauges: its verdicts, a mann-whitney one its interval, no threshold unless a one-sided relative judge", () => {
    const own = rolloutGauges([]).metrics;
    const gauges = (g: ReturnType<typeof parseGate>) => rolloutGauges([g]).metrics - own;
    expect(gauges(threshold)).toBe(5);
    expect(gauges(mannWhitney)).toBe(9);
    expect(gauges(cw({ judge: { kind: 'relative', measure: 'ratio', tolerance: 0.2 } }))).toBe(8);
    expect(gauges(cw({ judge: { kind: 'relative', measure: 'ratio', tolerance: 0.2, direction: 'either' } }))).toBe(7);
    expect(gauges(sequential)).toBe(7);
    expect(gauges(parseGate({ type: 'cloudwatchAlarm', name: 'a', alarms: ['x'] }))).toBe(3);
    // The number form (threshold gates) is what the Lambda metrics test compares with the EMF the function writes.
    expect(rolloutGauges(1)).toEqual(rolloutGauges([threshold]));
    const metrics = (g: ReturnType<typeof parseGate>) => lineOf(with_([g]), 'CloudWatch custom metrics')!.busy;
    expect(metrics(mannWhitney) - metrics(threshold)).toBeCloseTo(4 * PRICES.customMetric.usd, 10);
    expect(with_([mannWhitney]).busy).toBeGreaterThan(with_([threshold]).busy);
  });

  it('a judged Prometheus reading is 2 range queries (4 with sequential-rate), billed by the samples processed on AMP only', () => {
    const plain = amp({ comparison: '<', threshold: 1 });
    const judged = amp({ judge: { kind: 'mann-whitney' }, windowSeconds: 600, stepSeconds: 30 });
    const counts = amp({
      query: 'sum(increase(e{v="{{version}}"}[{{step}}]))',
      requestsQuery: 'sum(increase(r{v="{{version}}"}[{{step}}]))',
      judge: { kind: 'sequential-rate' },
      stepSeconds: 60,
    });
    expect(gateRead(plain, 1_800)).toMatchObject({ promQueries: 1, promPoints: 1, amp: true });
    expect(gateRead(judged, 1_800)).toMatchObject({ promQueries: 2, promPoints: 2 * 21 });
    expect(gateRead(counts, 1_800)).toMatchObject({ promQueries: 4, promPoints: 4 * 31 });
    expect(gateRead(counts, 3_600).promPoints).toBe(4 * 61);
    const queries = (g: ReturnType<typeof parseGate>) => lineOf(with_([g]), 'Amazon Managed Service for Prometheus')!.busy;
    // At the default 30 s: 86,400 readings a month.
    expect(queries(judged)).toBeCloseTo(86_400 * 42 * DEFAULT_ASSUMPTIONS.promSamplesPerPoint * PRICES.ampQuerySample.usd, 12);
    expect(queries(judged)).toBeGreaterThan(queries(plain));
    const own = parseGate({ type: 'prometheus', name: 'p', address: 'http://prometheus:9090', query: 'x{v="{{version}}"}', judge: { kind: 'mann-whitney' } });
    expect(lineOf(with_([own]), 'Amazon Managed Service for Prometheus')).toMatchObject({
      busy: 0,
      basis: expect.stringContaining('172,800 PromQL queries') as unknown,
    });
    expect(lineOf(with_([threshold]), 'Amazon Managed Service for Prometheus')).toBeUndefined();
  });

  it("--spec prices the spec's costliest stage, its rollout-wide gates included", () => {
    const spec = {
      target: { service: 'checkout', version: '7', stableVersion: '6' },
      stages: [
        {
          name: 'canary',
          percent: 10,
          bakeSeconds: 600,
          gates: { providers: [{ type: 'cloudwatchMetric', name: 't', metric: lambda('Errors', 'Sum'), comparison: '<', threshold: 5 }] },
        },
        { name: 'half', percent: 50, bakeSeconds: 600 },
        { name: 'all', percent: 100, bakeSeconds: 0 },
      ],
      rolloutGates: {
        fromStage: 'half',
        providers: [
          {
            type: 'cloudwatchMetric',
            name: 'e',
            metric: lambda('Errors', 'Sum'),
            requestsMetric: lambda('Invocations', 'Sum'),
            judge: { kind: 'sequential-rate' },
          },
        ],
      },
    };
    const a = assumptionsFor(spec);
    expect(a.gates.map((g) => g.name)).toEqual(['e']);
    expect(gatesCost(a.gates, a).metrics).toBe(4 * 43_200);
    expect(() => assumptionsFor({ ...spec, stages: [] })).toThrow(/--spec: .*stages/);
  });

  it("the docs' table of what each gate costs is the one the model prints (npm run cost -- --gates)", () => {
    const readme = readFileSync(join(root, COST_PAGE), 'utf8');
    const table = gateCostTable(DEFAULT_ASSUMPTIONS);
    expect(table.split('\n')).toHaveLength(EXAMPLE_GATES.length + 2);
    expect(readme, `run npm run cost -- --gates and copy its table into ${COST_PAGE}`).toContain(table);
  });
});

describe('the CLI options', () => {
  it('parses --store, --dashboard, --events, --spec, --markdown and --gates, and refuses anything else', () => {
    expect(parseArgs([])).toEqual({ store: 'both', dashboard: false, events: 1_000_000, markdown: false, spec: null, gates: false });
    expect(parseArgs(['--spec', 'r.json', '--gates'])).toMatchObject({ spec: 'r.json', gates: true });
    expect(() => parseArgs(['--spec'])).toThrow(/--spec: needs a value/);
    expect(parseArgs(['--store', 'dynamodb'])).toMatchObject({ store: 'dynamodb' });
    expect(parseArgs(['--store', 'aurora', '--dashboard', '--events', '2,000,000', '--markdown'])).toEqual({
      store: 'aurora',
      dashboard: true,
      events: 2_000_000,
      markdown: true,
      spec: null,
      gates: false,
    });
    expect(parseArgs(['--events=500'])).toMatchObject({ events: 500 });
    expect(() => parseArgs(['--store', 'mysql'])).toThrow(/--store/);
    expect(() => parseArgs(['--events', '-3'])).toThrow(/--events/);
    expect(() => parseArgs(['--events'])).toThrow(/needs a value/);
    expect(() => parseArgs(['--fast'])).toThrow(/unknown option/);
  });
});
