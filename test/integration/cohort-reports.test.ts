/**
 * Pushed reports by cohort over the wire: a node on PostgreSQL takes each
 * cohort's reports on POST /events (RolloutClient.publishSignal), as an
 * application's instances would send them, and a `signals` gate judges the
 * canary's against the baseline's. A canary failing five times as often
 * rolls back; one failing as often as the baseline completes; a report of a
 * version the rollout does not run is refused naming the field.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RolloutClient } from '../../shared/client/client.js';
import { gatedSpec, getRollout, postRollout, servedNode, type ServedNode } from '../support/gated-node.js';
import { databaseForFile } from '../support/database.js';

const db = databaseForFile('cohort_reports');
let served: ServedNode;
let client: RolloutClient;

beforeAll(async () => {
  served = await servedNode({ nodeId: 'cohort-node', databaseUrl: db.url, origins: [] });
  client = new RolloutClient({ url: served.url });
}, 90_000);

afterAll(async () => {
  await served?.close();
});

const gate = {
  type: 'signals',
  name: 'errors',
  metric: 'errors',
  judge: { kind: 'sequential-rate', alpha: 0.05, minSamples: 300 },
  intervalSeconds: 1,
  stepSeconds: 1,
  settleSeconds: 0,
  inconclusiveLimit: 1_000,
};

/**
 * Reports every 100 ms while the rollout runs, as three instances would: one canary (100 requests a
 * report) and two of the baseline (450 each), each failing at its rate. Stops when the rollout ends.
 */
async function report(id: string, rates: { canary: number; baseline: number }): Promise<number> {
  let sent = 0;
  for (;;) {
    const observedAt = new Date().toISOString();
    const send = (cohort: 'canary' | 'baseline', reporter: string, requests: number) =>
      client.publishSignal({
        type: 'rollout.metrics_reported',
        rolloutId: id,
        stage: 'canary',
        cohort,
        reporter,
        requests,
        errors: Math.round(requests * rates[cohort]),
        observedAt,
      });
    await Promise.all([send('canary', 'web-1', 100), send('baseline', 'web-2', 450), send('baseline', 'web-3', 450)]);
    sent += 3;
    if ((await getRollout(served.url, id)).state !== 'running') return sent;
    await delay(100); // the reporters' pace, not a wait for anything
  }
}

describe('pushed reports by cohort, judged by a signals gate', () => {
  it('rolls back a canary failing five times as often as the baseline, naming both rates', { timeout: 180_000 }, async () => {
    const res = await postRollout(served.url, 'pushed-bad', gatedSpec('v2', gate, 3_600));
    expect(res.status, await res.clone().text()).toBe(201);
    expect(await report('pushed-bad', { canary: 0.1, baseline: 0.02 })).toBeGreaterThan(0);
    const r = await getRollout(served.url, 'pushed-bad');
    expect(r.state).toBe('rolled_back');
    expect(r.stateReason).toMatch(
      /^gate errors \(signals\): 1 failed reading > failureLimit 0; last: the canary's error rate is higher: \d+\/\d+ against the baseline's \d+\/\d+/,
    );
    expect(r.gates[0]!.series).toMatchObject({ kind: 'counts', percent: 10 });
  });

  it('completes a canary failing as often as the baseline', { timeout: 180_000 }, async () => {
    const res = await postRollout(served.url, 'pushed-good', gatedSpec('v2', gate, 5));
    expect(res.status, await res.clone().text()).toBe(201);
    await report('pushed-good', { canary: 0.02, baseline: 0.02 });
    const r = await getRollout(served.url, 'pushed-good');
    expect(r.state).toBe('completed');
    expect(r.gates[0]!.readings!.some((x) => x.outcome === 'pass')).toBe(true);
  });

  it('refuses a report of a version the rollout does not run, naming the field', async () => {
    const res = await postRollout(served.url, 'pushed-refused', gatedSpec('v2', gate, 3_600));
    expect(res.status).toBe(201);
    const refused = await client
      .publishSignal({ type: 'rollout.metrics_reported', rolloutId: 'pushed-refused', stage: 0, version: 'v9', requests: 1, errors: 0, observedAt: Date.now() })
      .catch((e: unknown) => e);
    expect(String(refused)).toMatch(/400.*version: "v9" is neither the rollout's version \("v2"\) nor its stableVersion \("v1"\)/s);
  });
});
