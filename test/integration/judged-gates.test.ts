/**
 * Judged gates end to end: a node on PostgreSQL reads a real Prometheus that
 * scrapes an exporter whose latency gauge this test draws at each scrape. The
 * stable version (v1) answers in about 100 ms; a canary twice as slow (v2) is
 * still well inside the fleet's normal bound (500 ms), so a threshold gate
 * set for that bound promotes it, while a mann-whitney gate judging it
 * against the baseline rolls it back. A canary that behaves as the baseline
 * (v3) completes under the same judged gate.
 */
import { Gauge } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RolloutClient } from '../../shared/client/client.js';
import { rollout } from '../support/cli.js';
import { gatedSpec, getRollout, postRollout, servedNode, type ServedNode } from '../support/gated-node.js';
import { normals } from '../support/normals.js';
import { databaseForFile } from '../support/database.js';
import { startExporter, startPrometheus, waitForSeries, type Exporter, type PrometheusServer } from '../support/prometheus.js';

const db = databaseForFile('judged_gates');
let prometheus: PrometheusServer;
let exporter: Exporter;
let served: ServedNode;

beforeAll(async () => {
  exporter = await startExporter();
  const draw = normals(47);
  // Drawn at each scrape: the stable version's latency, the same for a canary that behaves as it, twice it for a slow one.
  new Gauge({
    name: 'app_latency_seconds',
    help: 'latency of the last request',
    labelNames: ['version'],
    registers: [exporter.registry],
    collect() {
      const stable = 0.1 + 0.01 * draw();
      this.set({ version: 'v1' }, stable);
      this.set({ version: 'v2' }, 2 * stable);
      this.set({ version: 'v3' }, stable);
    },
  });
  prometheus = await startPrometheus({ targets: [exporter.target], scrapeIntervalMs: 200 });
  await waitForSeries(prometheus.url, 'app_latency_seconds', (s) => s.length === 3);
  served = await servedNode({ nodeId: 'judged-node', databaseUrl: db.url, origins: [prometheus.url] });
}, 90_000);

afterAll(async () => {
  await served?.close();
  await prometheus?.stop();
  await exporter?.close();
});

const latency = { type: 'prometheus', name: 'latency', query: 'app_latency_seconds{version="{{version}}"}', intervalSeconds: 1 } as const;
/** Judged on a minute of one-second points; until 8 a side the readings are inconclusive, which the limit allows. */
const judged = () => ({
  ...latency,
  address: prometheus.url,
  judge: { kind: 'mann-whitney', direction: 'increase', minSamples: 8 },
  windowSeconds: 60,
  stepSeconds: 1,
  inconclusiveLimit: 1_000,
});
const threshold = () => ({ ...latency, query: 'app_latency_seconds{version="v2"}', address: prometheus.url, comparison: '<', threshold: 0.5 });

const spec = gatedSpec;

async function create(id: string, body: unknown): Promise<void> {
  const res = await postRollout(served.url, id, body);
  expect(res.status, await res.clone().text()).toBe(201);
}
const get = (id: string) => getRollout(served.url, id);

