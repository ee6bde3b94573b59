/**
 * Prometheus gates end to end: a control-plane node on PostgreSQL reads a
 * real Prometheus (Debian's 2.42) that scrapes an exporter this test
 * controls. A healthy rollout promotes through its stages on the gate's
 * readings; raising the error counter rolls the next one back; stopping
 * Prometheus makes the gate inconclusive and pauses the third — with the
 * gate and the provider's error named — and never promotes or rolls it back.
 * The rollouts are created and read over the node's HTTP API and the
 * `rollout` CLI, as a user would.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ControlPlaneNode } from '../../shared/runtimes/node/node.js';
import { servedNode, type ServedNode } from '../support/gated-node.js';
import type { GateJson } from '../../shared/api/rollout-json.js';
import type { GateReading } from '../../shared/rollout/gates.js';
import { rollout } from '../support/cli.js';
import { databaseForFile } from '../support/database.js';
import { startExporter, startPrometheus, waitForSeries, type Exporter, type PrometheusServer } from '../support/prometheus.js';

const db = databaseForFile('prom_gates');
let prometheus: PrometheusServer;
let exporter: Exporter;
let node: ControlPlaneNode;
let served: ServedNode;
let requests: ReturnType<Exporter['counter']>;
let errors: ReturnType<Exporter['counter']>;

beforeAll(async () => {
  exporter = await startExporter();
  requests = exporter.counter('app_requests_total', 'requests served', ['version']);
  errors = exporter.counter('app_errors_total', 'requests failed', ['version']);
  for (const v of ['v2', 'v3', 'v4']) {
    requests.inc({ version: v }, 1_000);
    errors.inc({ version: v }, 2);
  }
  prometheus = await startPrometheus({ targets: [exporter.target], scrapeIntervalMs: 200 });
  await waitForSeries(prometheus.url, 'app_errors_total', (s) => s.length === 3);
  served = await servedNode({ nodeId: 'gates-node', databaseUrl: db.url, origins: [prometheus.url] });
  node = served.node;
}, 90_000);

afterAll(async () => {
  await served?.close();
  await prometheus?.stop();
  await exporter?.close();
});

/** The error rate of one version, as the gate asks it. */
const errorRateGate = (version: string) => ({
  type: 'prometheus',
  name: 'error-rate',
  address: prometheus.url,
  query: `sum(app_errors_total{version="${version}"}) / sum(app_requests_total{version="${version}"})`,
  comparison: '<',
  threshold: 0.02,
  intervalSeconds: 1,
});

const spec = (version: string, bakeSeconds: number) => ({
  target: { service: 'checkout', version },
  stages: [
    { name: 'canary', percent: 10, bakeSeconds, gates: { providers: [errorRateGate(version)] } },
    { name: 'half', percent: 50, bakeSeconds, gates: { providers: [errorRateGate(version)] } },
    { name: 'all', percent: 100, bakeSeconds: 0, gates: { providers: [errorRateGate(version)] } },
  ],
});

interface RolloutBody {
  state: string;
  stateReason: string | null;
  stages: { name: string; phase: string }[];
  gates: GateJson[];
}

async function create(id: string, body: unknown): Promise<void> {
  const res = await fetch(`${served.url}/rollouts`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ id, spec: body }),
  });
  expect(res.status, await res.clone().text()).toBe(201);
}
async function get(id: string): Promise<RolloutBody> {
  return (await (await fetch(`${served.url}/rollouts/${id}`)).json()) as RolloutBody;
}
const events = async (id: string) => node.plane.engine.store.events(id);

