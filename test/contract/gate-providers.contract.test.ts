/**
 * The gate provider port, one suite for every provider: the same cases —
 * pass, fail, error, timeout, empty, NaN — give the same outcomes, judged by
 * the one judge every reading goes through. Each provider talks to its real
 * counterpart over the wire: Prometheus 2.42 (Debian's package) scraping an
 * exporter this file controls; CloudWatch through the unmodified SDK client,
 * served by the tests' CloudWatch stand-in (no CloudWatch emulator exists).
 *
 * Two cases CloudWatch cannot produce, and the suite says so rather than
 * skipping them: an alarm has a state, never a number (so no NaN), and
 * GetMetricData carries no NaN either (a datapoint whose math divides by zero
 * is dropped, which is the empty case).
 */
import { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CloudWatchAlarmProvider, CloudWatchMetricProvider, cloudWatchClients } from '../../shared/adapters/cloudwatch/providers.js';
import { PrometheusProvider } from '../../shared/adapters/prometheus/provider.js';
import { OutboundHttp } from '../../shared/adapters/http/outbound.js';
import { OutboundPolicy } from '../../shared/outbound/policy.js';
import type { GateContext, GateProvider } from '../../shared/rollout/gate-reader.js';
import { WebhookProvider } from '../../shared/adapters/http/webhook.js';
import { createServer as createHttpServer } from 'node:http';
import { providerGateSchema, type ProviderGate } from '../../shared/rollout/gate-spec.js';
import { judge, type GateOutcome } from '../../shared/rollout/gates.js';
import { CloudWatchStandIn } from '../support/cloudwatch/server.js';
import { startExporter, startPrometheus, waitForSeries, type Exporter, type PrometheusServer } from '../support/prometheus.js';

const CASES = ['pass', 'fail', 'error', 'timeout', 'empty', 'nan'] as const;
type Case = (typeof CASES)[number];

/** What each case must come to, whoever provides it. */
const EXPECTED: Record<Case, { outcome: GateOutcome; reason: RegExp | null }> = {
  pass: { outcome: 'pass', reason: null },
  fail: { outcome: 'fail', reason: /does not meet|in ALARM|hook refused/ },
  error: { outcome: 'inconclusive', reason: /./ },
  timeout: { outcome: 'inconclusive', reason: /^timed out after 1 s$|: timed out after 1 s$/ },
  empty: { outcome: 'inconclusive', reason: /^empty result|not found$/ },
  nan: { outcome: 'inconclusive', reason: /^the value is NaN/ },
};

interface Subject {
  readonly name: string;
  readonly provider: GateProvider;
  /** The gate for a case, with whatever its counterpart must hold arranged; null: the provider cannot produce the case. */
  arrange(c: Case): Promise<ProviderGate | null>;
  /** Why a case cannot be produced. */
  readonly cannot?: Partial<Record<Case, string>>;
}

/** A TCP server that accepts and never answers: what a hung endpoint looks like. */
async function silentServer(): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => void sockets.add(socket));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        // Drop the held connections, or close waits for them.
        for (const s of sockets) s.destroy();
      }),
  };
}

const gate = (g: Record<string, unknown>) => providerGateSchema.parse({ name: 'g', timeoutSeconds: 1, ...g });
const gateOf = <T extends ProviderGate['type']>(type: T, g: Record<string, unknown>) => gate({ type, ...g }) as Extract<ProviderGate, { type: T }>;

let prometheus: PrometheusServer;
let exporter: Exporter;
let hung: Awaited<ReturnType<typeof silentServer>>;
let cloudwatch: CloudWatchStandIn;
/** The operator's list: the test Prometheus and the hung endpoint, by address (loopback is reached only so). */
let outbound: OutboundHttp;
let prometheusProvider: PrometheusProvider;
/** A hook receiver: answers each request with the status its path names (/200, /409, /503). */
let receiver: Server;
let receiverUrl: string;
let webhookProvider: WebhookProvider;

