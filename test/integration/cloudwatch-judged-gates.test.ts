/**
 * Judged cloudwatchMetric gates on moto, through the unmodified CloudWatch
 * SDK client: a Lambda alias's metrics split by `ExecutedVersion`, as Lambda
 * publishes them for an alias (FunctionName, Resource = function:alias,
 * ExecutedVersion). The stable version is "1"; a canary twice as slow ("2")
 * fails a mann-whitney gate, a canary drawn from the stable version's own
 * distribution ("3") passes it; a canary erring twice as often fails a
 * sequential-rate gate on Invocations and Errors, one erring as often passes;
 * a rollout without a stableVersion is inconclusive and says why. Last, a
 * node on PostgreSQL reading moto rolls a slow canary back on such a gate and
 * completes one that behaves as the stable version.
 *
 * moto serves PutMetricData and GetMetricData with MetricStat queries (not
 * metric math, which judged gates refuse). Datapoints are put at fixed times
 * and read with a fixed `now`: what is asserted is the reading, never timing
 * (the node's rollouts read at its own clock, over datapoints put ahead of it).
 */
import { CloudWatchClient, PutMetricDataCommand, type MetricDatum } from '@aws-sdk/client-cloudwatch';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CloudWatchMetricProvider, cloudWatchClients } from '../../shared/adapters/cloudwatch/providers.js';
import { providerGateSchema, type CloudwatchMetricGate } from '../../shared/rollout/gate-spec.js';
import type { GateContext } from '../../shared/rollout/gate-reader.js';
import { judge, type GateReading, type ProviderResult } from '../../shared/rollout/gates.js';
import { databaseForFile } from '../support/database.js';
import { getRollout, postRollout, servedNode, type ServedNode } from '../support/gated-node.js';
import { normals } from '../support/normals.js';

const moto = process.env.ROLLOUT_MOTO_URL ?? '';
if (!moto) throw new Error('ROLLOUT_MOTO_URL is not set: run through npm test (the harness starts moto)');

/** A region of this file's own, so no other file's datapoints are read. */
const REGION = 'eu-north-1';
const FUNCTION = 'judged-api';
const ALIAS = `${FUNCTION}:live`;
/** The stage's period began here; datapoints are put in the 20 minutes after it. */
const T0 = Date.parse('2025-03-01T12:00:00Z');
const MINUTES = 20;
const at = (minute: number, second = 0) => new Date(T0 + minute * 60_000 + second * 1000);

const config = { region: REGION, endpoint: moto, credentials: { accessKeyId: 'test', secretAccessKey: 'test' } };
let cloudwatch: CloudWatchClient;
/** Each GetMetricData the provider sends, as it sent it. */
const sent: { MetricDataQueries?: { MetricStat?: { Metric?: { Dimensions?: { Name?: string; Value?: string }[] } } }[] }[] = [];
const provider = new CloudWatchMetricProvider(
  cloudWatchClients((region) => {
    const client = new CloudWatchClient({ ...config, region: region ?? REGION });
    client.middlewareStack.add(
      (next, context) => (args) => {
        if (context.commandName === 'GetMetricDataCommand') sent.push(args.input as (typeof sent)[number]);
        return next(args);
      },
      { step: 'initialize', name: 'countGetMetricData' },
    );
    return client;
  }),
);

/** By name, the order the provider asks in: moto matches a query's dimensions to a datapoint's in order. */
const dimensions = (version: string) => [
  { Name: 'ExecutedVersion', Value: version },
  { Name: 'FunctionName', Value: FUNCTION },
  { Name: 'Resource', Value: ALIAS },
];
const datum = (MetricName: string, version: string, Timestamp: Date, Value: number, Unit: 'Milliseconds' | 'Count'): MetricDatum => ({
  MetricName,
  Dimensions: dimensions(version),
  Timestamp,
  Value,
  Unit,
});

/** Requests a minute: the stable version 90 %, a canary the stage's 10 %. */
const STABLE = 9_000;
const CANARY = 1_000;

