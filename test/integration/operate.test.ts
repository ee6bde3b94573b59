/**
 * What someone on call sees (docs/operating/observability.md#operating), against a real Prometheus:
 * it scrapes a node and a worker (`rollout worker --metrics-port`) through
 * rollouts (one completes, one stays in its first stage with a Prometheus
 * gate) and a run of 200 items; every panel query of the shipped Grafana
 * dashboard then returns data, per-rollout and per-run series are gone once
 * their rollout or run ends, and the shipped alert rules pass `promtool check
 * rules` and their unit tests (`promtool test rules`: a firing and a
 * non-firing case per alert).
 */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../infra/local/processes.js';
import { serveApi } from '../../shared/runtimes/node/http.js';
import { nodeMetrics } from '../../shared/runtimes/node/metrics.js';
import { nodeApi } from '../../shared/runtimes/node/node-api.js';
import { ControlPlaneNode } from '../../shared/runtimes/node/node.js';
import { databaseForFile } from '../support/database.js';
import { prometheusBin, queryVector, startPrometheus, waitForSeries, type PrometheusServer } from '../support/prometheus.js';

const root = resolve(import.meta.dirname, '../..');
const observability = join(root, 'infra/observability');
const db = databaseForFile('operate');
let prometheus: PrometheusServer;
let node: ControlPlaneNode;
let api: { url: string; close(): Promise<void> };
let workerPort: number;
let began: number;

beforeAll(async () => {
  const nodePort = await freePort();
  workerPort = await freePort();
  began = Date.now() / 1000;
  prometheus = await startPrometheus({ targets: [`127.0.0.1:${nodePort}`, `127.0.0.1:${workerPort}`], scrapeIntervalMs: 250 });
  node = await ControlPlaneNode.open({
    nodeId: 'ops-node',
    port: nodePort,
    store: { kind: 'postgres', databaseUrl: db.url },
    elector: 'static',
    tickIntervalSeconds: 0.25,
    scanIntervalSeconds: 1,
    outbound: { origins: [prometheus.url] },
  });
  api = await serveApi(nodeApi(node, nodeMetrics(node)), { port: nodePort });
  await node.start();
  // Prometheus takes its targets up to 5 s after it starts: the rollouts begin once it scrapes the node.
  await waitForSeries(prometheus.url, `up{instance="127.0.0.1:${nodePort}"} == 1`);
});

afterAll(async () => {
  await api?.close();
  await node?.stop();
  await prometheus?.stop();
});

