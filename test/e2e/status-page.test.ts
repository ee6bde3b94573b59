import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { chromium, type Browser, type Locator } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GateReading, ReadingToStore } from '../../shared/rollout/gates.js';
import { assign, type RolloutTraffic } from '../../shared/rollout/assignment.js';
import { Demo, fleetOf } from '../../tools/demo/demo.js';
import { serveApi } from '../../shared/runtimes/node/http.js';
import { nodeMetrics } from '../../shared/runtimes/node/metrics.js';
import { nodeApi } from '../../shared/runtimes/node/node-api.js';
import { ControlPlaneNode } from '../../shared/runtimes/node/node.js';
import { freePort } from '../../infra/local/processes.js';
import { startSplitNginx, type SplitNginx } from '../support/split-nginx.js';
import { LocalWorkerPool } from '../../shared/runtimes/node/worker-pool.js';

/** Budgets for a hang, not for speed: the page polls every second, and a busy 2-core machine runs it all three times slower. */
const UI_WAIT_MS = 60_000;
// Each test's own budget, 300_000 ms, is written at its end as a literal, for the same reason.

/**
 * The status page in a real browser (Debian's Chromium through
 * playwright-core): what a person sees of the leader, the nodes, a rollout's
 * stages and gate readings, what was applied to its targets (two real
 * nginx), the demo fleet's answers, a run's items and failures, finished
 * rollouts with their history and percent in force over time, that what a
 * user wrote is shown as text, and that it follows changes.
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const shots = resolve(import.meta.dirname, '../../test-results');

/**
 * A picture of one part of the page, for people (not an assertion). The page redraws every second by
 * replacing its sections, so on a slow machine the element can be replaced while it is being taken:
 * the locator finds the new one, and the picture is taken again.
 */
async function shot(part: Locator, name: string): Promise<void> {
  mkdirSync(shots, { recursive: true });
  for (let tries = 1; ; tries++) {
    try {
      await part.screenshot({ path: resolve(shots, name) });
      return;
    } catch (err) {
      if (tries >= 10 || !/not attached|not visible|not stable/i.test(String(err))) throw err;
    }
  }
}

let node: ControlPlaneNode;
let pool: LocalWorkerPool;
let server: Awaited<ReturnType<typeof serveApi>>;
let browser: Browser;
let web: SplitNginx;
let edge: SplitNginx;

beforeAll(async () => {
  const port = await freePort();
  [web, edge] = await Promise.all([startSplitNginx(), startSplitNginx()]);
  node = await ControlPlaneNode.open({
    nodeId: 'page-node',
    port,
    store: { kind: 'pglite', dataDir: null },
    elector: 'static',
    scanIntervalSeconds: 1,
    outbound: { origins: ['http://prometheus.invalid:9090'] },
    targets: { web: web.target, edge: edge.target },
  });
  server = await serveApi(nodeApi(node, nodeMetrics(node)), { port });
  await node.start();
  pool = new LocalWorkerPool(node, { size: 3, itemMs: 5 });
  pool.start();
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await pool?.close();
  await server?.close();
  await node?.stop();
  await Promise.all([web?.stop(), edge?.stop()]);
});

async function post(path: string, body: unknown, actor?: string) {
  const res = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(actor ? { 'x-rollout-actor': actor } : {}) },
    body: JSON.stringify(body),
  });
  expect(res.status, await res.clone().text()).toBeLessThan(300);
  return (await res.json()) as Record<string, unknown>;
}

async function get<T>(path: string): Promise<T> {
  const res = await fetch(`${server.url}${path}`);
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json()) as T;
}

type HistoryEntry = { type: string; at: string; actor: string; percent: number | null; reason: string | null };
const history = async (id: string) => (await get<{ history: HistoryEntry[] }>(`/rollouts/${id}/history`)).history;

/** Each element's attribute `name`, in document order. */
async function attrs(all: Locator, name: string): Promise<(string | null)[]> {
  const out = [];
  for (let i = 0; i < (await all.count()); i++) out.push(await all.nth(i).getAttribute(name));
  return out;
}

/** Markup a store value would become if the page wrote it as HTML: it must arrive as text, and make no element. */
const INJECTED = '<img src=x class="pwned" onerror="document.body.dataset.pwned=1"><b class="pwned">bold</b>';