beforeAll(async () => {
  // moto cannot read the gzip body the SDK sends for a large PutMetricData.
  cloudwatch = new CloudWatchClient({ ...config, disableRequestCompression: true });
  const draw = normals(47);
  const data: MetricDatum[] = [];
  for (let minute = 0; minute < MINUTES; minute++) {
    // Five invocations a minute a version: "1" about 100 ms, "2" twice that, "3" from the same distribution as "1".
    for (let k = 0; k < 5; k++) {
      const stable = 100 + 10 * draw();
      data.push(datum('Duration', '1', at(minute, 10 * k), stable, 'Milliseconds'));
      data.push(datum('Duration', '2', at(minute, 10 * k), 2 * stable, 'Milliseconds'));
      data.push(datum('Duration', '3', at(minute, 10 * k), 100 + 10 * draw(), 'Milliseconds'));
    }
    // Exact counts: "1" errs 1 %, "2" 2 % (twice), "3" 1 %.
    data.push(datum('Invocations', '1', at(minute, 5), STABLE, 'Count'), datum('Errors', '1', at(minute, 5), STABLE / 100, 'Count'));
    data.push(datum('Invocations', '2', at(minute, 5), CANARY, 'Count'), datum('Errors', '2', at(minute, 5), (2 * CANARY) / 100, 'Count'));
    data.push(datum('Invocations', '3', at(minute, 5), CANARY, 'Count'), datum('Errors', '3', at(minute, 5), CANARY / 100, 'Count'));
  }
  for (let i = 0; i < data.length; i += 500) await cloudwatch.send(new PutMetricDataCommand({ Namespace: 'AWS/Lambda', MetricData: data.slice(i, i + 500) }));
  // An ALB's target groups, one a version: the canary's answers in twice the stable one's time, the same one's as it.
  const alb: MetricDatum[] = [];
  const groupDatum = (group: string, minute: number, Value: number): MetricDatum => ({
    MetricName: 'TargetResponseTime',
    // By name, as the provider asks: LoadBalancer, then TargetGroup.
    Dimensions: [
      { Name: 'LoadBalancer', Value: LOAD_BALANCER },
      { Name: 'TargetGroup', Value: group },
    ],
    Timestamp: at(minute, 30),
    Value,
    Unit: 'Seconds',
  });
  for (let minute = 0; minute < MINUTES; minute++) {
    const stable = 0.1 + 0.01 * draw();
    alb.push(groupDatum(GROUPS.stable, minute, stable), groupDatum(GROUPS.slow, minute, 2 * stable), groupDatum(GROUPS.same, minute, 0.1 + 0.01 * draw()));
  }
  await cloudwatch.send(new PutMetricDataCommand({ Namespace: 'AWS/ApplicationELB', MetricData: alb }));
});

const LOAD_BALANCER = 'app/checkout/50dc6c495c0c9188';
const GROUPS = {
  stable: 'targetgroup/checkout-v41/73e2d6bc24d8a067',
  slow: 'targetgroup/checkout-v42/6d0ecf831eec9f09',
  same: 'targetgroup/checkout-v43/1f2e3d4c5b6a7980',
};
/** A judged gate on an ALB: each cohort's target group by name, where no template names both. */
const albGate = (canaryGroup: string) =>
  gateOf({
    name: 'alb-latency',
    metric: {
      namespace: 'AWS/ApplicationELB',
      metricName: 'TargetResponseTime',
      stat: 'Average',
      dimensions: { LoadBalancer: LOAD_BALANCER, TargetGroup: { canary: canaryGroup, baseline: GROUPS.stable } },
    },
    judge: { kind: 'mann-whitney', direction: 'increase' },
  });

afterAll(() => cloudwatch?.destroy());