beforeAll(async () => {
  exporter = await startExporter();
  // Queried through last_over_time: a scrape that times out on a loaded host marks the series stale, and an
  // instant query would then find nothing. What is tested is how answers are read, not scrape timing.
  const value = exporter.gauge('gate_value', 'a value per case', ['case']);
  value.set({ case: 'pass' }, 0.01);
  value.set({ case: 'fail' }, 0.5);
  value.set({ case: 'nan' }, Number.NaN);
  prometheus = await startPrometheus({ targets: [exporter.target], scrapeIntervalMs: 200 });
  await waitForSeries(prometheus.url, 'gate_value', (s) => s.length === 3);
  hung = await silentServer();
  cloudwatch = await new CloudWatchStandIn({ region: 'us-east-1' }).start();
  receiver = createHttpServer((req, res) => {
    res.writeHead(Number(req.url!.slice(1)) || 500, { 'content-type': 'application/json' });
    res.end('{}');
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}`;
  outbound = new OutboundHttp(new OutboundPolicy({ origins: [prometheus.url, hung.url, receiverUrl] }));
  prometheusProvider = new PrometheusProvider({ outbound });
  webhookProvider = new WebhookProvider({ outbound });
}, 60_000);

afterAll(async () => {
  await prometheus?.stop();
  await exporter?.close();
  await hung?.close();
  await cloudwatch?.stop();
  await new Promise((r) => receiver?.close(r));
});

const clients = cloudWatchClients(
  (region) => new CloudWatchClient({ region: region ?? 'us-east-1', endpoint: cloudwatch.url, credentials: { accessKeyId: 'test', secretAccessKey: 'test' } }),
);
const denied = { type: 'AccessDenied', message: 'User is not authorized to perform: cloudwatch:GetMetricData', status: 403 };
const metric = { namespace: 'Checkout', metricName: 'Errors', stat: 'Sum' };

const subjects: Subject[] = [
  {
    name: 'prometheus',
    get provider() {
      return prometheusProvider;
    },
    arrange: (c) => {
      const at = (query: string, address = prometheus.url) => Promise.resolve(gate({ type: 'prometheus', address, query, comparison: '<', threshold: 0.05 }));
      switch (c) {
        case 'pass':
        case 'fail':
        case 'nan':
          return at(`last_over_time(gate_value{case="${c}"}[1m])`);
        case 'empty':
          return at('gate_value{case="none"}');
        case 'error':
          return at('gate_value{case=');
        case 'timeout':
          return at('gate_value', hung.url);
      }
    },
  },
  {
    name: 'cloudwatchAlarm',
    provider: new CloudWatchAlarmProvider(clients),
    cannot: { nan: 'an alarm has a state, never a number' },
    arrange: (c) => {
      const alarms = (...names: string[]) => Promise.resolve(gate({ type: 'cloudwatchAlarm', alarms: names }));
      cloudwatch.setAlarm('ok-1', 'OK');
      cloudwatch.setAlarm('ok-2', 'OK');
      cloudwatch.setAlarm('firing', 'ALARM');
      switch (c) {
        case 'pass':
          return alarms('ok-1', 'ok-2');
        case 'fail':
          return alarms('ok-1', 'firing');
        case 'empty':
          return alarms('ok-1', 'no-such-alarm');
        case 'error':
          cloudwatch.failNext(1, { ...denied, message: 'User is not authorized to perform: cloudwatch:DescribeAlarms' });
          return alarms('ok-1');
        case 'timeout':
          cloudwatch.delayNext(1, 5_000);
          return alarms('ok-1');
        case 'nan':
          return Promise.resolve(null);
      }
    },
  },
  {
    name: 'cloudwatchMetric',
    provider: new CloudWatchMetricProvider(clients),
    cannot: { nan: 'GetMetricData carries no NaN: a datapoint whose math divides by zero is dropped (the empty case)' },
    arrange: (c) => {
      // One datapoint in the last whole minute, the window every read covers.
      const inLastPeriod = new Date(Math.floor(Date.now() / 60_000) * 60_000 - 30_000);
      const of = (metricName: string, value?: number, expression = false) => {
        if (value !== undefined) cloudwatch.putDatapoint({ namespace: 'Checkout', metricName }, inLastPeriod, value);
        return Promise.resolve(
          gate(
            expression
              ? { type: 'cloudwatchMetric', expression: 'errors / 100', metrics: { errors: { ...metric, metricName } }, comparison: '<', threshold: 0.05 }
              : { type: 'cloudwatchMetric', metric: { ...metric, metricName }, comparison: '<', threshold: 0.05 },
          ),
        );
      };
      switch (c) {
        case 'pass':
          return of('PassErrors', 1, true);
        case 'fail':
          return of('FailErrors', 0.5);
        case 'empty':
          return of('Quiet');
        case 'error':
          cloudwatch.failNext(1, denied);
          return of('PassErrors');
        case 'timeout':
          cloudwatch.delayNext(1, 5_000);
          return of('PassErrors');
        case 'nan':
          return Promise.resolve(null);
      }
    },
  },
  {
    name: 'webhook',
    get provider() {
      return webhookProvider;
    },
    cannot: { empty: 'a hook answers with a status, never with nothing to judge', nan: 'a hook answers with a status, never a number' },
    arrange: (c) => {
      const hook = (url: string) => Promise.resolve(gate({ type: 'webhook', hook: 'confirm-promotion', url }));
      switch (c) {
        case 'pass':
          return hook(`${receiverUrl}/200`);
        case 'fail':
          return hook(`${receiverUrl}/409`);
        case 'error':
          return hook(`${receiverUrl}/503`);
        case 'timeout':
          return hook(`${hung.url}/hook`);
        case 'empty':
        case 'nan':
          return Promise.resolve(null);
      }
    },
  },
];

const context: GateContext = {
  rolloutId: 'r1',
  attempt: 1,
  stage: { index: 0, name: 'canary', percent: 10 },
  epoch: 3,
  service: 'checkout',
  newVersion: 'v2',
  stableVersion: 'v1',
  labels: {},
};

describe.each(subjects)('gate provider $name', (subject) => {
  it.each(CASES)('%s', async (c) => {
    const g = await subject.arrange(c);
    if (g === null) {
      // Not a skip: the suite states which cases the provider cannot produce, and why.
      expect(subject.cannot?.[c]).toMatch(/./);
      return;
    }
    const [result] = await subject.provider.read([g], { now: Date.now(), signal: new AbortController().signal, contexts: [context] });
    const reading = judge(g, result!, { attempt: 1, stage: 0, at: Date.now(), source: 'poll' });
    expect(reading.outcome, JSON.stringify(reading)).toBe(EXPECTED[c].outcome);
    if (EXPECTED[c].reason) expect(reading.reason).toMatch(EXPECTED[c].reason);
    else expect(reading.reason).toBeNull();
    if (c === 'pass' || c === 'fail') expect(reading.value ?? (g.type === 'cloudwatchAlarm' ? 'alarms' : null)).not.toBeNull();
    expect(reading.query.length).toBeGreaterThan(0);
  });
});

describe('what the providers ask, and how often', () => {
  it('prometheus: a distinct query once per read, whatever the number of gates asking it; several series are inconclusive', async () => {
    const g1 = gateOf('prometheus', {
      name: 'a',
      address: prometheus.url,
      query: 'last_over_time(gate_value{case="pass"}[1m])',
      comparison: '<',
      threshold: 0.05,
    });
    const g2 = { ...g1, name: 'b' };
    const all = gateOf('prometheus', { name: 'c', address: prometheus.url, query: 'last_over_time(gate_value[1m])', comparison: '<', threshold: 0.05 });
    const seen: string[] = [];
    const counting = new PrometheusProvider({ outbound: { policy: outbound.policy, request: (req) => (seen.push(req.body ?? ''), outbound.request(req)) } });
    const results = await counting.read([g1, g2, all], { signal: new AbortController().signal });
    expect(seen).toHaveLength(2);
    expect(results.map((r) => r.kind)).toEqual(['number', 'number', 'several']);
  });

  it('cloudwatchAlarm: every alarm of a tick in one DescribeAlarms (up to 100), composite alarms included', async () => {
    cloudwatch.calls.length = 0;
    cloudwatch.setAlarm('composite', 'ALARM', { type: 'CompositeAlarm' });
    const gates = Array.from({ length: 30 }, (_, i) => gateOf('cloudwatchAlarm', { name: `g${i}`, alarms: [`ok-1`, `alarm-${i}`, 'composite'] }));
    for (let i = 0; i < 30; i++) cloudwatch.setAlarm(`alarm-${i}`, 'OK');
    const results = await new CloudWatchAlarmProvider(clients).read(gates, { signal: new AbortController().signal });
    expect(cloudwatch.calls.filter((c) => c.operation === 'DescribeAlarms')).toHaveLength(1);
    expect(results.every((r) => r.kind === 'alarms' && r.states.composite === 'ALARM')).toBe(true);
  });

  it('cloudwatchMetric: every gate of a region and period in one GetMetricData, each answered by its own query', async () => {
    cloudwatch.calls.length = 0;
    const inLastPeriod = new Date(Math.floor(Date.now() / 60_000) * 60_000 - 30_000);
    for (let i = 0; i < 20; i++) cloudwatch.putDatapoint({ namespace: 'Batch', metricName: `M${i}` }, inLastPeriod, i);
    const gates = Array.from({ length: 20 }, (_, i) =>
      i % 2
        ? gateOf('cloudwatchMetric', { name: `g${i}`, metric: { namespace: 'Batch', metricName: `M${i}`, stat: 'Sum' }, comparison: '<', threshold: 10 })
        : gateOf('cloudwatchMetric', {
            name: `g${i}`,
            expression: 'm * 2',
            metrics: { m: { namespace: 'Batch', metricName: `M${i}`, stat: 'Sum' } },
            comparison: '<',
            threshold: 10,
          }),
    );
    const results = await new CloudWatchMetricProvider(clients).read(gates, { now: Date.now(), signal: new AbortController().signal });
    expect(cloudwatch.calls.filter((c) => c.operation === 'GetMetricData')).toHaveLength(1);
    expect(results.map((r) => (r.kind === 'number' ? r.value : r.kind))).toEqual(Array.from({ length: 20 }, (_, i) => (i % 2 ? i : i * 2)));
  });
});
