/**
 * Provider gates on every backend: readings are counted into their tallies
 * by one rule (`tallyWith`, which DynamoDB calls and PostgreSQL's upsert
 * mirrors in SQL), the view carries the tallies, the history keeps what each
 * gate saw, and the promoters act on them — promote on a pass, roll back past
 * failureLimit, pause past inconclusiveLimit, count again after a resume, and
 * roll back on a native CloudWatch alarm change in one delivery. Providers
 * here are the test's own (their answers set by hand); the provider contract
 * suite runs the real ones. Time is a ManualClock.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { createRollout, runCommand } from '../../shared/rollout/commands.js';
import { campaignEachTime, RolloutEngine } from '../../shared/rollout/engine.js';
import { GateReader, type GateProviders } from '../../shared/rollout/gate-reader.js';
import {
  READING_RETENTION_DAYS,
  tallyWith,
  type GateReading,
  type GateTally,
  type ProviderResult,
  type ReadingSeries,
  type ReadingToStore,
} from '../../shared/rollout/gates.js';
import { inboundFromEnvelope } from '../../shared/rollout/inbound.js';
import { BatchPromoter, StreamingPromoter } from '../../shared/rollout/promoters.js';
import { forEachBackend } from '../support/backends.js';
import { alarmStateChange } from '../support/cloudwatch/events.js';
import { ManualClock } from '../support/clock.js';

const LEASE = { ttlMs: 30_000, renewIntervalMs: 10_000, retryIntervalMs: 5_000, clockSkewMs: 1_000 };
const PROM = {
  type: 'prometheus',
  name: 'error-rate',
  address: 'http://prometheus.invalid:9090',
  query: 'sum(errors) / sum(requests)',
  comparison: '<',
  threshold: 0.05,
  intervalSeconds: 10,
};
const ALARMS = { type: 'cloudwatchAlarm', name: 'alarms', alarms: ['checkout-5xx', 'checkout-latency'], intervalSeconds: 10 };
const spec = (providers: unknown[], bakeSeconds = 30) => ({
  target: { service: 'checkout', version: 'v2' },
  stages: [
    { name: 'canary', percent: 10, bakeSeconds, gates: { providers } },
    { name: 'all', percent: 100, bakeSeconds: 0, gates: { providers } },
  ],
});

function reading(o: Partial<GateReading> & { at: number }): GateReading {
  return {
    gate: 'error-rate',
    type: 'prometheus',
    attempt: 1,
    stage: 0,
    outcome: 'pass',
    value: 0.01,
    query: 'q',
    answer: '{"status":"success"}',
    reason: null,
    source: 'poll',
    ...o,
  };
}

forEachBackend('provider gates on %s', { fresh: 'each' }, (backend, name) => {
  let clock: ManualClock;
  let engine: RolloutEngine;
  beforeEach(() => {
    clock = new ManualClock();
    engine = new RolloutEngine({ store: backend.rollouts, bus: new InProcessBus(), clock });
  });

  describe('tallies', () => {
    it('every backend counts by tallyWith’s rule: add within a period, start again in a newer one, ignore an older one', async () => {
      const { id } = await createRollout(engine, { spec: spec([PROM, { ...PROM, name: 'latency' }]), actor: 'alice' });
      const { id: other } = await createRollout(engine, { spec: spec([PROM]), actor: 'alice' });
      const T = clock.now();
      const steps: ReadingToStore[][] = [
        // Two gates of one rollout and a gate of another in one batch.
        [
          { rolloutId: id, origin: T, reading: reading({ at: T + 1, outcome: 'fail', value: 0.4, reason: '0.4 does not meet < 0.05' }) },
          {
            rolloutId: id,
            origin: T,
            reading: reading({ at: T + 1, gate: 'latency', outcome: 'inconclusive', value: null, reason: 'connect ECONNREFUSED 127.0.0.1:9090' }),
          },
          { rolloutId: other, origin: T, reading: reading({ at: T + 1 }) },
        ],
        // The same gate twice in one batch (two rounds on PostgreSQL), and a late reading that keeps the newest as last.
        [
          { rolloutId: id, origin: T, reading: reading({ at: T + 3 }) },
          { rolloutId: id, origin: T, reading: reading({ at: T + 2, outcome: 'inconclusive', value: null, reason: 'empty result' }) },
        ],
        // A resume at T + 10: a newer period starts the counts again…
        [{ rolloutId: id, origin: T + 10, reading: reading({ at: T + 11 }) }],
        // …and a reading taken before it, stored after it, does not count.
        [{ rolloutId: id, origin: T, reading: reading({ at: T + 4, outcome: 'fail', value: 0.9 }) }],
        // Equal times: the later write is the last.
        [{ rolloutId: id, origin: T + 10, reading: reading({ at: T + 11, outcome: 'fail', value: 0.2, reason: '0.2 does not meet < 0.05' }) }],
        // Passes in a row make a streak; a failure stored after the newest pass ends it, though taken before it.
        [{ rolloutId: id, origin: T + 10, reading: reading({ at: T + 12 }) }],
        [
          { rolloutId: id, origin: T + 10, reading: reading({ at: T + 14 }) },
          { rolloutId: id, origin: T + 10, reading: reading({ at: T + 13, outcome: 'fail', value: 0.3, reason: '0.3 does not meet < 0.05' }) },
        ],
      ];
      const model = new Map<string, GateTally>();
      for (const batch of steps) {
        const counted = await backend.rollouts.recordGateReadings(batch);
        const expected: { rolloutId: string; tally: GateTally }[] = [];
        for (const r of batch) {
          const key = `${r.rolloutId}/${r.reading.gate}`;
          const next = tallyWith(model.get(key), r.reading, r.origin);
          if (next) {
            model.set(key, next);
            expected.push({ rolloutId: r.rolloutId, tally: next });
          }
        }
        // What a batch returns: the tally after each counted reading (the last one per gate is what stands).
        const last = (xs: { rolloutId: string; tally: GateTally }[]) => Object.fromEntries(xs.map((x) => [`${x.rolloutId}/${x.tally.gate}`, x.tally]));
        expect(last(counted)).toEqual(last(expected));
      }
      expect(model.get(`${id}/error-rate`)).toMatchObject({
        origin: T + 10,
        readings: 5,
        failures: 2,
        inconclusive: 0,
        passStreak: 0,
        last: { outcome: 'pass', at: T + 14 },
        lastFailure: { value: 0.3 },
      });
      // A reader's stale idea of the tally (none at all, or one reading behind) is only a hint: the count is made on the tally as it is.
      const behind = tallyWith(undefined, reading({ at: T + 11 }), T + 10)!;
      for (const prior of [null, behind]) {
        const r = reading({ at: T + 20 + (prior ? 1 : 0), outcome: 'inconclusive', value: null, reason: 'timed out after 10 s' });
        const [counted] = await backend.rollouts.recordGateReadings([{ rolloutId: id, origin: T + 10, reading: r, prior }]);
        const next = tallyWith(model.get(`${id}/error-rate`), r, T + 10)!;
        model.set(`${id}/error-rate`, next);
        expect(counted?.tally).toEqual(next);
      }
      expect(model.get(`${id}/error-rate`)).toMatchObject({ readings: 7, failures: 2, inconclusive: 2, passStreak: 0 });
      const view = (await backend.rollouts.load(id))!;
      expect(view.gates.get(0)?.get('error-rate')).toEqual(model.get(`${id}/error-rate`));
      expect(view.gates.get(0)?.get('latency')).toEqual(model.get(`${id}/latency`));
      expect(
        (await backend.rollouts.loadRunning())
          .find((v) => v.rollout.id === other)
          ?.gates.get(0)
          ?.get('error-rate'),
      ).toEqual(model.get(`${other}/error-rate`));
    });

    it('the history keeps every reading as it was, the newest of each gate first', async () => {
      const { id } = await createRollout(engine, { spec: spec([PROM, { ...PROM, name: 'latency' }]), actor: 'alice' });
      const T = clock.now();
      const written = Array.from({ length: 5 }, (_, i) =>
        reading({
          at: T + i * 1_000,
          value: i === 2 ? null : i / 100,
          outcome: i === 2 ? 'inconclusive' : 'pass',
          reason: i === 2 ? 'the value is NaN: no number to compare' : null,
        }),
      );
      for (const r of written) await backend.rollouts.recordGateReadings([{ rolloutId: id, origin: T, reading: r }]);
      await backend.rollouts.recordGateReadings([
        { rolloutId: id, origin: T, reading: reading({ at: T, gate: 'latency', source: 'event', type: 'prometheus' }) },
      ]);
      const three = await backend.rollouts.gateReadings(id, { perGate: 3 });
      expect(three).toEqual([...written.slice(2).reverse(), reading({ at: T, gate: 'latency', source: 'event' })]);
      expect(await backend.rollouts.gateReadings(id)).toHaveLength(6);
      expect(await backend.rollouts.gateReadings('no-such-rollout')).toEqual([]);
    });

    it("a judged reading's series is kept with its history row: read back only when asked, never in the tally", async () => {
      const { id } = await createRollout(engine, { spec: spec([PROM, { ...PROM, name: 'latency' }]), actor: 'alice' });
      const T = clock.now();
      const values = (k: number): ReadingSeries => ({ kind: 'values', canary: [k, null, k + 0.5], baseline: [1, 1.25, 1.5, 1.75] });
      const counts: ReadingSeries = {
        kind: 'counts',
        canary: { requests: [10, 12, null], errors: [1, 0, null] },
        baseline: { requests: [90, 88, 91], errors: [2, 1, 3] },
        percent: 10,
      };
      const at = (i: number) => T + i * 1_000;
      for (const i of [0, 1, 2]) {
        await backend.rollouts.recordGateReadings([
          // The newest error-rate reading keeps none: an error, say.
          { rolloutId: id, origin: T, reading: reading({ at: at(i) }), ...(i < 2 ? { series: values(i) } : {}) },
          { rolloutId: id, origin: T, reading: reading({ at: at(i), gate: 'latency' }), series: i === 2 ? counts : values(10 + i) },
        ]);
      }
      const plain = await backend.rollouts.gateReadings(id);
      expect(plain).toHaveLength(6);
      expect(plain.filter((r) => r.series !== undefined)).toEqual([]);
      const newest = await backend.rollouts.gateReadings(id, { series: 'newest' });
      expect(newest.map((r) => [r.gate, r.at, r.series ?? null])).toEqual([
        ['error-rate', at(2), null],
        ['error-rate', at(1), null],
        ['error-rate', at(0), null],
        ['latency', at(2), counts],
        ['latency', at(1), null],
        ['latency', at(0), null],
      ]);
      const all = await backend.rollouts.gateReadings(id, { series: 'all', gate: 'latency', perGate: 2 });
      expect(all.map((r) => [r.gate, r.at, r.series ?? null])).toEqual([
        ['latency', at(2), counts],
        ['latency', at(1), values(11)],
      ]);
      expect((await backend.rollouts.gateReadings(id, { series: 'all' })).filter((r) => r.gate === 'error-rate').map((r) => r.series ?? null)).toEqual([
        null,
        values(1),
        values(0),
      ]);
      // The tally names its newest reading without the series, on every backend.
      const tally = (await backend.rollouts.load(id))!.gates.get(0)!.get('latency')!;
      expect(tally.last).toEqual(reading({ at: at(2), gate: 'latency' }));
      expect('series' in tally.last).toBe(false);
    });
  });

  describe('the promoters act on them', () => {
    let answers: Map<string, ProviderResult>;
    let batch: BatchPromoter;
    let streaming: StreamingPromoter;
    let leadership: ReturnType<typeof campaignEachTime>;
    beforeEach(() => {
      answers = new Map();
      const fixed = (name: string): ProviderResult => answers.get(name) ?? { kind: 'error', message: `no answer set for ${name}`, answer: '' };
      const providers: GateProviders = {
        prometheus: { read: (gates) => Promise.resolve(gates.map((g) => fixed(g.name))) },
        cloudwatchAlarm: { read: (gates) => Promise.resolve(gates.map((g) => fixed(g.name))) },
      };
      leadership = campaignEachTime(new LeaseElector(backend.store, { name: 'promotion_leader', holderId: 'a', clock, ...LEASE }));
      batch = new BatchPromoter(engine, leadership, { reader: new GateReader(providers, backend.rollouts, { clock }) });
      streaming = new StreamingPromoter(engine, leadership);
    });
    const stateOf = async (id: string) => {
      const v = (await backend.rollouts.load(id))!;
      return { state: v.rollout.state, phases: v.stages.map((s) => s.phase), reason: v.rollout.stateReason };
    };
    const events = async (id: string) => (await backend.rollouts.events(id)).map((e) => e.detailType);

    it('onInsufficientData pass: a stage short of data past its stretched bake promotes, and its row and event say why', async () => {
      const judged = {
        ...PROM,
        comparison: undefined,
        threshold: undefined,
        query: 'x{version="{{version}}"}',
        judge: { kind: 'mann-whitney', minSamples: 10 },
      };
      const quiet = {
        target: { service: 'checkout', version: 'v2', stableVersion: 'v1' },
        stages: [
          { name: 'canary', percent: 10, bakeSeconds: 30, maxBakeSeconds: 60, onInsufficientData: 'pass', gates: { providers: [judged] } },
          { name: 'all', percent: 100, bakeSeconds: 600 },
        ],
      };
      const { id } = await createRollout(engine, { spec: quiet, actor: 'alice' });
      answers.set('error-rate', { kind: 'cohorts', canary: [1, 2], baseline: [1, 2], answer: '' });
      await batch.tick(); // activates the canary
      await batch.tick(); // not enough data: the stage waits
      clock.advance(40_000);
      await batch.tick(); // baked, still short, the stretch not over: waits
      expect(await stateOf(id)).toMatchObject({ phases: ['active', 'pending'] });
      clock.advance(30_000);
      await batch.tick(); // past maxBakeSeconds and still short: passes on what was seen
      const v = (await backend.rollouts.load(id))!;
      expect(v.stages.map((s) => s.phase)).toEqual(['promoted', 'active']);
      expect(v.stages[0]!.reason).toMatch(/^passed on insufficient data \(onInsufficientData pass\): .*not enough data/);
      const promoted = (await backend.rollouts.events(id)).find((e) => e.detailType === 'ai.rollout.stage_promoted')!;
      expect(promoted.detail.insufficientData).toMatch(/not enough data/);
      expect(promoted.detail.readings).toEqual([expect.objectContaining({ gate: 'error-rate', outcome: 'inconclusive' })]);
    });

    it('promote on a passing reading once baked; roll back on a failing one, the reading in the event', async () => {
      const { id } = await createRollout(engine, { spec: spec([PROM]), actor: 'alice' });
      answers.set('error-rate', { kind: 'number', value: 0.01, answer: '0.01' });
      await batch.tick(); // activates the canary
      await batch.tick(); // reads: pass, but not baked yet
      expect(await stateOf(id)).toMatchObject({ phases: ['active', 'pending'] });
      clock.advance(30_000);
      await batch.tick(); // reads again (one interval later), baked: promote
      expect(await stateOf(id)).toMatchObject({ phases: ['promoted', 'active'] });
      const promoted = (await backend.rollouts.events(id)).find((e) => e.detailType === 'ai.rollout.stage_promoted')!;
      expect(promoted.detail.readings).toEqual([expect.objectContaining({ gate: 'error-rate', outcome: 'pass', value: 0.01, stage: 0, source: 'poll' })]);

      answers.set('error-rate', { kind: 'number', value: 0.3, answer: '0.3' });
      await batch.tick(); // the new stage's first reading fails
      expect(await stateOf(id)).toEqual({
        state: 'rolled_back',
        phases: ['promoted', 'rolled_back'],
        reason: 'gate error-rate (prometheus): 1 failed reading > failureLimit 0; last: 0.3 does not meet < 0.05',
      });
      const rollback = (await backend.rollouts.events(id)).find((e) => e.detailType === 'ai.rollout.rollback_detected')!;
      expect(rollback.detail.readings).toEqual([expect.objectContaining({ gate: 'error-rate', outcome: 'fail', value: 0.3, stage: 1 })]);
      // Every reading is in the history, with what was asked.
      expect((await backend.rollouts.gateReadings(id)).map((r) => [r.stage, r.outcome, r.query])).toEqual([
        [0, 'pass', 'sum(errors) / sum(requests)'],
        [0, 'pass', 'sum(errors) / sum(requests)'],
        [1, 'fail', 'sum(errors) / sum(requests)'],
      ]);
    });

    it('a rollout-wide gate is read in every stage from its fromStage on; consecutiveSuccesses holds each stage until that many passes in a row', async () => {
      const wide = { ...PROM, name: 'fleet-errors', consecutiveSuccesses: 2 };
      const { id } = await createRollout(engine, {
        spec: {
          target: { service: 'checkout', version: 'v2' },
          stages: [
            { name: 'canary', percent: 10, bakeSeconds: 0 },
            { name: 'half', percent: 50, bakeSeconds: 0 },
            { name: 'all', percent: 100, bakeSeconds: 0 },
          ],
          rolloutGates: { fromStage: 'half', providers: [wide] },
        },
        actor: 'alice',
      });
      answers.set('fleet-errors', { kind: 'number', value: 0.01, answer: '0.01' });
      await batch.tick(); // activates the canary, which reads no gate
      await batch.tick(); // promotes it: the rollout gate starts with half
      expect(await stateOf(id)).toMatchObject({ phases: ['promoted', 'active', 'pending'] });
      await batch.tick(); // half's first pass: one in a row of two
      expect(await stateOf(id)).toMatchObject({ phases: ['promoted', 'active', 'pending'] });
      clock.advance(10_000);
      await batch.tick(); // the second pass in a row: promote
      expect(await stateOf(id)).toMatchObject({ phases: ['promoted', 'promoted', 'active'] });
      // The last stage counts afresh: a pass, then a failure past failureLimit 0 rolls back.
      await batch.tick();
      answers.set('fleet-errors', { kind: 'number', value: 0.3, answer: '0.3' });
      clock.advance(10_000);
      await batch.tick();
      expect(await stateOf(id)).toEqual({
        state: 'rolled_back',
        phases: ['promoted', 'promoted', 'rolled_back'],
        reason: 'gate fleet-errors (prometheus): 1 failed reading > failureLimit 0; last: 0.3 does not meet < 0.05',
      });
      // Read in half and in all (the history is newest first within each stage's gate), never in the canary.
      expect((await backend.rollouts.gateReadings(id)).map((r) => [r.stage, r.gate, r.outcome])).toEqual([
        [1, 'fleet-errors', 'pass'],
        [1, 'fleet-errors', 'pass'],
        [2, 'fleet-errors', 'fail'],
        [2, 'fleet-errors', 'pass'],
      ]);
    });

    it('an outage pauses the rollout naming the gate and the error — never a promotion, never a rollback — and a resume counts again', async () => {
      const { id } = await createRollout(engine, { spec: spec([PROM], 0), actor: 'alice' });
      answers.set('error-rate', { kind: 'error', message: 'prometheus 127.0.0.1:9090: ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:9090', answer: '' });
      await batch.tick(); // activates
      for (let i = 0; i < 2; i++) {
        await batch.tick();
        expect((await stateOf(id)).state).toBe('running');
        clock.advance(10_000);
      }
      await batch.tick(); // the third inconclusive reading is over inconclusiveLimit 2
      expect(await stateOf(id)).toEqual({
        state: 'paused',
        phases: ['active', 'pending'],
        reason:
          'gate error-rate (prometheus): 3 inconclusive readings > inconclusiveLimit 2; last: prometheus 127.0.0.1:9090: ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:9090',
      });
      expect(await events(id)).toEqual(['ai.rollout.stage_activated', 'ai.rollout.paused']);
      clock.advance(10_000);
      await batch.tick(); // a paused rollout is not read
      expect((await backend.rollouts.gateReadings(id)).length).toBe(3);

      // Prometheus is back; a resume starts a new period: the gate has no data until it is read again.
      answers.set('error-rate', { kind: 'number', value: 0.0, answer: '0' });
      clock.advance(1_000);
      await runCommand(engine, (await leadership())!, { rolloutId: id, command: 'resume', actor: 'alice' });
      expect((await backend.rollouts.load(id))!.gates.get(0)?.get('error-rate')?.inconclusive).toBe(3);
      await batch.tick();
      expect(await stateOf(id)).toMatchObject({ state: 'running', phases: ['promoted', 'active'] });
    });

    it(`a tick prunes readings older than ${READING_RETENTION_DAYS} days (DynamoDB's TTL does it there); the tallies stay`, async () => {
      const { id } = await createRollout(engine, { spec: spec([PROM], 60 * 86_400), actor: 'alice' });
      answers.set('error-rate', { kind: 'number', value: 0.01, answer: '0.01' });
      await batch.tick(); // activates
      expect((await batch.tick()).readings).toBe(1);
      clock.advance((READING_RETENTION_DAYS + 1) * 86_400_000);
      const later = await batch.tick();
      expect(later.readings).toBe(1);
      const kept = (await backend.rollouts.gateReadings(id)).map((r) => r.at);
      expect(kept[0]).toBe(clock.now());
      if (name === 'dynamodb') {
        expect(later.pruned).toBe(0);
        expect(kept).toHaveLength(2);
      } else {
        expect(later.pruned).toBe(1);
        expect(kept).toHaveLength(1);
      }
      expect((await backend.rollouts.load(id))!.gates.get(0)?.get('error-rate')?.readings).toBe(2);
      expect((await batch.tick()).pruned).toBe(0);
    });

    it("a rollout-wide alarm gate is watched as a stage's: its alarm's change rolls the stage back in one delivery", async () => {
      const { id } = await createRollout(engine, {
        spec: { target: { service: 'checkout', version: 'v2' }, stages: spec([]).stages, rolloutGates: { providers: [ALARMS] } },
        actor: 'alice',
      });
      await batch.tick(); // activates
      await batch.tick(); // the poll has no answer set: an inconclusive reading
      const at = (ms: number) => new Date(ms).toISOString().replace('Z', '+0000');
      await streaming.handle(inboundFromEnvelope(alarmStateChange('checkout-5xx', 'OK', at(clock.now() - 5_000))));
      await streaming.handle(inboundFromEnvelope(alarmStateChange('checkout-latency', 'ALARM', at(clock.now() - 1_000))));
      expect(await stateOf(id)).toEqual({
        state: 'rolled_back',
        phases: ['rolled_back', 'pending'],
        reason: 'gate alarms (cloudwatchAlarm): 1 failed reading > failureLimit 0; last: in ALARM: checkout-latency',
      });
      expect((await backend.rollouts.load(id))!.alarms).toEqual({ 'checkout-5xx': 'OK', 'checkout-latency': 'ALARM' });
    });

    it('a native CloudWatch alarm change rolls the stage back in one delivery; an older one changes nothing', async () => {
      const { id } = await createRollout(engine, { spec: spec([ALARMS]), actor: 'alice' });
      await batch.tick(); // activates
      await batch.tick(); // the poll has no answer set: an inconclusive reading
      const T = clock.now();
      const at = (ms: number) => new Date(ms).toISOString().replace('Z', '+0000');
      // OK for one alarm while the other's state is unknown: the change settles nothing, no reading.
      await streaming.handle(inboundFromEnvelope(alarmStateChange('checkout-5xx', 'OK', at(T - 5_000))));
      expect((await backend.rollouts.gateReadings(id)).map((r) => r.source)).toEqual(['poll']);
      await streaming.handle(inboundFromEnvelope(alarmStateChange('checkout-latency', 'ALARM', at(T - 1_000))));
      expect(await stateOf(id)).toEqual({
        state: 'rolled_back',
        phases: ['rolled_back', 'pending'],
        reason: 'gate alarms (cloudwatchAlarm): 1 failed reading > failureLimit 0; last: in ALARM: checkout-latency',
      });
      const rollback = (await backend.rollouts.events(id)).find((e) => e.detailType === 'ai.rollout.rollback_detected')!;
      expect(rollback.detail.readings).toEqual([
        expect.objectContaining({
          gate: 'alarms',
          outcome: 'fail',
          source: 'event',
          answer: 'state change of checkout-latency: checkout-5xx OK, checkout-latency ALARM',
        }),
      ]);

      // A late delivery of an older change is stale: stored nothing new, made no reading.
      const { id: second } = await createRollout(engine, { spec: spec([ALARMS]), actor: 'bob' });
      await batch.tick();
      await batch.tick();
      const late = await streaming.handle(inboundFromEnvelope(alarmStateChange('checkout-latency', 'OK', at(T - 2_000))));
      expect(late.stored).toBe('stale');
      expect((await backend.rollouts.gateReadings(second)).map((r) => r.source)).toEqual(['poll']);
    });

    it('an alarm change is read as the tick reads the gate: not within its initial delay, not from a same-named alarm of another region', async () => {
      const at = (ms: number) => new Date(ms).toISOString().replace('Z', '+0000');
      const delayed = { ...ALARMS, name: 'delayed', alarms: ['checkout-5xx'], initialDelaySeconds: 60 };
      const elsewhere = { ...ALARMS, name: 'elsewhere', alarms: ['checkout-latency'], region: 'eu-west-1' };
      const { id } = await createRollout(engine, { spec: spec([delayed, elsewhere]), actor: 'alice' });
      await batch.tick(); // activates
      const T = clock.now();
      // us-east-1's checkout-latency is not eu-west-1's; checkout-5xx breaches within the delay.
      await streaming.handle(inboundFromEnvelope(alarmStateChange('checkout-latency', 'ALARM', at(T - 2_000))));
      await streaming.handle(inboundFromEnvelope(alarmStateChange('checkout-5xx', 'ALARM', at(T - 1_000))));
      expect(await backend.rollouts.gateReadings(id)).toEqual([]);
      expect(await stateOf(id)).toMatchObject({ state: 'running', phases: ['active', 'pending'] });
      // Past the delay, a change is acted on in its delivery.
      clock.advance(61_000);
      await streaming.handle(inboundFromEnvelope(alarmStateChange('checkout-5xx', 'ALARM', at(clock.now() - 1_000))));
      expect(await stateOf(id)).toMatchObject({
        state: 'rolled_back',
        reason: 'gate delayed (cloudwatchAlarm): 1 failed reading > failureLimit 0; last: in ALARM: checkout-5xx',
      });
    });
  });
});
