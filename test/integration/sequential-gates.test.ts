/**
 * The sequential-rate gate end to end: a node on PostgreSQL reads a real
 * Prometheus that scrapes an exporter whose request and error counters this
 * test advances at each scrape. The stable version (v1) errs about 1 % of the
 * time; a canary (v2) errs about 4 %: the gate, reading every second, rolls it
 * back on its error counts against the baseline's. A canary whose counts are
 * the baseline's own (v3) completes, every reading with enough data a pass.
 * How often the test fails an equal canary when read this often is the unit
 * suite's simulation; here the wiring is the question.
 */
import { Counter } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatedSpec, getRollout, postRollout, servedNode, type ServedNode } from '../support/gated-node.js';
import { databaseForFile } from '../support/database.js';
import { startExporter, startPrometheus, waitForSeries, type Exporter, type PrometheusServer } from '../support/prometheus.js';

const db = databaseForFile('sequential_gates');
let prometheus: PrometheusServer;
let exporter: Exporter;
let served: ServedNode;

/** A seeded uniform draw (mulberry32): the same counts on every run. */
function uniforms(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Requests served between two scrapes: the stable version 90 %, a canary the stage's 10 %. */
const STABLE = 900;
const CANARY = 100;

beforeAll(async () => {
  exporter = await startExporter();
  const draw = uniforms(51);
  const errorsOf = (n: number, rate: number) => Array.from({ length: n }, draw).filter((u) => u < rate).length;
  const requests = new Counter({ name: 'app_requests_total', help: 'requests served', labelNames: ['version'], registers: [exporter.registry] });
  new Counter({
    name: 'app_errors_total',
    help: 'requests that failed',
    labelNames: ['version'],
    registers: [exporter.registry],
    // Advanced at each scrape: v3 errs as the stable version does, exactly in proportion (its twin); v2 a 3 % more.
    collect() {
      const twin = errorsOf(CANARY, 0.01);
      requests.inc({ version: 'v1' }, STABLE);
      requests.inc({ version: 'v2' }, CANARY);
      requests.inc({ version: 'v3' }, CANARY);
      requests.inc({ version: 'v4' }, 3 * STABLE);
      this.inc({ version: 'v1' }, (STABLE / CANARY) * twin);
      this.inc({ version: 'v3' }, twin);
      this.inc({ version: 'v2' }, Math.min(CANARY, errorsOf(CANARY, 0.01) + errorsOf(CANARY, 0.03)));
      this.inc({ version: 'v4' }, 0);
    },
  });
  prometheus = await startPrometheus({ targets: [exporter.target], scrapeIntervalMs: 200 });
  await waitForSeries(prometheus.url, 'app_errors_total', (s) => s.length === 4);
  served = await servedNode({ nodeId: 'sequential-node', databaseUrl: db.url, origins: [prometheus.url] });
}, 90_000);

afterAll(async () => {
  await served?.close();
  await prometheus?.stop();
  await exporter?.close();
});

const gate = () => ({
  type: 'prometheus',
  name: 'errors',
  address: prometheus.url,
  query: 'sum(increase(app_errors_total{version="{{version}}"}[{{step}}]))',
  requestsQuery: 'sum(increase(app_requests_total{version="{{version}}"}[{{step}}]))',
  judge: { kind: 'sequential-rate', alpha: 0.01, minSamples: 1_000 },
  intervalSeconds: 1,
  stepSeconds: 1,
  // Scraped every 200 ms: a step is whole a second after it ends.
  settleSeconds: 1,
  // Until both cohorts have served minSamples the readings are inconclusive, which this allows.
  inconclusiveLimit: 1_000,
});

const spec = gatedSpec;
const post = (id: string, body: unknown) => postRollout(served.url, id, body);
const get = (id: string) => getRollout(served.url, id);
/** Polls until the rollout is in `state`; a timeout says what its gate last read. */
const reach = (id: string, state: string) =>
  expect
    .poll(
      async () => {
        const r = await get(id);
        return r.state === state ? state : `${r.state}: ${JSON.stringify(r.gates[0]?.readings?.slice(0, 2) ?? null)}`;
      },
      { timeout: 90_000 },
    )
    .toBe(state);

describe('a gate that tests the canary error rate against the baseline at every reading', () => {
  it('refuses a sequential-rate gate without its requests query, with a window, or counting other than per step', async () => {
    const { requestsQuery: _, ...noRequests } = gate();
    const missing = await post('bad', spec('v2', noRequests, 0));
    expect(missing.status).toBe(400);
    expect(await missing.text()).toContain("a sequential-rate gate needs requestsQuery (each cohort's requests per step) beside query (its errors)");
    const windowed = await post('bad', spec('v2', { ...gate(), windowSeconds: 60 }, 0));
    expect(windowed.status).toBe(400);
    expect(await windowed.text()).toContain('a sequential-rate gate reads every step since the stage began');
    const unstepped = await post('bad', spec('v2', { ...gate(), query: 'sum(increase(app_errors_total{version="{{version}}"}[5m]))' }, 0));
    expect(unstepped.status).toBe(400);
    expect(await unstepped.text()).toContain('a sequential-rate query counts each step: write its range as {{step}}');
    expect((await fetch(`${served.url}/rollouts/bad`)).status).toBe(404);
  });

  it('rolls back a canary that errs four times as often, naming the counts it decided on', async () => {
    expect((await post('errs', spec('v2', gate(), 3_600))).status).toBe(201);
    await reach('errs', 'rolled_back');
    const r = await get('errs');
    expect(r.stateReason).toMatch(
      /^gate errors \(prometheus\): 1 failed reading > failureLimit 0; last: the canary's error rate is higher: \d+\/\d+ against the baseline's \d+\/\d+/,
    );
    const failed = r.gates[0]!.readings!.find((x) => x.outcome === 'fail')!;
    const detail = JSON.parse(failed.answer) as {
      canary: { requests: number; errors: number };
      baseline: { requests: number; errors: number };
      evidence: number;
    };
    expect(detail.canary.requests).toBeGreaterThanOrEqual(1_000);
    expect(detail.baseline.requests).toBeGreaterThanOrEqual(1_000);
    expect(detail.evidence).toBeGreaterThanOrEqual(100);
    expect(failed.value).toBeGreaterThan(1);
    expect(failed.query).toBe(`sequential-rate of the canary against the baseline: errors ${gate().query}; requests ${gate().requestsQuery}`);
  }, 150_000);

  it('keeps a canary served far more than its share (sample-ratio mismatch) from passing, and pauses naming it', async () => {
    // v4 gets 75 % of the requests where the stage means 10 %: the actuator is not doing what it says.
    expect((await post('skewed', spec('v4', { ...gate(), inconclusiveLimit: 3 }, 3_600))).status).toBe(201);
    await reach('skewed', 'paused');
    const r = await get('skewed');
    expect(r.stateReason).toMatch(
      /^gate errors \(prometheus\): 4 inconclusive readings > inconclusiveLimit 3; last: sample-ratio mismatch: the canary served 75 % of the requests where 10 % was meant/,
    );
  }, 150_000);

  it("completes a canary whose counts are the baseline's, every reading with enough data a pass", async () => {
    expect((await post('twin', spec('v3', gate(), 10))).status).toBe(201);
    await reach('twin', 'completed');
    const readings = (await get('twin')).gates[0]!.readings!;
    // The rate ratio, near 1 but not exactly: increase() extrapolates and each
    // step's count is rounded to a whole number, about ±0.5 on some 5 canary
    // errors a step at the first reading with enough data.
    expect(readings[0]!.outcome).toBe('pass');
    expect(readings[0]!.value).toBeGreaterThan(0.8);
    expect(readings[0]!.value).toBeLessThan(1.25);
    expect(readings.some((x) => x.outcome === 'fail')).toBe(false);
    expect(readings.filter((x) => x.outcome === 'inconclusive').every((x) => x.reason!.startsWith('not enough data'))).toBe(true);
  }, 120_000);
});