describe('a rollout gated on Prometheus', () => {
  it('promotes through healthy stages, each on a passing reading of its own', async () => {
    await create('healthy', spec('v2', 0));
    await expect.poll(async () => (await get('healthy')).state, { timeout: 30_000 }).toBe('completed');
    const promoted = (await events('healthy')).filter((e) => e.detailType === 'ai.rollout.stage_promoted');
    expect(promoted.map((e) => e.detail.stage?.name)).toEqual(['canary', 'half', 'all']);
    for (const e of promoted) {
      // The reading that allowed it: Prometheus's own answer, 2 errors in 1,000.
      expect(e.detail.readings).toHaveLength(1);
      expect(e.detail.readings![0]).toMatchObject({ gate: 'error-rate', outcome: 'pass', value: 0.002, stage: e.detail.stage!.index, source: 'poll' });
      expect(e.detail.readings![0]!.answer).toContain('"status":"success"');
    }
  });

  it('rolls the active stage back when the error counter rises past the threshold', async () => {
    await create('breaking', spec('v3', 3_600));
    await expect.poll(async () => (await get('breaking')).gates.find((g) => g.stage === 0)?.status, { timeout: 30_000 }).toBe('pass');
    errors.inc({ version: 'v3' }, 98); // 100 in 1,000: 10 %
    await expect.poll(async () => (await get('breaking')).state, { timeout: 30_000 }).toBe('rolled_back');
    const r = await get('breaking');
    expect(r.stages.map((s) => s.phase)).toEqual(['rolled_back', 'pending', 'pending']);
    expect(r.stateReason).toBe('gate error-rate (prometheus): 1 failed reading > failureLimit 0; last: 0.1 does not meet < 0.02');
    const rollback = (await events('breaking')).find((e) => e.detailType === 'ai.rollout.rollback_detected')!;
    expect(rollback.detail.readings).toEqual([expect.objectContaining({ gate: 'error-rate', outcome: 'fail', value: 0.1, stage: 0 })]);
    // What the gate saw, newest first: the failing reading after the passing ones.
    const seen = r.gates.find((g) => g.stage === 0)!.readings!;
    expect(seen[0]).toMatchObject({ outcome: 'fail', value: 0.1 });
    expect(seen.slice(1).every((x: GateReading) => x.outcome === 'pass' && x.value === 0.002)).toBe(true);
  });

  it('an outage of Prometheus pauses the rollout naming the gate and the error; it never promotes or rolls back on it', async () => {
    await create('outage', spec('v4', 3_600));
    await expect.poll(async () => (await get('outage')).gates.find((g) => g.stage === 0)?.status, { timeout: 30_000 }).toBe('pass');
    await prometheus.kill();
    await expect.poll(async () => (await get('outage')).state, { timeout: 30_000 }).toBe('paused');
    const r = await get('outage');
    expect(r.stages.map((s) => s.phase)).toEqual(['active', 'pending', 'pending']);
    expect(r.stateReason).toMatch(
      /^gate error-rate \(prometheus\): 3 inconclusive readings > inconclusiveLimit 2; last: prometheus 127\.0\.0\.1:\d+: connect ECONNREFUSED 127\.0\.0\.1:\d+$/,
    );
    expect((await events('outage')).map((e) => e.detailType)).toEqual(['ai.rollout.stage_activated', 'ai.rollout.paused']);
    const paused = (await events('outage')).find((e) => e.detailType === 'ai.rollout.paused')!;
    expect(paused.detail.readings).toEqual([expect.objectContaining({ gate: 'error-rate', outcome: 'inconclusive', value: null })]);

    // What a user sees from the CLI: the reason, the gate's newest reading against its threshold, its tally against its limits, and why.
    const shown = await rollout(['rollouts', 'get', 'outage', '--url', served.url]);
    expect(shown.code, shown.err).toBe(0);
    expect(shown.out).toMatch(/^outage {2}paused {2}\(gate error-rate \(prometheus\): 3 inconclusive readings/);
    expect(shown.out).toMatch(/^waiting for:\n {2}- a resume \(paused: gate error-rate/m);
    expect(shown.out).toMatch(/^● canary +\d+% {2}active +bake \d+ s of \d+ s/m);
    expect(shown.out).toMatch(
      /[├└] gate error-rate \(prometheus\): inconclusive · - \(passes when < 0\.02\) · \d+ readings, 0 failed, 3 inconclusive \(failureLimit 0, inconclusiveLimit 2\) · last: prometheus 127\.0\.0\.1:\d+: connect ECONNREFUSED/,
    );
    expect(shown.out).toMatch(/^last transitions\n/m);
    expect(shown.out).toMatch(/^\S+\s+paused\s.*gate error-rate/m);
  });
});