describe('a gate that judges the canary against the baseline', () => {
  it('refuses a judged query that does not name its cohort, and a judge beside a threshold', async () => {
    const bad = async (gate: unknown) => {
      const res = await postRollout(served.url, 'bad', spec('v2', gate, 0));
      return { status: res.status, body: await res.text() };
    };
    const unnamed = await bad({ ...judged(), query: 'app_latency_seconds{version="v2"}' });
    expect(unnamed.status).toBe(400);
    expect(unnamed.body).toContain('a judged query names its cohort with {{cohort}} or {{version}}');
    const both = await bad({ ...judged(), comparison: '<', threshold: 1 });
    expect(both.status).toBe(400);
    expect(both.body).toContain('a judged gate compares the canary with the baseline, not with a comparison');
    expect((await fetch(`${served.url}/rollouts/bad`)).status).toBe(404);
  });

  it('passes a canary twice as slow on a threshold set for the fleet, and rolls it back on mann-whitney', async () => {
    await create('slow-threshold', spec('v2', threshold(), 0));
    await expect.poll(async () => (await get('slow-threshold')).state, { timeout: 60_000 }).toBe('completed');

    await create('slow-judged', spec('v2', judged(), 3_600));
    await expect.poll(async () => (await get('slow-judged')).state, { timeout: 90_000 }).toBe('rolled_back');
    const r = await get('slow-judged');
    expect(r.stateReason).toMatch(/^gate latency \(prometheus\): 1 failed reading > failureLimit 0; last: the canary is higher: shift 0\.\d+/);
    const failed = r.gates[0]!.readings!.find((x) => x.outcome === 'fail')!;
    // The reading keeps what the judgement stands on: each side's size, the shift and its interval.
    const detail = JSON.parse(failed.answer) as { canary: { n: number }; baseline: { n: number }; ci: [number, number]; classification: string };
    expect(detail.classification).toBe('high');
    expect(detail.canary.n).toBeGreaterThanOrEqual(8);
    expect(detail.baseline.n).toBeGreaterThanOrEqual(8);
    expect(detail.ci[0]).toBeGreaterThan(0.05);
    expect(failed.value).toBeGreaterThan(0.05);
    expect(failed.query).toBe('mann-whitney of the canary against the baseline: app_latency_seconds{version="{{version}}"}');
    // Beside the readings, what the newest was judged on: both cohorts' points, the canary's about twice the baseline's.
    const series = r.gates[0]!.series!;
    expect(series.kind).toBe('values');
    if (series.kind !== 'values') return;
    const mean = (xs: readonly (number | null)[]) => xs.filter((x): x is number => x !== null).reduce((a, b, _, all) => a + b / all.length, 0);
    expect(series.canary.filter((x) => x !== null).length).toBeGreaterThanOrEqual(8);
    expect(mean(series.canary) / mean(series.baseline)).toBeGreaterThan(1.5);
    expect(r.gates[0]!.readings!.every((x) => x.series === undefined)).toBe(true);

    // Each reading's series is kept, so a backtest judges them again: a relative gate allowing 2.5× would have missed this
    // canary, one allowing 1.5× would have caught it, as mann-whitney did.
    const client = new RolloutClient({ url: served.url });
    const kept = await client.readings('slow-judged', { gate: 'latency', series: true });
    expect(kept.readings.filter((x) => x.outcome !== 'inconclusive').every((x) => x.series?.kind === 'values')).toBe(true);
    const proposed = (tolerance: number) => {
      const path = join(mkdtempSync(join(tmpdir(), 'backtest-')), 'gate.json');
      writeFileSync(path, JSON.stringify({ ...judged(), judge: { kind: 'relative', measure: 'ratio', tolerance, minSamples: 8 } }));
      return path;
    };
    const verdictOf = async (tolerance: number) => {
      const out = await rollout(['gates', 'backtest', '--gate', proposed(tolerance), '--rollouts', 'slow-judged', '--url', served.url, '--json']);
      expect(out.code, out.err).toBe(0);
      return (JSON.parse(out.out.trim().split('\n')[0]!) as { verdict: string }).verdict;
    };
    expect(await verdictOf(1.5)).toBe('missed');
    expect(await verdictOf(0.5)).toBe('caught');
  }, 200_000);

  it("shows a judged gate's verdict and interval: on GET /rollouts/{id} and the node's /metrics (rollout_gate_judgement, rollout_gate_interval)", async () => {
    await create('shown', spec('v3', judged(), 3_600));
    await expect.poll(async () => (await get('shown')).gates[0]?.last?.outcome, { timeout: 90_000 }).toBe('pass');
    const r = await get('shown');
    expect(r.gates[0]).toMatchObject({ judge: 'mann-whitney', comparison: null, threshold: null });
    const metrics = await (await fetch(`${served.url}/metrics`)).text();
    // The node adds its own labels (node_id) after the metric's.
    const series = (name: string, labels: string) => new RegExp(`^${name}\\{${labels}[^}]*\\} (\\S+)$`, 'm').exec(metrics)?.[1];
    const verdict = (v: string) => series('rollout_gate_judgement', `rollout="shown",gate="latency",judge="mann-whitney",verdict="${v}"`);
    // The metrics are read at the scrape, the rollout just before: a newer reading may have come between, so each is one of the outcomes.
    expect([verdict('pass'), verdict('fail'), verdict('inconclusive')].map(Number).sort()).toEqual([0, 0, 1]);
    const low = Number(series('rollout_gate_interval', 'rollout="shown",gate="latency",bound="low"'));
    const high = Number(series('rollout_gate_interval', 'rollout="shown",gate="latency",bound="high"'));
    expect(Number.isFinite(low) && Number.isFinite(high)).toBe(true);
    expect(low).toBeLessThanOrEqual(high);
    // A canary that behaves as the baseline: its shift's interval holds 0.
    expect(low).toBeLessThanOrEqual(0);
    expect(high).toBeGreaterThanOrEqual(0);
    const abort = await fetch(`${served.url}/rollouts/shown/abort`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(abort.status).toBe(200);
  }, 120_000);

  it('reads a gate on demand (POST /rollouts/{id}/gates/{gate}/test, RolloutClient.testGate): judged now, stored and acted on never', async () => {
    // The promoter's own first reading is a day away: every reading here is the test's.
    await create('tested', spec('v2', { ...judged(), initialDelaySeconds: 86_400 }, 3_600));
    const client = new RolloutClient({ url: served.url });
    await expect.poll(async () => (await client.getRollout('tested')).stages[0]?.phase, { timeout: 30_000 }).toBe('active');
    const post = (path: string) => fetch(`${served.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    // Until 8 points a side have been scraped since the stage began, the judgement is short of data.
    await expect.poll(async () => (await client.testGate('tested', 'latency')).outcome, { timeout: 60_000, interval: 1_000 }).toBe('fail');
    const res = await post('/rollouts/tested/gates/latency/test?stage=0');
    expect(res.status).toBe(200);
    const body = (await res.json()) as { rolloutId: string; stage: number; stored: boolean; reading: { outcome: string; reason: string; source: string } };
    expect(body).toMatchObject({ rolloutId: 'tested', stage: 0, stored: false, reading: { outcome: 'fail', source: 'poll' } });
    expect(body.reading.reason).toMatch(/^the canary is higher: shift 0\.\d+/);
    // Nothing counted, nothing acted on.
    const r = await get('tested');
    expect(r.state).toBe('running');
    expect(r.gates[0]).toMatchObject({ status: 'no-data', counts: { readings: 0, failures: 0, inconclusive: 0, passStreak: 0 }, last: null });
    expect(r.gates[0]!.readings).toEqual([]);
    // A gate the stage does not read, and a stage the rollout does not have, are named.
    const missing = await post('/rollouts/tested/gates/errors/test');
    expect(missing.status).toBe(404);
    expect(await missing.text()).toContain('rollout tested has no gate errors in stage 0 (canary); its gates there: latency');
    const noStage = await post('/rollouts/tested/gates/latency/test?stage=7');
    expect(noStage.status).toBe(404);
    expect(await noStage.text()).toContain('rollout tested has no stage 7 (it has 2)');
    await client.command('tested', 'abort');
    // An ended rollout has no active stage: name one.
    const ended = await post('/rollouts/tested/gates/latency/test');
    expect(ended.status).toBe(409);
    expect(await ended.text()).toContain('has no active stage');
  }, 120_000);

  it('backtests a proposed gate over the stored readings (rollout gates backtest): a tighter threshold stops a good rollout, the one it ran with lets it through', async () => {
    await create('kept', spec('v3', { ...threshold(), query: 'app_latency_seconds{version="v3"}' }, 2));
    await expect.poll(async () => (await get('kept')).state, { timeout: 60_000 }).toBe('completed');
    const client = new RolloutClient({ url: served.url });
    const { readings } = await client.readings('kept', { gate: 'latency' });
    expect(readings.length).toBeGreaterThan(0);
    expect(readings.every((r) => r.gate === 'latency' && r.outcome === 'pass' && r.value! < 0.5)).toBe(true);
    const proposed = (t: number) => {
      const path = join(mkdtempSync(join(tmpdir(), 'backtest-')), 'gate.json');
      writeFileSync(path, JSON.stringify({ ...threshold(), threshold: t }));
      return path;
    };
    // At 0.05 every reading of a ~100 ms canary fails: the first one would have rolled the stage back.
    const tight = await rollout(['gates', 'backtest', '--gate', proposed(0.05), '--rollouts', 'kept', '--url', served.url, '--json']);
    expect(tight.code, tight.err).toBe(0);
    const [row, summary] = tight.out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(row).toMatchObject({ rollout: 'kept', outcome: 'completed', verdict: 'falseAlarm', replayed: { kind: 'stop', action: 'rollback', stage: 0 } });
    expect(summary).toEqual({ summary: { caught: 0, falseAlarm: 1, missed: 0, agreed: 0, unknown: 0 } });
    // The bound it ran with agrees with what happened, in words.
    const same = await rollout(['gates', 'backtest', '--gate', proposed(0.5), '--rollouts', 'kept', '--url', served.url]);
    expect(same.code, same.err).toBe(0);
    expect(same.out).toContain('kept  completed  agreed');
    expect(same.out).toContain('1 rollouts: 0 caught, 0 false alarms, 0 missed, 1 agreed, 0 unknown');
  }, 150_000);

  it('completes a canary that behaves as the baseline, on readings that passed with enough data', async () => {
    await create('same', spec('v3', judged(), 12));
    await expect.poll(async () => (await get('same')).state, { timeout: 90_000 }).toBe('completed');
    const readings = (await get('same')).gates[0]!.readings!;
    expect(readings[0]).toMatchObject({ outcome: 'pass', value: 0 });
    expect(readings.some((x) => x.outcome === 'fail')).toBe(false);
    expect(readings.filter((x) => x.outcome === 'inconclusive').every((x) => x.reason!.startsWith('not enough data'))).toBe(true);
  }, 120_000);
});