const metric = (metricName: string, stat: string) => ({
  namespace: 'AWS/Lambda',
  metricName,
  stat,
  dimensions: { FunctionName: FUNCTION, Resource: ALIAS, ExecutedVersion: '{{version}}' },
});
const gateOf = (g: Record<string, unknown>) => providerGateSchema.parse({ type: 'cloudwatchMetric', timeoutSeconds: 10, ...g }) as CloudwatchMetricGate;
const latency = gateOf({ name: 'latency', metric: metric('Duration', 'Average'), judge: { kind: 'mann-whitney', direction: 'increase' } });
const errors = gateOf({
  name: 'errors',
  metric: metric('Errors', 'Sum'),
  requestsMetric: metric('Invocations', 'Sum'),
  judge: { kind: 'sequential-rate', alpha: 0.05, minSamples: 1_000 },
});

const contextOf = (newVersion: string, stableVersion: string | null): GateContext => ({
  rolloutId: `r-${newVersion}`,
  attempt: 1,
  stage: { index: 0, name: 'canary', percent: 10 },
  epoch: 1,
  service: FUNCTION,
  newVersion,
  stableVersion,
  labels: {},
  periodStart: T0,
});

/** Read at 25 minutes past the stage's start: every put period whole, and settled for the counts. */
const NOW = T0 + 25 * 60_000;
async function read(gate: CloudwatchMetricGate, context: GateContext): Promise<{ result: ProviderResult; reading: GateReading }> {
  const [result] = await provider.read([gate], { now: NOW, signal: new AbortController().signal, contexts: [context] });
  return { result: result!, reading: judge(gate, result!, { attempt: 1, stage: 0, at: NOW, source: 'poll' }) };
}
const detailOf = (r: GateReading) => JSON.parse(r.answer) as Record<string, unknown>;

