import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assign, type RolloutTraffic } from '../../shared/rollout/assignment.js';
import { Demo, fleetOf } from '../../shared/runtimes/node/demo.js';
import { serveApi } from '../../shared/runtimes/node/http.js';
import { nodeMetrics } from '../../shared/runtimes/node/metrics.js';
import { nodeApi } from '../../shared/runtimes/node/node-api.js';
import { ControlPlaneNode } from '../../shared/runtimes/node/node.js';
import { freePort } from '../../infra/local/processes.js';
import { startSplitNginx, type SplitNginx } from '../../shared/runtimes/node/split-nginx.js';
import { LocalWorkerPool } from '../../shared/runtimes/node/worker-pool.js';

/**
 * The status page in a real browser (Debian's Chromium through
 * playwright-core): what a person sees of the leader, the nodes, a rollout's
 * stages and gate readings, what was applied to its targets (two real
 * nginx), the demo fleet's answers and a run's items, and that it follows
 * changes.
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const shots = resolve(import.meta.dirname, '../../test-results');

let node: ControlPlaneNode;
let pool: LocalWorkerPool;
let server: Awaited<ReturnType<typeof serveApi>>;
let browser: Browser;
let web: SplitNginx;
let edge: SplitNginx;

beforeAll(async () => {
  const port = await freePort();
  [web, edge] = await Promise.all([startSplitNginx(), startSplitNginx()]);
  node = await ControlPlaneNode.open({ nodeId: 'page-node', port, store: { kind: 'pglite', dataDir: null }, elector: 'static', scanIntervalSeconds: 1, outbound: { origins: ['http://prometheus.invalid:9090'] }, targets: { web: web.target, edge: edge.target } });
  server = await serveApi(nodeApi(node, nodeMetrics(node)), { port });
  await node.start();
  pool = new LocalWorkerPool(node, { size: 3, itemMs: 5 });
  pool.start();
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await pool?.close();
  await server?.close();
  await node?.stop();
  await Promise.all([web?.stop(), edge?.stop()]);
});

async function post(path: string, body: unknown) {
  const res = await fetch(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.status, await res.clone().text()).toBeLessThan(300);
  return (await res.json()) as Record<string, unknown>;
}

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
    await post('/events', { type: 'rollout.metrics_reported', rolloutId: 'checkout-v2', stage: 'canary', requests: 400, errors: 4, p99LatencyMs: 210, observedAt: Date.now() });
    await post('/runs', { id: 'nightly-batch', items: Array.from({ length: 120 }, (_, i) => ({ i })) });

    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    await page.goto(server.url);
    await expect.poll(() => page.locator('#leader').innerText(), { timeout: 10_000 }).toMatch(/leader: page-node · epoch 0 · 1\/1 nodes healthy/);
    await expect.poll(() => page.locator('#nodes tbody tr').first().innerText()).toMatch(/page-node\s+leader\s+healthy/);

    const rollout = page.locator('.rollout[data-id="checkout-v2"]');
    await expect.poll(() => rollout.innerText()).toMatch(/checkout-v2\s+running/);
    expect(await rollout.locator('.stage').allInnerTexts()).toEqual(['canary 5%', 'half 50%', 'all 100%']);
    expect(await rollout.locator('.stage.active').innerText()).toBe('canary 5%');
    expect(await rollout.locator('.gates').innerText()).toBe('canary: requests 400 / min 100 · error rate 1.0% (max 2.0%) ok · p99 210 ms');

    const run = page.locator('.run[data-id="nightly-batch"]');
    await expect.poll(() => run.locator('.counts').innerText(), { timeout: 30_000 }).toMatch(/^items 120 done \/ 0 running \/ 0 pending \/ 0 failed of 120 · steals \d+ · drains 0$/);
    expect(await run.innerText()).toContain('done');

    // A change made elsewhere shows up without a reload.
    await post('/rollouts/checkout-v2/promote', { reason: 'looks good' });
    await expect.poll(() => rollout.locator('.stage.promoted').allInnerTexts(), { timeout: 5_000 }).toEqual(['canary 5%']);
    expect(await rollout.locator('.stage.active').innerText()).toBe('half 50%');

    // The cluster's own history: the node joined and was elected.
    const events = await page.locator('#events tbody tr').allInnerTexts();
    expect(events.some((e) => /page-node\s+leader_elected\s+term 0/.test(e))).toBe(true);
    expect(events.some((e) => /page-node\s+node_joined/.test(e))).toBe(true);

    mkdirSync(shots, { recursive: true });
    await page.screenshot({ path: resolve(shots, 'status-page.png'), fullPage: true });
    await page.close();
  }, 60_000);

  it('draws each provider gate of the active stage: its readings over time against the threshold, coloured by outcome', async () => {
    // Never read by the node during the test (a long initial delay): the readings shown are the ones stored here, as a reader stores them.
    const gate = { type: 'prometheus', name: 'error-rate', address: 'http://prometheus.invalid:9090', query: 'sum(errors) / sum(requests)', comparison: '<', threshold: 0.05, initialDelaySeconds: 86_400 };
    const alarms = { type: 'cloudwatchAlarm', name: 'alarms', alarms: ['checkout-5xx'], initialDelaySeconds: 86_400, failureLimit: 5 };
    await post('/rollouts', { id: 'charted', spec: { target: { service: 'cart', version: 'v9' }, stages: [{ name: 'canary', percent: 10, bakeSeconds: 3_600, gates: { providers: [gate, alarms] } }, { name: 'all', percent: 100, bakeSeconds: 0 }] } });
    await expect.poll(async () => (await node.plane.engine.store.load('charted'))?.stages[0]?.phase, { timeout: 10_000 }).toBe('active');
    const view = (await node.plane.engine.store.load('charted'))!;
    const T = Date.now();
    const values = [0.01, 0.02, null, 0.03, 0.2];
    const at = (i: number) => T - (values.length - i) * 1_000;
    await node.plane.engine.store.recordGateReadings(
      values.map((value, i) => ({
        rolloutId: 'charted',
        origin: view.rollout.lastProgressAt,
        reading: {
          gate: 'error-rate', type: 'prometheus', attempt: 1, stage: 0, at: at(i), value, query: gate.query, answer: '', source: 'poll',
          outcome: value === null ? 'inconclusive' : value < 0.05 ? 'pass' : 'fail',
          reason: value === null ? 'connect ECONNREFUSED 10.0.0.9:9090' : value < 0.05 ? null : `${value} does not meet < 0.05`,
        },
      })),
    );
    await node.plane.engine.store.recordGateReadings([
      { rolloutId: 'charted', origin: view.rollout.lastProgressAt, reading: { gate: 'alarms', type: 'cloudwatchAlarm', attempt: 1, stage: 0, at: T, value: null, query: 'alarms checkout-5xx', answer: '', source: 'event', outcome: 'pass', reason: null } },
    ]);

    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    await page.goto(server.url);
    const chart = page.locator('.rollout[data-id="charted"] .chart[data-gate="error-rate"]');
    // The failing reading rolled the stage back (failureLimit 0): the page keeps showing the stage and what decided.
    await expect.poll(() => page.locator('.rollout[data-id="charted"]').innerText(), { timeout: 15_000 }).toMatch(/charted\s+rolled_back/);
    expect(await page.locator('.rollout[data-id="charted"] .reason').innerText()).toBe('gate error-rate (prometheus): 1 failed reading > failureLimit 0; last: 0.2 does not meet < 0.05');
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
    expect(await page.evaluate(`getComputedStyle(document.querySelector('.rollout[data-id="charted"] .chart[data-gate="error-rate"] circle.point.fail')).fill`)).toBe('rgb(220, 38, 38)');
    const alarmChart = page.locator('.rollout[data-id="charted"] .chart[data-gate="alarms"]');
    expect(await alarmChart.innerText()).toContain('fails while an alarm is in ALARM');
    expect(await alarmChart.locator('line.threshold').count()).toBe(0);
    expect(await alarmChart.locator('circle.point.pass').count()).toBe(1);

    mkdirSync(shots, { recursive: true });
    await page.locator('.rollout[data-id="charted"]').screenshot({ path: resolve(shots, 'status-page-gates.png') });
    await page.close();
  }, 60_000);

  it('shows what was applied to each target and when: a converged target, and drift highlighted with its reason', async () => {
    const spec = (target: string) => ({ target: { service: 'storefront', version: 'v7' }, actuators: [target], stages: [{ name: 'canary', percent: 10, bakeSeconds: 3_600 }, { name: 'all', percent: 100, bakeSeconds: 0 }] });
    await post('/rollouts', { id: 'moves-web', spec: spec('web') });
    await post('/rollouts', { id: 'moves-edge', spec: spec('edge') });
    const record = async (id: string) => (await node.plane.engine.store.actuations(id))[0];
    await expect.poll(async () => (await record('moves-web'))?.state, { timeout: 15_000 }).toBe('converged');
    await expect.poll(async () => (await record('moves-edge'))?.state, { timeout: 15_000 }).toBe('converged');
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
    await expect.poll(() => ok.getAttribute('data-state'), { timeout: 10_000 }).toBe('converged');
    const okCells = await ok.locator('td').allInnerTexts();
    expect(okCells.slice(0, 4)).toEqual(['web', 'nginx', 'converged', '10% canary']);
    expect(okCells[4]).toMatch(new RegExp(`^10%\\s+${escape(web.target.include)}: 10% canary, \\* stable$`));
    expect(okCells[5]).toBe(await time(converged.appliedAt!));
    expect(okCells[6]).toBe('');
    expect(await style('.rollout[data-id="moves-web"] .applied tr[data-target="web"]', 'backgroundColor')).toBe('rgba(0, 0, 0, 0)');

    const rollout = page.locator('.rollout[data-id="moves-edge"]');
    const bad = rollout.locator('.applied tr[data-target="edge"]');
    await expect.poll(() => bad.getAttribute('data-state'), { timeout: 10_000 }).toBe('drift');
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

    mkdirSync(shots, { recursive: true });
    await rollout.screenshot({ path: resolve(shots, 'status-page-applied.png') });
    await page.close();
  }, 60_000);

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

      await expect.poll(() => row('canary').getAttribute('data-observed'), { timeout: 15_000 }).toBe('1000');
      const canary = await onNew();
      expect(canary.percent).toBe(5);
      expect(await row('canary').locator('.told').innerText()).toBe(told(canary.count));
      expect(Math.abs(canary.count / 10 - 5)).toBeLessThanOrEqual(3);
      expect(await row('quarter').locator('.told').innerText()).toBe('not asked under this stage');

      await post(`/rollouts/${id}/promote`, { reason: 'the fleet looks right' });
      await expect.poll(() => row('quarter').getAttribute('data-observed'), { timeout: 15_000 }).toBe('1000');
      const quarter = await onNew();
      expect(quarter.percent).toBe(25);
      expect(await row('quarter').locator('.told').innerText()).toBe(told(quarter.count));
      expect(Math.abs(quarter.count / 10 - 25)).toBeLessThanOrEqual(3);
      // The bar is the fleet's share, the line the stage's percent; the canary keeps what the fleet was told then.
      expect(await row('quarter').locator('.share').getAttribute('style')).toBe(`width:${quarter.count / 10}%`);
      expect(await row('quarter').locator('.mark').getAttribute('style')).toBe('left:25%');
      expect(await row('canary').locator('.told').innerText()).toBe(told(canary.count));

      mkdirSync(shots, { recursive: true });
      await page.locator(`.rollout[data-id="${id}"]`).screenshot({ path: resolve(shots, 'status-page-fleet.png') });
      await page.close();
    } finally {
      await demo.stop();
    }
    expect(fleetOf(node)).toBeUndefined();
  }, 60_000);

  it('says so when the node cannot be reached', async () => {
    const page = await browser.newPage();
    await page.goto(server.url);
    await expect.poll(() => page.locator('.rollout').count(), { timeout: 10_000 }).toBeGreaterThan(0);
    await page.route('**/ui/state', (route) => route.abort('connectionrefused'));
    await expect.poll(() => page.locator('#error').innerText(), { timeout: 5_000 }).toMatch(/^cannot reach the node: /);
    expect(await page.locator('#error').isVisible()).toBe(true);
    await page.close();
  }, 30_000);
});
