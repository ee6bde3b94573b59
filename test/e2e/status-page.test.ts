import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveApi } from '../../shared/runtimes/node/http.js';
import { nodeMetrics } from '../../shared/runtimes/node/metrics.js';
import { nodeApi } from '../../shared/runtimes/node/node-api.js';
import { ControlPlaneNode } from '../../shared/runtimes/node/node.js';
import { freePort } from '../../infra/local/processes.js';
import { LocalWorkerPool } from '../../shared/runtimes/node/worker-pool.js';

/**
 * The status page in a real browser (Debian's Chromium through
 * playwright-core): what a person sees of the leader, the nodes, a rollout's
 * stages and gate readings and a run's items, and that it follows changes.
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const shots = resolve(import.meta.dirname, '../../test-results');

let node: ControlPlaneNode;
let pool: LocalWorkerPool;
let server: Awaited<ReturnType<typeof serveApi>>;
let browser: Browser;

beforeAll(async () => {
  const port = await freePort();
  node = await ControlPlaneNode.open({ nodeId: 'page-node', port, store: { kind: 'pglite', dataDir: null }, elector: 'static', scanIntervalSeconds: 1 });
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
