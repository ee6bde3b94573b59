/**
 * Pushed reports by cohort on every backend: each report is kept once under
 * (cohort, reporter, observedAt), a version names its cohort on the rollout's
 * target, and a `signals` gate judges the canary's reports against the
 * baseline's, read from the store by the GateReader's own provider — a
 * doubled error rate rolls the canary back, an equal one completes, a slower
 * canary fails mann-whitney. Time is a ManualClock.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { createRollout } from '../../shared/rollout/commands.js';
import { campaignEachTime, RolloutEngine } from '../../shared/rollout/engine.js';
import { GateReader } from '../../shared/rollout/gate-reader.js';
import { InvalidEventError, parseInboundEvent } from '../../shared/rollout/inbound.js';
import { BatchPromoter, StreamingPromoter } from '../../shared/rollout/promoters.js';
import { UnknownRolloutError } from '../../shared/rollout/store.js';
import { forEachBackend } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';

const LEASE = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };
const ERRORS_GATE = {
  type: 'signals',
  name: 'errors',
  metric: 'errors',
  judge: { kind: 'sequential-rate', alpha: 0.05, minSamples: 200 },
  intervalSeconds: 10,
  stepSeconds: 10,
  settleSeconds: 0,
};
const spec = (gate: unknown, bakeSeconds = 60) => ({
  target: { service: 'checkout', version: 'v2', stableVersion: 'v1' },
  stages: [
    { name: 'canary', percent: 10, bakeSeconds, gates: { providers: [gate] } },
    { name: 'all', percent: 100, bakeSeconds: 0 },
  ],
});
const report = (o: { cohort?: string; version?: string; reporter?: string; requests: number; errors: number; samples?: number[]; at: number }) => ({
  type: 'rollout.metrics_reported',
  stage: 'canary',
  ...(o.cohort ? { cohort: o.cohort } : {}),
  ...(o.version ? { version: o.version } : {}),
  ...(o.reporter ? { reporter: o.reporter } : {}),
  requests: o.requests,
  errors: o.errors,
  ...(o.samples ? { samples: o.samples } : {}),
  observedAt: o.at,
});

forEachBackend('cohort reports on %s', { fresh: 'each' }, (backend) => {
  let clock: ManualClock;
  let engine: RolloutEngine;
  let batch: BatchPromoter;
  let streaming: StreamingPromoter;
  beforeEach(() => {
    clock = new ManualClock();
    engine = new RolloutEngine({ store: backend.rollouts, bus: new InProcessBus(), clock });
    const leadership = campaignEachTime(new LeaseElector(backend.store, { name: 'promotion_leader', holderId: 'a', clock, ...LEASE }));
    // No provider given: the signals gate's is the reader's own.
    batch = new BatchPromoter(engine, leadership, { reader: new GateReader({}, backend.rollouts, { clock }) });
    streaming = new StreamingPromoter(engine, leadership);
  });
  const push = (rolloutId: string, r: Parameters<typeof report>[0]) => streaming.handle(parseInboundEvent({ ...report(r), rolloutId }));

  describe('storing', () => {
    it('keeps each report once, adds reporters up, names the cohort by version, and reads by time, order and limit', async () => {
      const { id } = await createRollout(engine, { spec: spec(ERRORS_GATE), actor: 'alice' });
      const T = clock.now();
      expect((await push(id, { cohort: 'canary', reporter: 'a', requests: 10, errors: 1, samples: [12, 15], at: T - 3_000 })).stored).toBe('stored');
      // Delivered again: the same report, not a second one.
      expect((await push(id, { cohort: 'canary', reporter: 'a', requests: 10, errors: 1, samples: [12, 15], at: T - 3_000 })).stored).toBe('stale');
      // Another reporter at the same instant is a report of its own.
      expect((await push(id, { cohort: 'canary', reporter: 'b', requests: 20, errors: 0, at: T - 3_000 })).stored).toBe('stored');
      // By version: v1 is the stable version, so the baseline.
      expect((await push(id, { version: 'v1', requests: 90, errors: 2, samples: [10], at: T - 2_000 })).stored).toBe('stored');
      expect((await push(id, { version: 'v2', requests: 5, errors: 0, at: T - 1_000 })).stored).toBe('stored');

      const all = await backend.rollouts.cohortReports(id, 1, 0, { since: 0, limit: 100, order: 'oldest', samples: true });
      expect(all.map((r) => [r.cohort, r.reporter, r.requests, r.errors, r.samples, r.observedAt])).toEqual([
        ['canary', 'a', 10, 1, [12, 15], T - 3_000],
        ['canary', 'b', 20, 0, null, T - 3_000],
        ['baseline', '', 90, 2, [10], T - 2_000],
        ['canary', '', 5, 0, null, T - 1_000],
      ]);
      // Without samples, newest first, from a time on, at most a limit.
      const some = await backend.rollouts.cohortReports(id, 1, 0, { since: T - 2_000, limit: 1, order: 'newest', samples: false });
      expect(some).toEqual([{ cohort: 'canary', reporter: '', requests: 5, errors: 0, samples: null, observedAt: T - 1_000 }]);
      expect(await backend.rollouts.cohortReports(id, 1, 0, { since: T - 2_000, limit: 10, order: 'oldest', samples: false })).toHaveLength(2);
      // Another stage or attempt holds none of them.
      expect(await backend.rollouts.cohortReports(id, 1, 1, { since: 0, limit: 10, order: 'oldest', samples: false })).toEqual([]);
      expect(await backend.rollouts.cohortReports(id, 2, 0, { since: 0, limit: 10, order: 'oldest', samples: false })).toEqual([]);
      // Nothing of it is a stage's own reading: the thresholds' newest-wins metrics stay empty.
      expect((await backend.rollouts.load(id))!.metrics.size).toBe(0);
    });

    it('refuses a version that is neither the canary’s nor the stable one, naming the field; an unknown rollout or stage as before', async () => {
      const { id } = await createRollout(engine, { spec: spec(ERRORS_GATE), actor: 'alice' });
      const at = { stage: 'canary' };
      const r = { reporter: '', requests: 1, errors: 0, samples: null, observedAt: clock.now() };
      const refused = await backend.rollouts.recordCohortReport(id, at, { ...r, cohort: { version: 'v7' } }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(InvalidEventError);
      expect((refused as Error).message).toMatch(/version: "v7" is neither the rollout's version \("v2"\) nor its stableVersion \("v1"\)/);
      await expect(backend.rollouts.recordCohortReport('nope', at, { ...r, cohort: 'canary' })).rejects.toBeInstanceOf(UnknownRolloutError);
      await expect(backend.rollouts.recordCohortReport(id, { stage: 'nope' }, { ...r, cohort: 'canary' })).rejects.toThrow(/has no stage "nope"/);
      expect(await backend.rollouts.cohortReports(id, 1, 0, { since: 0, limit: 10, order: 'oldest', samples: false })).toEqual([]);
    });

    it('retention deletes reports older than the cut-off with the readings, and leaves newer ones', async () => {
      const { id } = await createRollout(engine, { spec: spec(ERRORS_GATE), actor: 'alice' });
      const T = clock.now();
      await push(id, { cohort: 'canary', requests: 1, errors: 0, at: T - 20_000 });
      await push(id, { cohort: 'baseline', requests: 1, errors: 0, at: T - 10_000 });
      await push(id, { cohort: 'canary', requests: 1, errors: 0, at: T });
      // DynamoDB's reports expire by TTL, as its readings do: nothing to delete here.
      const pruned = await backend.rollouts.pruneGateReadings(T - 5_000, 100);
      const left = await backend.rollouts.cohortReports(id, 1, 0, { since: 0, limit: 10, order: 'oldest', samples: false });
      if (backend.name === 'dynamodb') expect([pruned, left.length]).toEqual([0, 3]);
      else expect([pruned, left.map((r) => r.observedAt)]).toEqual([2, [T]]);
    });
  });

  describe('a signals gate', () => {
    /** Each step of 10 s: every cohort's reports (two baseline reporters), then the gate's read one step later. */
    async function run(
      id: string,
      steps: number,
      canary: { requests: number; errors: number; samples?: number[] },
      baselineErrors: number,
      samples?: number[],
    ) {
      for (let i = 0; i < steps; i++) {
        const at = clock.now() + 5_000;
        await push(id, { cohort: 'canary', reporter: 'web-1', ...canary, at });
        await push(id, { cohort: 'baseline', reporter: 'web-2', requests: 450, errors: baselineErrors, ...(samples ? { samples } : {}), at });
        await push(id, { cohort: 'baseline', reporter: 'web-3', requests: 450, errors: baselineErrors, ...(samples ? { samples } : {}), at });
        clock.advance(10_000);
        await batch.tick();
        const state = (await backend.rollouts.load(id))!.rollout.state;
        if (state !== 'running') return state;
      }
      return (await backend.rollouts.load(id))!.rollout.state;
    }

    it('rolls back a canary whose error rate is twice the baseline’s, naming the judgement', async () => {
      const { id } = await createRollout(engine, { spec: spec(ERRORS_GATE), actor: 'alice' });
      await batch.tick(); // activates the canary
      expect(await run(id, 30, { requests: 100, errors: 10 }, 23)).toBe('rolled_back');
      const v = (await backend.rollouts.load(id))!;
      expect(v.rollout.stateReason).toMatch(
        /^gate errors \(signals\): 1 failed reading > failureLimit 0; last: the canary's error rate is higher: \d+\/\d+ against the baseline's \d+\/\d+/,
      );
      const [newest] = await backend.rollouts.gateReadings(id, { series: 'newest' });
      expect(newest).toMatchObject({ gate: 'errors', type: 'signals', outcome: 'fail', series: { kind: 'counts', percent: 10 } });
      // The series is what the reports said, step by step: 100 canary and 900 baseline requests each.
      const series = newest!.series as { canary: { requests: readonly (number | null)[] }; baseline: { requests: readonly (number | null)[] } };
      expect(new Set(series.canary.requests)).toEqual(new Set([100]));
      expect(new Set(series.baseline.requests)).toEqual(new Set([900]));
    });

    it('completes a canary whose error rate is the baseline’s', async () => {
      const { id } = await createRollout(engine, { spec: spec(ERRORS_GATE), actor: 'alice' });
      await batch.tick();
      // Baked (60 s) on passing readings once past minSamples: promoted to the last stage, which completes it.
      expect(await run(id, 12, { requests: 100, errors: 5 }, 23)).toBe('completed');
      const readings = await backend.rollouts.gateReadings(id);
      expect(readings.filter((r) => r.outcome === 'fail')).toEqual([]);
      expect(readings.some((r) => r.outcome === 'pass')).toBe(true);
    });

    it('judges latency samples with mann-whitney: a canary twice as slow fails', async () => {
      const gate = { type: 'signals', name: 'latency', metric: 'latency', judge: { kind: 'mann-whitney', minSamples: 20 }, intervalSeconds: 10 };
      const { id } = await createRollout(engine, { spec: spec(gate), actor: 'alice' });
      await batch.tick();
      const base = Array.from({ length: 10 }, (_, i) => 100 + 3 * i);
      const state = await run(id, 6, { requests: 10, errors: 0, samples: base.map((x) => 2 * x) }, 0, base);
      expect(state).toBe('rolled_back');
      const [newest] = await backend.rollouts.gateReadings(id, { series: 'newest' });
      expect(newest).toMatchObject({ gate: 'latency', outcome: 'fail', series: { kind: 'values' } });
    });
  });
});
