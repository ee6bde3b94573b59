/**
 * The sample-ratio gate end to end, on the exposures the OpenFeature
 * provider counts: an application asks the provider, against a node on
 * PostgreSQL, which version each of its users runs, and the provider's
 * `rollout.exposures` counter (here a prom-client counter behind the meter,
 * as an OpenTelemetry Prometheus exporter would name it) is scraped by a real
 * Prometheus, which the node's gate reads per cohort.
 *
 * The right split (every user asked once) passes and the rollout completes.
 * A canary whose users' requests are each retried three times shows about 30 % of
 * the exposures where the stage means 10 %: the gate fails with the split in
 * its reason, and, by a sample-ratio gate's default `onFail: hold`, the stage
 * waits past its bake instead of promoting, and is never rolled back.
 */
import { Counter, Gauge } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RolloutProvider, type ExposureMeter } from '../../shared/openfeature/provider.js';
import { databaseForFile } from '../support/database.js';
import { gatedSpec, getRollout, postRollout, servedNode, type GatedRollout, type ServedNode } from '../support/gated-node.js';
import { startExporter, startPrometheus, waitForSeries, type Exporter, type PrometheusServer } from '../support/prometheus.js';

const db = databaseForFile('sample_ratio_gates');
let prometheus: PrometheusServer;
let exporter: Exporter;
let served: ServedNode;
let provider: RolloutProvider | undefined;

/** Users asked about between two scrapes, per rollout the application serves. */
const USERS_PER_SCRAPE = 100;
/** The rollouts the application serves, each with how often a canary user's request is sent (1: once; 4: three retries). */
const serving = new Map<string, number>();

beforeAll(async () => {
  exporter = await startExporter();
  const exposures = new Counter({
    name: 'rollout_exposures_total',
    help: 'Evaluations answered by the rollout provider, by rollout, cohort and version',
    labelNames: ['rollout', 'cohort', 'version'],
    registers: [exporter.registry],
  });
  const meter: ExposureMeter = { createCounter: () => ({ add: (value, attributes) => exposures.inc({ ...attributes }, value) }) };
  let next = 0;
  new Gauge({
    name: 'app_users_asked',
    help: 'users the application asked about (it serves them at each scrape)',
    registers: [exporter.registry],
    // The application's traffic, served at each scrape: each user's version asked of the provider, a canary user's once per attempt.
    async collect() {
      for (const [id, attempts] of provider ? serving : []) {
        const traffic = provider!.cached(id)?.traffic;
        // Until the provider holds the stage's split (and after the stage), the application is not serving this rollout's users.
        if (traffic?.state !== 'running' || traffic.percent !== 10) {
          await provider!.refresh(id);
          continue;
        }
        for (let i = 0; i < USERS_PER_SCRAPE; i++) {
          const user = `user-${next++}`;
          const d = await provider!.resolveStringEvaluation(id, 'v1', { targetingKey: user });
          if (d.flagMetadata?.cohort === 'canary') for (let k = 1; k < attempts; k++) await provider!.resolveStringEvaluation(id, 'v1', { targetingKey: user });
        }
      }
      this.set(next);
    },
  });
  prometheus = await startPrometheus({ targets: [exporter.target], scrapeIntervalMs: 200 });
  await waitForSeries(prometheus.url, 'app_users_asked');
  served = await servedNode({ nodeId: 'sample-ratio-node', databaseUrl: db.url, origins: [prometheus.url] });
  provider = new RolloutProvider({ baseUrl: served.url, maxAgeMs: 100, meter });
}, 90_000);

afterAll(async () => {
  await provider?.onClose();
  await served?.close();
  await prometheus?.stop();
  await exporter?.close();
});