const post = async (path: string, body: unknown) => {
  const res = await fetch(`${api.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.status, `${path}: ${await res.clone().text()}`).toBeLessThan(300);
  return res.json() as Promise<Record<string, unknown>>;
};

const gate = () => ({
  type: 'prometheus',
  name: 'error-rate',
  address: prometheus.url,
  query: 'vector(0.004)',
  comparison: '<',
  threshold: 0.05,
  intervalSeconds: 1,
});

/** Every series `query` gave over the test so far (a range query), or the API's error. */
async function overTheTest(query: string): Promise<number> {
  const q = new URLSearchParams({ query, start: String(began), end: String(Date.now() / 1000), step: '1' });
  const res = await fetch(`${prometheus.url}/api/v1/query_range?${q.toString()}`);
  const body = (await res.json()) as { status: string; error?: string; data?: { result: unknown[] } };
  if (body.status !== 'success') throw new Error(`${query}: ${body.error ?? res.status}`);
  return body.data!.result.length;
}

describe('operating the control plane with Prometheus', () => {
  it('scrapes a node and a worker through rollouts and a run: every dashboard panel has data, and ended rollouts and runs leave no series', async () => {
    const stages = (bake: number) => [
      { name: 'canary', percent: 10, bakeSeconds: bake, gates: { providers: [gate()] } },
      { name: 'half', percent: 50, bakeSeconds: 3_600, gates: { providers: [gate()] } },
      { name: 'all', percent: 100, bakeSeconds: 0 },
    ];
    // One moves on to its second stage and waits there to be seen, then is promoted to the end; the other stays in its first.
    await post('/rollouts', { id: 'ops-done', spec: { target: { service: 'web', version: 'v2', stableVersion: 'v1' }, stages: stages(1) } });
    await post('/rollouts', { id: 'ops-held', spec: { target: { service: 'api', version: 'v7', stableVersion: 'v6' }, stages: stages(3_600) } });
    await post('/runs', { id: 'ops-run', items: Array.from({ length: 200 }, (_, n) => ({ n })) });

    // The worker, as a fleet runs it, with its metrics served for the scraper; stopped (SIGTERM: a drain) once its last item was scraped.
    const worker = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        'shared/runtimes/cli/cli.ts',
        'worker',
        '--run',
        'ops-run',
        '--store',
        'postgres',
        '--database-url',
        db.url,
        '--mock-duration-ms',
        '15',
        '--metrics-port',
        String(workerPort),
        '--heartbeat-ms',
        '500',
        '--wait-seconds',
        '1',
        '--json',
      ],
      { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const exited = new Promise<number | null>((done) => worker.on('exit', (code) => done(code)));
    let err = '';
    worker.stderr.on('data', (c: Buffer) => (err += c.toString()));
    await waitForSeries(prometheus.url, 'rollout_worker_items_total{run="ops-run",outcome="done"}', (s) => s[0]!.value === 200, 60_000);
    expect((await queryVector(prometheus.url, 'rollout_worker_item_seconds_count{run="ops-run",outcome="ok"}'))[0]?.value).toBe(200);
    worker.kill('SIGTERM');
    expect(await exited, err.slice(-2000)).toBe(0);

    // A run cancelled before any worker came: its coordinator fails its items, counted by why.
    await post('/runs', { id: 'ops-cancelled', items: Array.from({ length: 5 }, (_, n) => ({ n })) });
    await post('/runs/ops-cancelled/cancel', { reason: 'wrong input' });
    await waitForSeries(prometheus.url, 'rollout_run_failures_total{reason="cancelled"}', (s) => s[0]!.value === 5);
    expect((await queryVector(prometheus.url, 'rollout_run_failures_total{reason="attempts"}'))[0]?.value).toBe(0);
    expect((await queryVector(prometheus.url, 'rollout_run_repends_total'))[0]?.value).toBe(0);

    await waitForSeries(prometheus.url, 'rollout_percent{rollout="ops-done"} == 50');
    await post('/rollouts/ops-done/promote', { reason: 'seen at 50%' });
    const held = await waitForSeries(prometheus.url, 'rollout_gate_value{rollout="ops-held"}', (s) => s[0]!.value === 0.004);
    expect(held[0]!.metric).toMatchObject({ gate: 'error-rate', type: 'prometheus', node_id: 'ops-node' });
    await waitForSeries(prometheus.url, 'rollout_events_total{type="ai.rollout.completed"}', (s) => s[0]!.value >= 1);
    // While it ran, the completed one was seen.
    expect(await overTheTest('rollout_info{rollout="ops-done",state="running"}')).toBe(1);
    expect((await queryVector(prometheus.url, 'rollout_percent{rollout="ops-held"}'))[0]?.value).toBe(10);
    expect((await queryVector(prometheus.url, 'rollout_gate_threshold{rollout="ops-held"}'))[0]).toMatchObject({ value: 0.05, metric: { comparison: '<' } });

    // Ended: the completed rollout and the finished run are gone from the next scrapes (bounded cardinality).
    await waitForSeries(prometheus.url, 'count(rollout_info)', (s) => s[0]!.value === 1);
    expect(await queryVector(prometheus.url, 'rollout_info{rollout="ops-done"}')).toEqual([]);
    expect(await queryVector(prometheus.url, 'rollout_run_items{run="ops-run"}')).toEqual([]);

    // Every panel's every query returned data over the test, and none is refused.
    const dashboard = JSON.parse(readFileSync(join(observability, 'grafana-dashboard.json'), 'utf8')) as {
      panels: { title: string; targets: { expr: string }[] }[];
    };
    const empty: string[] = [];
    for (const panel of dashboard.panels) for (const t of panel.targets) if ((await overTheTest(t.expr)) === 0) empty.push(`${panel.title}: ${t.expr}`);
    expect(empty).toEqual([]);
    expect(dashboard.panels.length).toBeGreaterThanOrEqual(10);
  });

  it('ships alert rules that promtool accepts, each alert tested firing and not firing', () => {
    const promtool = join(dirname(prometheusBin()), 'promtool');
    const check = spawnSync(promtool, ['check', 'rules', 'rollout-alerts.yml'], { cwd: observability, encoding: 'utf8' });
    expect(check.status, check.stdout + check.stderr).toBe(0);
    expect(check.stdout).toMatch(/SUCCESS: 7 rules found/);
    const tested = spawnSync(promtool, ['test', 'rules', 'rollout-alerts.test.yml'], { cwd: observability, encoding: 'utf8' });
    expect(tested.status, tested.stdout + tested.stderr).toBe(0);
    // Each alert of the rules has a case where it fires (a non-empty exp_alerts) and one where it does not.
    const rules = readFileSync(join(observability, 'rollout-alerts.yml'), 'utf8');
    const tests = readFileSync(join(observability, 'rollout-alerts.test.yml'), 'utf8');
    for (const [, name] of rules.matchAll(/- alert: (\w+)/g)) {
      const cases = [...tests.matchAll(new RegExp(`alertname: ${name}\\n\\s+exp_alerts:(.*)`, 'g'))].map((m) => m[1]!.trim());
      expect(cases, name).toContain('[]');
      expect(
        cases.filter((c) => c === ''),
        name,
      ).not.toHaveLength(0);
    }
  });
});
