/**
 * A judged gate on real traffic through nginx. nginx splits requests between
 * two versions of a tiny service by the actuator's include; each version
 * records how long it took in a histogram labelled by its version, which a
 * real Prometheus scrapes: an application's own metric, split by the cohort
 * that served it. The canary (v2) answers in twice the stable version's
 * time, still well inside the fleet's normal bound (100 ms): a threshold
 * gate set for that bound promotes it, while a mann-whitney gate judging its
 * series against the baseline's rolls it back, and the actuator puts nginx
 * back on the stable version.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { normals } from '../support/normals.js';
import { databaseForFile } from '../support/database.js';
import { getRollout, postRollout, servedNode, type ServedNode } from '../support/gated-node.js';
import { startExporter, startPrometheus, waitForSeries, type Exporter, type PrometheusServer } from '../support/prometheus.js';
import { startSplitNginx, type SplitNginx } from '../support/split-nginx.js';

const db = databaseForFile('nginx_judged');
let exporter: Exporter;
let prometheus: PrometheusServer;
/** One nginx a rollout: a completed rollout leaves its target on the canary's upstream for good. */
let nginx: SplitNginx;
let fleet: SplitNginx;
let served: ServedNode;
let load: { stop: () => Promise<number> }[];

/** Requests through nginx, a few at a time, each from a new entity, until stopped: how many were answered. */
function drive(url: string): { stop: () => Promise<number> } {
  let running = true;
  let answered = 0;
  let n = 0;
  const worker = async () => {
    while (running) {
      try {
        const res = await fetch(url, { headers: { 'x-entity': `user-${n++}` } });
        await res.text();
        answered++;
      } catch {
        // A reload retires nginx's workers and their idle connections: the next request goes on a new one.
      }
    }
  };
  const workers = Array.from({ length: 4 }, worker);
  return {
    stop: async () => {
      running = false;
      await Promise.all(workers);
      return answered;
    },
  };
}

beforeAll(async () => {
  exporter = await startExporter();
  const seconds = exporter.histogram('app_request_duration_seconds', 'time to answer a request', ['version'], [0.005, 0.01, 0.02, 0.04, 0.08, 0.16]);
  const draw = normals(2);
  // The service's own latency (this is the simulated work, not a wait for anything): stable about 15 ms, the canary twice it.
  const serve = async (version: 'stable' | 'canary') => {
    const stable = Math.max(0.002, 0.015 + 0.002 * draw());
    const took = version === 'canary' ? 2 * stable : stable;
    await sleep(took * 1000);
    seconds.observe({ version: version === 'canary' ? 'v2' : 'v1' }, took);
  };
  [nginx, fleet] = await Promise.all([startSplitNginx({ serve }), startSplitNginx({ serve })]);
  prometheus = await startPrometheus({ targets: [exporter.target], scrapeIntervalMs: 200 });
  served = await servedNode({
    nodeId: 'nginx-judged',
    databaseUrl: db.url,
    origins: [prometheus.url],
    targets: { edge: nginx.target, fleet: fleet.target },
  });
  load = [drive(nginx.url), drive(fleet.url)];
  // The stable version serves everything at rest: its series exists before any rollout.
  await waitForSeries(prometheus.url, 'app_request_duration_seconds_count', (s) => s.some((x) => x.metric.version === 'v1'));
}, 120_000);

afterAll(async () => {
  await Promise.all((load ?? []).map((l) => l.stop()));
  await served?.close();
  await prometheus?.stop();
  await exporter?.close();
  await Promise.all([nginx?.stop(), fleet?.stop()]);
});

/** Each cohort's mean latency over the last 2 s, a point a second. */
const meanLatency = (version: string) =>
  `sum(rate(app_request_duration_seconds_sum{version="${version}"}[2s])) / sum(rate(app_request_duration_seconds_count{version="${version}"}[2s]))`;
const spec = (target: string, gate: Record<string, unknown>, bakeSeconds: number) => ({
  target: { service: target, version: 'v2', stableVersion: 'v1' },
  actuators: [target],
  stages: [
    { name: 'canary', percent: 20, bakeSeconds, gates: { providers: [{ type: 'prometheus', name: 'latency', address: prometheus.url, ...gate }] } },
    { name: 'all', percent: 100, bakeSeconds: 0 },
  ],
});

describe('a judged gate on traffic nginx splits', () => {
  it('a canary twice as slow passes a threshold set for the fleet, and is rolled back by mann-whitney; nginx goes back to stable', async () => {
    const created = await postRollout(
      served.url,
      'fleet-threshold',
      spec('fleet', { query: meanLatency('v2'), comparison: '<', threshold: 0.1, intervalSeconds: 1, inconclusiveLimit: 1_000 }, 5),
    );
    expect(created.status, await created.clone().text()).toBe(201);
    await expect.poll(async () => (await getRollout(served.url, 'fleet-threshold')).state, { timeout: 90_000 }).not.toBe('running');
    expect((await getRollout(served.url, 'fleet-threshold')).state).toBe('completed');
    // Completed: nginx sends everyone to the canary's upstream.
    await expect.poll(() => fleet.measure(50, 'after-threshold-'), { timeout: 30_000 }).toBe(100);

    const judged = {
      query: meanLatency('{{version}}'),
      judge: { kind: 'mann-whitney', direction: 'increase', minSamples: 8 },
      windowSeconds: 30,
      stepSeconds: 1,
      intervalSeconds: 1,
      inconclusiveLimit: 1_000,
    };
    const again = await postRollout(served.url, 'edge-judged', spec('edge', judged, 3_600));
    expect(again.status, await again.clone().text()).toBe(201);
    // Polled with its reason, so that a rollout that ends otherwise says why.
    const stateOf = async (id: string) => {
      const r = await getRollout(served.url, id);
      return r.state === 'running' ? 'running' : `${r.state}: ${r.stateReason}`;
    };
    await expect.poll(() => stateOf('edge-judged'), { timeout: 120_000 }).toMatch(/^rolled_back: /);
    const r = await getRollout(served.url, 'edge-judged');
    expect(r.stateReason).toMatch(/^gate latency \(prometheus\): 1 failed reading > failureLimit 0; last: the canary is higher: shift 0\.\d+/);
    // What it was judged on: the canary's series about twice the baseline's, both from the version's own histogram.
    const series = r.gates[0]!.series!;
    expect(series.kind).toBe('values');
    if (series.kind !== 'values') return;
    const mean = (xs: readonly (number | null)[]) => {
      const v = xs.filter((x): x is number => x !== null);
      return v.reduce((a, b) => a + b, 0) / v.length;
    };
    expect(mean(series.canary) / mean(series.baseline)).toBeGreaterThan(1.5);
    // Rolled back: nobody is sent to the canary's upstream any more.
    await expect.poll(() => nginx.measure(100, 'after-judged-'), { timeout: 30_000 }).toBe(0);
    // Traffic flowed throughout.
    expect(await load[0]!.stop()).toBeGreaterThan(0);
    load[0] = drive(nginx.url);
  }, 300_000);
});