const gate = (rollout: string) => ({
  type: 'prometheus',
  name: 'split',
  address: prometheus.url,
  query: `sum(increase(rollout_exposures_total{rollout="${rollout}",cohort="{{cohort}}"}[{{step}}]))`,
  judge: { kind: 'sample-ratio', minSamples: 2_000 },
  intervalSeconds: 1,
  stepSeconds: 1,
  // Scraped every 200 ms: a step is whole a second after it ends.
  settleSeconds: 1,
  // Until minSamples exposures are counted the readings are inconclusive, which this allows.
  inconclusiveLimit: 1_000,
});

const get = (id: string) => getRollout(served.url, id) as Promise<GatedRollout & { waiting: string[] }>;

describe('a sample-ratio gate on the exposures the OpenFeature provider counts', () => {
  it('refuses a sample-ratio gate with a requests query, naming the field', async () => {
    const res = await postRollout(served.url, 'srm-bad', gatedSpec('v2', { ...gate('srm-bad'), requestsQuery: gate('x').query }, 0));
    expect(res.status).toBe(400);
    expect(await res.text()).toContain(
      "stages.0.gates.providers.0.requestsQuery: a sample-ratio gate counts with query alone (each cohort's requests or exposures per step): drop requestsQuery",
    );
  });

  it('passes the split meant, and the rollout completes', async () => {
    serving.set('srm-right', 1);
    expect((await postRollout(served.url, 'srm-right', gatedSpec('v2', gate('srm-right'), 2))).status).toBe(201);
    await expect.poll(async () => (await get('srm-right')).state, { timeout: 90_000 }).toBe('completed');
    const readings = (await get('srm-right')).gates[0]!.readings!;
    const passed = readings.find((r) => r.outcome === 'pass')!;
    expect(passed.query).toBe(`sample-ratio of the canary against the baseline: ${gate('srm-right').query}`);
    // The canary's observed percent of the exposures: the users' buckets, near 10.
    expect(passed.value).toBeGreaterThan(8);
    expect(passed.value).toBeLessThan(12);
    const answer = JSON.parse(passed.answer) as { canary: { count: number }; baseline: { count: number }; percent: number };
    expect(answer.percent).toBe(10);
    expect(answer.canary.count + answer.baseline.count).toBeGreaterThanOrEqual(2_000);
    expect(readings.some((r) => r.outcome === 'fail')).toBe(false);
    expect(readings.filter((r) => r.outcome === 'inconclusive').every((r) => r.reason!.startsWith('not enough data'))).toBe(true);
  }, 120_000);

  it('holds a stage whose exposures are 30 % canary where 10 % is meant: waiting past its bake with the reason, never rolled back', async () => {
    serving.set('srm-skewed', 4);
    expect((await postRollout(served.url, 'srm-skewed', gatedSpec('v2', gate('srm-skewed'), 2))).status).toBe(201);
    // Three failed readings: past failureLimit 0 twice over, and still no rollback.
    await expect
      .poll(
        async () => {
          const r = await get('srm-skewed');
          return r.gates[0]!.counts.failures >= 3 ? r.state : `${r.state}: ${JSON.stringify(r.gates[0]!.last)}`;
        },
        { timeout: 90_000 },
      )
      .toBe('running');
    const r = await get('srm-skewed');
    expect(r.gates[0]!.status).toBe('fail');
    const last = r.gates[0]!.last!;
    expect(last.reason).toMatch(
      /^sample-ratio mismatch: the canary has [23]\d(\.\d)? % of the counts where 10 % is meant \(\d+ of \d+; p (= \d\.\d\de-\d+|< 1e-300), under alpha 0\.001\); no judgement on this split can be trusted$/,
    );
    expect(last.value).toBeGreaterThan(27);
    expect(last.value).toBeLessThan(35);
    // The stage is past its 2 s bake and waits on the gate alone.
    expect(r.waiting).toContain('gate split (prometheus): last reading fail (onFail hold: the stage waits while it fails)');
    expect(r.gates[0]!.threshold).toBe(10);
    serving.delete('srm-skewed');
  }, 120_000);
});