describe('a cloudwatchMetric gate judged by ExecutedVersion (moto)', () => {
  it('reads both cohorts in one GetMetricData, a point a period from the stage start, oldest first', async () => {
    sent.length = 0;
    const { result } = await read(latency, contextOf('2', '1'));
    expect(sent).toHaveLength(1);
    const versions = sent[0]!.MetricDataQueries!.map((q) => q.MetricStat?.Metric?.Dimensions?.find((d) => d.Name === 'ExecutedVersion')?.Value);
    expect(versions).toEqual(['2', '1']);
    expect(result.kind).toBe('cohorts');
    if (result.kind !== 'cohorts') return;
    // The default window is 20 periods, all after the stage began; the five minutes without data are null.
    expect(result.canary).toHaveLength(20);
    expect(result.baseline).toHaveLength(20);
    expect(result.canary.slice(0, 15).every((v) => v !== null)).toBe(true);
    expect(result.canary.slice(15)).toEqual([null, null, null, null, null]);
    result.canary.forEach((v, i) => v !== null && expect(v).toBeCloseTo(2 * result.baseline[i]!, 6));
  });

  it('fails a canary twice as slow on mann-whitney, naming the shift', async () => {
    const { reading } = await read(latency, contextOf('2', '1'));
    expect(reading.outcome, JSON.stringify(reading)).toBe('fail');
    expect(reading.reason).toMatch(/^the canary is higher: shift \d/);
    expect(reading.value).toBeGreaterThan(50);
    expect(detailOf(reading)).toMatchObject({ classification: 'high', canary: { n: 15 }, baseline: { n: 15 } });
    expect(reading.query).toBe(
      `mann-whitney of the canary against the baseline: Average(AWS/Lambda Duration {FunctionName=${FUNCTION}, Resource=${ALIAS}, ExecutedVersion={{version}}}) over 60 s`,
    );
  });

  it("judges an ALB's target groups, a dimension value for each cohort: the slow one fails, the same one passes", async () => {
    sent.length = 0;
    const slow = await read(albGate(GROUPS.slow), contextOf('42', '41'));
    const groups = sent[0]!.MetricDataQueries!.map((q) => q.MetricStat?.Metric?.Dimensions?.find((d) => d.Name === 'TargetGroup')?.Value);
    expect(groups).toEqual([GROUPS.slow, GROUPS.stable]);
    expect(slow.reading.outcome, JSON.stringify(slow.reading)).toBe('fail');
    expect(detailOf(slow.reading)).toMatchObject({ classification: 'high', canary: { n: 15 }, baseline: { n: 15 } });
    expect(slow.reading.query).toContain(`TargetGroup=canary:${GROUPS.slow}|baseline:${GROUPS.stable}`);
    const same = await read(albGate(GROUPS.same), contextOf('43', '41'));
    expect(same.reading.outcome, JSON.stringify(same.reading)).toBe('pass');
  });

  it('passes a canary that behaves as the stable version', async () => {
    const { reading } = await read(latency, contextOf('3', '1'));
    expect(reading.outcome, JSON.stringify(reading)).toBe('pass');
    expect(detailOf(reading)).toMatchObject({ classification: 'pass', canary: { n: 15 }, baseline: { n: 15 } });
  });

  it('reads nothing from before the stage began: a stage a minute old has one whole period', async () => {
    const [result] = await provider.read([latency], {
      now: T0 + 90_000,
      signal: new AbortController().signal,
      contexts: [contextOf('2', '1')],
    });
    expect(result).toMatchObject({ kind: 'cohorts', canary: [expect.any(Number)], baseline: [expect.any(Number)] });
    expect(judge(latency, result!, { attempt: 1, stage: 0, at: T0 + 90_000, source: 'poll' })).toMatchObject({
      outcome: 'inconclusive',
      reason: 'not enough data: 1 canary and 1 baseline points, 10 needed on each side',
    });
  });

  it('fails a canary erring twice as often on sequential-rate, on requests and errors of each cohort in one call', async () => {
    sent.length = 0;
    const { result, reading } = await read(errors, contextOf('2', '1'));
    expect(sent).toHaveLength(1);
    expect(sent[0]!.MetricDataQueries).toHaveLength(4);
    expect(result.kind).toBe('counts');
    if (result.kind === 'counts') {
      // Settled periods since the stage began (25 min, less the 3 min a period settles): the 20 put and two empty.
      expect(result.canary.requests).toHaveLength(22);
      expect(result.canary.requests.slice(0, 20)).toEqual(Array.from({ length: 20 }, () => CANARY));
      expect(result.baseline.errors.slice(0, 20)).toEqual(Array.from({ length: 20 }, () => STABLE / 100));
      expect(result.percent).toBe(10);
    }
    expect(reading.outcome, JSON.stringify(reading)).toBe('fail');
    expect(reading.reason).toMatch(/^the canary's error rate is higher: \d+\/\d+ against the baseline's \d+\/\d+/);
    expect(reading.value).toBeCloseTo(2, 6);
  });

  it('passes a canary erring as often as the stable version on sequential-rate', async () => {
    const { reading } = await read(errors, contextOf('3', '1'));
    expect(reading.outcome, JSON.stringify(reading)).toBe('pass');
    expect(detailOf(reading)).toMatchObject({ canary: { requests: 20 * CANARY, errors: 20 * (CANARY / 100) }, steps: 22 });
  });

  it('is inconclusive without a stableVersion, naming why, and sends nothing', async () => {
    sent.length = 0;
    for (const g of [latency, errors]) {
      const { reading } = await read(g, contextOf('2', null));
      expect(reading).toMatchObject({
        outcome: 'inconclusive',
        reason: 'the rollout names no stableVersion: a {{version}} dimension cannot find the baseline',
      });
    }
    expect(sent).toHaveLength(0);
  });
});