describe('status page', () => {
  it('shows the leader, the nodes, a rollout with its stages and gate readings, and a run with its items — and follows changes live', async () => {
    await post('/rollouts', {
      id: 'checkout-v2',
      spec: {
        target: { service: 'checkout', version: 'v2' },
        stages: [
          { name: 'canary', percent: 5, bakeSeconds: 600, gates: { maxErrorRate: 0.02, minRequests: 100 } },
          { name: 'half', percent: 50, bakeSeconds: 600 },
          { name: 'all', percent: 100, bakeSeconds: 0 },
        ],
      },
    });
    await post('/events', {
      type: 'rollout.metrics_reported',
      rolloutId: 'checkout-v2',
      stage: 'canary',
      requests: 400,
      errors: 4,
      p99LatencyMs: 210,
      observedAt: Date.now(),
    });
    await post('/runs', { id: 'nightly-batch', items: Array.from({ length: 120 }, (_, i) => ({ i })) });

    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    await page.goto(server.url);
    await expect.poll(() => page.locator('#leader').innerText(), { timeout: UI_WAIT_MS }).toMatch(/leader: page-node · epoch 0 · 1\/1 nodes healthy/);
    await expect.poll(() => page.locator('#nodes tbody tr').first().innerText()).toMatch(/page-node\s+leader\s+healthy/);

    const rollout = page.locator('.rollout[data-id="checkout-v2"]');
    await expect.poll(() => rollout.innerText()).toMatch(/checkout-v2\s+running/);
    expect(await rollout.locator('.stage').allInnerTexts()).toEqual(['canary 5%', 'half 50%', 'all 100%']);
    expect(await rollout.locator('.stage.active').innerText()).toBe('canary 5%');
    expect(await rollout.locator('.gates').innerText()).toBe('canary: requests 400 / min 100 · error rate 1.0% (max 2.0%) ok · p99 210 ms');

    const run = page.locator('.run[data-id="nightly-batch"]');
    await expect
      .poll(() => run.locator('.counts').innerText(), { timeout: UI_WAIT_MS })
      .toMatch(/^items 120 done \/ 0 running \/ 0 pending \/ 0 failed of 120 · steals \d+ · drains 0$/);
    expect(await run.innerText()).toContain('done');

    // A change made elsewhere shows up without a reload.
    await post('/rollouts/checkout-v2/promote', { reason: 'looks good' });
    await expect.poll(() => rollout.locator('.stage.promoted').allInnerTexts(), { timeout: UI_WAIT_MS }).toEqual(['canary 5%']);
    expect(await rollout.locator('.stage.active').innerText()).toBe('half 50%');

    // The cluster's own history: the node joined and was elected.
    const events = await page.locator('#events tbody tr').allInnerTexts();
    expect(events.some((e) => /page-node\s+leader_elected\s+term 0/.test(e))).toBe(true);
    expect(events.some((e) => /page-node\s+node_joined/.test(e))).toBe(true);

    mkdirSync(shots, { recursive: true });
    await page.screenshot({ path: resolve(shots, 'status-page.png'), fullPage: true });
    await page.close();
  }, 300_000);

  it('draws each provider gate of the active stage: its readings over time against the threshold, coloured by outcome', async () => {
    // Never read by the node during the test (a long initial delay): the readings shown are the ones stored here, as a reader stores them.
    const gate = {
      type: 'prometheus',
      name: 'error-rate',
      address: 'http://prometheus.invalid:9090',
      query: 'sum(errors) / sum(requests)',
      comparison: '<',
      threshold: 0.05,
      initialDelaySeconds: 86_400,
    };
    const alarms = { type: 'cloudwatchAlarm', name: 'alarms', alarms: ['checkout-5xx'], initialDelaySeconds: 86_400, failureLimit: 5 };
    const judged = {
      type: 'prometheus',
      name: 'latency',
      address: 'http://prometheus.invalid:9090',
      query: 'app_latency_seconds{version="{{version}}"}',
      judge: { kind: 'mann-whitney' },
      initialDelaySeconds: 86_400,
      failureLimit: 5,
      inconclusiveLimit: 5,
    };
    await post('/rollouts', {
      id: 'charted',
      spec: {
        target: { service: 'cart', version: 'v9', stableVersion: 'v8' },
        stages: [
          { name: 'canary', percent: 10, bakeSeconds: 3_600, gates: { providers: [gate, alarms, judged] } },
          { name: 'all', percent: 100, bakeSeconds: 0 },
        ],
      },
    });
    await expect.poll(async () => (await node.plane.engine.store.load('charted'))?.stages[0]?.phase, { timeout: UI_WAIT_MS }).toBe('active');
    const view = (await node.plane.engine.store.load('charted'))!;
    const T = Date.now();
    const values = [0.01, 0.02, null, 0.03, 0.2];
    const at = (i: number) => T - (values.length - i) * 1_000;
    // As a reader stores them: the canary stage's current period, read by polling unless said otherwise.
    const stored = (reading: Omit<GateReading, 'attempt' | 'stage' | 'source'> & Partial<Pick<GateReading, 'source'>>): ReadingToStore => ({
      rolloutId: 'charted',
      origin: view.rollout.lastProgressAt,
      reading: { attempt: 1, stage: 0, source: 'poll', ...reading },
    });
    // A judged gate's readings keep their interval in the answer: two of three have one. Stored first: the error-rate failure below rolls the stage back.
    const shifts = [
      { value: 0.01, ci: [-0.02, 0.03] },
      { value: 0.02, ci: [-0.01, 0.04] },
      { value: null, ci: null },
    ];
    // The newest keeps the series it was judged on (too few points to judge): the page draws both cohorts from it.
    const series = { kind: 'values' as const, canary: [0.31, null, 0.35, 0.4], baseline: [0.2, 0.22, 0.21, 0.19, 0.2] };
    await node.plane.engine.store.recordGateReadings(
      shifts.map((sh, i) => ({
        ...(i === shifts.length - 1 ? { series } : {}),
        ...stored({
          gate: 'latency',
          type: 'prometheus',
          at: at(i),
          value: sh.value,
          query: 'mann-whitney of the canary against the baseline: app_latency_seconds{version="{{version}}"}',
          answer: JSON.stringify({ estimate: sh.value, ci: sh.ci, classification: sh.value === null ? 'nodata' : 'pass' }),
          outcome: sh.value === null ? 'inconclusive' : 'pass',
          reason: sh.value === null ? 'not enough data: 3 of 10 points' : null,
        }),
      })),
    );
    await node.plane.engine.store.recordGateReadings(
      values.map((value, i) =>
        stored({
          gate: 'error-rate',
          type: 'prometheus',
          at: at(i),
          value,
          query: gate.query,
          answer: '',
          outcome: value === null ? 'inconclusive' : value < 0.05 ? 'pass' : 'fail',
          reason: value === null ? 'connect ECONNREFUSED 10.0.0.9:9090' : value < 0.05 ? null : `${value} does not meet < 0.05`,
        }),
      ),
    );
    await node.plane.engine.store.recordGateReadings([
      stored({
        gate: 'alarms',
        type: 'cloudwatchAlarm',
        at: T,
        value: null,
        query: 'alarms checkout-5xx',
        answer: '',
        source: 'event',
        outcome: 'pass',
        reason: null,
      }),
    ]);

    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    await page.goto(server.url);
    const chart = page.locator('.rollout[data-id="charted"] .chart[data-gate="error-rate"]');
    // The failing reading rolled the stage back (failureLimit 0): the page keeps showing the stage and what decided.
    await expect.poll(() => page.locator('.rollout[data-id="charted"]').innerText(), { timeout: UI_WAIT_MS }).toMatch(/charted\s+rolled_back/);
    expect(await page.locator('.rollout[data-id="charted"] .reason').innerText()).toBe(
      'gate error-rate (prometheus): 1 failed reading > failureLimit 0; last: 0.2 does not meet < 0.05',
    );
    expect(await chart.innerText()).toMatch(/error-rate\s+prometheus\s+fail\s+1 failed \/ 1 inconclusive of 5/);
    expect(await chart.innerText()).toContain('passes when value < 0.05');
    const circles = chart.locator('circle.point');
    const points: { outcome: string | null; x: number; y: number }[] = [];
    for (let i = 0; i < (await circles.count()); i++) {
      const c = circles.nth(i);
      points.push({ outcome: await c.getAttribute('data-outcome'), x: Number(await c.getAttribute('cx')), y: Number(await c.getAttribute('cy')) });
    }
    expect(points.map((p) => p.outcome)).toEqual(['pass', 'pass', 'inconclusive', 'pass', 'fail']);
    // Oldest on the left; every pass below the dashed threshold line, the failure above it, the reading without a value on the axis.
    expect(points.map((p) => p.x)).toEqual([...points.map((p) => p.x)].sort((a, b) => a - b));
    const line = Number(await chart.locator('line.threshold').getAttribute('y1'));
    for (const p of points.filter((q) => q.outcome === 'pass')) expect(p.y).toBeGreaterThan(line);
    expect(points.find((p) => p.outcome === 'fail')!.y).toBeLessThan(line);
    expect(points.find((p) => p.outcome === 'inconclusive')!.y).toBeGreaterThan(Math.max(...points.filter((p) => p.outcome === 'pass').map((p) => p.y)));
    expect(
      await page.evaluate(`getComputedStyle(document.querySelector('.rollout[data-id="charted"] .chart[data-gate="error-rate"] circle.point.fail')).fill`),
    ).toBe('rgb(220, 38, 38)');
    const alarmChart = page.locator('.rollout[data-id="charted"] .chart[data-gate="alarms"]');
    expect(await alarmChart.innerText()).toContain('fails while an alarm is in ALARM');
    expect(await alarmChart.locator('line.threshold').count()).toBe(0);
    expect(await alarmChart.locator('circle.point.pass').count()).toBe(1);
    // A judged gate says how it judges, draws each reading's interval around its estimate, and the line of no shift.
    const judgedChart = page.locator('.rollout[data-id="charted"] .chart[data-gate="latency"]');
    expect(await judgedChart.innerText()).toMatch(/latency\s+prometheus · mann-whitney/);
    expect(await judgedChart.innerText()).toContain('judges the canary against the baseline (mann-whitney): the shift estimate, its interval');
    expect(await judgedChart.locator('line.interval').count()).toBe(2);
    expect(await judgedChart.locator('line.zero').count()).toBe(1);
    // Both cohorts' series of the newest reading, a line each, a missing point left out.
    expect(await judgedChart.locator('.cohorts').getAttribute('data-kind')).toBe('values');
    expect(await judgedChart.locator('polyline[data-cohort="canary"]').getAttribute('data-points')).toBe('3');
    expect(await judgedChart.locator('polyline[data-cohort="baseline"]').getAttribute('data-points')).toBe('5');
    expect(await judgedChart.locator('.cohorts').innerText()).toMatch(/canary 3 points, mean 0\.3533 · baseline 5 points, mean 0\.204/);
    // The other gates kept no series: nothing drawn for them.
    expect(await page.locator('.rollout[data-id="charted"] .chart:not([data-gate="latency"]) .cohorts').count()).toBe(0);
    const zeroY = Number(await judgedChart.locator('line.zero').getAttribute('y1'));
    for (let i = 0; i < 2; i++) {
      const whisker = judgedChart.locator('line.interval').nth(i);
      const [top, bottom] = [Number(await whisker.getAttribute('y2')), Number(await whisker.getAttribute('y1'))];
      // Each interval holds 0: its whisker crosses the line of no shift.
      expect(top).toBeLessThan(zeroY);
      expect(bottom).toBeGreaterThan(zeroY);
    }

    await shot(page.locator('.rollout[data-id="charted"]'), 'status-page-gates.png');
    await page.close();
  }, 300_000);

  it('shows what was applied to each target and when: a converged target, and drift highlighted with its reason', async () => {
    const spec = (target: string) => ({
      target: { service: 'storefront', version: 'v7' },
      actuators: [target],
      stages: [
        { name: 'canary', percent: 10, bakeSeconds: 3_600 },
        { name: 'all', percent: 100, bakeSeconds: 0 },
      ],
    });
    await post('/rollouts', { id: 'moves-web', spec: spec('web') });
    await post('/rollouts', { id: 'moves-edge', spec: spec('edge') });
    const record = async (id: string) => (await node.plane.engine.store.actuations(id))[0];
    await expect.poll(async () => (await record('moves-web'))?.state, { timeout: UI_WAIT_MS }).toBe('converged');
    await expect.poll(async () => (await record('moves-edge'))?.state, { timeout: UI_WAIT_MS }).toBe('converged');
    // Someone changes edge's split by hand; the leader's next reconciliation (run now rather than at its tick) finds it.
    const include = readFileSync(edge.target.include, 'utf8');
    expect(include).toContain('10%  canary;');
    writeFileSync(edge.target.include, include.replace('10%  canary;', '30%  canary;'));
    await node.actuate('moves-edge');
    const converged = (await record('moves-web'))!;
    const drift = (await record('moves-edge'))!;
    expect(drift.state).toBe('drift');

    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    await page.goto(server.url);
    const time = (ms: number) => page.evaluate((at) => new Date(at).toLocaleTimeString(), ms);
    const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    const style = (selector: string, property: string) => page.evaluate(`getComputedStyle(document.querySelector(${JSON.stringify(selector)})).${property}`);

    const ok = page.locator('.rollout[data-id="moves-web"] .applied tr[data-target="web"]');
    await expect.poll(() => ok.getAttribute('data-state'), { timeout: UI_WAIT_MS }).toBe('converged');
    const okCells = await ok.locator('td').allInnerTexts();
    expect(okCells.slice(0, 4)).toEqual(['web', 'nginx', 'converged', '10% canary']);
    expect(okCells[4]).toMatch(new RegExp(`^10%\\s+${escape(web.target.include)}: 10% canary, \\* stable$`));
    expect(okCells[5]).toBe(await time(converged.appliedAt!));
    expect(okCells[6]).toBe('');
    expect(await style('.rollout[data-id="moves-web"] .applied tr[data-target="web"]', 'backgroundColor')).toBe('rgba(0, 0, 0, 0)');

    const rollout = page.locator('.rollout[data-id="moves-edge"]');
    const bad = rollout.locator('.applied tr[data-target="edge"]');
    await expect.poll(() => bad.getAttribute('data-state'), { timeout: UI_WAIT_MS }).toBe('drift');
    // The rollout was paused for it, saying why; the row says what we applied, what was found instead and when we last applied it.
    expect(await rollout.innerText()).toMatch(/moves-edge\s+paused/);
    const cells = await bad.locator('td').allInnerTexts();
    expect(cells.slice(0, 4)).toEqual(['edge', 'nginx', 'drift', '10% canary']);
    expect(cells[4]).toMatch(new RegExp(`^30%\\s+${escape(edge.target.include)}: 30% canary, \\* stable$`));
    expect(cells[5]).toBe(await time(drift.appliedAt!));
    expect(cells[6]).toBe(drift.reason);
    expect(cells[6]).toMatch(/^actuation drift on edge \(nginx\): its weights were changed by someone else: we wrote 10%, found 30%/);
    const edgeRow = '.rollout[data-id="moves-edge"] .applied tr[data-target="edge"]';
    expect(await style(edgeRow, 'backgroundColor')).toBe('rgb(254, 242, 242)');
    expect([await style(`${edgeRow} .why`, 'color'), await style(`${edgeRow} .why`, 'fontWeight')]).toEqual(['rgb(127, 29, 29)', '600']);

    await shot(rollout, 'status-page-applied.png');
    await page.close();
  }, 300_000);

  it("charts the demo's fleet: per stage, how many of its 1,000 hosts were told the new version, as the assignment rule has it", async () => {
    const demo = new Demo(node, pool, { items: 30, bakeSeconds: 3_600, url: server.url });
    await demo.start();
    try {
      const id = demo.rolloutId;
      const fleet = fleetOf(node)!;
      expect(fleet.entities).toHaveLength(1_000);
      // The rule on the traffic the node serves now: exactly the hosts on the new version.
      const onNew = async () => {
        const traffic = (await (await fetch(`${server.url}/rollouts/${id}/traffic`)).json()) as RolloutTraffic;
        return { percent: traffic.percent, count: fleet.entities.filter((e) => assign(traffic, e).variant === 'new').length };
      };
      const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
      await page.goto(server.url);
      const row = (stage: string) => page.locator(`.rollout[data-id="${id}"] .fleet tr[data-stage="${stage}"]`);
      const told = (n: number) => `${n} of 1,000 on v2.0.0 (${(n / 10).toFixed(1)}%)`;
      // The rollout id (and so every bucket) is new each demo: the count is a binomial draw, held within 5 standard deviations.
      const near = (count: number, percent: number) =>
        expect(Math.abs(count - 10 * percent)).toBeLessThanOrEqual(5 * Math.sqrt(1_000 * (percent / 100) * (1 - percent / 100)));

      await expect.poll(() => row('canary').getAttribute('data-observed'), { timeout: UI_WAIT_MS }).toBe('1000');
      const canary = await onNew();
      expect(canary.percent).toBe(5);
      expect(await row('canary').locator('.told').innerText()).toBe(told(canary.count));
      near(canary.count, 5);
      expect(await row('quarter').locator('.told').innerText()).toBe('not asked under this stage');

      await post(`/rollouts/${id}/promote`, { reason: 'the fleet looks right' });
      await expect.poll(() => row('quarter').getAttribute('data-observed'), { timeout: UI_WAIT_MS }).toBe('1000');
      const quarter = await onNew();
      expect(quarter.percent).toBe(25);
      expect(await row('quarter').locator('.told').innerText()).toBe(told(quarter.count));
      near(quarter.count, 25);
      // The bar is the fleet's share, the line the stage's percent; the canary keeps what the fleet was told then.
      expect(await row('quarter').locator('.share').getAttribute('style')).toBe(`width:${quarter.count / 10}%`);
      expect(await row('quarter').locator('.mark').getAttribute('style')).toBe('left:25%');
      expect(await row('canary').locator('.told').innerText()).toBe(told(canary.count));

      await shot(page.locator(`.rollout[data-id="${id}"]`), 'status-page-fleet.png');
      await page.close();
    } finally {
      await demo.stop();
    }
    expect(fleetOf(node)).toBeUndefined();
  }, 300_000);

  it('lists a finished rollout with its history (what, who, when, why) and draws the percent in force over time, step by step', async () => {
    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    await page.goto(server.url);
    const locale = (at: string) => page.evaluate((iso) => new Date(iso).toLocaleString(), at);
    const steps = (id: string) => page.locator(`.rollout[data-id="${id}"] .percent line.step`);
    const percents = async (id: string) => (await attrs(steps(id), 'data-percent')).map(Number);

    await post('/rollouts', {
      id: 'finished-3',
      spec: {
        target: { service: 'search', version: 'v3' },
        stages: [
          { name: 'canary', percent: 5, bakeSeconds: 3_600 },
          { name: 'half', percent: 50, bakeSeconds: 3_600 },
          { name: 'all', percent: 100, bakeSeconds: 3_600 },
        ],
      },
    });
    // In flight, its last step is the percent the node serves now.
    const live = page.locator('#rollouts .rollout[data-id="finished-3"]');
    await expect.poll(() => percents('finished-3'), { timeout: UI_WAIT_MS }).toEqual([5]);
    expect((await get<{ percent: number }>('/rollouts/finished-3/traffic')).percent).toBe(5);
    expect(await live.count()).toBe(1);
    await post('/rollouts/finished-3/promote', {}, 'alice');
    await expect.poll(() => percents('finished-3'), { timeout: UI_WAIT_MS }).toEqual([5, 50]);
    expect((await get<{ percent: number }>('/rollouts/finished-3/traffic')).percent).toBe(50);
    await post('/rollouts/finished-3/pause', { reason: 'hold through the traffic peak' }, 'bob');
    await post('/rollouts/finished-3/resume', {}, 'bob');
    await post('/rollouts/finished-3/promote', {}, 'bob');
    await post('/rollouts/finished-3/promote', {}, 'alice');

    const card = page.locator('#finished .rollout[data-id="finished-3"]');
    await expect.poll(() => card.count(), { timeout: UI_WAIT_MS }).toBe(1);
    expect(await card.innerText()).toMatch(/finished-3\s+completed/);
    expect(await live.count()).toBe(0);
    const traffic = await get<{ percent: number; final: boolean }>('/rollouts/finished-3/traffic');
    expect([traffic.percent, traffic.final]).toEqual([100, true]);

    // Every transition, newest first, as the history API has them (oldest first).
    const api = await history('finished-3');
    expect(api.map((e) => e.type.replace('ai.rollout.', ''))).toEqual([
      'stage_activated',
      'stage_promoted',
      'paused',
      'resumed',
      'stage_promoted',
      'stage_promoted',
      'completed',
    ]);
    const rows = card.locator('.history tr.transition');
    expect(await rows.count()).toBe(api.length);
    const shown = [];
    for (let i = 0; i < api.length; i++) {
      const row = rows.nth(i);
      shown.push({
        when: await row.locator('.when').innerText(),
        what: await row.getAttribute('data-type'),
        inForce: await row.locator('.in-force').innerText(),
        who: await row.locator('.who').innerText(),
        why: await row.locator('.why').innerText(),
      });
    }
    const expected = [];
    for (const e of [...api].reverse())
      expected.push({
        when: await locale(e.at),
        what: e.type.replace('ai.rollout.', ''),
        inForce: e.percent === null ? '' : `${e.percent}%`,
        who: e.actor,
        why: e.reason ?? '',
      });
    expect(shown).toEqual(expected);
    expect(shown.slice(0, 6).map((r) => [r.who, r.why])).toEqual([
      ['alice', ''],
      ['alice', ''],
      ['bob', ''],
      ['bob', ''],
      ['bob', 'hold through the traffic peak'],
      ['alice', ''],
    ]);
    expect(shown.map((r) => r.inForce)).toEqual(['100%', '100%', '100%', '50%', '50%', '50%', '5%']);
    expect(await card.locator('.history caption').innerText()).toBe('history every transition, newest first');

    // One step per percent the stages set, each starting at the transition that set it, each at its height on the 0-100 scale.
    expect(await percents('finished-3')).toEqual([5, 50, 100]);
    const chart = card.locator('.percent svg');
    const level = async (v: number) => Number(await chart.locator(`line[data-level="${v}"]`).getAttribute('y1'));
    const [zero, full] = [await level(0), await level(100)];
    expect(zero).toBeGreaterThan(full);
    const at = await attrs(steps('finished-3'), 'data-at');
    const [x1, x2, y1, y2] = await Promise.all(['x1', 'x2', 'y1', 'y2'].map(async (a) => (await attrs(steps('finished-3'), a)).map(Number)));
    const lines = at.map((a, i) => ({ at: a, x1: x1![i]!, x2: x2![i]!, y1: y1![i]!, y2: y2![i]! }));
    // Pausing and resuming moved no traffic: no step of their own.
    expect(lines.map((l) => l.at)).toEqual([api[0]!.at, api[1]!.at, api[4]!.at]);
    [5, 50, 100].forEach((percent, i) => {
      expect(lines[i]!.y1).toBe(lines[i]!.y2);
      expect(lines[i]!.y1).toBeCloseTo(zero - ((zero - full) * percent) / 100, 0);
      if (i) expect(lines[i]!.x1).toBe(lines[i - 1]!.x2);
    });
    expect(lines[2]!.x2).toBeGreaterThan(lines[2]!.x1);
    expect(await card.locator('.percent .title').innerText()).toBe('percent in force now 100%');

    await shot(card, 'status-page-history.png');
    await page.close();
  }, 300_000);

  it("shows a run's newest failed items with their reasons, and the total failed", async () => {
    await post('/runs', { id: 'doomed', items: Array.from({ length: 200 }, (_, i) => ({ i })) });
    // Cancelled at once: the items still pending end failed with the canceller's reason.
    await post('/runs/doomed/cancel', { reason: `out of budget ${INJECTED}` }, 'carol');
    const reason = `cancelled: out of budget ${INJECTED} (by carol)`;

    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    await page.goto(server.url);
    const run = page.locator('.run[data-id="doomed"]');
    await expect.poll(() => run.locator('.counts').innerText(), { timeout: UI_WAIT_MS }).toMatch(/ 0 running \/ 0 pending \//);
    const counts = (await get<{ counts: { failed: number } }>('/runs/doomed')).counts;
    expect(counts.failed).toBeGreaterThan(5);
    const failed = (await get<{ items: { id: string; error: string }[] }>('/runs/doomed/items?state=failed&limit=500')).items;
    expect(failed).toHaveLength(counts.failed);

    await expect
      .poll(() => run.locator('.failures caption').innerText(), { timeout: UI_WAIT_MS })
      .toBe(`failed items the newest 5 of ${counts.failed}; all of them: /runs/doomed/items?state=failed`);
    const rows = run.locator('.failures tr.failure');
    expect(await rows.count()).toBe(5);
    for (let i = 0; i < 5; i++) {
      const id = (await rows.nth(i).getAttribute('data-item'))!;
      expect(failed.find((f) => f.id === id)?.error).toBe(reason);
      expect(await rows.nth(i).locator('.why').innerText()).toBe(reason);
    }
    // The reason was shown as text: none of its markup became an element, nothing of it ran.
    expect(await run.locator('.pwned, img, b').count()).toBe(0);
    expect(await page.evaluate('document.body.dataset.pwned')).toBeUndefined();
    await shot(run, 'status-page-failures.png');
    await page.close();
  }, 300_000);

  it('shows what a user wrote (actor, reason) as text; lists only the newest transitions, and an abort is a step down to 0', async () => {
    await post('/rollouts', {
      id: 'aborted-1',
      spec: {
        target: { service: 'feed', version: 'v8' },
        stages: [
          { name: 'canary', percent: 10, bakeSeconds: 3_600 },
          { name: 'all', percent: 100, bakeSeconds: 0 },
        ],
      },
    });
    // More transitions than the page lists: the list keeps the newest and points to the rest.
    for (let i = 0; i < 5; i++) {
      await post('/rollouts/aborted-1/pause', { reason: `hold ${i}` }, 'dave');
      await post('/rollouts/aborted-1/resume', {}, 'dave');
    }
    const actor = `mallory ${INJECTED}`;
    await post('/rollouts/aborted-1/pause', { reason: `paused: ${INJECTED}` }, actor);
    await post('/rollouts/aborted-1/abort', { reason: `aborted: ${INJECTED}` }, actor);
    const api = await history('aborted-1');
    expect(api).toHaveLength(13);

    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    await page.goto(server.url);
    const card = page.locator('#finished .rollout[data-id="aborted-1"]');
    const rows = card.locator('.history tr.transition');
    await expect.poll(() => rows.count(), { timeout: UI_WAIT_MS }).toBe(10);
    expect(await attrs(rows, 'data-type')).toEqual(['aborted', 'paused', ...Array.from({ length: 4 }, () => ['resumed', 'paused']).flat()]);
    expect(await card.locator('.history caption').innerText()).toBe(
      'history the newest 10 transitions, newest first; all of them: /rollouts/aborted-1/history',
    );
    expect(await card.locator('.history caption a').getAttribute('href')).toBe('/rollouts/aborted-1/history');
    expect([await rows.nth(0).locator('.who').innerText(), await rows.nth(0).locator('.why').innerText()]).toEqual([actor, `aborted: ${INJECTED}`]);
    expect([await rows.nth(1).locator('.who').innerText(), await rows.nth(1).locator('.why').innerText()]).toEqual([actor, `paused: ${INJECTED}`]);
    expect([await rows.nth(3).locator('.who').innerText(), await rows.nth(3).locator('.why').innerText()]).toEqual(['dave', 'hold 4']);
    expect(await card.locator('.reason').innerText()).toBe(`aborted: ${INJECTED}`);
    // Shown as text: none of the markup became an element, nothing of it ran.
    expect(await card.locator('.pwned, img, b').count()).toBe(0);
    expect(await page.evaluate('document.body.dataset.pwned')).toBeUndefined();

    // The chart reads a longer window than the list: from the activation on. Pausing moved no traffic; the abort took it to 0.
    expect((await attrs(card.locator('.percent line.step'), 'data-percent')).map(Number)).toEqual([10, 0]);
    expect(await attrs(card.locator('.percent line.step'), 'data-at')).toEqual([api[0]!.at, api[12]!.at]);
    await page.close();
  }, 300_000);

  it('says so when the node cannot be reached', async () => {
    const page = await browser.newPage();
    await page.goto(server.url);
    await expect.poll(() => page.locator('.rollout').count(), { timeout: UI_WAIT_MS }).toBeGreaterThan(0);
    await page.route('**/ui/state', (route) => route.abort('connectionrefused'));
    await expect.poll(() => page.locator('#error').innerText(), { timeout: UI_WAIT_MS }).toMatch(/^cannot reach the node: /);
    expect(await page.locator('#error').isVisible()).toBe(true);
    await page.close();
  }, 300_000);
});
