/**
 * Gates read the truth, on every backend. A stage keeps its newest reading
 * (by `observedAt`); a reading stamped far in the future would stay newest
 * forever, so every real report after it is "older" and ignored: a breach is
 * never seen and the gate passes. Readings from beyond now + the skew margin
 * are refused (the field named), and a reading observed before its stage
 * became active is about other traffic: it is ignored. Time is a ManualClock.
 */
import { beforeEach, expect, it } from 'vitest';
import { InProcessBus } from '../../shared/events/bus.js';
import { LeaseElector } from '../../shared/lease/elector.js';
import { createRollout } from '../../shared/rollout/commands.js';
import { campaignEachTime, RolloutEngine } from '../../shared/rollout/engine.js';
import { InvalidEventError, READING_SKEW_MARGIN_MS } from '../../shared/rollout/inbound.js';
import { BatchPromoter, StreamingPromoter } from '../../shared/rollout/promoters.js';
import { forEachBackend } from '../support/backends.js';
import { ManualClock } from '../support/clock.js';
import { CHECKOUT_SPEC, LEASE } from '../support/checkout-rollout.js';

const SPEC = CHECKOUT_SPEC;
const FAR_FUTURE = Date.parse('9999-12-31T00:00:00Z');

forEachBackend('gate readings on %s', { fresh: 'each' }, (backend) => {
  let clock: ManualClock;
  let batch: BatchPromoter;
  let streaming: StreamingPromoter;
  let engine: RolloutEngine;
  beforeEach(() => {
    clock = new ManualClock();
    engine = new RolloutEngine({ store: backend.rollouts, bus: new InProcessBus(), clock });
    const leadership = campaignEachTime(new LeaseElector(backend.store, { name: 'promotion_leader', holderId: 'a', clock, ...LEASE }));
    batch = new BatchPromoter(engine, leadership);
    streaming = new StreamingPromoter(engine, leadership);
  });

  const metrics = (rolloutId: string, stage: number, errors: number, observedAt: number) =>
    ({ type: 'rollout.metrics_reported', rolloutId, stage, requests: 200, errors, p99LatencyMs: 100, observedAt }) as const;
  /** The outcome of handling an event: what it did, or the error it was refused with. */
  const outcome = (p: Promise<unknown>) =>
    p.then(
      (r) => ({ handled: r }),
      (err: unknown) => ({ refused: err }),
    );
  async function started(): Promise<string> {
    const { id } = await createRollout(engine, { spec: SPEC, actor: 'alice' });
    await streaming.handle({ type: 'rollout.created', rolloutId: id });
    await streaming.handle({ type: 'rollout.alarm_changed', alarm: 'checkout-5xx', state: 'OK', changedAt: clock.now() });
    return id;
  }

  it('a reading names its stage by index or by name; a name no stage has, or an index past the last, is refused naming what was asked for', async () => {
    const id = await started();
    const reading = { requests: 200, errors: 0, p99LatencyMs: 100, observedAt: clock.now() };
    expect(await backend.rollouts.recordMetrics(id, { stage: 'canary' }, reading)).toBe('stored');
    // The same reading again, now by index: the stage already has it.
    expect(await backend.rollouts.recordMetrics(id, { stage: 0 }, reading)).toBe('stale');
    expect(await backend.rollouts.recordMetrics(id, { stage: 'half' }, { ...reading, observedAt: clock.now() + 1 })).toBe('stored');
    const view = (await backend.rollouts.load(id))!;
    expect(view.metrics.get(0)).toMatchObject({ requests: 200 });
    expect(view.metrics.get(1)).toMatchObject({ requests: 200 });
    await expect(backend.rollouts.recordMetrics(id, { stage: 'Canary' }, reading)).rejects.toThrow(`rollout ${id} has no stage "Canary"`);
    await expect(backend.rollouts.recordMetrics(id, { stage: 3 }, reading)).rejects.toThrow(`rollout ${id} has no stage 3`);
    await expect(backend.rollouts.recordMetrics(id, { stage: -1 }, reading)).rejects.toThrow(`rollout ${id} has no stage -1`);
    await expect(backend.rollouts.recordMetrics('nope', { stage: 0 }, reading)).rejects.toThrow('unknown rollout nope');
  });

  it('a healthy reading from 9999-12-31 does not become the stage’s reading: the breach reported after it rolls the stage back', async () => {
    const id = await started();
    const future = await outcome(streaming.handle(metrics(id, 0, 0, FAR_FUTURE)));
    clock.advance(10_000);
    await streaming.handle(metrics(id, 0, 60, clock.now())); // the real traffic: 30 % errors
    clock.advance(60_000);
    await batch.tick();

    const view = (await backend.rollouts.load(id))!;
    expect(view.rollout.state).toBe('rolled_back');
    expect(view.stages[0]).toMatchObject({ phase: 'rolled_back', reason: 'error rate 0.3000 > 0.05 over 200 requests' });
    expect(future).toMatchObject({ refused: expect.any(InvalidEventError) as unknown });
    expect(String((future as { refused: Error }).refused.message)).toMatch(
      /^invalid rollout event: observedAt: 9999-12-31T00:00:00\.000Z is later than now \+ 30 s/,
    );
  });

  it(`a reading up to ${READING_SKEW_MARGIN_MS / 1000} s ahead (clock skew) is taken; one a millisecond beyond is refused and changes nothing`, async () => {
    const id = await started();
    await expect(streaming.handle(metrics(id, 0, 0, clock.now() + READING_SKEW_MARGIN_MS + 1))).rejects.toThrow(/observedAt: .* is later than now \+ 30 s/);
    expect((await backend.rollouts.load(id))!.metrics.get(0)).toBeUndefined();
    expect(await streaming.handle(metrics(id, 0, 0, clock.now() + READING_SKEW_MARGIN_MS))).toMatchObject({ stored: 'stored' });
  });

  it('an alarm state from the future is refused as well: it would pin the alarm the same way', async () => {
    const id = await started();
    const future = await outcome(streaming.handle({ type: 'rollout.alarm_changed', alarm: 'checkout-5xx', state: 'OK', changedAt: FAR_FUTURE }));
    clock.advance(10_000);
    await streaming.handle({ type: 'rollout.alarm_changed', alarm: 'checkout-5xx', state: 'ALARM', changedAt: clock.now() });
    const view = (await backend.rollouts.load(id))!;
    expect(view.rollout.state).toBe('rolled_back');
    expect(view.stages[0]!.reason).toBe('alarm checkout-5xx is in ALARM');
    expect(String((future as { refused: Error }).refused?.message)).toMatch(/changedAt: 9999-12-31T00:00:00\.000Z is later than now \+ 30 s/);
  });

  it('a reading observed before its stage became active is ignored: it neither rolls the stage back nor stands in for its traffic', async () => {
    const id = await started();
    const beforeHalf = clock.now();
    // Readings for stage 1 ('half') while stage 0 is still the active one.
    await streaming.handle(metrics(id, 1, 60, beforeHalf));
    await streaming.handle(metrics(id, 0, 0, beforeHalf));
    clock.advance(60_000);
    await batch.tick(); // stage 0 baked and healthy: promoted; stage 1 active from now
    let view = (await backend.rollouts.load(id))!;
    expect(view.stages.map((s) => s.phase)).toEqual(['promoted', 'active', 'pending']);
    expect(view.rollout.state).toBe('running'); // the old breach of stage 1 is not held against it

    clock.advance(60_000);
    await batch.tick();
    view = (await backend.rollouts.load(id))!;
    expect(view.stages.map((s) => s.phase)).toEqual(['promoted', 'active', 'pending']); // and no traffic of its own yet: it waits

    await streaming.handle(metrics(id, 1, 0, clock.now()));
    view = (await backend.rollouts.load(id))!;
    expect(view.stages.map((s) => s.phase)).toEqual(['promoted', 'promoted', 'promoted']);
    expect(view.rollout.state).toBe('completed');
  });
});