describe('a rollout on a node, judged on moto by ExecutedVersion', () => {
  const db = databaseForFile('cloudwatch_judged');
  let served: ServedNode;
  /** The stable version "11", a canary twice as slow "12", one that answers as the stable version does "13", under a function of their own. */
  const fn = 'judged-node-api';

  beforeAll(async () => {
    // The node's providers make their clients on first use, with this endpoint and the harness's test credentials.
    process.env.AWS_ENDPOINT_URL_CLOUDWATCH = moto;
    // One-second periods from a little before now to five minutes ahead: each whole period the node reads has its points.
    const from = Math.floor(Date.now() / 1000) - 5;
    const draw = normals(11);
    const data: MetricDatum[] = [];
    const dims = (version: string) => [
      { Name: 'ExecutedVersion', Value: version },
      { Name: 'FunctionName', Value: fn },
      { Name: 'Resource', Value: `${fn}:live` },
    ];
    for (let s = 0; s < 300; s++) {
      const t = new Date((from + s) * 1000);
      const stable = 100 + 10 * draw();
      data.push({ MetricName: 'Duration', Dimensions: dims('11'), Timestamp: t, Value: stable, Unit: 'Milliseconds' });
      data.push({ MetricName: 'Duration', Dimensions: dims('12'), Timestamp: t, Value: 2 * stable, Unit: 'Milliseconds' });
      // Each reading reads the seconds that have passed, whichever they are: a canary that answers as the stable version does passes any of them.
      data.push({ MetricName: 'Duration', Dimensions: dims('13'), Timestamp: t, Value: stable, Unit: 'Milliseconds' });
    }
    for (let i = 0; i < data.length; i += 500) await cloudwatch.send(new PutMetricDataCommand({ Namespace: 'AWS/Lambda', MetricData: data.slice(i, i + 500) }));
    served = await servedNode({ nodeId: 'cloudwatch-judged-node', databaseUrl: db.url, origins: [] });
  }, 60_000);

  afterAll(async () => {
    await served?.close();
  });

  const spec = (version: string, bakeSeconds: number) => ({
    target: { service: fn, version, stableVersion: '11' },
    stages: [
      {
        name: 'canary',
        percent: 10,
        bakeSeconds,
        gates: {
          providers: [
            {
              type: 'cloudwatchMetric',
              name: 'duration',
              region: REGION,
              metric: {
                namespace: 'AWS/Lambda',
                metricName: 'Duration',
                stat: 'Average',
                dimensions: { FunctionName: fn, Resource: `${fn}:live`, ExecutedVersion: '{{version}}' },
              },
              // Until 8 points a side the readings are inconclusive, which the limit allows.
              judge: { kind: 'mann-whitney', direction: 'increase', minSamples: 8 },
              periodSeconds: 1,
              windowSeconds: 60,
              intervalSeconds: 1,
              inconclusiveLimit: 1_000,
            },
          ],
        },
      },
      { name: 'all', percent: 100, bakeSeconds: 0 },
    ],
  });

  it('rolls back a canary twice as slow, naming the judgement', async () => {
    const res = await postRollout(served.url, 'slow', spec('12', 3_600));
    expect(res.status, await res.clone().text()).toBe(201);
    await expect.poll(async () => (await getRollout(served.url, 'slow')).state, { timeout: 60_000 }).toBe('rolled_back');
    const r = await getRollout(served.url, 'slow');
    expect(r.stateReason).toMatch(/^gate duration \(cloudwatchMetric\): 1 failed reading > failureLimit 0; last: the canary is higher: shift \d/);
    expect(r.gates[0]).toMatchObject({ type: 'cloudwatchMetric', judge: 'mann-whitney', comparison: null, threshold: null });
  }, 90_000);

  it('completes a canary that behaves as the stable version', async () => {
    const res = await postRollout(served.url, 'same', spec('13', 12));
    expect(res.status, await res.clone().text()).toBe(201);
    await expect.poll(async () => (await getRollout(served.url, 'same')).state, { timeout: 60_000 }).toBe('completed');
    const readings = (await getRollout(served.url, 'same')).gates[0]!.readings!;
    expect(readings[0]).toMatchObject({ outcome: 'pass' });
    expect(readings.some((x) => x.outcome === 'fail')).toBe(false);
  }, 90_000);
});
